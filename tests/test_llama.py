"""The course's Llama-style model equals Hugging Face's ``LlamaForCausalLM`` with copied weights, piece by piece in
float64 and whole in float32, with Llama 3's scaled RoPE too; greedy generations agree (each choice clear of a
near-tie); a wrong weight mapping is caught. Nothing is downloaded: the
Hugging Face models are built from small random configurations."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama import modeling_llama as hf_llama

from transformer_lib.decoding import GreedyWithMargin, generate_tokens, top_two_gap
from transformer_lib.llama import (
    GroupedQueryAttention,
    Llama,
    Llama3RopeScaling,
    LlamaConfig,
    RMSNorm,
    SwiGLU,
    apply_rope_halves,
    expand_kv_heads,
    hf_llama_name,
    llama3_rope_frequencies,
    rms_norm,
)
from transformer_lib.positions import apply_rope, rope_frequencies

VOCAB = 97
# float32 logits (up to about 9) of two implementations, summed in other orders, differ by up to 1.5e-5 (with
# COURSE_MOVE_LAST_BITS=1; rtol=0, atol=1e-5 failed there): 1e-4 relative and absolute is far above that and far
# below a wrong mapping's error (> 1).
FLOAT32 = dict(rtol=1e-4, atol=1e-4)
MARGIN = 1e-3  # a greedy choice compared across implementations must lead its runner-up by this much
# Llama 3.1's scaling (factor 8, low_freq_factor 1, high_freq_factor 4) shrunk to a pre-training context of 32: with
# d_head = 8 and rope_theta = 100 the wavelengths are 6.3, 19.9, 62.8 and 199 positions, so the first is kept
# (< 32 / 4), the second interpolated and the last two divided by 8 (> 32 / 1).
LLAMA3_ROPE = dict(rope_type="llama3", rope_theta=100.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=32)


def hf_model(num_kv_heads=2, tie=False, dtype=torch.float32, **overrides):
    """A small random LlamaForCausalLM; every weight (RMSNorm gains too) drawn from a seed, so a wrong copy shows."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=num_kv_heads, max_position_embeddings=64, tie_word_embeddings=tie, **overrides,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3).add_(1.0 if parameter.dim() == 1 else 0.0)
    return model.to(dtype)


def tokens(batch=3, length=11):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))


def cos_sin_float64(length, d_head, base=10000.0):
    """The rotary tables in float64, laid out as Hugging Face's LlamaRotaryEmbedding returns them."""
    frequencies = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    angles = torch.arange(length, dtype=torch.float64)[:, None] * frequencies  # (T, d_head/2)
    angles = torch.cat((angles, angles), dim=-1)[None]  # (1, T, d_head)
    return angles.cos(), angles.sin()


# -- the pieces, in float64 ------------------------------------------------------------------------------------


