"""The lesson 08 checks accept the solutions, spot stubs, and name the typical mistakes."""

import math

import pytest
import torch
from torch import nn

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import DecoderLayer, EncoderLayer, LayerNorm, causal_mask, sinusoidal_encoding
from transformer_lib.checks import ex08_transformer as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def parameter_count_solution(vocab_size, d_model, d_ff, num_layers, tied=True):
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    embedding = vocab_size * d_model
    return embedding + num_layers * (encoder_layer + decoder_layer) + (0 if tied else embedding)


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.parameter_count, check.encoder_decoder_model, check.output_logits):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_parameter_count_accepts_the_solution_and_names_the_mistakes():
    assert check.parameter_count(parameter_count_solution).ok
    untied = check.parameter_count(lambda *args: parameter_count_solution(*args, tied=False))
    assert_rejected_with(untied, "you counted the output projection separately")


class EncoderDecoder(nn.Module):
    """The exercise's solution, with switches that make each classic mistake (written independently of the check)."""

    def __init__(self, config, final_norms=True, **mistakes):
        super().__init__()
        c, self.mistakes = config, mistakes
        self.d_model = c.d_model
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.register_buffer("positions", sinusoidal_encoding(c.max_len, c.d_model), persistent=False)
        args = (c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*args) for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*args) for _ in range(c.num_decoder_layers))
        final = c.norm_first or not final_norms
        self.encoder_norm = LayerNorm(c.d_model) if final else nn.Identity()
        self.decoder_norm = LayerNorm(c.d_model) if final else nn.Identity()
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size)

    def embed(self, table, tokens):
        scale = 1.0 if "unscaled" in self.mistakes else math.sqrt(self.d_model)
        x = table(tokens) * scale
        return x if "no_positions" in self.mistakes else x + self.positions[: tokens.shape[1]]

    def forward(self, src, tgt, src_mask=None):
        m = self.mistakes
        x = embedded = self.embed(self.src_embedding, src)
        for layer in self.encoder_layers:
            x = layer(x, None if "encoder_unmasked" in m else src_mask)
        memory = embedded if "cross_to_source" in m else x if "no_encoder_norm" in m else self.encoder_norm(x)
        y = self.embed(self.src_embedding if "source_table" in m else self.tgt_embedding, tgt)
        tgt_mask = None if "not_causal" in m else causal_mask(tgt.shape[1])
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask=tgt_mask, memory_mask=None if "memory_unmasked" in m else src_mask)
        logits = self.output_projection(y if "no_decoder_norm" in m else self.decoder_norm(y))
        return logits.softmax(-1) if "softmax" in m else logits


def with_mistakes(*mistakes, **options):
    return lambda config: EncoderDecoder(config, **options, **dict.fromkeys(mistakes, True))


def test_the_walk_through_equals_the_library_model():
    src, tgt, src_mask = check._assembly_inputs()
    for config in check.ASSEMBLY_CONFIGS.values():
        model = check._reference_model(config)
        with torch.no_grad():
            torch.testing.assert_close(check._walk_through(model, src, tgt, src_mask), model(src, tgt, src_mask))


def test_encoder_decoder_model_accepts_the_solution():
    assert check.encoder_decoder_model(EncoderDecoder).ok


@pytest.mark.parametrize(("mistakes", "hint"), [
    (("unscaled",), "the token embeddings are not scaled"),
    (("no_positions",), "the positional encodings are missing"),
    (("not_causal",), "the decoder's self-attention is not causal"),
    (("cross_to_source",), "the cross-attention reads the embedded source"),
    (("memory_unmasked",), "padded source tokens are visible to the cross-attention"),
    (("encoder_unmasked",), "the encoder's self-attention sees <pad>"),
    (("no_encoder_norm", "no_decoder_norm"), "a pre-LN stack ends with one more LayerNorm"),
    (("no_decoder_norm",), "the decoder's final LayerNorm is missing"),
    (("no_encoder_norm",), "the encoder's final LayerNorm is missing"),
    (("source_table",), "the target was looked up in the source embedding table"),
    (("softmax",), "return logits, not probabilities"),
])
def test_encoder_decoder_model_names_each_classic_mistake(mistakes, hint):
    assert_rejected_with(check.encoder_decoder_model(with_mistakes(*mistakes)), hint)


