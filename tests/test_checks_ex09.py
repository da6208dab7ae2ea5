"""The lesson 09 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch
import torch.nn.functional as F

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import label_smoothed_cross_entropy, padding_mask
from transformer_lib.checks import ex09_training as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED, show_hint


def test_stubs_are_not_attempted(capsys):
    checks = (check.shift_target, check.padded_loss, check.smoothed_loss, check.warmup_lr, check.training_loop)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_shift_target_accepts_the_solution_and_names_the_mistakes():
    assert check.shift_target(lambda tgt: (tgt[:, :-1], tgt[:, 1:])).ok
    assert_rejected_with(check.shift_target(lambda tgt: (tgt, tgt)), "you forgot the shift")
    assert_rejected_with(check.shift_target(lambda tgt: (tgt[:, 1:], tgt[:, :-1])), "swapped")
    assert_diagnosed(check.shift_target(lambda tgt: (tgt, tgt)), "target-not-shifted")
    assert_diagnosed(check.shift_target(lambda tgt: (tgt[:, 1:], tgt[:, :-1])), "input-and-labels-swapped")
    assert_diagnosed(check.shift_target(lambda tgt: (tgt[:, :-1], tgt[:, :-1])), "labels-are-decoder-input")
    assert_diagnosed(check.shift_target(lambda tgt: (tgt[:-1], tgt[1:])), "shifted-batch-axis")


def test_shift_target_hints_give_the_idea_first_and_the_code_on_request(capsys):
    result = check.shift_target(lambda tgt: (tgt[:, :-1], tgt[:, :-1]))  # labels = the decoder input
    hint_lines = [line for line in result.lines if line.startswith("  hint:")]
    assert hint_lines and not any("tgt[" in line for line in hint_lines), hint_lines
    capsys.readouterr()
    show_hint("shift_target")
    assert "labels = tgt[:, 1:]" in capsys.readouterr().out


def test_padded_loss_accepts_the_solution_and_names_the_mistakes():
    def solution(logits, labels, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id)

    assert check.padded_loss(solution).ok

    def with_padding(logits, labels, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    assert_rejected_with(check.padded_loss(with_padding), "you counted the padding positions")
    assert_diagnosed(check.padded_loss(with_padding), "padding-in-loss")

    def summed(logits, labels, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id,
                               reduction="sum")

    assert_diagnosed(check.padded_loss(summed), "loss-summed-not-averaged")

    def softmax_first(logits, labels, pad_id):
        return F.cross_entropy(logits.softmax(-1).reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=pad_id)

    assert_rejected_with(check.padded_loss(softmax_first), "you applied softmax before the cross-entropy")
    assert_diagnosed(check.padded_loss(softmax_first), "softmax-before-cross-entropy")


def test_warmup_lr_accepts_the_solution_and_names_the_mistakes():
    assert check.warmup_lr(lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-1.5)).ok
    assert_rejected_with(check.warmup_lr(lambda step, d, w: min(step**-0.5, step * w**-1.5)), "multiply by d_model")
    assert_rejected_with(check.warmup_lr(lambda step, d, w: d**-0.5 * max(step**-0.5, step * w**-1.5)), "the min")
    assert_diagnosed(check.warmup_lr(lambda step, d, w: min(step**-0.5, step * w**-1.5)), "missing-d-model-scale")
    assert_diagnosed(check.warmup_lr(lambda step, d, w: d**0.5 * min(step**-0.5, step * w**-1.5)),
                     "d-model-exponent-sign")
    assert_diagnosed(check.warmup_lr(lambda step, d, w: d**-0.5 * max(step**-0.5, step * w**-1.5)),
                     "max-instead-of-min")
    assert_diagnosed(check.warmup_lr(lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-0.5)),
                     "warmup-exponent-wrong")


def _smoothed_by_hand(logits, labels, pad_id, smoothing, over=None, real_only=True):
    log_probs = logits.log_softmax(-1)  # (batch, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    keep = torch.ones(logits.shape[-1], dtype=torch.bool) if over == "all" else torch.arange(logits.shape[-1]) != pad_id
    uniform = -log_probs[..., keep].mean(-1)
    if over == "others":  # every token but <pad> and the label: V - 2 of them
        uniform = (-log_probs[..., keep].sum(-1) - nll) / (logits.shape[-1] - 2)
    per_token = (1 - smoothing) * nll + smoothing * uniform
    return per_token[labels != pad_id].mean() if real_only else per_token.mean()


def test_smoothed_loss_accepts_the_solution_and_names_the_mistakes():
    assert check.smoothed_loss(_smoothed_by_hand).ok
    assert_rejected_with(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, over="all")),
                         "you spread the smoothing mass over <pad> too")
    assert_rejected_with(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, real_only=False)),
                         "you averaged over the padding positions too")
    def no_smoothing(logits, labels, pad_id, smoothing):
        return _smoothed_by_hand(logits, labels, pad_id, 0)

    assert_rejected_with(check.smoothed_loss(no_smoothing), "you forgot the smoothing")
    assert_diagnosed(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, over="all")), "smoothing-spread-over-pad")
    assert_diagnosed(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, real_only=False)), "padding-in-loss")
    assert_diagnosed(check.smoothed_loss(no_smoothing), "smoothing-forgotten")
    assert_diagnosed(check.smoothed_loss(lambda *a: _smoothed_by_hand(*a, over="others")), "uniform-part-skips-label")
    assert_diagnosed(check.smoothed_loss(lambda logits, labels, pad_id, smoothing: _smoothed_by_hand(
        logits, labels, pad_id, 1 - smoothing)), "smoothing-weights-swapped")


def _loop(model, optimizer, batches, pad_id, lr_at, smoothing, clip_norm, mistake=None):
    """The training loop written out, as a learner would, with at most one classic mistake."""
    losses = []
    for step, (src, tgt) in enumerate(batches, start=0 if mistake == "steps from 0" else 1):
        if mistake != "no learning rate":
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step) * (1e-3 if mistake == "learning rate too small" else 1)
        decoder_input, labels = tgt[:, :-1], tgt[:, 1:]
        if mistake == "labels are the input":
            labels = decoder_input
        logits = model(src, decoder_input, src_mask=padding_mask(src, pad_id))  # (batch, T-1, V)
        if mistake == "padding in the loss":
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), label_smoothing=smoothing)
        else:
            loss = label_smoothed_cross_entropy(logits, labels, pad_id, smoothing)
        if mistake == "step, zero_grad, backward":
            optimizer.step()
        if mistake != "no zero_grad":
            optimizer.zero_grad()
        if mistake == "zero_grad, step, backward":
            optimizer.step()
        loss.backward()
        if mistake not in ("clip after step", "no clipping"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        if mistake not in ("step, zero_grad, backward", "zero_grad, step, backward"):
            optimizer.step()
        if mistake == "clip after step":
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        losses.append(loss.item())
    return losses


def _own_loss_loop(model, optimizer, batches, pad_id, lr_at, smoothing, clip_norm):
    """A correct loop that computes the smoothed loss its own way (exercise 3) and zeroes gradients in place."""
    losses = []
    for step, (src, tgt) in enumerate(batches, start=1):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        logits = model(src, tgt[:, :-1], src_mask=padding_mask(src, pad_id))
        losses.append(_smoothed_by_hand(logits, tgt[:, 1:], pad_id, smoothing))
        optimizer.zero_grad(set_to_none=False)
        losses[-1].backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), clip_norm)
        optimizer.step()
    return [loss.detach() for loss in losses]


def test_training_loop_accepts_correct_loops_and_leaves_the_callers_state_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected_draw = torch.rand(1)
    torch.manual_seed(123)
    assert check.training_loop(_loop).ok
    assert torch.equal(torch.rand(1), expected_draw) and torch.get_num_threads() == threads
    assert check.training_loop(_own_loss_loop).ok


def _wrong(mistake):
    """``_loop`` with one classic mistake."""
    return lambda *args: _loop(*args, mistake=mistake)


def test_training_loop_names_each_classic_mistake():
    """Each one is recognised as itself (the hint of that id is the one shown), at the first check it fails."""
    assert_diagnosed(check.training_loop(_wrong("no zero_grad")), "no-zero-grad")
    assert_diagnosed(check.training_loop(_wrong("labels are the input")), "labels-not-shifted")
    assert_diagnosed(check.training_loop(_wrong("padding in the loss")), "padding-in-loss")
    assert_diagnosed(check.training_loop(_wrong("zero_grad, step, backward")), "step-before-backward")
    assert_diagnosed(check.training_loop(_wrong("step, zero_grad, backward")), "step-before-backward")
    assert_diagnosed(check.training_loop(_wrong("clip after step")), "clip-after-step")
    assert_diagnosed(check.training_loop(_wrong("no clipping")), "clip-after-step")
    assert_diagnosed(check.training_loop(_wrong("no learning rate")), "lr-not-set")
    assert_diagnosed(check.training_loop(_wrong("steps from 0")), "steps-from-0")


def test_a_loop_that_cannot_overfit_hears_the_likely_mistake_there():
    """Without zero_grad the loop cannot learn one batch: the overfitting line already names the reason."""
    lines = check.training_loop(_wrong("no zero_grad")).lines
    failed = lines.index(next(line for line in lines if line.startswith("✘ overfits one fixed batch")))
    assert "the gradients accumulate" in lines[failed + 1], lines
    assert_diagnosed(check.training_loop(_wrong("learning rate too small")), "cannot-overfit-one-batch")


def test_training_loop_names_pytorchs_smoothing_and_an_unshifted_target():
    def pytorch_smoothing(model, optimizer, batches, pad_id, lr_at, smoothing, clip_norm):
        losses = []
        for step, (src, tgt) in enumerate(batches, start=1):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            logits = model(src, tgt[:, :-1], src_mask=padding_mask(src, pad_id))
            loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=pad_id,
                                   label_smoothing=smoothing)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            losses.append(loss.item())
        return losses

    assert_rejected_with(check.training_loop(pytorch_smoothing), "PyTorch's label_smoothing spreads")
    assert_diagnosed(check.training_loop(pytorch_smoothing), "pytorch-label-smoothing")
    assert_rejected_with(check.training_loop(check._wrong_loop(shift="none")), "you did not shift the target")
    assert_diagnosed(check.training_loop(check._wrong_loop(shift="none")), "target-not-shifted")


def test_overfitting_one_batch_alone_does_not_catch_unshifted_labels():
    """Copying the input is easy: such a loop passes the overfitting check, and only the comparison catches it."""
    result = check.training_loop(lambda *args: _loop(*args, mistake="labels are the input"))
    assert any(line.startswith("✔ overfits one fixed batch") for line in result.lines), result.lines
    assert not result.ok


def test_training_loop_asks_for_one_loss_per_batch():
    assert_rejected_with(check.training_loop(lambda *args: _loop(*args)[:-1]), "append loss.item() once per batch")
    assert_rejected_with(check.training_loop(lambda *args: None), "append loss.item() once per batch")
    assert_diagnosed(check.training_loop(lambda *args: None), "loss-list-not-returned")


def test_padded_loss_names_the_loss_averaged_over_padding():
    def over_all_positions(logits, labels, pad_id):
        per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id,
                                    reduction="sum")
        return per_token / labels.numel()

    assert_rejected_with(check.padded_loss(over_all_positions), "you divided by all positions")
    assert_diagnosed(check.padded_loss(over_all_positions), "divided-by-all-positions")


# --- answers right on the lesson's inputs only, and right answers written another way (issue: checks too special)


def test_shift_target_tries_other_lengths_and_a_non_contiguous_batch():
    assert check.shift_target(lambda tgt: (tgt.narrow(1, 0, tgt.shape[1] - 1), tgt[..., 1:])).ok
    assert check.shift_target(lambda tgt: (tgt.T[:-1].T, tgt.T[1:].T.contiguous())).ok
    result = check.shift_target(lambda tgt: (tgt[:, :4], tgt[:, 1:5]))  # the lesson's T = 5 written in
    assert not result.ok and sum(line.startswith("  hint:") for line in result.lines) == 2, result.lines


def _per_token(logits, labels):
    return F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")  # (batch, T)


def test_padded_loss_accepts_right_answers_written_other_ways():
    assert check.padded_loss(lambda logits, labels, pad_id: _per_token(logits, labels)[labels != pad_id].mean()).ok
    assert check.padded_loss(lambda logits, labels, pad_id: F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=pad_id)).ok
    assert check.padded_loss(lambda logits, labels, pad_id: torch.where(
        labels != pad_id, _per_token(logits, labels), 0.0).sum() / (labels != pad_id).sum()).ok


def test_padded_loss_names_the_lessons_pitfall_and_the_answers_right_on_the_lesson_only():
    def mask_multiplied(logits, labels, pad_id):  # right without -inf logits: 0 x inf is NaN
        real = labels != pad_id
        return (_per_token(logits, labels) * real).sum() / real.sum()

    def pad_zero(logits, labels, pad_id):  # right while pad_id is 0
        return _per_token(logits, labels)[labels != 0].mean()

    def sentence_means(logits, labels, pad_id):  # right while every sentence has as many real tokens
        real = labels != pad_id
        return (torch.where(real, _per_token(logits, labels), 0.0).sum(-1) / real.sum(-1)).mean()

    assert_rejected_with(check.padded_loss(mask_multiplied), "0 x inf is NaN")
    assert_diagnosed(check.padded_loss(mask_multiplied), "mask-multiplied-nan")
    assert_diagnosed(check.padded_loss(pad_zero), "pad-id-hardcoded")
    assert_diagnosed(check.padded_loss(sentence_means), "mean-of-sentence-means")
    result = check.padded_loss(lambda logits, labels, pad_id: F.cross_entropy(  # .view on non-contiguous logits
        logits.view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id))
    assert_rejected_with(result, "view")
    assert [d["mistake"] for d in result.diagnoses] == ["error:RuntimeError"]


def test_a_wrong_loss_is_diagnosed_once_across_batches():
    result = check.padded_loss(lambda logits, labels, pad_id: F.cross_entropy(logits.flatten(0, 1), labels.flatten()))
    assert [d["mistake"] for d in result.diagnoses] == ["padding-in-loss"]
    assert sum(line.startswith("  hint:") for line in result.lines) == 1


def test_smoothed_loss_tries_another_pad_id_and_masked_logits():
    def pad_zero(logits, labels, pad_id, smoothing):  # <pad> taken to be token 0 in the uniform part
        log_probs = logits.log_softmax(-1)
        nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        per_token = (1 - smoothing) * nll + smoothing * -log_probs[..., 1:].mean(-1)
        return per_token[labels != pad_id].mean()

    def mask_multiplied(logits, labels, pad_id, smoothing):
        real = labels != pad_id
        return (_smoothed_per_token(logits, labels, pad_id, smoothing) * real).sum() / real.sum()

    assert_diagnosed(check.smoothed_loss(pad_zero), "pad-id-hardcoded")
    assert_diagnosed(check.smoothed_loss(mask_multiplied), "mask-multiplied-nan")
    assert check.smoothed_loss(lambda logits, labels, pad_id, smoothing: torch.where(
        labels != pad_id, _smoothed_per_token(logits, labels, pad_id, smoothing), 0.0).sum()
        / (labels != pad_id).sum()).ok


def _smoothed_per_token(logits, labels, pad_id, smoothing):
    log_probs = logits.log_softmax(-1)  # (batch, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    uniform = -log_probs[..., torch.arange(logits.shape[-1]) != pad_id].mean(-1)
    return (1 - smoothing) * nll + smoothing * uniform  # (batch, T)


def test_warmup_lr_tries_other_sizes_and_hints_once():
    assert check.warmup_lr(lambda step, d, w: d**-0.5 * (step * w**-1.5 if step < w else step**-0.5)).ok
    assert_diagnosed(check.warmup_lr(lambda step, d, w: 512**-0.5 * min(step**-0.5, step * w**-1.5)),
                     "d-model-hardcoded")
    assert_diagnosed(check.warmup_lr(lambda step, d, w: d**-0.5 * min(step**-0.5, step * 4000**-1.5)),
                     "warmup-steps-hardcoded")
    result = check.warmup_lr(lambda step, d, w: 1e-3)
    assert len(result.diagnoses) == 1 and sum(line.startswith("  hint:") for line in result.lines) == 1


def _loop_with(pad=None, clip=None, src_mask=True):
    """A right loop but for a value written in place of an argument, or the source mask left out."""
    def loop(model, optimizer, batches, pad_id, lr_at, smoothing, clip_norm):
        pad_id, clip_norm = (pad_id if pad is None else pad), (clip_norm if clip is None else clip)
        return _loop(model, optimizer, batches, pad_id, lr_at, smoothing, clip_norm) if src_mask else [
            _masked_free_step(model, optimizer, src, tgt, pad_id, lr_at(step), smoothing, clip_norm)
            for step, (src, tgt) in enumerate(batches, start=1)]
    return loop


def _masked_free_step(model, optimizer, src, tgt, pad_id, lr, smoothing, clip_norm):
    for group in optimizer.param_groups:
        group["lr"] = lr
    loss = label_smoothed_cross_entropy(model(src, tgt[:, :-1]), tgt[:, 1:], pad_id, smoothing)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss.item()


def test_training_loop_uses_its_arguments():
    """The check's batches are padded with 3 and its three steps clip to 0.5: the lesson's 0 and 1.0 written in show."""
    assert_diagnosed(check.training_loop(_loop_with(pad=0)), "pad-id-hardcoded")
    assert_diagnosed(check.training_loop(_loop_with(clip=1.0)), "clip-norm-hardcoded")
    assert_diagnosed(check.training_loop(_loop_with(src_mask=False)), "source-padding-not-masked")


def clip(grads, max_norm, norm_of="global", cap=True):
    """Clipping by the global norm, or with one classic mistake: the norm of each gradient, the squared norm, the
    largest entry; ``cap=False`` scales up gradients under the limit too."""
    flat = torch.cat([g.flatten() for g in grads])
    norm = {"global": flat.norm(), "squared": flat.square().sum(), "max": flat.abs().max()}.get(norm_of)
    if norm_of == "each":
        return flat.norm(), [g * min(1.0, max_norm / (g.norm().item() + 1e-6)) for g in grads]
    factor = max_norm / (norm + 1e-6)
    return norm, [g * (factor.clamp(max=1.0) if cap else factor) for g in grads]


def clip_in_place(grads, max_norm):
    """Another correct way: a norm of norms, no epsilon, the gradients scaled in place."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / norm)
    return norm.item(), grads


def test_clip_global_accepts_correct_variants(capsys):
    assert check.clip_global(clip).ok
    assert check.clip_global(clip_in_place).ok
    assert not check.clip_global(stub).attempted


def test_clip_global_names_each_mistake(capsys):
    assert_diagnosed(check.clip_global(lambda g, m: clip(g, m, norm_of="each")), "per-parameter-norm")
    assert_diagnosed(check.clip_global(lambda g, m: clip(g, m, cap=False)), "scaled-up-below-limit")
    assert_diagnosed(check.clip_global(lambda g, m: clip(g, m, norm_of="squared")), "squared-norm")
    assert_diagnosed(check.clip_global(lambda g, m: clip(g, m, norm_of="max")), "max-not-norm")
    result = check.clip_global(lambda g, m: (clip(g, m)[0], clip(g, m)[1][:-1]))
    assert_rejected_with(result, "one clipped gradient per gradient")
    assert_rejected_with(check.clip_global(lambda g, m: (clip(g, m)[0] ** 2, clip(g, m)[1])),
                         "the norm before clipping")
