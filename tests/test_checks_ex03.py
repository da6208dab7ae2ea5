"""The lesson 03 checks accept the solutions, spot stubs, and name the typical mistakes."""

import math

import pytest
import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex03_queries_keys_values as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_every_check_reports_a_stub_as_not_attempted(capsys):
    for check_fn in (check.project_qkv, check.attention, check.dot_product_variance):
        result = check_fn(stub)
        assert not result.attempted and not result.ok
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_project_qkv_accepts_the_solution_and_names_swapped_matrices():
    assert check.project_qkv(lambda x, wq, wk, wv: (x @ wq, x @ wk, x @ wv)).ok
    assert_rejected_with(check.project_qkv(lambda x, wq, wk, wv: (x @ wk, x @ wq, x @ wv)),
                         "your queries used the key matrix")
    assert_rejected_with(check.project_qkv(lambda x, wq, wk, wv: x @ wq), "returns three tensors (q, k, v): got Tensor")


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors")  # the wrong answer below uses k.T on 4-D keys
def test_attention_accepts_the_solution_and_names_the_mistakes():
    def solution(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v

    assert check.attention(solution).ok
    unscaled = check.attention(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v)
    assert_rejected_with(unscaled, "you forgot the scale: divide the scores by √d_k = 4")
    assert unscaled.lines.count("  hint: you forgot the scale: divide the scores by √d_k") == 1  # the batched one
    assert_rejected_with(check.attention(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 16, dim=-1) @ v),
                         "you divided by d_k")
    transposed_keys = check.attention(lambda q, k, v: torch.softmax(q @ k.T / 4, dim=-1) @ v)
    assert transposed_keys.passed == 1
    assert_rejected_with(transposed_keys, "`k.T` reverses every axis there")


def test_dot_product_variance_accepts_the_experiment_and_names_the_mistakes():
    def experiment(d_k, n_samples):
        q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
        return (q * k).sum(-1).var().item()

    assert check.dot_product_variance(experiment).ok
    assert_rejected_with(check.dot_product_variance(lambda d_k, n: experiment(d_k, n) ** 0.5),
                         "you returned the standard deviation")
    assert_rejected_with(check.dot_product_variance(lambda d_k, n: experiment(d_k, n) / d_k),
                         "you scaled by √d_k")
