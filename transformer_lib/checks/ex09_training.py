"""Checks for lesson 09's exercises: the shifted target, the padded loss, label smoothing without ``<pad>``, the
warm-up schedule and the whole training loop (overfit one batch first, then step for step equal to the library's)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from ..data import make_translation_task
from ..masks import padding_mask
from ..model import Transformer, TransformerConfig
from ..optim import clip_grad_norm
from ..training import (
    label_smoothed_cross_entropy,
    shift_for_teacher_forcing,
    training_step,
    transformer_lr,
    warmup_linear_decay_lr,
)
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch

PAD_ID = 0
TARGET = torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, 0, 0]])  # <bos>=1 … <eos>=2, then padding


def _unambiguous(mistakes: dict[Hint, Any], right: Any, **tolerance: float) -> dict[Hint, Any]:
    """The mistakes whose value on these inputs differs from the right one and from every other mistake's (a value two
    mistakes share names neither)."""
    values = list(mistakes.values())
    return {hint: value for hint, value in mistakes.items()
            if describe_mismatch(value, right, **tolerance) is not None
            and sum(describe_mismatch(value, other, **tolerance) is None for other in values) == 1}


def _targets() -> list[tuple[str, torch.Tensor]]:
    """(description, tgt (batch, T)): the lesson's two targets, and three of 7, 4 and 6 tokens stored transposed."""
    stored = torch.tensor([[1, 1, 1], [4, 6, 3], [9, 2, 8], [5, 0, 5], [7, 0, 4], [8, 0, 2], [2, 0, 0]])  # (T, batch)
    return [("the lesson's two targets", TARGET),
            ("three targets of 7, 4 and 6 tokens, not contiguous in memory", stored.T)]


BATCH_AXIS = Hint("you shifted along the batch axis (dropping a whole sentence): shift along the tokens, the last axis",
                  code="decoder_input, labels = tgt[:, :-1], tgt[:, 1:]", id="shifted-batch-axis")
NOT_SHIFTED = "you forgot the shift: "
SHIFT_CODE = "labels = tgt[:, 1:]"


