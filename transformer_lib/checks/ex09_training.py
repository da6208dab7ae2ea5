"""Checks for lesson 09's exercises: the shifted target, the padded loss, label smoothing without ``<pad>``, the
warm-up schedule and a repaired training step."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..masks import padding_mask
from ..model import Transformer, TransformerConfig
from ..training import label_smoothed_cross_entropy, shift_for_teacher_forcing, training_step, transformer_lr
from ._feedback import CheckResult, Exercise

PAD_ID = 0
TARGET = torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, 0, 0]])  # <bos>=1 … <eos>=2, then padding


def shift_target(student_fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> CheckResult:
    """Check ``shift_target(tgt)`` -> (decoder_input, labels) for teacher forcing."""
    ex = Exercise("shift_target")
    with ex.run():
        result = ex.call(student_fn, TARGET)
        if not ex.require("returns a pair (decoder_input, labels)", isinstance(result, tuple) and len(result) == 2,
                          problem=f"got {type(result).__name__}", hint="return decoder_input, labels"):
            return ex.result
        decoder_input, labels = result
        expected_input, expected_labels = shift_for_teacher_forcing(TARGET)
        ex.compare("decoder input: <bos> and the target without its last token", decoder_input, expected_input,
                   hint="tgt[:, :-1]",
                   mistakes={"you forgot the shift: the decoder reads the target shifted right by one": TARGET,
                             "swapped: the input starts with <bos>, the labels end with <eos>": expected_labels})
        ex.compare("labels: the target without <bos>", labels, expected_labels, hint="tgt[:, 1:]",
                   mistakes={"you forgot the shift: the label at each position is the next token": TARGET,
                             "swapped: the labels are tgt[:, 1:]": expected_input})
    return ex.result


def padded_loss(student_fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]) -> CheckResult:
    """Check ``padded_loss(logits, labels, pad_id)``: mean cross-entropy over the real tokens only."""
    ex = Exercise("padded_loss")
    with ex.run():
        generator = torch.Generator().manual_seed(9)
        logits = torch.randn(2, 4, 10, generator=generator, dtype=torch.float64)  # (batch, T, V)
        labels = shift_for_teacher_forcing(TARGET)[1]  # (2, 4) with two padding positions
        flat_logits, flat_labels = logits.reshape(-1, 10), labels.reshape(-1)
        expected = label_smoothed_cross_entropy(logits, labels, PAD_ID)
        ex.compare("loss of a batch with padding", ex.call(student_fn, logits, labels, PAD_ID), expected,
                   hint="cross-entropy per token, keep tokens whose label != pad_id, average over those",
                   mistakes={"you counted the padding positions: leave out labels equal to pad_id "
                             "(F.cross_entropy(..., ignore_index=pad_id))": F.cross_entropy(flat_logits, flat_labels),
                             "you summed: divide by the number of real tokens":
                             F.cross_entropy(flat_logits, flat_labels, ignore_index=PAD_ID, reduction="sum"),
                             "you divided by all positions, padding included: divide by the real tokens only":
                             F.cross_entropy(flat_logits, flat_labels, ignore_index=PAD_ID, reduction="sum") / 8})
    return ex.result


def warmup_lr(student_fn: Callable[[int, int, int], float]) -> CheckResult:
    """Check ``warmup_lr(step, d_model, warmup_steps)``, the paper's schedule (steps from 1)."""
    ex = Exercise("warmup_lr")
    with ex.run():
        for step in (1, 2000, 4000, 8000, 100000):
            expected = transformer_lr(step, 512, 4000)
            ex.compare(f"step {step}, d_model 512, warm-up 4000", ex.call(student_fn, step, 512, 4000), expected,
                       rtol=1e-6, atol=0,
                       hint="d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)",
                       mistakes={"multiply by d_model**-0.5": expected * 512**0.5,
                                 "take the min of the two terms, not the max":
                                 512**-0.5 * max(step**-0.5, step * 4000**-1.5)})
    return ex.result


