"""Checks for lesson 11's exercises: one online-softmax update step and the decoder-only (GPT) mask."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import scaled_dot_product_attention
from ..chunked_attention import online_softmax_update
from ..masks import causal_mask, padding_mask
from ._feedback import CheckResult, Exercise


def _chunks() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores (3 queries, 6 keys) split in two chunks; the second chunk raises some rows' maximum."""
    generator = torch.Generator().manual_seed(11)
    scores = torch.randn(3, 6, generator=generator, dtype=torch.float64)
    scores[0, 4] = 5.0  # a new maximum arrives in the second chunk
    values = torch.randn(6, 2, generator=generator, dtype=torch.float64)
    return scores[:, :3], values[:3], scores[:, 3:], values[3:]


def online_softmax_step(student_fn: Callable) -> CheckResult:
    """Check a function (running_max, running_sum, accumulator, scores, values) -> the three updated statistics."""
    ex = Exercise("online_softmax_step")
    with ex.run():
        scores_a, values_a, scores_b, values_b = _chunks()
        start = (
            torch.full((3, 1), float("-inf"), dtype=torch.float64),
            torch.zeros(3, 1, dtype=torch.float64),
            torch.zeros(3, 2, dtype=torch.float64),
        )
        after_a = online_softmax_update(*start, scores_a, values_a)
        expected = online_softmax_update(*after_a, scores_b, values_b)
        got = ex.call(student_fn, *[t.clone() for t in after_a], scores_b, values_b)
        if not ex.require(
            "returns three tensors (new_max, new_sum, new_accumulator)",
            isinstance(got, tuple | list) and len(got) == 3,
            problem=f"got {type(got).__name__}",
            hint="return new_max, new_sum, new_accumulator",
        ):
            return ex.result
        new_max = torch.maximum(after_a[0], scores_b.amax(-1, keepdim=True))
        weights = torch.exp(scores_b - new_max)
        no_rescale_sum = after_a[1] + weights.sum(-1, keepdim=True)
        ex.compare(
            "the new running maximum",
            got[0],
            expected[0],
            hint="the larger of the old maximum and this chunk's maximum (keepdim=True)",
        )
        ex.compare(
            "the new running sum",
            got[1],
            expected[1],
            hint="multiply the old sum by exp(old_max - new_max), then add this chunk's exp(scores - new_max)",
            mistakes={
                "rescale the old sum by exp(old_max - new_max): it was computed with the old maximum": no_rescale_sum
            },
        )
        ex.compare(
            "the new accumulator",
            got[2],
            expected[2],
            hint="rescale the old accumulator like the sum, then add exp(scores - new_max) @ values",
            mistakes={"rescale the old accumulator by exp(old_max - new_max) too": after_a[2] + weights @ values_b},
        )
        output = got[2] / got[1]
        exact, _ = scaled_dot_product_attention(
            torch.cat((scores_a, scores_b), dim=-1),
            torch.eye(6, dtype=torch.float64),
            torch.cat((values_a, values_b)),
            scale=1.0,
        )
        ex.compare("accumulator / sum after both chunks equals softmax(all scores) @ values", output, exact)
    return ex.result


def decoder_only_mask(student_fn: Callable) -> CheckResult:
    """Check a function (tokens (batch, T), pad_id) -> (batch, 1, T, T) bool: causal and hiding padded keys."""
    ex = Exercise("decoder_only_mask")
    with ex.run():
        tokens = torch.tensor([[5, 6, 7, 8], [9, 4, 0, 0]])  # (batch, T), pad id 0 at the end of the second row
        got = ex.call(student_fn, tokens, 0)
        causal = causal_mask(4).expand(2, 1, 4, 4)  # (batch, 1, T, T)
        padding = padding_mask(tokens, 0).expand(2, 1, 4, 4)  # (batch, 1, T, T)
        expected = causal & padding
        ex.compare(
            "the mask for two sequences, the second with 2 padding tokens",
            got,
            expected,
            hint="combine causal_mask(T) (T, T) and the key padding mask (batch, 1, 1, T) with &",
            mistakes={
                "hide the padding keys too: combine the causal mask with the padding mask": causal,
                "a GPT must not see the future: combine the padding mask with the causal mask": padding,
                "True means allowed: your mask is inverted": ~expected,
                "the future lies above the diagonal (queries are rows): keep the lower triangle": causal.transpose(
                    -2, -1
                )
                & padding,
            },
        )
    return ex.result
