"""Checks for lesson 12's exercises: one BPE merge step, a repaired RMSNorm, the key/value heads of grouped-query
attention and the SwiGLU feed-forward."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..bpe import merge_pair
from ..llama import SwiGLU, expand_kv_heads, rms_norm
from ._feedback import CheckResult, Exercise

NEW_ID = 256


def _merge_first_only(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return [*ids[:i], new_id, *ids[i + 2:]]
    return list(ids)


def _merge_without_skipping(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    return [new_id if (a, b) == pair else a for a, b in zip(ids, [*ids[1:], None], strict=True)]


def _merge_dropping_the_last(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    merged, i = [], 0
    while i < len(ids) - 1:  # the bug: a last id that starts no pair is never appended
        merged.append(new_id if (ids[i], ids[i + 1]) == pair else ids[i])
        i += 2 if merged[-1] == new_id else 1
    return merged


def merge_step(student_fn: Callable) -> CheckResult:
    """Check a function (ids, pair, new_id) -> ids with every non-overlapping occurrence of pair, left to right,
    replaced by new_id."""
    ex = Exercise("merge_step")
    with ex.run():
        cases = [
            ("a pair that occurs three times", [5, 1, 2, 1, 2, 3, 1, 2, 4], (1, 2)),
            ("overlapping candidates: [7, 7, 7] holds the pair (7, 7) once", [7, 7, 7, 9, 7, 7], (7, 7)),
            ("a pair that does not occur", [3, 4, 3, 4], (4, 4)),
        ]
        for what, ids, pair in cases:
            got = ex.call(student_fn, list(ids), pair, NEW_ID)
            ex.compare(
                what,
                got,
                merge_pair(ids, pair, NEW_ID),
                hint="scan left to right: where ids[i], ids[i + 1] form the pair, append new_id and move on by 2; "
                "otherwise append ids[i] and move on by 1",
                mistakes={
                    "replace every occurrence, not only the first": _merge_first_only(ids, pair, NEW_ID),
                    "after a merge skip both ids of the pair (i += 2): the second one is used up":
                        _merge_without_skipping(ids, pair, NEW_ID),
                    "keep the last id when it does not start a pair: loop while i < len(ids)":
                        _merge_dropping_the_last(ids, pair, NEW_ID),
                },
            )
    return ex.result


def fixed_rms_norm(student_fn: Callable) -> CheckResult:
    """Check a function (x (..., d), weight (d,), eps) -> x / sqrt(mean(x²) + eps) * weight."""
    ex = Exercise("fixed_rms_norm")
    with ex.run():
        generator = torch.Generator().manual_seed(12)
        x = 0.1 * torch.randn(2, 3, 6, generator=generator, dtype=torch.float64) + 0.05  # small rows, mean not 0
        weight = torch.linspace(0.5, 2.0, 6, dtype=torch.float64)
        eps = 1e-2  # large beside mean(x²), so where it goes shows
        centred = x - x.mean(dim=-1, keepdim=True)

        def outside(rows: torch.Tensor) -> torch.Tensor:
            return rows / (rows.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * weight

        got = ex.call(student_fn, x.clone(), weight, eps)
        ex.compare(
            "RMSNorm of rows with a non-zero mean, eps=1e-2",
            got,
            rms_norm(x, weight, eps),
            hint="x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight",
            mistakes={
                "both bugs are still there: keep the mean, and put eps inside the square root": outside(centred),
                "RMSNorm does not subtract the mean: only LayerNorm centres the rows": rms_norm(centred, weight, eps),
                "eps goes inside the square root: sqrt(mean(x²) + eps), not sqrt(mean(x²)) + eps": outside(x),
                "multiply by weight at the end": rms_norm(x, torch.ones_like(weight), eps),
            },
        )
    return ex.result


def expand_kv(student_fn: Callable) -> CheckResult:
    """Check a function (kv (batch, kv_heads, T, d_head), num_heads) -> (batch, num_heads, T, d_head) in which query
    head h gets key/value head h // (num_heads / kv_heads)."""
    ex = Exercise("expand_kv")
    with ex.run():
        for kv_heads, num_heads in ((3, 6), (2, 8)):
            kv = torch.arange(2 * kv_heads * 4 * 5, dtype=torch.float64).view(2, kv_heads, 4, 5)  # distinct values
            got = ex.call(student_fn, kv.clone(), num_heads)
            group = num_heads // kv_heads
            ex.compare(
                f"{kv_heads} key/value heads for {num_heads} query heads (batch 2, T 4)",
                got,
                expand_kv_heads(kv, num_heads),
                hint="repeat each key/value head group = num_heads // kv_heads times in place, along dim 1",
                mistakes={
                    "neighbouring query heads share a key/value head: repeat each head in place "
                    "(repeat_interleave), not the whole stack (repeat)": kv.repeat(1, group, 1, 1),
                },
            )
    return ex.result


def swiglu(student_fn: Callable) -> CheckResult:
    """Check a function (x (batch, T, d_model), w_gate, w_up (d_ff, d_model), w_down (d_model, d_ff)) ->
    (batch, T, d_model) = down(silu(gate(x)) * up(x))."""
    ex = Exercise("swiglu")
    with ex.run():
        generator = torch.Generator().manual_seed(0)
        x, w_gate, w_up, w_down = (torch.randn(*shape, generator=generator, dtype=torch.float64)
                                   for shape in ((2, 3, 6), (10, 6), (10, 6), (6, 10)))  # d_model 6, d_ff 10
        reference = SwiGLU(d_model=6, d_ff=10).double()
        reference.load_state_dict({"gate_proj.weight": w_gate, "up_proj.weight": w_up, "down_proj.weight": w_down})
        got = ex.call(student_fn, x.clone(), w_gate, w_up, w_down)
        gate, up = x @ w_gate.T, x @ w_up.T  # (batch, T, d_ff)
        ex.compare(
            "SwiGLU of a (2, 3, 6) input with d_ff = 10",
            got,
            reference(x).detach(),
            hint="(F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T: the weights are stored (out, in), as in nn.Linear",
            mistakes={
                "the SiLU acts on the gate branch, x @ w_gate.T, not on the up branch": (F.silu(up) * gate) @ w_down.T,
                "apply F.silu to the gate: without it the block is bilinear, not gated": (gate * up) @ w_down.T,
                "SwiGLU uses SiLU (x · sigmoid(x)), not GELU": (F.gelu(gate) * up) @ w_down.T,
                "multiply the two branches before the down projection, do not add them":
                    (F.silu(gate) + up) @ w_down.T,
            },
        )
    return ex.result