def shift_target(student_fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> CheckResult:
    """Check ``shift_target(tgt)`` -> (decoder_input, labels) for teacher forcing, on two batches of targets."""
    ex = Exercise("shift_target")
    with ex.run():
        for description, target in _targets():
            result = ex.call(student_fn, target.clone())  # clone keeps the transposed layout
            if not ex.require(f"{description}: returns a pair (decoder_input, labels)",
                              isinstance(result, tuple) and len(result) == 2,
                              problem=f"got {type(result).__name__}", hint="return decoder_input, labels"):
                return ex.result
            decoder_input, labels = result
            expected_input, expected_labels = shift_for_teacher_forcing(target)
            swapped = describe_mismatch(decoder_input, expected_labels) is None
            input_ok = ex.compare(
                f"{description}: the decoder input, <bos> and the target without its last token", decoder_input,
                expected_input,
                hint=Hint(idea="the decoder reads <bos> and every target token but the last one (it never reads the "
                               "token it has to predict last)", code="decoder_input = tgt[:, :-1]"),
                mistakes={Hint(NOT_SHIFTED + "the decoder reads the target shifted right by one",
                               id="target-not-shifted"): target,
                          Hint("swapped: the input starts with <bos>, the labels end with <eos>",
                               id="input-and-labels-swapped"): expected_labels,
                          BATCH_AXIS: target[:-1]})
            # Labels equal to the right decoder input: the swap when the input was swapped too, else the input copied.
            copied = (Hint(idea="swapped: the labels start after <bos> and end with <eos>", code=SHIFT_CODE,
                           id="input-and-labels-swapped") if swapped else
                      Hint(idea="your labels are the decoder input: the label at each position is the token after the "
                                "one the decoder reads there", code=SHIFT_CODE, id="labels-are-decoder-input"))
            labels_ok = ex.compare(
                f"{description}: the labels, the target without <bos>", labels, expected_labels,
                hint=Hint(idea="the label at each position is the token after the one the decoder reads there: the "
                               "target without its first token, <bos>", code=SHIFT_CODE),
                mistakes={Hint(NOT_SHIFTED + "the label at each position is the next token",
                               id="target-not-shifted"): target,
                          copied: expected_input, BATCH_AXIS: target[1:]})
            if not (input_ok and labels_ok):
                break  # one batch's hints are enough
    return ex.result


def _loss_cases(vocab: int, seed: int) -> list[tuple[str, torch.Tensor, torch.Tensor, int]]:
    """(description, logits (batch, T, V), labels (batch, T), pad_id): the lesson's batch; the same with -inf logits at
    its padding positions (the pad's among them: their loss is infinite); three sentences of 5, 2 and 4 real labels
    padded with id 3 (0 is a real token there), the logits not contiguous in memory."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 4, vocab, generator=generator, dtype=torch.float64)  # (batch, T, V)
    labels = shift_for_teacher_forcing(TARGET)[1]  # (2, 4) with two padding positions
    masked = logits.clone()
    masked[labels == PAD_ID, : vocab // 2] = float("-inf")  # masked logits, the pad's (id 0) among them
    other_pad = 3
    other_labels = torch.tensor([[0, 5, 4, 0, 2], [6, 2, 3, 3, 3], [4, 0, 1, 2, 3]])  # (3, 5), padded with 3
    stored = torch.randn(5, 3, vocab, generator=generator, dtype=torch.float64)  # (T, batch, V)
    return [("the lesson's batch, 4 and 2 real labels", logits, labels, PAD_ID),
            ("the same batch with -inf logits at its padding positions", masked, labels, PAD_ID),
            (f"3 sentences of 5, 2 and 4 real labels, pad_id {other_pad}, logits not contiguous",
             stored.transpose(0, 1), other_labels, other_pad)]


def _per_token_mistakes(per_token: torch.Tensor, labels: torch.Tensor, pad_id: int) -> dict[Hint, torch.Tensor]:
    """The values of the ways of averaging a per-token loss (batch, T) wrongly over the real positions."""
    real = labels != pad_id  # (batch, T)
    return {
        MASK_MULTIPLIED: (per_token * real).sum() / real.sum(),
        SENTENCE_MEANS: (torch.where(real, per_token, 0.0).sum(-1) / real.sum(-1)).mean(),
        PAD_HARDCODED: per_token[labels != 0].mean(),
    }


MASK_MULTIPLIED = Hint(idea="you multiplied the per-token loss by a 0/1 mask: at a padding position whose loss is "
                            "infinite (-inf logits), 0 x inf is NaN; select the real positions instead",
                       code="per_token[labels != pad_id].mean()", id="mask-multiplied-nan")
SENTENCE_MEANS = Hint("you averaged each sentence, then the sentences: a sentence with fewer real tokens then weighs "
                      "more per token; average over all the real tokens of the batch at once",
                      id="mean-of-sentence-means")
PAD_HARDCODED = Hint("use the pad_id passed in: here it is not 0, and 0 is a real token", id="pad-id-hardcoded")


def padded_loss(student_fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]) -> CheckResult:
    """Check ``padded_loss(logits, labels, pad_id)``: mean cross-entropy over the real tokens only, on three batches."""
    ex = Exercise("padded_loss")
    with ex.run():
        for description, logits, labels, pad_id in _loss_cases(10, seed=9):
            vocab = logits.shape[-1]
            flat_logits, flat_labels = logits.reshape(-1, vocab), labels.reshape(-1)
            expected = label_smoothed_cross_entropy(logits, labels, pad_id)
            summed = F.cross_entropy(flat_logits, flat_labels, ignore_index=pad_id, reduction="sum")
            per_token = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")  # (batch, T)
            mistakes = {
                Hint(idea="you counted the padding positions: leave out the positions whose label is pad_id",
                     code="F.cross_entropy(..., ignore_index=pad_id)", id="padding-in-loss"):
                F.cross_entropy(flat_logits, flat_labels),
                Hint("you summed: divide by the number of real tokens", id="loss-summed-not-averaged"): summed,
                Hint("you divided by all positions, padding included: divide by the real tokens only",
                     id="divided-by-all-positions"): summed / labels.numel(),
                Hint("you applied softmax before the cross-entropy: it takes the logits and applies log-softmax "
                     "itself", code="F.cross_entropy(logits, ...), not F.cross_entropy(logits.softmax(-1), ...)",
                     id="softmax-before-cross-entropy"):
                F.cross_entropy(flat_logits.softmax(-1), flat_labels, ignore_index=pad_id),
                **_per_token_mistakes(per_token, labels, pad_id),
            }
            if not ex.compare(f"the loss of {description}",
                              ex.call(student_fn, logits.clone(), labels, pad_id), expected,
                              hint="cross-entropy per token, keep tokens whose label != pad_id, average over those",
                              mistakes=_unambiguous(mistakes, expected)):
                break  # one batch's hint is enough
    return ex.result


WARMUP_CASES = ((512, 4000, (1, 2000, 4000, 8000, 100000)), (64, 100, (1, 50, 100, 400)))  # (d_model, warm-up, steps)


def warmup_lr(student_fn: Callable[[int, int, int], float]) -> CheckResult:
    """Check ``warmup_lr(step, d_model, warmup_steps)``, the paper's schedule (steps from 1): the paper's sizes, then
    another width and warm-up."""
    ex = Exercise("warmup_lr")
    with ex.run():
        for d_model, warmup, steps in WARMUP_CASES:
            for step in steps:
                expected = transformer_lr(step, d_model, warmup)
                mistakes = {
                    Hint("multiply by d_model**-0.5", id="missing-d-model-scale"): expected * d_model**0.5,
                    Hint("you multiplied by sqrt(d_model): the scale is 1/sqrt(d_model), smaller for wider models",
                         id="d-model-exponent-sign"): expected * d_model,
                    Hint("take the min of the two terms, not the max", id="max-instead-of-min"):
                    d_model**-0.5 * max(step**-0.5, step * warmup**-1.5),
                    Hint("your warm-up term is too large: it must meet 1/sqrt(step) at step = warmup_steps, which "
                         "takes warmup_steps to the power -1.5, not -0.5", id="warmup-exponent-wrong"):
                    d_model**-0.5 * min(step**-0.5, step * warmup**-0.5),
                    Hint("use the d_model passed in, not the paper's 512", id="d-model-hardcoded"):
                    transformer_lr(step, 512, warmup),
                    Hint("use the warmup_steps passed in, not the paper's 4000", id="warmup-steps-hardcoded"):
                    transformer_lr(step, d_model, 4000),
                }
                if not ex.compare(
                        f"step {step}, d_model {d_model}, warm-up {warmup}", ex.call(student_fn, step, d_model, warmup),
                        expected, rtol=1e-6, atol=0,
                        hint=Hint(idea="the rate rises in proportion to step during the warm-up, then falls like "
                                       "1/sqrt(step): take the smaller of the two terms, scaled by 1/sqrt(d_model)",
                                  code="d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)"),
                        mistakes=_unambiguous(mistakes, expected, rtol=1e-6, atol=0)):
                    return ex.result  # one step's hint is enough
    return ex.result


def _smoothed_mistakes(logits: torch.Tensor, labels: torch.Tensor, pad_id: int,
                       smoothing: float) -> dict[Hint, torch.Tensor]:
    """The values the classic label-smoothing mistakes give, for ``smoothed_loss``'s feedback (those that differ from
    the right loss here: without smoothing most of them are right, see ``_unambiguous``)."""
    vocab = logits.shape[-1]
    flat_logits, flat_labels = logits.reshape(-1, vocab), labels.reshape(-1)
    log_probs = logits.log_softmax(-1)  # (batch, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (batch, T)
    not_pad = torch.arange(vocab) != pad_id  # (V,)
    uniform = -log_probs[..., not_pad].mean(-1)  # (batch, T)
    per_token = (1 - smoothing) * nll + smoothing * uniform
    spread_on_others = (1 - smoothing) * nll + smoothing * (-log_probs[..., not_pad].sum(-1) - nll) / (vocab - 2)
    swapped = smoothing * nll + (1 - smoothing) * uniform
    hardcoded = (1 - smoothing) * nll + smoothing * -log_probs[..., 1:].mean(-1)  # <pad> taken to be 0
    real = labels != pad_id
    right = label_smoothed_cross_entropy(logits, labels, pad_id, smoothing)
    mistakes = {
        Hint("you spread the smoothing mass over <pad> too: spread it over the V - 1 tokens other than <pad>",
             id="smoothing-spread-over-pad"):
        F.cross_entropy(flat_logits, flat_labels, ignore_index=pad_id, label_smoothing=smoothing),
        Hint("you averaged over the padding positions too: keep the positions whose label is not pad_id",
             id="padding-in-loss"):
        per_token.mean(),
        Hint("you forgot the smoothing: mix (1 - smoothing) x the usual loss with smoothing x the uniform part",
             id="smoothing-forgotten"):
        label_smoothed_cross_entropy(logits, labels, pad_id),
        Hint("the uniform part covers every token but <pad>, the right one included (V - 1 tokens, not V - 2)",
             id="uniform-part-skips-label"):
        spread_on_others[real].mean(),
        Hint("you swapped the weights: the label keeps 1 - smoothing of the mass, the uniform part gets smoothing",
             id="smoothing-weights-swapped"):
        swapped[real].mean(),
        **_per_token_mistakes(per_token, labels, pad_id),
    }
    mistakes[PAD_HARDCODED] = hardcoded[real].mean()
    return _unambiguous(mistakes, right)


def smoothed_loss(student_fn: Callable[[torch.Tensor, torch.Tensor, int, float], torch.Tensor]) -> CheckResult:
    """Check ``smoothed_loss(logits, labels, pad_id, smoothing)``: label smoothing over the tokens other than <pad>,
    averaged over the real tokens, on three batches at four smoothings."""
    ex = Exercise("smoothed_loss")
    with ex.run():
        lesson, masked, other = _loss_cases(12, seed=4)
        for (description, logits, labels, pad_id), smoothing in ((lesson, 0.0), (lesson, 0.2), (masked, 0.1),
                                                                 (other, 0.3)):
            if not ex.compare(f"smoothing {smoothing}, {description}",
                              ex.call(student_fn, logits.clone(), labels, pad_id, smoothing),
                              label_smoothed_cross_entropy(logits, labels, pad_id, smoothing),
                              hint="(1 - smoothing) * (-log p of the label) + smoothing * mean over the non-pad tokens "
                                   "of (-log p), averaged over the positions whose label is not pad_id",
                              mistakes=_smoothed_mistakes(logits, labels, pad_id, smoothing)):
                break  # one batch's hint is enough
    return ex.result


# --- the whole training loop: overfit one batch first, then the same steps as the library's

OVERFIT_PAIRS, OVERFIT_STEPS, OVERFIT_LR, OVERFIT_BOUND = 4, 40, 2e-2, 0.1
OVERFIT_CLIP, LOOP_STEPS, LOOP_SMOOTHING, LOOP_CLIP = 1.0, 3, 0.1, 0.5
LOOP_PAD_ID = 3  # the task's pad id 0 swapped with the word id 3, so that a loop that takes pad_id to be 0 shows
# float64 and the library's own operations: a correct loop agrees to about 1e-12, every mistake below moves some weight
# by more than 1e-3 of its distance. (atol: the keys' biases get gradients of rounding size only, which Adam turns into
# moves of about 1e-10 that depend on the order of the sums.)
EXACT = {"rtol": 1e-6, "atol": 1e-8}


@functools.cache
def _loop_data() -> tuple[int, int, int, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Lesson 09's language pair, small: both vocabulary sizes, the pad id and three padded batches of 8 pairs, in
    which the pad id and the word id ``LOOP_PAD_ID`` trade places."""
    task = make_translation_task(num_train=8 * LOOP_STEPS, num_valid=1, num_test=1, num_unseen=1, seed=0)
    pad_id = task.tgt_vocab.pad_id
    assert task.src_vocab.pad_id == pad_id != LOOP_PAD_ID

    def swapped(ids: torch.Tensor) -> torch.Tensor:
        return torch.where(ids == pad_id, LOOP_PAD_ID, torch.where(ids == LOOP_PAD_ID, pad_id, ids))

    batches = [(swapped(src), swapped(tgt)) for src, tgt in task.batches("train", 8)]
    return len(task.src_vocab), len(task.tgt_vocab), LOOP_PAD_ID, batches


