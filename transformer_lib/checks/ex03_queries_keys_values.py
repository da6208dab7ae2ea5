"""Checks for lesson 03's exercises: cross-attention's projections, a broken attention function to fix, the size of
unscaled scores, and which key each query attends to most."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import scaled_dot_product_attention, softmax
from ._feedback import CheckResult, Exercise, Hint

# Exercise 4's self-attention example, shown in the exercise notebook: four tokens, d_model = 3, d_k = 2.
TOKENS = ["A", "B", "C", "D"]
X = torch.tensor([[-1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [-1.0, 1.0, 2.0], [-1.0, 2.0, 0.0]])  # (T=4, d_model=3)
W_Q = torch.tensor([[1.0, -1.0], [-1.0, -1.0], [1.0, -1.0]])  # (d_model=3, d_k=2)
W_K = torch.tensor([[0.0, 1.0], [0.0, 1.0], [1.0, -1.0]])  # (d_model=3, d_k=2)


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def cross_attention_qkv(student_fn: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> CheckResult:
    """Check (target, source, w_q, w_k, w_v) -> (target @ w_q, source @ w_k, source @ w_v)."""
    ex = Exercise("cross_attention_qkv")
    with ex.run():
        target, source = _random(3, 4, seed=0), _random(5, 4, seed=1)  # (T_target=3, d_model=4), (T_source=5, 4)
        w_q, w_k, w_v = _random(4, 2, seed=2), _random(4, 2, seed=3), _random(4, 6, seed=4)  # d_k = 2, d_v = 6
        got = ex.call(student_fn, target, source, w_q, w_k, w_v)
        if not ex.require("returns three tensors (q, k, v)", isinstance(got, tuple | list) and len(got) == 3,
                          problem=f"got {type(got).__name__}",
                          hint=Hint("end with `return q, k, v`", id="not-three-tensors")):
            return ex.result
        q, k, v = got
        ex.compare("the queries: one per target token, (3, 2)", q, target @ w_q,
                   hint="queries come from the sequence being written: target @ w_q",
                   mistakes={Hint("your queries came from the source: in cross-attention the target asks the "
                                  "questions", id="queries-from-source"): source @ w_q,
                             Hint("your queries used the key matrix: q = target @ w_q", id="queries-use-key-matrix"):
                             target @ w_k})
        ex.compare("the keys: one per source token, (5, 2)", k, source @ w_k,
                   hint="keys come from the source (the encoder's output): source @ w_k",
                   mistakes={Hint("your keys came from the target: that is self-attention; "
                                  "here the source supplies the keys", id="keys-from-target"): target @ w_k,
                             Hint("your keys used the query matrix: k = source @ w_k", id="keys-use-query-matrix"):
                             source @ w_q})
        ex.compare("the values: one per source token, (5, 6)", v, source @ w_v,
                   hint="values come from the same sequence as the keys: source @ w_v",
                   mistakes={Hint("your values came from the target: each key needs its value, from the same source "
                                  "token", id="values-from-target"): target @ w_v})
    return ex.result


def _variants(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[Hint, torch.Tensor]:
    """What the classic mistakes in attention return, keyed by the hint that names each one.

    On one (T_q, T_k) score matrix dim=0 is dim=-2, the queries, so those two are one mistake there. On
    (batch, heads, T_q, T_k) scores dim=0 is the batch and dim=1 the heads: dim=1 is right on one matrix only.
    """
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k) unscaled
    d_k, d_v = q.shape[-1], v.shape[-1]
    scaled = scores / math.sqrt(d_k)
    root_norm = q.norm(dim=-1, keepdim=True).sqrt()  # (..., T_q, 1) √‖q‖, the broken function's scale
    variants = {
        Hint("this is still the broken function: fix its scale and its softmax axis", id="still-broken"):
            torch.softmax(scores / root_norm, dim=0) @ v,
        Hint("you divide by √‖q‖, the square root of the query's length: the scale is 1/√d_k, "
             "one constant for every pair (d_k = query.shape[-1])", id="scaled-by-query-norm"):
            softmax(scores / root_norm) @ v,
        Hint("your softmax runs over the queries: each query's weights over the keys must sum to 1, so use dim=-1",
             id="softmax-not-over-keys"): torch.softmax(scaled, dim=-2) @ v,
        Hint("you dropped the scale: divide the scores by √d_k", id="missing-sqrt-dk"): softmax(scores) @ v,
        Hint("you divided by d_k: divide by its square root, √d_k", id="divided-by-dk"): softmax(scores / d_k) @ v,
        Hint("you divided by √d_v (value.shape[-1]): d_k is the last dimension of the queries and keys",
             id="scaled-by-sqrt-dv"): softmax(scores / math.sqrt(d_v)) @ v,
        Hint("your output is transposed: it should be (..., T_q, d_v), one row per query", id="output-transposed"):
            (softmax(scaled) @ v).transpose(-2, -1),
    }
    if scores.dim() == 4:
        variants[Hint("your softmax runs over dim=0, the batch: each query's weights over the keys must sum to 1, "
                      "so use dim=-1", id="softmax-not-over-keys")] = torch.softmax(scaled, dim=0) @ v
        variants[Hint("your softmax runs over dim=1: on one (T_q, T_k) matrix that is the keys, but on "
                      "(batch, heads, T_q, T_k) scores it is the heads; dim=-1 is the keys for any number of axes",
                      id="softmax-over-heads")] = torch.softmax(scaled, dim=1) @ v
        variants[Hint("you took d_k from query.shape[1]: on one (T_q, d_k) matrix that is d_k, but on "
                      "(batch, heads, T_q, d_k) queries it is the heads; d_k = query.shape[-1] for any number of axes",
                      id="d-k-from-fixed-axis")] = softmax(scores / math.sqrt(q.shape[1])) @ v
    return variants


def fixed_attention(student_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check softmax(Q Kᵀ / √d_k) V where every size differs (T_q ≠ T_k, d_k ≠ d_v), alone and in a batch."""
    ex = Exercise("fixed_attention")
    with ex.run():
        q, k, v = _random(3, 4, seed=5) * 2, _random(5, 4, seed=6) * 2, _random(5, 2, seed=7)  # T_q=3, T_k=5
        qb, kb, vb = _random(2, 3, 4, 6, seed=8) * 2, _random(2, 3, 5, 6, seed=9) * 2, _random(2, 3, 5, 2, seed=10)
        cases = (("one sequence: 3 queries, 5 keys, d_k = 4, d_v = 2 -> (3, 2)", (q, k, v),
                  "softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1) @ v, with d_k = q.shape[-1]", None),
                 ("batched: (2, 3, 4, 6) queries, (2, 3, 5, 6) keys, (2, 3, 5, 2) values -> (2, 3, 4, 2)",
                  (qb, kb, vb), "work on the last two axes only: key.transpose(-2, -1), d_k = query.shape[-1], dim=-1",
                  "your function on (batch=2, heads=3, T, d) tensors; "
                  "`key.T` reverses every axis there, `key.transpose(-2, -1)` swaps only the last two"))
        for what, inputs, hint, description in cases:  # the first failure stops: one hint, one diagnosis
            given = tuple(x.clone() for x in inputs)
            got = ex.call(student_fn, *given, description=description)
            if not all(torch.equal(copy, x) for copy, x in zip(given, inputs, strict=True)):
                ex.require("your function leaves its inputs unchanged", False,
                           problem="it changed a tensor it was given",
                           hint=Hint("your function changed its query, key or value (an in-place step such as /= or "
                                     "div_): they are the caller's data, so compute into new tensors",
                                     id="modified-input"))
                break
            if not ex.compare(what, got, scaled_dot_product_attention(*inputs)[0], hint=hint,
                              mistakes=_variants(*inputs)):
                break
    return ex.result