def test_encoder_decoder_model_gives_the_code_on_a_second_failure():
    check.encoder_decoder_model(with_mistakes("unscaled"))
    again = check.encoder_decoder_model(with_mistakes("unscaled"))
    assert_rejected_with(again, "next step: x = self.src_embedding(src) * math.sqrt(d_model)")


def test_encoder_decoder_model_names_misbuilt_parts():
    assert_rejected_with(check.encoder_decoder_model(with_mistakes(final_norms=False)),
                         "LayerNorm(d_model) when config.norm_first")

    class Renamed(EncoderDecoder):
        def __init__(self, config):
            super().__init__(config)
            self.generator = self.output_projection
            del self.output_projection

    assert_rejected_with(check.encoder_decoder_model(Renamed), "give the parts the library's names")
    assert_rejected_with(check.encoder_decoder_model(lambda config: "a model"), "subclass nn.Module")


def test_encoder_decoder_model_leaves_the_global_random_state_alone():
    before = torch.random.get_rng_state()
    check.encoder_decoder_model(EncoderDecoder)
    assert torch.equal(torch.random.get_rng_state(), before)


def output_logits_solution(decoder_output, weight, bias):
    return decoder_output @ weight.T + bias


def test_output_logits_accepts_the_solution_and_names_the_mistakes():
    assert check.output_logits(output_logits_solution).ok
    assert check.output_logits(torch.nn.functional.linear).ok
    rejections = {
        "you flattened the T positions into one vector per sentence":
            lambda x, weight, bias: x.flatten(1) @ weight.T + bias,
        "your function only runs when T = 1: you flattened":
            lambda x, weight, bias: x.reshape(x.shape[0], -1) @ weight.T,
        "weight is (vocab, d_model), laid out like nn.Linear's: it must be transposed":
            lambda x, weight, bias: x @ weight + bias,
        "your function only runs when vocab = d_model: weight is":
            lambda x, weight, bias: torch.nn.functional.linear(x, weight.T, bias),
        "you left out the bias": lambda x, weight, bias: x @ weight.T,
        "return logits, not probabilities":
            lambda x, weight, bias: torch.softmax(output_logits_solution(x, weight, bias), dim=-1),
        "return logits, not log-probabilities":
            lambda x, weight, bias: torch.log_softmax(output_logits_solution(x, weight, bias), dim=-1),
        "your logits are (batch, vocab, T)":
            lambda x, weight, bias: output_logits_solution(x, weight, bias).transpose(1, 2),
        "you merged batch and positions into rows":
            lambda x, weight, bias: x.reshape(-1, x.shape[-1]) @ weight.T + bias,
        "a shape error": lambda x, weight, bias: x.transpose(1, 2) @ weight.T + bias,
    }
    for hint, wrong in rejections.items():
        assert_rejected_with(check.output_logits(wrong), hint)


def test_output_logits_names_the_lecture_notes_head():
    """The broken head of the exercise notebook (a layer with T·d_model inputs) is told it flattened the positions."""
    def per_sentence_head(x, weight, bias):
        batch, length, d_model = x.shape
        layer = torch.nn.Linear(length * d_model, weight.shape[0], dtype=x.dtype)
        return layer(x.reshape(batch, length * d_model))  # (batch, vocab)

    assert_rejected_with(check.output_logits(per_sentence_head), "you flattened the T positions")