def test_rms_norm_equals_torch():
    x = torch.randn(2, 5, 8, dtype=torch.float64) * 3 + 1
    reference = torch.nn.RMSNorm(8, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.normal_()
    ours = RMSNorm(8, eps=1e-5).double()
    ours.weight.data.copy_(reference.weight)
    torch.testing.assert_close(ours(x), reference(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(rms_norm(x, reference.weight, 1e-5), reference(x), rtol=0, atol=1e-12)


def test_swiglu_equals_hugging_faces_mlp():
    hf = hf_model(dtype=torch.float64)
    mlp = hf.model.layers[0].mlp
    ours = SwiGLU(48, 80).double()
    ours.load_state_dict(mlp.state_dict())
    x = torch.randn(2, 7, 48, dtype=torch.float64)
    torch.testing.assert_close(ours(x), mlp(x), rtol=0, atol=1e-10)


def test_rope_halves_equals_hugging_faces_rotation():
    q, k = torch.randn(2, 3, 9, 8, dtype=torch.float64), torch.randn(2, 3, 9, 8, dtype=torch.float64)
    cos, sin = cos_sin_float64(9, 8)
    q_hf, k_hf = hf_llama.apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(apply_rope_halves(q), q_hf, rtol=0, atol=1e-12)
    torch.testing.assert_close(apply_rope_halves(k), k_hf, rtol=0, atol=1e-12)
    assert not torch.allclose(apply_rope(q), q_hf)  # lesson 04's neighbour pairs are another layout


def test_rope_halves_scores_depend_on_the_offset_only():
    q, k = torch.randn(1, 8, dtype=torch.float64), torch.randn(1, 8, dtype=torch.float64)

    def score(p, r):
        return apply_rope_halves(q, torch.tensor([p]))[0] @ apply_rope_halves(k, torch.tensor([r]))[0]

    torch.testing.assert_close(score(3, 1), score(12, 10), rtol=0, atol=1e-12)


@pytest.mark.parametrize("head_dim, rope", [
    (8, LLAMA3_ROPE),
    (128, dict(LLAMA3_ROPE, rope_theta=500000.0, original_max_position_embeddings=8192)),  # Llama 3.1 8B's values
    (64, dict(LLAMA3_ROPE, rope_theta=500000.0, factor=32.0, original_max_position_embeddings=8192)),  # Llama 3.2 1B
])
def test_llama3_rope_frequencies_equal_hugging_faces(head_dim, rope):
    """Hugging Face computes them in float32 (its code casts to ``torch.float``): ours, in float64, agree to
    float32's precision (within 1e-6 relative, a few float32 units in the last place: 3.2e-7 at Llama 3.1's sizes; a
    wrong band is off by up to ``factor``)."""
    config = transformers.LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                                      max_position_embeddings=64 * rope["original_max_position_embeddings"],
                                      rope_parameters=dict(rope))
    expected, attention_scaling = ROPE_INIT_FUNCTIONS["llama3"](config, None)
    assert attention_scaling == 1.0  # llama3 rescales the frequencies only, not the cosines and sines
    scaling = Llama3RopeScaling(rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"],
                                rope["original_max_position_embeddings"])
    frequencies = rope_frequencies(head_dim, rope["rope_theta"])  # (head_dim/2,) float64
    scaled = llama3_rope_frequencies(frequencies, scaling)
    torch.testing.assert_close(scaled, expected.double(), rtol=1e-6, atol=0)
    wavelengths = 2 * math.pi / frequencies
    kept = wavelengths < scaling.original_context / scaling.high_freq_factor
    divided = wavelengths > scaling.original_context / scaling.low_freq_factor
    between = ~kept & ~divided
    assert kept.any() and between.any() and divided.any()  # all three bands are tested
    assert torch.equal(scaled[kept], frequencies[kept])
    torch.testing.assert_close(scaled[divided], frequencies[divided] / scaling.factor, rtol=1e-15, atol=0)
    slowest, unchanged = frequencies[between] / scaling.factor, frequencies[between]
    assert ((slowest < scaled[between]) & (scaled[between] < unchanged)).all()  # interpolated in between


def test_expand_kv_heads_equals_hugging_faces_repeat_kv():
    kv = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    torch.testing.assert_close(expand_kv_heads(kv, 12), hf_llama.repeat_kv(kv, 4), rtol=0, atol=0)
    assert torch.equal(expand_kv_heads(kv, 12)[:, 5], kv[:, 1])  # query head 5 of 12 reads key/value head 5 // 4
    with pytest.raises(ValueError, match="not a multiple"):
        expand_kv_heads(kv, 8)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 6])
def test_grouped_query_attention_equals_hugging_faces(num_kv_heads):
    hf = hf_model(num_kv_heads, dtype=torch.float64)
    ours = GroupedQueryAttention(LlamaConfig(VOCAB, 48, 2, 6, num_kv_heads, 80)).double()
    ours.load_state_dict(hf.model.layers[1].self_attn.state_dict())
    x = torch.randn(2, 10, 48, dtype=torch.float64)
    expected, _ = hf.model.layers[1].self_attn(x, position_embeddings=cos_sin_float64(10, 8), attention_mask=None)
    torch.testing.assert_close(ours(x), expected, rtol=0, atol=1e-10)


