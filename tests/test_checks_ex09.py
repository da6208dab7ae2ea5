"""The lesson 09 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch.nn.functional as F

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex09_training as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.shift_target, check.padded_loss, check.warmup_lr):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_shift_target_accepts_the_solution_and_names_the_mistakes():
    assert check.shift_target(lambda tgt: (tgt[:, :-1], tgt[:, 1:])).ok
    assert_rejected_with(check.shift_target(lambda tgt: (tgt, tgt)), "you forgot the shift")
    assert_rejected_with(check.shift_target(lambda tgt: (tgt[:, 1:], tgt[:, :-1])), "swapped")


def test_padded_loss_accepts_the_solution_and_names_the_mistakes():
    def solution(logits, labels, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id)

    assert check.padded_loss(solution).ok

    def with_padding(logits, labels, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    assert_rejected_with(check.padded_loss(with_padding), "you counted the padding positions")


def test_warmup_lr_accepts_the_solution_and_names_the_mistakes():
    assert check.warmup_lr(lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-1.5)).ok
    assert_rejected_with(check.warmup_lr(lambda step, d, w: min(step**-0.5, step * w**-1.5)), "multiply by d_model")
    assert_rejected_with(check.warmup_lr(lambda step, d, w: d**-0.5 * max(step**-0.5, step * w**-1.5)), "the min")