def test_output_logits_leaves_the_global_random_state_alone():
    before = torch.random.get_rng_state()
    check.output_logits(output_logits_solution)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_each_named_mistake_is_diagnosed_as_itself():
    def count(extra=0, biases=True, norms=True, cross=True):
        def counted(vocab_size, d_model, d_ff, num_layers):
            attention = 4 * (d_model * d_model + (d_model if biases else 0))
            feed_forward = 2 * d_model * d_ff + ((d_ff + d_model) if biases else 0)
            norm = 2 * d_model if norms and biases else 0
            encoder = attention + feed_forward + 2 * norm
            decoder = (2 if cross else 1) * attention + feed_forward + 3 * norm
            return vocab_size * d_model * (2 if extra else 1) + num_layers * (encoder + decoder)
        return counted

    assert check.parameter_count(count()).ok
    assert_diagnosed(check.parameter_count(count(extra=1)), "tied-output-counted-twice")
    assert_diagnosed(check.parameter_count(count(biases=False)), "biases-left-out")
    assert_diagnosed(check.parameter_count(count(norms=False)), "layer-norms-left-out")
    assert_diagnosed(check.parameter_count(count(cross=False)), "cross-attention-not-counted")

    assert_diagnosed(check.encoder_decoder_model(with_mistakes("unscaled")), "embeddings-not-scaled")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("no_positions")), "positions-missing")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("not_causal")), "decoder-not-causal")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("cross_to_source")), "cross-attention-to-embeddings")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("memory_unmasked")), "memory-mask-missing")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("encoder_unmasked")), "encoder-mask-missing")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("no_encoder_norm", "no_decoder_norm")),
                     "final-norms-missing")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("no_decoder_norm")), "decoder-final-norm-missing")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("no_encoder_norm")), "encoder-final-norm-missing")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("source_table")), "target-in-source-table")
    assert_diagnosed(check.encoder_decoder_model(with_mistakes("softmax")), "softmax-applied")

    solution = output_logits_solution
    assert_diagnosed(check.output_logits(lambda x, w, b: x.flatten(1) @ w.T + b), "positions-flattened")
    assert_diagnosed(check.output_logits(lambda x, w, b: x.reshape(x.shape[0], -1) @ w.T), "positions-flattened")
    assert_diagnosed(check.output_logits(lambda x, w, b: x.reshape(-1, x.shape[-1]) @ w.T + b),
                     "batch-and-positions-merged")
    assert_diagnosed(check.output_logits(lambda x, w, b: solution(x, w, b).transpose(1, 2)), "vocabulary-not-last")
    assert_diagnosed(check.output_logits(lambda x, w, b: x @ w + b), "weight-not-transposed")
    assert_diagnosed(check.output_logits(lambda x, w, b: x @ w.T), "bias-left-out")
    assert_diagnosed(check.output_logits(lambda x, w, b: torch.softmax(solution(x, w, b), dim=-1)), "softmax-applied")
    assert_diagnosed(check.output_logits(lambda x, w, b: torch.log_softmax(solution(x, w, b), dim=-1)),
                     "log-softmax-applied")


def test_parameter_count_uses_every_argument_and_names_a_mistake_once():
    count = parameter_count_solution
    assert_diagnosed(check.parameter_count(lambda v, d, d_ff, n: count(v, d, 4 * d, n)), "d-ff-argument-ignored")
    assert not check.parameter_count(lambda v, d, d_ff, n: count(v, d, d_ff, 1)).ok
    twice = check.parameter_count(lambda v, d, d_ff, n: count(v, d, d_ff, n) + v * d)
    assert [line for line in twice.lines if line.startswith("  hint:")] == [
        "  hint: you counted the output projection separately: the paper ties it to the embedding matrix"]
    assert len(twice.diagnoses) == 1


@pytest.mark.parametrize(("mistakes", "mistake_id", "where"), [
    (("not_causal",), "decoder-not-causal", "the first sub-module whose output differs is "
     "decoder_layers.0.self_attn.out_proj (the difference arises inside decoder_layers.0.self_attn); likely "
     "mask-missing: no causal mask"),
    (("unscaled",), "embeddings-not-scaled", "the first sub-module whose output differs is "
     "encoder_layers.0.self_attn.q_proj (the difference arises in your forward's own code)"),
    (("cross_to_source",), "cross-attention-to-embeddings", "your forward never calls encoder_norm, which the "
     "library's calls"),
    (("softmax",), "softmax-applied", "every sub-module's output agrees, and only the final output differs"),
])
def test_encoder_decoder_model_hint_says_where_the_model_parts_from_the_librarys(mistakes, mistake_id, where):
    """A wrong model is run beside the library's Transformer: its one hint keeps the check's mistake and adds the
    sub-module compare_models finds first, with the mistake it names there."""
    result = check.encoder_decoder_model(with_mistakes(*mistakes))
    assert_diagnosed(result, mistake_id)
    hints = [line for line in result.lines if line.startswith("  hint:")]
    assert len(hints) == 1 and len(result.diagnoses) == 1, result.lines
    assert where in hints[0] and where in result.diagnoses[0]["hint"], hints
    assert check.encoder_decoder_model(EncoderDecoder).ok
