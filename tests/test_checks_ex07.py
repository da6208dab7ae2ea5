"""The lesson 07 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex07_encoder_decoder_blocks as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def layer_norm_solution(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    variance = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.layer_norm, check.add_and_norm):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 2


def test_layer_norm_accepts_the_solution_and_names_the_mistakes():
    assert check.layer_norm(layer_norm_solution).ok

    def over_batch(x, weight, bias, eps=1e-5):
        return (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + eps) * weight + bias

    assert_rejected_with(check.layer_norm(over_batch), "you normalised over the batch")

    def unbiased(x, weight, bias, eps=1e-5):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias

    assert_rejected_with(check.layer_norm(unbiased), "biased variance")


def test_add_and_norm_accepts_the_solution_and_names_the_mistakes():
    assert check.add_and_norm(lambda x, sublayer, norm: norm(x + sublayer(x))).ok
    assert_rejected_with(check.add_and_norm(lambda x, sublayer, norm: norm(sublayer(x))), "you forgot the residual")
    assert_rejected_with(check.add_and_norm(lambda x, sublayer, norm: x + sublayer(norm(x))), "that is pre-LN")
