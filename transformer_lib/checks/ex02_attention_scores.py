"""Checks for lesson 02's exercises: a stable softmax, attention weights from dot products, a weighted average."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import softmax
from ._feedback import CheckResult, Exercise

WORDS = ["Orange", "Phone", "Apple", "And", "An"]
FEATURES = torch.tensor(  # (5, 3) columns: tech, fruitness, other (lesson 01's word-feature table)
    [[0.0, 3.0, 0.0], [4.0, 0.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 3.0]], dtype=torch.float64
)


def stable_softmax(student_fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check a softmax over the last axis that survives huge scores."""
    ex = Exercise("stable_softmax")
    with ex.run():
        small = torch.tensor([1.0, 0.71, 0.0, 0.0], dtype=torch.float64)
        ex.compare("softmax of [1, 0.71, 0, 0] (Orange's row in lesson 02)", ex.call(student_fn, small), softmax(small),
                   hint="exponentiate every score, then divide by the sum of the exponentials")
        rows = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]], dtype=torch.float64)
        ex.compare("softmax of a (2, 3) matrix, one distribution per row", ex.call(student_fn, rows), softmax(rows),
                   hint="normalise along the last axis (dim=-1), so each row sums to 1",
                   mistakes={"each column sums to 1: sum over the last axis (dim=-1, keepdim=True)":
                             torch.softmax(rows, dim=0)})
        huge = torch.tensor([[1000.0, 999.0, -1000.0], [1.0, 2.0, 3.0]], dtype=torch.float64)
        naive = huge.exp() / huge.exp().sum(dim=-1, keepdim=True)  # exp(1000) overflows: row 0 is [nan, nan, 0]
        global_exps = (huge - huge.max()).exp()  # row 1 becomes exp(-999) = 0 everywhere, then 0 / 0
        global_max = global_exps / global_exps.sum(dim=-1, keepdim=True)
        ex.compare("softmax of the rows [1000, 999, -1000] and [1, 2, 3]", ex.call(student_fn, huge), softmax(huge),
                   hint="subtract each row's maximum before exponentiating",
                   mistakes={"exp(1000) overflows to inf: subtract the row's maximum (x.amax(dim=-1, keepdim=True)) "
                             "before exp": naive,
                             "you subtracted the largest score of the whole tensor: row [1, 2, 3] then underflows to "
                             "0 / 0; subtract each row's own maximum (x.amax(dim=-1, keepdim=True))": global_max})
    return ex.result


def attention_weights(student_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check (T_q, d) queries and (T_k, d) keys -> (T_q, T_k) weights = softmax of the dot products per query."""
    ex = Exercise("attention_weights")
    with ex.run():
        queries = FEATURES[[2, 0]]  # (2, 3): Apple, Orange
        scores = queries @ FEATURES.T  # (2, 5)
        got = ex.call(student_fn, queries, FEATURES)
        ex.compare("weights of Apple and Orange over the five words", got, softmax(scores),
                   hint="scores = queries @ keys.T, then softmax over the keys (the last axis)",
                   mistakes={"you divided the scores by their row sum: use softmax (exp, then normalise)":
                             scores / scores.sum(dim=-1, keepdim=True),
                             "you returned the scores: apply softmax to them": scores})
        square = ex.call(student_fn, FEATURES, FEATURES)
        ex.compare("weights of all five words over all five (each row sums to 1)", square,
                   softmax(FEATURES @ FEATURES.T),
                   hint="softmax over the keys: dim=-1",
                   mistakes={"each column sums to 1: take the softmax over the keys, dim=-1":
                             torch.softmax(FEATURES @ FEATURES.T, dim=0)})
    return ex.result


def weighted_average(student_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check (T_q, T_k) weights and (T_k, d_v) values -> (T_q, d_v) weighted averages of the values."""
    ex = Exercise("weighted_average")
    with ex.run():
        weights = softmax(FEATURES[[2, 0, 3]] @ FEATURES[[0, 1, 2]].T)  # (3, 3), rows sum to 1, not symmetric
        values = FEATURES[[0, 1, 2]]  # (3, 3)
        ex.compare("new vectors of Apple, Orange and And", ex.call(student_fn, weights, values), weights @ values,
                   hint="output[i] = Σ_j weights[i, j] · values[j], i.e. weights @ values",
                   mistakes={"you mixed the values with the columns of the weights: use weights @ values, "
                             "not weights.T @ values": weights.T @ values,
                             "you multiplied element by element: use the matrix product @": weights * values})
        wide = torch.arange(6, dtype=torch.float64).reshape(3, 2)  # (3, 2): d_v differs from T_k
        ex.compare("an output with d_v = 2 components", ex.call(student_fn, weights, wide), weights @ wide,
                   hint="the result has one row per query and one column per value component: (T_q, d_v)")
    return ex.result