def test_grouped_query_attention_equals_torchs_enable_gqa():
    attention = GroupedQueryAttention(LlamaConfig(VOCAB, 48, 2, 6, 2, 80)).double()
    x = torch.randn(2, 10, 48, dtype=torch.float64)
    q = apply_rope_halves(attention.q_proj(x).view(2, 10, 6, 8).transpose(1, 2))
    k = apply_rope_halves(attention.k_proj(x).view(2, 10, 2, 8).transpose(1, 2))
    v = attention.v_proj(x).view(2, 10, 2, 8).transpose(1, 2)
    attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (2, 6, 10, 8)
    expected = attention.o_proj(attended.transpose(1, 2).reshape(2, 10, 48))
    torch.testing.assert_close(attention(x), expected, rtol=0, atol=1e-10)


# -- the whole model -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_kv_heads, tie", [(2, False), (1, False), (6, False), (3, True)])
def test_logits_equal_hugging_faces_in_float32(num_kv_heads, tie):
    hf = hf_model(num_kv_heads, tie)
    ours = Llama.from_hf_llama(hf)
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens()), hf(tokens()).logits, **FLOAT32)


def test_llama3_scaled_rope_logits_equal_hugging_faces_in_float32():
    """Llama 3's ``rope_type: llama3`` over 48 positions, past the pre-training context of 32 where the scaling
    matters: equal within 1e-4; the same weights with plain RoPE differ from Hugging Face's by more than 1."""
    hf = hf_model(rope_parameters=dict(LLAMA3_ROPE))
    assert hf.model.rotary_emb.attention_scaling == 1.0
    ours = Llama.from_hf_llama(hf)
    assert ours.config.rope_scaling == Llama3RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                         original_context=32)
    unscaled = Llama(dataclasses.replace(ours.config, rope_scaling=None))
    unscaled.load_state_dict(ours.state_dict())
    with torch.no_grad():
        expected = hf(tokens(length=48)).logits
        torch.testing.assert_close(ours(tokens(length=48)), expected, **FLOAT32)
        assert (unscaled(tokens(length=48)) - expected).abs().max() > 1.0


def test_logits_equal_hugging_faces_in_float64():
    """Hugging Face's LlamaRMSNorm and rotary tables compute in float32 even in a float64 model: as is, the two
    models agree to float32's precision (within 1e-4, as the float32 models); with those two steps computed in
    float64, within 1e-10."""
    hf = hf_model(dtype=torch.float64)
    ours = Llama.from_hf_llama(hf)
    assert next(ours.parameters()).dtype == torch.float64
    with torch.no_grad():
        expected = ours(tokens())
        torch.testing.assert_close(hf(tokens()).logits, expected, **FLOAT32)


def test_logits_equal_hugging_faces_in_float64_without_its_float32_steps(monkeypatch):
    def rms_norm_in_model_dtype(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    def rotary_tables_in_float64(self, x, position_ids):
        return cos_sin_float64(position_ids.shape[-1], self.config.head_dim)

    monkeypatch.setattr(hf_llama.LlamaRMSNorm, "forward", rms_norm_in_model_dtype)
    monkeypatch.setattr(hf_llama.LlamaRotaryEmbedding, "forward", rotary_tables_in_float64)
    hf = hf_model(dtype=torch.float64)
    ours = Llama.from_hf_llama(hf)
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens()), hf(tokens()).logits, rtol=0, atol=1e-10)


def test_greedy_generations_are_identical():
    """Ours (with and without the cache) against Hugging Face's ``generate``: compared exactly because every choice
    leads its runner-up by more than MARGIN, in Hugging Face's logits and in ours."""
    hf = hf_model()
    ours = Llama.from_hf_llama(hf)
    prompt, eos = tokens(length=4), hf.config.eos_token_id
    expected = hf.generate(prompt, max_new_tokens=24, do_sample=False, pad_token_id=eos)
    with torch.no_grad():
        assert top_two_gap(hf(expected).logits[:, 3:-1]).min() > MARGIN  # the logits that chose tokens 4 … 27
    cache, cached_picker, uncached_picker = ours.new_cache(), GreedyWithMargin(), GreedyWithMargin()
    got = generate_tokens(lambda t: ours(t[:, len(cache[0]):], cache)[:, -1], prompt, 24, cached_picker, eos_id=eos)
    assert cached_picker.smallest_gap > MARGIN and torch.equal(got, expected)
    uncached = generate_tokens(lambda t: ours(t)[:, -1], prompt, 24, uncached_picker, eos_id=eos)
    assert uncached_picker.smallest_gap > MARGIN and torch.equal(uncached, expected)