def _tiny_model(dtype: torch.dtype) -> Transformer:
    """A seeded Transformer small enough to train in a fraction of a second."""
    src_vocab, tgt_vocab, _, _ = _loop_data()
    torch.manual_seed(0)
    return Transformer(TransformerConfig(src_vocab, tgt_vocab, d_model=16, num_heads=2, num_encoder_layers=1,
                                         num_decoder_layers=1, d_ff=32, dropout=0.0, max_len=16,
                                         share_embeddings=False)).to(dtype)


def _adam(model: Transformer) -> torch.optim.Optimizer:
    """Lesson 09's optimiser. Its starting lr (1e-3) is on neither schedule, so a loop that never sets it shows."""
    return torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)


def _loop_lr(step: int) -> float:
    """The three-step run's schedule: a warm-up over 2 steps to 1e-2, then a linear decay to 0 at step 10."""
    return warmup_linear_decay_lr(step, 1e-2, 2, 10)


@contextmanager
def _quietly_one_thread() -> Iterator[None]:
    """One thread (tiny matrices: faster, steadier); the caller's thread count and random state come back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(threads)


def _overfit(loop_fn: Callable[..., Any]) -> Any:
    """``loop_fn`` on one fixed batch of 4 pairs, 40 times: Adam at a constant 2e-2, no smoothing, clip 1.0.
    Returns what ``loop_fn`` returns."""
    _, _, pad_id, batches = _loop_data()
    batch = (batches[0][0][:OVERFIT_PAIRS], batches[0][1][:OVERFIT_PAIRS])
    with _quietly_one_thread():
        model = _tiny_model(torch.float32)
        return loop_fn(model, _adam(model), [batch] * OVERFIT_STEPS, pad_id, lambda step: OVERFIT_LR, 0.0, OVERFIT_CLIP)


def _three_steps(loop_fn: Callable[..., Any]) -> tuple[Any, torch.Tensor]:
    """``loop_fn`` on three batches in float64, from the seeded model: what it returns, and how far each weight
    tensor moved (its norm)."""
    _, _, pad_id, batches = _loop_data()
    with _quietly_one_thread():
        model = _tiny_model(torch.float64)
        before = [p.detach().clone() for p in model.parameters()]
        losses = loop_fn(model, _adam(model), batches, pad_id, _loop_lr, LOOP_SMOOTHING, LOOP_CLIP)
        moved = torch.stack([(p.detach() - b).norm() for p, b in zip(model.parameters(), before, strict=True)])
    return losses, moved


def _library_loop(model: Transformer, optimizer: torch.optim.Optimizer, batches: Iterable, pad_id: int,
                  lr_at: Callable[[int], float], smoothing: float, clip_norm: float) -> list[float]:
    """The library's loop, ``train``'s body: set this step's learning rate, then ``training_step``."""
    losses = []
    for step, (src, tgt) in enumerate(batches, start=1):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        losses.append(training_step(model, optimizer, src, tgt, pad_id, smoothing, clip_norm)[0])
    return losses


