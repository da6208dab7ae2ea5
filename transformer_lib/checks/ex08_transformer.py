"""Checks for lesson 08's exercises: counting a configuration's parameters, the output projection, the output head."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..model import Transformer, TransformerConfig, count_parameters
from ._feedback import CheckResult, Exercise, describe_mismatch

CONFIGURATIONS = [  # (vocab_size, d_model, d_ff, num_layers)
    (100, 16, 64, 1),
    (37000, 512, 2048, 6),
    (37000, 1024, 4096, 6),
]


def _counted(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    with torch.device("meta"):  # shapes only
        config = TransformerConfig(vocab_size, vocab_size, d_model=d_model, num_heads=1, d_ff=d_ff,
                                   num_encoder_layers=num_layers, num_decoder_layers=num_layers)
        model = Transformer(config)  # the number of heads does not change the count
    return count_parameters(model)


def _without_biases(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    weights_per_encoder = 4 * d_model * d_model + 2 * d_model * d_ff
    weights_per_decoder = 8 * d_model * d_model + 2 * d_model * d_ff
    return vocab_size * d_model + num_layers * (weights_per_encoder + weights_per_decoder)


def parameter_count(student_fn: Callable[[int, int, int, int], int]) -> CheckResult:
    """Check ``parameter_count(vocab_size, d_model, d_ff, num_layers)`` for the paper's shared-vocabulary model."""
    ex = Exercise("parameter_count")
    with ex.run():
        for vocab_size, d_model, d_ff, num_layers in CONFIGURATIONS:
            args = (vocab_size, d_model, d_ff, num_layers)
            expected = _counted(*args)
            ex.compare(f"vocab {vocab_size}, d_model {d_model}, d_ff {d_ff}, {num_layers}+{num_layers} layers",
                       ex.call(student_fn, *args), expected, atol=0, rtol=0,
                       hint="per encoder layer: 4 attention projections, 2 FFN linears, 2 LayerNorms (weights and "
                            "biases); a decoder layer has 8 projections and 3 norms; one shared embedding",
                       mistakes={"you counted the output projection separately: the paper ties it to the embedding"
                                 " matrix": expected + vocab_size * d_model,
                                 "you left out the biases and LayerNorm parameters": _without_biases(*args)})
    return ex.result


