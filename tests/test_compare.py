"""``compare_models`` finds where a model parts from its reference and names the mistake: planted mistakes in the
course's GPT-2 and Llama against Hugging Face's models with copied random weights are each found in the right
sub-module and named; the unplanted models show no difference in float32 and float64; the hooks are always removed;
models it cannot map are refused, naming the sub-modules. Nothing is downloaded: the Hugging Face models are built
from small random configurations (as in tests/test_gpt2.py and tests/test_llama.py)."""

import math
import types

import pytest
import test_gpt2
import test_llama
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import DecoderLayer, EncoderLayer, LayerNorm, Transformer, TransformerConfig
from transformer_lib.compare import (
    MISTAKES,
    Comparison,
    compare_models,
    gpt2_mapping,
    same_name_mapping,
)
from transformer_lib.gpt import GPT, GPTConfig
from transformer_lib.llama import Llama, apply_rope_halves, expand_kv_heads
from transformer_lib.masks import causal_mask
from transformer_lib.multi_head import merge_heads, split_heads
from transformer_lib.positions import apply_rope, sinusoidal_encoding

# -- planting mistakes: each replaces one forward of the course's model, written out here ------------------------


def attention_forward(scale=None, softmax_dim=-1, mask="causal", split="heads-first", rope="halves", query_offset=0):
    """A forward for the course's ``CausalSelfAttention`` or ``GroupedQueryAttention``, written out with one mistake
    chosen by the arguments."""

    def heads(x, count):
        if split == "heads-first":
            return split_heads(x, count)
        batch, length, width = x.shape
        return x.view(batch, length, width // count, count).permute(0, 3, 1, 2)  # features as (d_head, heads)

    def forward(self, x, cache=None, need_weights=False):
        length = x.shape[1]
        num_kv = getattr(self, "num_kv_heads", self.num_heads)
        q, k, v = heads(self.q_proj(x), self.num_heads), heads(self.k_proj(x), num_kv), heads(self.v_proj(x), num_kv)
        if hasattr(self, "rope_frequencies"):
            positions, frequencies = torch.arange(length), self.rope_frequencies
            rotate = apply_rope_halves if rope == "halves" else apply_rope
            q = rotate(q, positions + query_offset, frequencies=frequencies)
            k = rotate(k, positions, frequencies=frequencies)
            k, v = expand_kv_heads(k, self.num_heads), expand_kv_heads(v, self.num_heads)
        scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)  # (batch, heads, T, T)
        allowed = {"causal": causal_mask(length), "inverted": ~causal_mask(length), "none": None}[mask]
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        weights = scores.softmax(dim=softmax_dim).nan_to_num(0.0)  # a row with no allowed key: zero weights
        out = (getattr(self, "o_proj", None) or self.out_proj)(merge_heads(weights @ v))
        return out if hasattr(self, "rope_frequencies") else (out, None)

    return forward


def plant(module, forward):
    module.forward = types.MethodType(forward, module)


def post_norm_gpt_block(self, x, cache=None):
    x = self.norm1(x + self.self_attn(x, cache)[0])
    return self.norm2(x + self.linear2(self.activation(self.linear1(x))))


def gpt_block_without_ff_residual(self, x, cache=None):
    x = x + self.self_attn(self.norm1(x), cache)[0]
    return self.linear2(self.activation(self.linear1(self.norm2(x))))


def llama_block_without_attention_residual(self, x, cache=None):
    x = self.attention(self.attention_norm(x), cache)
    return x + self.feed_forward(self.feed_forward_norm(x))


def unbiased_layer_norm(self, x):
    centred = x - x.mean(-1, keepdim=True)
    return centred / torch.sqrt(x.var(-1, keepdim=True) + self.eps) * self.weight + self.bias  # var: d - 1


def transpose_weight(linear):
    with torch.no_grad():
        linear.weight.copy_(linear.weight.T.clone())


def drop_bias(linear):
    linear.bias = None


def untie_head(model):
    model.head = nn.Linear(model.head.in_features, model.head.out_features, bias=False).to(model.head.weight.dtype)