def _wrong_loop(shift: str = "right", loss: str = "ours", order: str = "right", set_lr: bool = True,
                first_step: int = 1, pad: int | None = None, clip: float | None = None,
                src_mask: bool = True) -> Callable[..., list[float]]:
    """The loop with one classic mistake, for the feedback of ``training_loop`` (``pad`` and ``clip``: a value used
    instead of the argument's)."""

    def loop(model: Transformer, optimizer: torch.optim.Optimizer, batches: Iterable, pad_id: int,
             lr_at: Callable[[int], float], smoothing: float, clip_norm: float) -> list[float]:
        losses = []
        pad_id = pad_id if pad is None else pad
        clip_norm = clip_norm if clip is None else clip
        for step, (src, tgt) in enumerate(batches, start=first_step):
            if set_lr:
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(step)
            decoder_input, labels = {"right": (tgt[:, :-1], tgt[:, 1:]), "labels are the input": (tgt[:, :-1],
                                     tgt[:, :-1]), "none": (tgt, tgt)}[shift]
            mask = padding_mask(src, pad_id) if src_mask else None
            logits = model(src, decoder_input, src_mask=mask)  # (batch, T, V)
            flat_logits, flat_labels = logits.flatten(0, 1), labels.flatten()
            if loss == "ours":
                value = label_smoothed_cross_entropy(logits, labels, pad_id, smoothing)
            elif loss == "padding counted":
                value = F.cross_entropy(flat_logits, flat_labels, label_smoothing=smoothing)
            else:  # PyTorch's smoothing: over all V tokens, <pad> included
                value = F.cross_entropy(flat_logits, flat_labels, ignore_index=pad_id, label_smoothing=smoothing)
            if order != "no zero_grad":
                optimizer.zero_grad()
            if order == "step before backward":
                optimizer.step()
            value.backward()
            if order != "clip after step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            if order != "step before backward":
                optimizer.step()
            if order == "clip after step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            losses.append(value.item())
        return losses
    return loop


