"""Checks for lesson 03's exercises: the three projections, scaled dot-product attention, the variance of q·k."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import scaled_dot_product_attention, softmax
from ._feedback import CheckResult, Exercise


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def project_qkv(student_fn: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> CheckResult:
    """Check (x, w_q, w_k, w_v) -> (q, k, v) = (x @ w_q, x @ w_k, x @ w_v) for x (T, d_model)."""
    ex = Exercise("project_qkv")
    with ex.run():
        x = _random(3, 4, seed=0)  # (T=3, d_model=4)
        w_q, w_k, w_v = _random(4, 2, seed=1), _random(4, 2, seed=2), _random(4, 5, seed=3)
        got = ex.call(student_fn, x, w_q, w_k, w_v)
        if not ex.require("returns three tensors (q, k, v)", isinstance(got, tuple | list) and len(got) == 3,
                          problem=f"got {type(got).__name__}", hint="end with `return q, k, v`"):
            return ex.result
        q, k, v = got
        ex.compare("the queries q = x @ w_q, shape (3, 2)", q, x @ w_q,
                   mistakes={"your queries used the key matrix: q = x @ w_q": x @ w_k})
        ex.compare("the keys k = x @ w_k, shape (3, 2)", k, x @ w_k,
                   mistakes={"your keys used the query matrix: k = x @ w_k": x @ w_q})
        ex.compare("the values v = x @ w_v, shape (3, 5)", v, x @ w_v,
                   hint="each row of x (one token) is multiplied by w_v: (T, d_model) @ (d_model, d_v)")
    return ex.result


def attention(student_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check softmax(q kᵀ / √d_k) v on one sequence and on (batch, heads, T, d) tensors."""
    ex = Exercise("attention")
    with ex.run():
        q, k, v = _random(3, 16, seed=4) * 2, _random(4, 16, seed=5) * 2, _random(4, 3, seed=6)
        scores = q @ k.T  # (3, 4)
        expected, _ = scaled_dot_product_attention(q, k, v)
        ex.compare("one sequence: 3 queries, 4 keys, d_k = 16, d_v = 3", ex.call(student_fn, q, k, v), expected,
                   hint="scores = q @ k.transpose(-2, -1) / √d_k, softmax over the keys, then @ v",
                   mistakes={"you forgot the scale: divide the scores by √d_k = 4": softmax(scores) @ v,
                             "you divided by d_k: the scale is √d_k, the square root of the number of components":
                             softmax(scores / 16) @ v,
                             "your softmax ran over the queries: use dim=-1 (the keys)":
                             torch.softmax(scores / 4, dim=0) @ v})
        qb, kb, vb = _random(2, 3, 5, 8, seed=7), _random(2, 3, 6, 8, seed=8), _random(2, 3, 6, 4, seed=9)
        got = ex.call(student_fn, qb, kb, vb,
                      description="attention on (batch=2, heads=3, T, d) tensors; "
                      "`k.T` reverses every axis there, `k.transpose(-2, -1)` swaps only the last two")
        batched_scores = qb @ kb.transpose(-2, -1)  # (2, 3, 5, 6)
        ex.compare("batched: (2, 3, 5, 8) queries, (2, 3, 6, 8) keys, (2, 3, 6, 4) values -> (2, 3, 5, 4)", got,
                   scaled_dot_product_attention(qb, kb, vb)[0],
                   hint="work on the last two axes only: k.transpose(-2, -1), d_k = q.shape[-1], softmax(dim=-1)",
                   mistakes={"you forgot the scale: divide the scores by √d_k": softmax(batched_scores) @ vb})
    return ex.result


def dot_product_variance(student_fn: Callable[[int, int], float]) -> CheckResult:
    """Check an experiment: variance of q·k for random unit-variance q, k with d_k components (about d_k)."""
    ex = Exercise("dot_product_variance")
    with ex.run():
        for d_k in (16, 64):
            torch.manual_seed(0)
            got = ex.call(student_fn, d_k, 20000)
            ex.compare(f"variance of q·k for d_k = {d_k} (20000 samples; about {d_k} within 10%)",
                       float(got), float(d_k), rtol=0.1, atol=0.0,
                       hint="draw q and k with torch.randn(n_samples, d_k), take (q * k).sum(-1), then .var()",
                       mistakes={"you returned the standard deviation: return the variance (its square)":
                                 math.sqrt(d_k),
                                 "you scaled by √d_k: measure the raw dot product q·k": 1.0})
    return ex.result