def tie_head(model):
    model.head.weight = model.token_embedding.weight


def dropout_on(model):
    model.dropout.p = 0.1
    model.train()


def set_eps(norm, eps):
    norm.eps = eps


# (model, expected culprit, expected mistake, plant(course_model))
CASES = {
    "gpt2-unscaled": ("gpt2", "blocks.1.self_attn", "unscaled-scores",
                      lambda m: plant(m.blocks[1].self_attn, attention_forward(scale=1.0))),
    "gpt2-softmax-axis": ("gpt2", "blocks.0.self_attn", "softmax-wrong-axis",
                          lambda m: plant(m.blocks[0].self_attn, attention_forward(softmax_dim=-2))),
    "gpt2-mask-inverted": ("gpt2", "blocks.1.self_attn", "mask-inverted",
                           lambda m: plant(m.blocks[1].self_attn, attention_forward(mask="inverted"))),
    "gpt2-heads-split": ("gpt2", "blocks.0.self_attn", "heads-split-order",
                         lambda m: plant(m.blocks[0].self_attn, attention_forward(split="d_head-first"))),
    "gpt2-transposed-out": ("gpt2", "blocks.0.self_attn.out_proj", "transposed-weight",
                            lambda m: transpose_weight(m.blocks[0].self_attn.out_proj)),
    "gpt2-eps": ("gpt2", "blocks.0.norm2", "layer-norm-eps", lambda m: set_eps(m.blocks[0].norm2, 1e-3)),
    "gpt2-unbiased": ("gpt2", "blocks.1.norm1", "unbiased-variance",
                      lambda m: plant(m.blocks[1].norm1, unbiased_layer_norm)),
    "gpt2-gelu-erf": ("gpt2", "blocks.0", "gelu-tanh-vs-erf", lambda m: setattr(m.blocks[0], "activation", F.gelu)),
    "gpt2-post-norm": ("gpt2", "blocks.1", "pre-vs-post-norm", lambda m: plant(m.blocks[1], post_norm_gpt_block)),
    "gpt2-no-residual": ("gpt2", "blocks.0", "missing-residual",
                         lambda m: plant(m.blocks[0], gpt_block_without_ff_residual)),
    "gpt2-no-bias": ("gpt2", "blocks.1.linear1", "missing-bias", lambda m: drop_bias(m.blocks[1].linear1)),
    "gpt2-untied": ("gpt2", "head", "tied-embeddings", untie_head),
    "gpt2-dropout": ("gpt2", "dropout", "dropout-in-eval", dropout_on),
    "llama-transposed-q": ("llama", "blocks.1.attention.q_proj", "transposed-weight",
                           lambda m: transpose_weight(m.blocks[1].attention.q_proj)),
    "llama-rope-interleaved": ("llama", "blocks.1.attention", "rope-interleaved",
                               lambda m: plant(m.blocks[1].attention, attention_forward(rope="pairs"))),
    "llama-rope-offset": ("llama", "blocks.0.attention", "rope-offset",
                          lambda m: plant(m.blocks[0].attention, attention_forward(query_offset=1))),
    "llama-mask-missing": ("llama", "blocks.1.attention", "mask-missing",
                           lambda m: plant(m.blocks[1].attention, attention_forward(mask="none"))),
    "llama-unscaled": ("llama", "blocks.0.attention", "unscaled-scores",
                       lambda m: plant(m.blocks[0].attention, attention_forward(scale=1.0))),
    "llama-heads-split": ("llama", "blocks.1.attention", "heads-split-order",
                          lambda m: plant(m.blocks[1].attention, attention_forward(split="d_head-first"))),
    "llama-no-residual": ("llama", "blocks.0", "missing-residual",
                          lambda m: plant(m.blocks[0], llama_block_without_attention_residual)),
    "llama-rms-eps": ("llama", "final_norm", "layer-norm-eps", lambda m: set_eps(m.final_norm, 1e-2)),
    "llama-tied": ("llama", "head", "tied-embeddings", tie_head),
}