SHIFT_HINT = Hint(idea="your labels are the decoder's own input: every position learns to predict the token it "
                       "reads, not the next one (copying is easy, so the loss still falls)",
                  code="decoder_input, labels = tgt[:, :-1], tgt[:, 1:]", id="labels-not-shifted")
NO_SHIFT_HINT = Hint(idea="you did not shift the target: the decoder reads all of it, and every position learns to "
                          "predict the token it reads, not the next one",
                     code="decoder_input, labels = tgt[:, :-1], tgt[:, 1:]", id="target-not-shifted")
PADDING_HINT = Hint(idea="your loss counts the padding positions: average over the real tokens only (the labels "
                         "that are not pad_id)",
                    code="loss = label_smoothed_cross_entropy(logits, labels, pad_id, smoothing), or your "
                         "smoothed_loss of exercise 3", id="padding-in-loss")
PYTORCH_SMOOTHING_HINT = Hint(idea="PyTorch's label_smoothing spreads the smoothing over <pad> too (exercise 3): the "
                                   "course's loss spreads it over the tokens other than <pad>",
                              code="loss = label_smoothed_cross_entropy(logits, labels, pad_id, smoothing)",
                              id="pytorch-label-smoothing")
ZERO_GRAD_HINT = Hint(idea="the gradients accumulate: each backward() adds to the gradients of all the earlier steps "
                           "unless you clear them first",
                      code="optimizer.zero_grad() before loss.backward(), in every step", id="no-zero-grad")
STEP_BEFORE_BACKWARD_HINT = Hint(
    idea="the weights never moved with this step's gradients: optimizer.step() came before loss.backward() (or one "
         "of the two is missing); the step must use the gradients of this step's loss, after backward and clipping",
    code="in every step: optimizer.zero_grad(), loss.backward(), clip, optimizer.step()", id="step-before-backward")
