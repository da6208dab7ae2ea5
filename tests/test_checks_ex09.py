"""The lesson 09 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch
import torch.nn.functional as F

from check_helpers import assert_rejected_with, stub
from transformer_lib import label_smoothed_cross_entropy, padding_mask
from transformer_lib.checks import ex09_training as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_stubs_are_not_attempted(capsys):
    checks = (check.shift_target, check.padded_loss, check.smoothed_loss, check.warmup_lr, check.training_step_fixed)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


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


def _smoothed_by_hand(logits, labels, pad_id, smoothing, over=None, real_only=True):
    log_probs = logits.log_softmax(-1)  # (batch, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    keep = torch.ones(logits.shape[-1], dtype=torch.bool) if over == "all" else torch.arange(logits.shape[-1]) != pad_id
    per_token = (1 - smoothing) * nll + smoothing * -log_probs[..., keep].mean(-1)
    return per_token[labels != pad_id].mean() if real_only else per_token.mean()


def test_smoothed_loss_accepts_the_solution_and_names_the_mistakes():
    assert check.smoothed_loss(_smoothed_by_hand).ok
    assert_rejected_with(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, over="all")),
                         "you spread the smoothing mass over <pad> too")
    assert_rejected_with(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, real_only=False)),
                         "you averaged over the padding positions too")
    unsmoothed = check.smoothed_loss(lambda logits, labels, pad_id, _: _smoothed_by_hand(logits, labels, pad_id, 0))
    assert_rejected_with(unsmoothed, "you forgot the smoothing")


def _step(model, optimizer, src, tgt, pad_id, shift=True, zero_grad=True, clip_first=True):
    decoder_input, labels = (tgt[:, :-1], tgt[:, 1:]) if shift else (tgt, tgt)
    loss = label_smoothed_cross_entropy(model(src, decoder_input, src_mask=padding_mask(src, pad_id)), labels,
                                        pad_id, 0.1)
    if zero_grad:
        optimizer.zero_grad()
    loss.backward()
    if clip_first:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if not clip_first:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return loss.item()


def test_training_step_fixed_accepts_the_solution_and_names_the_mistakes():
    assert check.training_step_fixed(_step).ok
    assert_rejected_with(check.training_step_fixed(lambda *a: _step(*a, shift=False)), "shift the target")
    assert_rejected_with(check.training_step_fixed(lambda *a: _step(*a, zero_grad=False)), "optimizer.zero_grad()")
    assert_rejected_with(check.training_step_fixed(lambda *a: _step(*a, clip_first=False)),
                         "clip before optimizer.step()")


def test_padded_loss_names_the_loss_averaged_over_padding():
    def over_all_positions(logits, labels, pad_id):
        per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id,
                                    reduction="sum")
        return per_token / labels.numel()

    assert_rejected_with(check.padded_loss(over_all_positions), "you divided by all positions")