def models(kind, dtype=torch.float64, **overrides):
    """(course model, Hugging Face model) with copied random weights, and an input."""
    if kind == "gpt2":
        hf = test_gpt2.hf_model(dtype, **overrides)
        return GPT.from_hf_gpt2(hf), hf, test_gpt2.tokens()
    hf = test_llama.hf_model(dtype=dtype, **overrides)
    return Llama.from_hf_llama(hf), hf, test_llama.tokens()


@pytest.fixture(scope="module")
def planted():
    """Every case's comparison, planted in float64 (where a small ε or a tanh approximation is far above rounding)."""
    results = {}
    for name, (kind, _, _, mistake) in CASES.items():
        ours, hf, tokens = models(kind)
        mistake(ours)
        results[name] = compare_models(ours, hf, tokens)
    return results


def test_the_cases_cover_the_catalogue():
    assert len(CASES) >= 12
    assert {case[2] for case in CASES.values()} >= set(MISTAKES) - {"wrong-activation"}


def test_every_planted_mistake_is_found_in_the_right_sub_module(planted):
    found = {name: result.culprit for name, result in planted.items()}
    assert found == {name: case[1] for name, case in CASES.items()}


@pytest.mark.parametrize("name", CASES)
def test_the_planted_mistake_is_named_first(planted, name):
    result = planted[name]
    assert result.differs and result.mistakes, str(result)
    assert result.mistakes[0] == CASES[name][2], str(result)


def test_at_least_ten_of_twelve_named(planted):
    named = sum(result.mistakes[:1] == [CASES[name][2]] for name, result in planted.items())
    assert named >= len(CASES) - 2


# -- no difference without a mistake ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind, overrides", [("gpt2", {}), ("gpt2", {"tie_word_embeddings": False}),
                                             ("llama", {}), ("llama", {"num_kv_heads": 6, "tie": True})])
def test_unplanted_models_show_no_difference(kind, overrides, dtype):
    ours, hf, tokens = models(kind, dtype, **overrides)
    result = compare_models(ours, hf, tokens)
    assert not result.differs, str(result)
    assert all(row.status == "same" for row in result.rows) and len(result.rows) > 10
    assert "no difference" in str(result)


def test_llama_at_sixty_four_positions_in_float64_shows_no_difference():
    """Hugging Face builds the RoPE tables in float32 even in a float64 model: the float64 tolerance absorbs it."""
    ours, hf, _ = models("llama")
    tokens = torch.randint(0, test_llama.VOCAB, (2, 64), generator=torch.Generator().manual_seed(2))
    assert not compare_models(ours, hf, tokens).differs


# -- the report ------------------------------------------------------------------------------------------------


def test_the_report_marks_the_first_difference_as_text_and_html(planted):
    result = planted["gpt2-unscaled"]
    text, page = str(result), result._repr_html_()
    assert "→" in text and "blocks.1.self_attn" in text and "unscaled-scores" in text
    assert "max abs" in text and "relative" in text
    assert page.count("<tr") == len(result.rows) + 1 and "→" in page and "unscaled-scores" in page
    first = result.first
    assert first.learner == "blocks.1.self_attn.out_proj" and math.isfinite(first.max_abs) and first.relative > 0
    assert result.between == "blocks.1.self_attn.out_proj" and not result.inside


def test_a_missing_mask_leaves_the_last_position_alone(planted):
    """The last position may see every position anyway: the difference is at the earlier ones."""
    assert "positions 0-9 of 0-10" in planted["llama-mask-missing"].looks_like


def test_an_unknown_mistake_is_reported_as_unknown():
    ours, hf, tokens = models("gpt2")
    with torch.no_grad():
        ours.blocks[1].linear2.weight.mul_(1.5)  # a weight copied wrongly: not in the catalogue
    result = compare_models(ours, hf, tokens)
    assert result.culprit == "blocks.1.linear2" and result.inside and result.mistakes == []
    assert "unknown" in str(result)


# -- the hooks, the mappings -----------------------------------------------------------------------------------


