"""Checks for lesson 05's exercises: the causal mask, the padding mask, and a softmax that ignores masked keys."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ._feedback import CheckResult, Exercise

_TOKENS = torch.tensor([[7, 3, 9, 4], [5, 8, 0, 0], [6, 0, 0, 0]])  # (batch, T), pad id 0


def look_ahead_mask(student_fn: Callable) -> CheckResult:
    """Check a function size -> (size, size) bool mask, True where query i may attend to key j (j <= i)."""
    ex = Exercise("look_ahead_mask")
    with ex.run():
        got = ex.call(student_fn, 4)
        expected = causal_mask(4)
        ex.compare(
            "the causal mask for 4 tokens",
            got,
            expected,
            hint="query i (row) may see keys j <= i (columns): the lower triangle including the diagonal",
            mistakes={
                "your polarity is inverted (True = blocked, as nn.MultiheadAttention wants): "
                "the course's masks are True where attention is allowed": ~expected,
                "you allowed the future and blocked the past: queries are rows, so keep the lower triangle "
                "(torch.tril), not the upper": expected.T,
                "the diagonal must be allowed: a token may attend to itself": expected.tril(diagonal=-1),
            },
        )
        ex.compare("the causal mask for 1 token", ex.call(student_fn, 1), causal_mask(1))
    return ex.result


def key_padding_mask(student_fn: Callable) -> CheckResult:
    """Check a function (tokens (batch, T), pad_id) -> (batch, 1, 1, T) bool, True where the key is real."""
    ex = Exercise("key_padding_mask")
    with ex.run():
        got = ex.call(student_fn, _TOKENS, 0)
        expected = padding_mask(_TOKENS, 0)
        ex.compare(
            "the padding mask of 3 sentences of lengths 4, 2 and 1 (pad id 0)",
            got,
            expected,
            hint="compare the tokens with pad_id, then add two axes: mask[:, None, None, :]",
            mistakes={
                "your polarity is inverted: mark real tokens True, padding False": ~expected,
                "add the heads and queries axes so the mask broadcasts: shape (batch, 1, 1, T)": expected[:, 0, 0],
            },
        )
    return ex.result


def masked_softmax(student_fn: Callable) -> CheckResult:
    """Check a function (scores (..., T_q, T_k), mask bool) -> weights; masked keys get 0, no NaN anywhere."""
    ex = Exercise("masked_softmax")
    with ex.run():
        scores = torch.tensor([[2.0, 1.0, 0.5], [0.3, 1.2, -1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
        mask = torch.tensor([[True, False, True], [True, True, True], [False, False, False]])
        got = ex.call(student_fn, scores, mask)
        identity = torch.eye(3, dtype=torch.float64)  # keys = identity, so query @ keys.T = the scores
        _, expected = scaled_dot_product_attention(scores, identity, identity, mask=mask, scale=1.0)
        _, inverted = scaled_dot_product_attention(scores, identity, identity, mask=~mask, scale=1.0)
        ex.compare(
            "weights for 3 queries: key 1 blocked, nothing blocked, every key blocked",
            got,
            expected,
            hint="fill blocked scores with -inf, take the softmax, then set rows with no allowed key to 0",
            mistakes={
                "blocked keys still get weight: fill them with -inf before the softmax, not 0": torch.softmax(
                    scores.masked_fill(~mask, 0.0), dim=-1
                ),
                "the mask polarity is inverted: True means the key is allowed": inverted,
            },
        )
        batch_scores = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        _, causal_weights = scaled_dot_product_attention(
            batch_scores, torch.eye(4, dtype=torch.float64), torch.eye(4, dtype=torch.float64),
            mask=causal_mask(4), scale=1.0,
        )
        ex.compare("a batch of scores (2, 4, 4) with a causal mask (4, 4) (broadcasting)",
                   ex.call(student_fn, batch_scores, causal_mask(4)), causal_weights)
    return ex.result
