"""Checks for lesson 06's exercises: splitting into heads, merging them back, a multi-head forward pass."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..masks import causal_mask
from ..multi_head import MultiHeadAttention, merge_heads, split_heads
from ._feedback import CheckResult, Exercise


def _input(batch: int, length: int, d_model: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def split_into_heads(student_fn: Callable) -> CheckResult:
    """Check a function ((batch, T, d_model), num_heads) -> (batch, heads, T, d_head)."""
    ex = Exercise("split_into_heads")
    with ex.run():
        x = _input(2, 5, 12)
        got = ex.call(student_fn, x, 3)
        ex.compare(
            "12 features split into 3 heads of 4 (batch 2, 5 tokens)",
            got,
            split_heads(x, 3),
            hint="view as (batch, T, heads, d_head), then swap the T and heads axes with .transpose(1, 2)",
            mistakes={
                "you reshaped straight to (batch, heads, T, d_head): that mixes tokens into heads. "
                "View as (batch, T, heads, d_head) first, then transpose(1, 2)": x.reshape(2, 3, 5, 4),
            },
        )
    return ex.result


def merge_from_heads(student_fn: Callable) -> CheckResult:
    """Check a function (batch, heads, T, d_head) -> (batch, T, heads * d_head), the inverse of splitting."""
    ex = Exercise("merge_from_heads")
    with ex.run():
        heads = split_heads(_input(2, 5, 12, seed=1), 3)  # (2, 3, 5, 4)
        got = ex.call(student_fn, heads)
        ex.compare(
            "3 heads of 4 merged back into 12 features",
            got,
            merge_heads(heads),
            hint="transpose(1, 2) to (batch, T, heads, d_head) first, then reshape to (batch, T, heads * d_head)",
            mistakes={
                "you merged the heads in the wrong order (reshaped without transposing): transpose(1, 2) first": (
                    heads.reshape(2, 5, 12)
                ),
            },
        )
        x = _input(1, 3, 8, seed=2)
        ex.compare("merging undoes splitting (8 features, 2 heads)", ex.call(student_fn, split_heads(x, 2)), x)
    return ex.result


def multi_head_forward(student_fn: Callable) -> CheckResult:
    """Check a function (x, mha: MultiHeadAttention, mask) -> (batch, T, d_model) written from the projections."""
    ex = Exercise("multi_head_forward")
    with ex.run():
        torch.manual_seed(0)
        mha = MultiHeadAttention(d_model=8, num_heads=2).double().eval()
        x = _input(2, 4, 8, seed=3)
        expected, _ = mha(x, x, x, mask=causal_mask(4))
        with torch.no_grad():
            got = ex.call(student_fn, x, mha, causal_mask(4))
            one_head = MultiHeadAttention(d_model=8, num_heads=1).double().eval()
            one_head.load_state_dict(mha.state_dict())
            single_head_output, _ = one_head(x, x, x, mask=causal_mask(4))
            unmasked, _ = mha(x, x, x)
        ex.compare(
            "self-attention with 2 heads and a causal mask (batch 2, 4 tokens, d_model 8)",
            got,
            expected,
            hint="project with mha.q_proj/k_proj/v_proj, split into heads, scale by sqrt(d_head), mask, softmax, "
            "weight the values, merge, then mha.out_proj",
            mistakes={
                "you attended with one head of width d_model: split the projections into mha.num_heads heads, "
                "and scale by sqrt(d_head)": single_head_output,
                "the mask was ignored: block the scores where the mask is False": unmasked,
            },
        )
    return ex.result
