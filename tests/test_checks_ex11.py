"""The lesson 11 checks accept the solutions, spot stubs, and name typical mistakes."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex11_gpt_and_scaling as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def step(running_max, running_sum, accumulator, scores, values, rescale=True):
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    factor = torch.exp(running_max - new_max) if rescale else 1.0
    weights = torch.exp(scores - new_max)
    return new_max, running_sum * factor + weights.sum(-1, keepdim=True), accumulator * factor + weights @ values


def mask(tokens, pad_id, causal=True, padding=True):
    length = tokens.shape[1]
    allowed = torch.ones(tokens.shape[0], 1, length, length, dtype=torch.bool)
    if causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool).tril()
    if padding:
        allowed = allowed & (tokens != pad_id)[:, None, None, :]
    return allowed


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.online_softmax_step, check.decoder_only_mask):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 2


def test_online_softmax_step_accepts_the_solution():
    assert check.online_softmax_step(step).ok


def test_online_softmax_step_names_a_missing_rescale():
    result = check.online_softmax_step(lambda *args: step(*args, rescale=False))
    assert_rejected_with(result, "rescale the old sum by exp(old_max - new_max)")


def test_online_softmax_step_wants_three_tensors():
    assert_rejected_with(check.online_softmax_step(lambda *args: step(*args)[2]), "returns three tensors")


def test_decoder_only_mask_accepts_the_solution():
    assert check.decoder_only_mask(mask).ok


def test_decoder_only_mask_names_forgotten_padding_and_forgotten_causality():
    assert_rejected_with(check.decoder_only_mask(lambda t, p: mask(t, p, padding=False)), "hide the padding keys")
    assert_rejected_with(check.decoder_only_mask(lambda t, p: mask(t, p, causal=False)), "must not see the future")
    assert_rejected_with(check.decoder_only_mask(lambda t, p: ~mask(t, p)), "inverted")