def hook_count(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_hooks_are_removed_also_when_a_model_raises():
    ours, hf, tokens = models("gpt2")
    compare_models(ours, hf, tokens)
    assert hook_count(ours) == hook_count(hf) == 0

    def broken(self, x, cache=None):
        raise RuntimeError("a learner's bug")

    plant(ours.blocks[1], broken)
    with pytest.raises(RuntimeError, match="a learner's bug"):
        compare_models(ours, hf, tokens)
    assert hook_count(ours) == hook_count(hf) == 0


def test_models_that_cannot_be_mapped_are_refused_naming_the_modules():
    _, hf, tokens = models("gpt2")
    attention_only = GPT(GPTConfig(vocab_size=test_gpt2.VOCAB, block_size=16, d_model=32, num_layers=2,
                                   feed_forward=False))
    with pytest.raises(ValueError, match="learner's 'blocks.0.norm2'.*learner's 'blocks.0.linear1'"):
        gpt2_mapping(attention_only, hf)
    ours, _, _ = models("gpt2")
    ours.blocks[0].attn = ours.blocks[0].self_attn  # renamed: the old name is gone
    del ours.blocks[0].self_attn
    reference = GPT.from_hf_gpt2(hf)
    with pytest.raises(ValueError, match=r"learner's 'blocks.0.attn'.*reference's 'blocks.0.self_attn'"):
        same_name_mapping(ours, reference)
    with pytest.raises(ValueError, match="reference's 'no.such.module'"):
        compare_models(reference, hf, tokens, mapping={"head": "no.such.module"})


def test_a_course_gpt_against_the_course_gpt_maps_by_name():
    ours, hf, tokens = models("gpt2")
    reference = GPT.from_hf_gpt2(hf)
    assert not compare_models(ours, reference, tokens).differs
    plant(ours.blocks[0].self_attn, attention_forward(softmax_dim=-2))
    result = compare_models(ours, reference, tokens)
    assert result.culprit == "blocks.0.self_attn" and result.mistakes[0] == "softmax-wrong-axis"


# -- a learner's encoder-decoder of lessons 07-08 against the library's ----------------------------------------


class EncoderDecoder(nn.Module):
    """Lesson 08's exercise model, as a learner writes it (``scale`` False: the embeddings not times √d_model)."""

    def __init__(self, c, scale=True):
        super().__init__()
        self.d_model, self.scale = c.d_model, scale
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = self.src_embedding
        self.register_buffer("positions", sinusoidal_encoding(c.max_len, c.d_model), persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        layer_args = (c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(c.num_decoder_layers))
        self.encoder_norm = LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.output_projection.weight = self.tgt_embedding.weight

    def embed(self, embedding, tokens):
        x = embedding(tokens) * (math.sqrt(self.d_model) if self.scale else 1.0)
        return self.dropout(x + self.positions[: tokens.shape[1]])

    def forward(self, src, tgt, src_mask=None):
        x = self.embed(self.src_embedding, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        memory = self.encoder_norm(x)
        y = self.embed(self.tgt_embedding, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask=causal_mask(tgt.shape[1]), memory_mask=src_mask)
        return self.output_projection(self.decoder_norm(y))


@pytest.mark.parametrize("scale", [True, False])
def test_a_learners_encoder_decoder_against_the_librarys(scale):
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, num_heads=2, num_encoder_layers=2,
                               num_decoder_layers=2, d_ff=32, dropout=0.0, max_len=20)
    torch.manual_seed(0)
    reference = Transformer(config).double().eval()
    learner = EncoderDecoder(config, scale).double().eval()
    learner.load_state_dict(reference.state_dict())
    src, tgt = torch.randint(0, 30, (2, 7)), torch.randint(0, 30, (2, 5))
    result = compare_models(learner, reference, src, tgt)
    if scale:
        assert not result.differs, str(result)
        return
    assert result.first.learner == "dropout"  # the embedding sum's dropout (P_drop = 0) reads the unscaled sum
    assert result.culprit == "" and result.between == "dropout" and result.mistakes == []


def test_compare_models_returns_a_comparison():
    ours, hf, tokens = models("llama", torch.float32)
    assert isinstance(compare_models(ours, hf, tokens), Comparison)