CLIP_AFTER_STEP_HINT = Hint(
    idea="the gradient was not clipped when the step used it: clipping after optimizer.step() (or not at all) "
         "changes nothing, since the next zero_grad() clears that gradient",
    code="torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm) between loss.backward() and optimizer.step()",
    id="clip-after-step")
PAD_ID_HINT = Hint(idea="use the pad_id passed in, in the source's mask and in the loss: the check's batches are "
                        "padded with 3, not 0", code="padding_mask(src, pad_id), and pad_id in the loss",
                   id="pad-id-hardcoded")
SRC_MASK_HINT = Hint(idea="the source's padding is not masked: the encoder and the cross-attention attend to <pad>",
                     code="model(src, decoder_input, src_mask=padding_mask(src, pad_id))",
                     id="source-padding-not-masked")
CLIP_NORM_HINT = Hint(idea="clip to the clip_norm passed in: the three-step run clips to 0.5, not 1.0",
                      code="torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)", id="clip-norm-hardcoded")
LR_HINT = Hint(idea="the learning rate never followed the schedule: set it at every step, before optimizer.step()",
               code='for group in optimizer.param_groups: group["lr"] = lr_at(step)', id="lr-not-set")
STEP_ZERO_HINT = Hint(idea="your steps count from 0: lr_at counts them from 1, as lesson 09's schedule does",
                      code="for step, (src, tgt) in enumerate(batches, start=1):", id="steps-from-0")
OVERFIT_HINT = Hint(idea="a correct loop learns one batch by heart in a few dozen steps; if yours cannot, training on "
                         "more data will not help: the checks below say where it differs from the library's",
                    id="cannot-overfit-one-batch")
LOSSES_HINT = Hint(idea="append loss.item() once per batch and return the list", id="loss-list-not-returned")

# How _wrong_loop makes each classic mistake of training_loop.
_MISTAKE_FLAGS = {SHIFT_HINT: {"shift": "labels are the input"}, NO_SHIFT_HINT: {"shift": "none"},
                  PADDING_HINT: {"loss": "padding counted"}, PYTORCH_SMOOTHING_HINT: {"loss": "pytorch smoothing"},
                  ZERO_GRAD_HINT: {"order": "no zero_grad"},
                  STEP_BEFORE_BACKWARD_HINT: {"order": "step before backward"},
                  CLIP_AFTER_STEP_HINT: {"order": "clip after step"}, LR_HINT: {"set_lr": False},
                  STEP_ZERO_HINT: {"first_step": 0}, PAD_ID_HINT: {"pad": 0}, SRC_MASK_HINT: {"src_mask": False},
                  CLIP_NORM_HINT: {"clip": OVERFIT_CLIP}}


@functools.cache
def _mistake_runs() -> dict[Hint, tuple[list[float], torch.Tensor]]:
    """What each classic mistake gives on the three-step run (computed once per process, when first needed)."""
    return {hint: _three_steps(_wrong_loop(**flags)) for hint, flags in _MISTAKE_FLAGS.items()}


def _matching_mistake(run: Any) -> Hint | None:
    """The classic mistake whose three-step run (first loss and weight moves) ``run`` reproduces, if any."""
    if run is _STEPPED_IN_PLACE:
        return STEP_BEFORE_BACKWARD_HINT
    losses = _numbers(run[0], LOOP_STEPS) if isinstance(run, tuple) else None
    if losses is None:
        return None
    for hint, (wrong_losses, wrong_moved) in _mistake_runs().items():
        if (describe_mismatch(losses[0], wrong_losses[0], **EXACT) is None
                and describe_mismatch(run[1], wrong_moved, **EXACT) is None):
            return hint
    return None


def _raise(error: Exception) -> None:
    """Raise ``error`` again, so that ``Exercise.call`` reports it in its place among the lines."""
    raise error


_STEPPED_IN_PLACE = object()


def _guarded(run: Callable[[Callable[..., Any]], Any], loop_fn: Callable[..., Any]) -> Any:
    """``run(loop_fn)``; the error that backward() raises after optimizer.step() changed the weights it needs
    becomes a marker, so the check can name that mistake."""
    try:
        return run(loop_fn)
    except RuntimeError as error:
        if "modified by an inplace operation" in str(error):
            return _STEPPED_IN_PLACE
        raise


def _stepped_in_place(ex: Exercise, returned: Any) -> bool:
    """Name the mistake when the student's loop broke backward() by stepping first; True when it did."""
    if returned is not _STEPPED_IN_PLACE:
        return False
    ex.require("your loop runs", False, problem="loss.backward() needed weights that optimizer.step() had already "
               "changed in place", hint=STEP_BEFORE_BACKWARD_HINT)
    return True


