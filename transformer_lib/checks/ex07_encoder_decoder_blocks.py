"""Checks for lesson 07's exercises: layer normalisation and an Add & Norm (residual) block."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..layers import LayerNorm
from ._feedback import CheckResult, Exercise


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64) * 3 + 1  # (batch, T, d_model)
    weight = torch.tensor([1.0, 2.0, 0.5, -1.0], dtype=torch.float64)
    bias = torch.tensor([0.0, 0.1, -0.2, 0.3], dtype=torch.float64)
    return x, weight, bias


def _reference_norm(weight: torch.Tensor, bias: torch.Tensor) -> LayerNorm:
    norm = LayerNorm(weight.shape[0]).double()
    norm.load_state_dict({"weight": weight, "bias": bias})
    return norm


def layer_norm(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check ``layer_norm(x, weight, bias, eps)``: normalise each position's features, then scale and shift."""
    ex = Exercise("layer_norm")
    with ex.run():
        x, weight, bias = _inputs()
        expected = _reference_norm(weight, bias)(x)
        over_batch = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5) * weight + bias
        unbiased = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5) * weight + bias
        ex.compare("layer norm of a (2, 3, 4) batch", ex.call(student_fn, x, weight, bias, 1e-5), expected,
                   hint="mean and variance over the last dimension (dim=-1, keepdim=True), then * weight + bias",
                   mistakes={"you normalised over the batch (dim 0): LayerNorm uses each token's own features, "
                             "dim=-1": over_batch,
                             "use the biased variance (unbiased=False, divide by d_model) as nn.LayerNorm does":
                             unbiased})
        constant = torch.full((1, 2, 4), 3.0, dtype=torch.float64)
        ex.compare("a constant vector (variance 0) gives the bias, not NaN",
                   ex.call(student_fn, constant, weight, bias, 1e-5), bias.expand(1, 2, 4),
                   hint="add eps to the variance before the square root")
    return ex.result


def add_and_norm(student_fn: Callable[..., torch.Tensor]) -> CheckResult:
    """Check ``add_and_norm(x, sublayer, norm)`` = norm(x + sublayer(x)) (post-LN, as in the paper)."""
    ex = Exercise("add_and_norm")
    with ex.run():
        x, weight, bias = _inputs()
        norm = _reference_norm(weight, bias)
        torch.manual_seed(0)
        sublayer = nn.Linear(4, 4).double()
        with torch.no_grad():
            expected = norm(x + sublayer(x))
            mistakes = {
                "you forgot the residual: add x to sublayer(x) before normalising": norm(sublayer(x)),
                "that is pre-LN, x + sublayer(norm(x)): the paper normalises after adding": x + sublayer(norm(x)),
                "normalise the sum: norm(x + sublayer(x)), not x + norm(sublayer(x))": x + norm(sublayer(x)),
            }
        got = ex.call(student_fn, x, sublayer, norm)
        ex.compare("norm(x + sublayer(x)) for a linear sublayer", got, expected,
                   hint="add the sublayer's output to its input, then apply norm", mistakes=mistakes)
    return ex.result