def test_the_cache_holds_kv_heads_only_like_hugging_faces():
    hf = hf_model(num_kv_heads=2)
    ours = Llama.from_hf_llama(hf)
    cache = ours.new_cache()
    with torch.no_grad():
        ours(tokens(length=20), cache)
        hf_cache = hf(tokens(length=20), use_cache=True).past_key_values
    ours_bytes = sum(c.key.nbytes + c.value.nbytes for c in cache)
    hf_bytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in hf_cache.layers)
    assert ours_bytes == hf_bytes == 2 * 2 * 3 * 20 * 2 * 8 * 4  # K and V, layers, batch, T, kv_heads, d_head, bytes


def test_a_transposed_weight_is_caught():
    hf = hf_model()
    ours = Llama.from_hf_llama(hf)
    with torch.no_grad():
        ours.blocks[0].attention.q_proj.weight.copy_(hf.model.layers[0].self_attn.q_proj.weight.T)  # 48 x 48
        with pytest.raises(AssertionError):
            torch.testing.assert_close(ours(tokens()), hf(tokens()).logits, **FLOAT32)


def test_neighbour_pair_rope_is_caught(monkeypatch):
    hf = hf_model()
    ours = Llama.from_hf_llama(hf)
    monkeypatch.setattr("transformer_lib.llama.apply_rope_halves", apply_rope)
    with torch.no_grad(), pytest.raises(AssertionError):
        torch.testing.assert_close(ours(tokens()), hf(tokens()).logits, **FLOAT32)


def test_every_parameter_has_a_hugging_face_name():
    hf, ours = hf_model(), Llama(LlamaConfig(VOCAB, 48, 2, 6, 2, 80))
    hf_names = set(hf.state_dict())
    assert {hf_llama_name(name) for name, _ in ours.named_parameters()} == hf_names
    assert hf_llama_name("blocks.1.feed_forward.gate_proj.weight") == "model.layers.1.mlp.gate_proj.weight"


@pytest.mark.parametrize("rope", [
    dict(rope_type="linear", factor=2.0),
    dict(rope_type="dynamic", factor=2.0),
    dict(rope_type="yarn", factor=2.0, original_max_position_embeddings=32),
])
def test_other_rope_types_are_refused(rope):
    hf = hf_model(rope_parameters=dict(rope, rope_theta=10000.0))
    with pytest.raises(ValueError, match=f"rope_type='{rope['rope_type']}'"):
        Llama.from_hf_llama(hf)


def test_unsupported_configurations_are_refused():
    with pytest.raises(ValueError, match="attention_bias"):
        Llama.from_hf_llama(hf_model(attention_bias=True))
    with pytest.raises(ValueError, match="rope_scaling=.* must be None or a Llama3RopeScaling"):
        LlamaConfig(VOCAB, rope_scaling=dict(LLAMA3_ROPE))
    with pytest.raises(ValueError, match="0 < low_freq_factor < high_freq_factor"):
        Llama3RopeScaling(low_freq_factor=4.0, high_freq_factor=1.0)
    with pytest.raises(ValueError, match=r"frequencies must be shaped \(4,\)"):
        apply_rope_halves(torch.zeros(3, 8), frequencies=torch.ones(3))
    with pytest.raises(ValueError, match="num_kv_heads=4 must divide num_heads=6"):
        LlamaConfig(VOCAB, 48, 2, 6, 4)
    with pytest.raises(ValueError, match="must be even"):
        LlamaConfig(VOCAB, 18, 2, 6, 2)