def _smoothed_mistakes(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> dict[str, torch.Tensor]:
    """The values the classic label-smoothing mistakes give, for ``smoothed_loss``'s feedback."""
    vocab = logits.shape[-1]
    flat_logits, flat_labels = logits.reshape(-1, vocab), labels.reshape(-1)
    log_probs = logits.log_softmax(-1)  # (batch, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (batch, T)
    per_token = (1 - smoothing) * nll + smoothing * -log_probs[..., 1:].mean(-1)  # <pad> = 0 left out
    without_right = -log_probs[..., 1:].sum(-1) + log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    spread_on_others = (1 - smoothing) * nll + smoothing * without_right / (vocab - 2)
    real = labels != PAD_ID
    return {
        "you spread the smoothing mass over <pad> too: spread it over the V - 1 tokens other than <pad>":
        F.cross_entropy(flat_logits, flat_labels, ignore_index=PAD_ID, label_smoothing=smoothing),
        "you averaged over the padding positions too: keep the positions whose label is not pad_id":
        per_token.mean(),
        "you forgot the smoothing: mix (1 - smoothing) x the usual loss with smoothing x the uniform part":
        label_smoothed_cross_entropy(logits, labels, PAD_ID),
        "the uniform part covers every token but <pad>, the right one included (V - 1 tokens, not V - 2)":
        spread_on_others[real].mean(),
    }


def smoothed_loss(student_fn: Callable[[torch.Tensor, torch.Tensor, int, float], torch.Tensor]) -> CheckResult:
    """Check ``smoothed_loss(logits, labels, pad_id, smoothing)``: label smoothing over the tokens other than <pad>,
    averaged over the real tokens."""
    ex = Exercise("smoothed_loss")
    with ex.run():
        generator = torch.Generator().manual_seed(4)
        logits = torch.randn(2, 4, 12, generator=generator, dtype=torch.float64)  # (batch, T, V)
        labels = shift_for_teacher_forcing(TARGET)[1]  # (2, 4) with two padding positions
        for smoothing in (0.0, 0.2):
            ex.compare(f"smoothing {smoothing}, a batch with padding",
                       ex.call(student_fn, logits, labels, PAD_ID, smoothing),
                       label_smoothed_cross_entropy(logits, labels, PAD_ID, smoothing),
                       hint="(1 - smoothing) * (-log p of the label) + smoothing * mean over the non-pad tokens of "
                            "(-log p), averaged over the positions whose label is not pad_id",
                       mistakes=_smoothed_mistakes(logits, labels, smoothing) if smoothing else None)
    return ex.result


def _tiny_run(step_fn: Callable[..., float]) -> tuple[list[float], torch.Tensor]:
    """Two SGD steps of a tiny seeded Transformer through ``step_fn``: the returned losses and how far each weight
    tensor moved (float64 norms)."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(11, 11, d_model=8, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=16, dropout=0.0, max_len=16))
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    src = torch.tensor([[3, 4, 5, 2], [6, 7, 2, 0]])  # (2, S) with padding
    losses = [step_fn(model, optimizer, src, TARGET, PAD_ID) for _ in range(2)]
    moved = torch.stack([(p.detach() - b).double().norm() for p, b in zip(model.parameters(), before, strict=True)])
    return [float(loss) for loss in losses], moved


def _reference_step(model: Transformer, optimizer: torch.optim.Optimizer, src: torch.Tensor, tgt: torch.Tensor,
                    pad_id: int) -> float:
    return training_step(model, optimizer, src, tgt, pad_id, smoothing=0.1, clip_norm=1.0)[0]


def _wrong_step(shift: bool = True, zero_grad: bool = True, clip_first: bool = True) -> Callable[..., float]:
    """A training step with one classic mistake, for the feedback of ``training_step_fixed``."""

    def step(model: Transformer, optimizer: torch.optim.Optimizer, src: torch.Tensor, tgt: torch.Tensor,
             pad_id: int) -> float:
        decoder_input, labels = shift_for_teacher_forcing(tgt) if shift else (tgt, tgt)
        logits = model(src, decoder_input, src_mask=padding_mask(src, pad_id))
        loss = label_smoothed_cross_entropy(logits, labels, pad_id, 0.1)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        if clip_first:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if not clip_first:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return loss.item()
    return step


def training_step_fixed(student_fn: Callable[..., float]) -> CheckResult:
    """Check a repaired ``training_step(model, optimizer, src, tgt, pad_id)`` against the library's step."""
    ex = Exercise("training_step_fixed")
    with ex.run():
        expected_losses, expected_moved = _tiny_run(_reference_step)
        losses, moved = ex.call(_tiny_run, student_fn, description="two training steps of a tiny model")
        wrong = {name: _tiny_run(_wrong_step(**flags)) for name, flags in (
            ("shift", {"shift": False}), ("zero_grad", {"zero_grad": False}), ("clip", {"clip_first": False}))}
        ex.compare("the loss of both steps", losses, expected_losses, rtol=1e-5,
                   hint="shift the target, run the model, take the label-smoothed loss (0.1) over the real tokens",
                   mistakes={"shift the target: the decoder reads tgt[:, :-1] and predicts tgt[:, 1:]":
                             wrong["shift"][0]})
        ex.compare("how far each weight moved in the two steps", moved, expected_moved, rtol=1e-5,
                   hint="zero the gradients, backward, clip the gradient norm to 1.0, then optimizer.step()",
                   mistakes={"clear the old gradients (optimizer.zero_grad()) before backward: they add up":
                             wrong["zero_grad"][1],
                             "clip before optimizer.step(): clipping afterwards changes nothing the step used":
                             wrong["clip"][1],
                             "shift the target: the decoder reads tgt[:, :-1] and predicts tgt[:, 1:]":
                             wrong["shift"][1]})
    return ex.result
