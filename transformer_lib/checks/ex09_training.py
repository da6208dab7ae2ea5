"""Checks for lesson 09's exercises: the shifted target, the padded loss and the warm-up schedule."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..training import label_smoothed_cross_entropy, shift_for_teacher_forcing, transformer_lr
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
