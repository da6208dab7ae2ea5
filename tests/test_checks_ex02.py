"""The lesson 02 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib import softmax
from transformer_lib.checks import ex02_attention_scores as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_every_check_reports_a_stub_as_not_attempted(capsys):
    for check_fn in (check.stable_softmax, check.attention_weights, check.weighted_average):
        result = check_fn(stub)
        assert not result.attempted and not result.ok
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_stable_softmax_accepts_the_solution_and_names_the_mistakes(capsys):
    def solution(x):
        exps = (x - x.amax(dim=-1, keepdim=True)).exp()
        return exps / exps.sum(dim=-1, keepdim=True)

    assert check.stable_softmax(solution).ok
    assert_rejected_with(check.stable_softmax(lambda x: x.exp() / x.exp().sum(dim=-1, keepdim=True)),
                         "exp(1000) overflows to inf: subtract the row's maximum")
    assert_rejected_with(check.stable_softmax(lambda x: torch.softmax(x, dim=0)), "each column sums to 1")

    def global_max(x):
        exps = (x - x.max()).exp()
        return exps / exps.sum(dim=-1, keepdim=True)

    assert_rejected_with(check.stable_softmax(global_max), "you subtracted the largest score of the whole tensor")
    assert "your result contains NaN" in capsys.readouterr().out


def test_attention_weights_accepts_the_solution_and_names_the_mistakes():
    assert check.attention_weights(lambda q, k: softmax(q @ k.T)).ok

    def row_sum(q, k):
        scores = q @ k.T
        return scores / scores.sum(dim=-1, keepdim=True)

    assert_rejected_with(check.attention_weights(row_sum), "you divided the scores by their row sum")
    assert_rejected_with(check.attention_weights(lambda q, k: torch.softmax(q @ k.T, dim=0)),
                         "each column sums to 1: take the softmax over the keys")


def test_weighted_average_accepts_the_solution_and_names_the_mistakes():
    assert check.weighted_average(lambda w, v: w @ v).ok
    assert_rejected_with(check.weighted_average(lambda w, v: w.T @ v), "not weights.T @ values")
    result = check.weighted_average(lambda w, v: w * v)
    assert_rejected_with(result, "you multiplied element by element")
    assert_rejected_with(result, "raised RuntimeError")