def _numbers(value: Any, count: int) -> list[float] | None:
    """``value`` as a list of ``count`` floats, or None when it is not one loss per batch."""
    if not isinstance(value, list | tuple) or len(value) != count:
        return None
    try:
        return [float(loss) for loss in value]
    except (TypeError, ValueError, RuntimeError):
        return None


def training_loop(student_fn: Callable[..., list[float]]) -> CheckResult:
    """Check ``train_loop(model, optimizer, batches, pad_id, lr_at, smoothing, clip_norm)``: first it must overfit
    one fixed batch; then three steps of it must move every weight as the library's ``training_step`` does (same
    seed, same model, same batches, float64)."""
    ex = Exercise("training_loop")
    with ex.run():
        returned = ex.call(_guarded, _overfit, student_fn, description="your loop on one fixed batch")
        if _stepped_in_place(ex, returned):
            return ex.result
        losses = _numbers(returned, OVERFIT_STEPS)
        if not ex.require("returns one loss per batch", losses is not None,
                          problem=f"got {returned!r:.60} for {OVERFIT_STEPS} batches", hint=LOSSES_HINT):
            return ex.result
        # The three-step run comes first, unreported, so that a loop that cannot overfit hears the likely reason.
        try:
            run = _guarded(_three_steps, student_fn)
        except NotImplementedError:
            raise
        except Exception as error:
            run = error
        overfits = math.isfinite(losses[-1]) and losses[-1] < OVERFIT_BOUND
        ex.require(f"overfits one fixed batch of {OVERFIT_PAIRS} pairs: its loss is below {OVERFIT_BOUND} after "
                   f"{OVERFIT_STEPS} steps", overfits, problem=f"it went from {losses[0]:.3g} to {losses[-1]:.3g}",
                   hint=None if overfits else _matching_mistake(run) or OVERFIT_HINT)
        if isinstance(run, Exception):
            ex.call(_raise, run, description="your loop on three batches")
        if _stepped_in_place(ex, run):
            return ex.result
        expected_losses, expected_moved = _three_steps(_library_loop)
        returned, moved = run
        losses = _numbers(returned, LOOP_STEPS)
        if losses is None:
            ex.require(f"returns one loss per batch ({LOOP_STEPS} batches)", False, problem=f"got {returned!r:.60}",
                       hint=LOSSES_HINT)
            return ex.result
        runs = _mistake_runs() if describe_mismatch(moved, expected_moved, **EXACT) else {}
        # The mistakes that change the first loss (computed before any update), then those that change only updates.
        loss_mistakes = (SHIFT_HINT, NO_SHIFT_HINT, PADDING_HINT, PYTORCH_SMOOTHING_HINT, PAD_ID_HINT, SRC_MASK_HINT)
        update_mistakes = (ZERO_GRAD_HINT, STEP_BEFORE_BACKWARD_HINT, CLIP_AFTER_STEP_HINT, LR_HINT, STEP_ZERO_HINT,
                           CLIP_NORM_HINT)
        loss_right = ex.compare(
            "the first batch's loss, before any update (float64)", losses[0], expected_losses[0], **EXACT,
            hint="shift the target, run the model with the source's padding mask, and take the label-smoothed loss "
                 "over the real tokens",
            mistakes={hint: runs[hint][0][0] for hint in loss_mistakes if hint in runs})
        update_hint = ("every step: set the learning rate, zero the gradients, backward, clip, step" if loss_right
                       else "the loss is wrong already (line above): fix it first, the weights follow from it")
        if ex.compare(f"how far each weight tensor moved in {LOOP_STEPS} steps of Adam (float64)", moved,
                      expected_moved, **EXACT, hint=update_hint,
                      mistakes={hint: runs[hint][1] for hint in update_mistakes if hint in runs}):
            ex.compare(f"the losses of all {LOOP_STEPS} steps", losses, expected_losses, **EXACT,
                       hint="return loss.item() of every step, measured before that step's update")
    return ex.result