def unscaled_score_std(student_fn: Callable[[], float]) -> CheckResult:
    """Check a prediction: the standard deviation of q·k for unit-variance q, k with d_k = 64 (about √64 = 8)."""
    ex = Exercise("unscaled_score_std")
    with ex.run():
        d_k, pairs = 64, 20_000
        q, k = _random(pairs, d_k, seed=11), _random(pairs, d_k, seed=12)  # unit-variance components
        measured = (q * k).sum(-1).std().item()  # the spread of 20000 unscaled scores
        got = ex.call(student_fn)
        ex.compare(f"your prediction against the measured standard deviation of {pairs} unscaled scores "
                   f"(d_k = {d_k}): {measured:.2f}, within 5%", got, measured, rtol=0.05, atol=0.0,
                   hint="each product q_i k_i has variance 1, and q·k adds up d_k of them",
                   mistakes={Hint("that is the variance: the standard deviation is its square root",
                                  id="variance-not-std"): float(d_k),
                             Hint("1 is the spread after dividing by √d_k; the question is about the unscaled scores",
                                  id="spread-after-scaling"): 1.0,
                             Hint("that is the scale factor 1/√d_k, not the spread of the scores",
                                  id="scale-factor-not-spread"): 1 / math.sqrt(d_k)})
    return ex.result


def favourite_keys(student_fn: Callable[[], list[int]]) -> CheckResult:
    """Check a prediction: for each query of the example (X, W^Q, W^K), the index of its largest attention weight."""
    ex = Exercise("favourite_keys")
    with ex.run():
        q, k = X @ W_Q, X @ W_K  # (4, 2) each: self-attention on one sequence
        _, weights = scaled_dot_product_attention(q, k, k)  # (T_q=4, T_k=4); the values do not change the weights
        scores = q @ k.T  # (4, 4)
        got = ex.call(student_fn)
        if isinstance(got, torch.Tensor):
            got = got.tolist()
        ex.compare("the key each query (A, B, C, D) attends to most", got, weights.argmax(dim=-1).tolist(),
                   hint="compute Q = X W^Q and K = X W^K, then the scores Q Kᵀ: each ROW is one query",
                   mistakes={Hint("a token need not attend most to itself: compare the whole row of scores",
                                  id="attends-to-itself"): list(range(len(TOKENS))),
                             Hint("you took the largest entry of each column (the query that looks at a key most): "
                                  "take each row's largest, over the keys", id="argmax-over-queries"):
                             scores.argmax(dim=0).tolist(),
                             Hint("you compared the token vectors directly (X Xᵀ): the scores are (X W^Q)(X W^K)ᵀ",
                                  id="unprojected-tokens"): (X @ X.T).argmax(dim=-1).tolist()})
    return ex.result
