"""Checks for lesson 08's exercises: counting a configuration's parameters, the output projection."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..model import Transformer, TransformerConfig, count_parameters
from ._feedback import CheckResult, Exercise

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