def tied_output_logits(student_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check ``tied_output_logits(hidden, embedding_weight)``: (batch, T, d_model), (V, d_model) -> (batch, T, V)."""
    ex = Exercise("tied_output_logits")
    with ex.run():
        generator = torch.Generator().manual_seed(8)
        hidden = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64)  # (batch, T, d_model)
        embedding = torch.randn(6, 4, generator=generator, dtype=torch.float64)  # (V, d_model)
        expected = hidden @ embedding.T  # (batch, T, V)
        ex.compare("logits for every position, shape (2, 3, 6)", ex.call(student_fn, hidden, embedding), expected,
                   hint="apply the same projection at every position: hidden @ embedding_weight.T",
                   mistakes={"return logits, not probabilities: the softmax belongs to the loss":
                             torch.softmax(expected, dim=-1)})
    return ex.result


BATCH, LENGTH, D_MODEL, VOCAB = 2, 3, 4, 5  # all different: each classic bug gives another shape or crashes
FLATTENED_HINT = ("you flattened the T positions into one vector per sentence: the vocabulary layer reads d_model "
                  "numbers, so apply it to every position on its own and keep the T axis")
TRANSPOSED_HINT = ("weight is (vocab, d_model), laid out like nn.Linear's: multiply by weight.T "
                   "(or call torch.nn.functional.linear(decoder_output, weight, bias))")
SHAPE_HINTS = {
    (BATCH, VOCAB): FLATTENED_HINT,
    (BATCH * LENGTH, VOCAB): "you merged batch and positions into rows: give back (batch, T, vocab), one row of "
                             "logits per position of each sentence",
    (BATCH, VOCAB, LENGTH): "your logits are (batch, vocab, T): keep the vocabulary last, as the model's output "
                            "layer does, and do not transpose the result",
}


def _output_layer(weight: torch.Tensor, bias: torch.Tensor) -> torch.nn.Linear:
    """The output layer of an untied Transformer of the exercise's sizes, holding ``weight`` and ``bias``."""
    config = TransformerConfig(VOCAB, VOCAB, d_model=D_MODEL, num_heads=1, d_ff=8, num_encoder_layers=1,
                               num_decoder_layers=1, dropout=0.0, tie_output=False)
    with torch.random.fork_rng():  # leave the learner's random numbers as they were
        layer = Transformer(config).output_projection.to(weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    return layer


def _gives(student_fn: Callable[..., object], args: tuple[torch.Tensor, ...], *candidates: torch.Tensor) -> bool:
    """Whether the student's function runs on ``args`` and returns one of ``candidates``."""
    try:
        got = student_fn(*args)
    except Exception:
        return False
    return any(describe_mismatch(got, candidate) is None for candidate in candidates)


def _crash_hint(student_fn: Callable[..., object], x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> str:
    """Name the bug behind a crash by running the student's function where that bug cannot crash."""
    one_position = x[:, :1]  # (batch, 1, d_model): flattening T·d_model gives d_model numbers here
    per_sentence = one_position[:, 0] @ weight.T  # (batch, vocab)
    if _gives(student_fn, (one_position, weight, bias), per_sentence + bias, per_sentence):
        return "your function only runs when T = 1: " + FLATTENED_HINT
    square_weight, square_bias = weight[:D_MODEL], bias[:D_MODEL]  # vocab = d_model: a transposed weight fits
    transposed = x @ square_weight  # (batch, T, d_model)
    if _gives(student_fn, (x, square_weight, square_bias), transposed + square_bias, transposed):
        return "your function only runs when vocab = d_model: " + TRANSPOSED_HINT
    return ("a shape error: apply the (vocab, d_model) weight to the last dimension of the (batch, T, d_model) "
            "decoder output")


def output_logits(student_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check ``output_logits(decoder_output, weight, bias)``: (batch, T, d_model), (V, d_model), (V,) -> (batch, T, V).

    Every classic bug gets its hint: flattening the positions, a transposed weight (both crash; a second run on sizes
    where they do not crash names them), a missing bias, a softmax, or the logits laid out (batch, V, T).
    """
    ex = Exercise("output_logits")
    with ex.run():
        generator = torch.Generator().manual_seed(80)
        x = torch.randn(BATCH, LENGTH, D_MODEL, generator=generator, dtype=torch.float64)  # decoder output
        weight = torch.randn(VOCAB, D_MODEL, generator=generator, dtype=torch.float64)
        bias = torch.randn(VOCAB, generator=generator, dtype=torch.float64)
        with torch.no_grad():
            expected = _output_layer(weight, bias)(x)  # (batch, T, vocab)
        if not callable(student_fn):
            ex.call(student_fn)  # reports "expected a function" and stops the checks
        what = f"logits for every position, shape {tuple(expected.shape)}"
        try:
            got = student_fn(x, weight, bias)
        except NotImplementedError:
            raise
        except Exception as error:
            ex.require(what, False, problem=f"your function raised {type(error).__name__}: {error}",
                       hint=_crash_hint(student_fn, x, weight, bias))
            return ex.result
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else None
        if shape in SHAPE_HINTS:
            ex.require(what, False, problem=f"got shape {shape}", hint=SHAPE_HINTS[shape])
            return ex.result
        ex.compare(what, got, expected, hint="decoder_output @ weight.T + bias: the same layer at every position",
                   mistakes={"you left out the bias: add it after the product": x @ weight.T,
                             "return logits, not probabilities: the softmax belongs to the loss":
                                 torch.softmax(expected, dim=-1),
                             "return logits, not log-probabilities: the loss takes the log-softmax itself":
                                 torch.log_softmax(expected, dim=-1)})
    return ex.result