def _clip_cases() -> list[tuple[str, list[torch.Tensor], float]]:
    """(description, gradients of several shapes (float64), max_norm): a global norm of about 5.5 clipped to 1.0 (the
    smallest gradient's own norm is below 1.0); a global norm of about 0.7, under the limit 2.0; and a norm of about
    12 clipped to 3.0, one gradient not contiguous in memory."""
    generator = torch.Generator().manual_seed(9)

    def gradient(*shape: int, scale: float) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)

    stored = gradient(5, 3, scale=2.0)  # (5, 3), passed on transposed: (3, 5)
    return [("3 gradients of shapes (4, 3), (5,) and (2, 2, 2), global norm above max_norm 1.0",
             [gradient(4, 3, scale=1.5), gradient(5, scale=0.2), gradient(2, 2, 2, scale=0.5)], 1.0),
            ("2 gradients of shapes (3,) and (2, 3), global norm below max_norm 2.0",
             [gradient(3, scale=0.3), gradient(2, 3, scale=0.2)], 2.0),
            ("gradients of shapes (3, 5) (not contiguous), (7,) and (1,), clipped to 3.0",
             [stored.T, gradient(7, scale=3.0), gradient(1, scale=1.0)], 3.0)]


def _flat(grads: list[torch.Tensor]) -> torch.Tensor:
    """All the gradients as one long vector (the global norm's view of them)."""
    return torch.cat([g.reshape(-1) for g in grads])


PER_PARAMETER_HINT = Hint(idea="you clipped each gradient by its own norm: clipping takes the norm of all the "
                               "gradients together, as one long vector, and scales every one by the same factor",
                          id="per-parameter-norm")
SCALED_UP_HINT = Hint(idea="your gradients grew: when the global norm is already below max_norm, clipping leaves "
                           "them unchanged (the factor is capped at 1)", id="scaled-up-below-limit")
SQUARED_NORM_HINT = Hint(idea="you used the sum of squares: the norm is its square root", id="squared-norm")
MAX_NORM_HINT = Hint(idea="you took the largest entry: the global norm is the L2 norm of every entry of every "
                          "gradient", id="max-not-norm")


def _clip_variant(grads: list[torch.Tensor], max_norm: float, variant: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(norm, all clipped gradients as one vector) of one classic mistake of ``clip_global``: ``"each"`` gradient by
    its own norm, ``"uncapped"`` factor, ``"squared"`` norm, ``"largest"`` entry as the norm."""
    flat = _flat(grads)
    if variant == "each":
        return flat.norm(), _flat([g * torch.clamp(max_norm / (g.norm() + 1e-6), max=1.0) for g in grads])
    norm = {"uncapped": flat.norm(), "squared": flat.square().sum(), "largest": flat.abs().max()}[variant]
    factor = max_norm / (norm + 1e-6)
    return norm, flat * (factor if variant == "uncapped" else torch.clamp(factor, max=1.0))


def clip_global(student_fn: Callable[[list[torch.Tensor], float], tuple[Any, list[torch.Tensor]]]) -> CheckResult:
    """Check ``clip_global(grads, max_norm)`` -> (norm before clipping, clipped gradients), against the library's
    ``clip_grad_norm`` on three lists of gradients; the first wrong case ends the check."""
    ex = Exercise("clip_global")
    with ex.run():
        for description, grads, max_norm in _clip_cases():
            parameters = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
            for parameter, g in zip(parameters, grads, strict=True):
                parameter.grad = g.clone()
            expected_norm = clip_grad_norm(parameters, max_norm)
            expected = _flat([p.grad for p in parameters])
            result = ex.call(student_fn, [g.clone() for g in grads], max_norm)
            shapes = [tuple(g.shape) for g in grads]
            returned = (isinstance(result, tuple | list) and len(result) == 2 and isinstance(result[1], list | tuple)
                        and all(isinstance(g, torch.Tensor) for g in result[1]))
            if not ex.require(f"{description}: returns (norm, a list of clipped gradients)", returned,
                              problem=f"got {type(result).__name__}", hint="return norm, clipped"):
                return ex.result
            norm, clipped = result
            if not ex.require(f"{description}: one clipped gradient per gradient, of its shape",
                              [tuple(g.shape) for g in clipped] == shapes,
                              problem=f"expected shapes {shapes}, got {[tuple(g.shape) for g in clipped]}",
                              hint="scale each gradient, keep its shape"):
                return ex.result
            mistakes = {hint: _clip_variant(grads, max_norm, variant) for hint, variant in (
                (PER_PARAMETER_HINT, "each"), (SCALED_UP_HINT, "uncapped"), (SQUARED_NORM_HINT, "squared"),
                (MAX_NORM_HINT, "largest"))}
            if not ex.compare(f"{description}: the clipped gradients", _flat(list(clipped)), expected,
                              hint="one factor for all: max_norm / global norm, capped at 1",
                              mistakes=_unambiguous({hint: value for hint, (_, value) in mistakes.items()},
                                                    expected)):
                return ex.result
            if not ex.compare(f"{description}: the norm before clipping", norm, expected_norm,
                              hint="return the global norm measured before scaling",
                              mistakes=_unambiguous({hint: value for hint, (value, _) in mistakes.items()},
                                                    expected_norm)):
                return ex.result
    return ex.result
