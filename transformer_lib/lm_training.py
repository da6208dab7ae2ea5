"""Training a GPT on next-character prediction, with the training and held-out loss measured along the way.

Shape legend: N = characters in a split, batch, T = ``block_size``, V = vocabulary size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .gpt import GPT
from .lm_evaluation import evaluate_lm_loss
from .text_data import random_windows


@dataclass
class LMHistory:
    """What ``train_gpt`` records: the loss of every training batch, and at each evaluation step the loss on fixed
    windows of the training and the held-out split (the same number of windows, measured the same way)."""

    step_loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def best_step(self) -> int:
        """The evaluation step with the lowest held-out loss (the first, on a tie): where early stopping would keep
        the model. A later best step means the held-out loss was still falling."""
        if not self.valid_loss:
            raise ValueError("no held-out loss was measured: train with valid=... and eval_every=...")
        best = min(range(len(self.valid_loss)), key=self.valid_loss.__getitem__)
        return self.eval_steps[best]


def train_gpt(
    model: GPT,
    train: torch.Tensor,
    steps: int,
    valid: torch.Tensor | None = None,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    eval_every: int | None = None,
    eval_windows: int = 64,
) -> LMHistory:
    """Train on next-character prediction for a fixed number of ``steps`` (AdamW, constant ``lr``).

    ``train``/``valid``: (N,) token ids on the CPU, N > block_size. Batches come from a generator seeded with
    ``seed``, so a run is repeatable on one machine. With ``valid`` and ``eval_every``, both splits are measured by
    :func:`~transformer_lib.lm_evaluation.evaluate_lm_loss` before the first step, every ``eval_every`` steps and
    after the last. ``seconds`` counts training only, not the evaluations.
    """
    block_size = model.config.block_size
    if train.dim() != 1 or len(train) <= block_size:
        raise ValueError(
            f"train_gpt needs data shaped (N,) with N > block_size={block_size} (one window plus its next "
            f"character), got shape {tuple(train.shape)}: pass a longer text, encoded, e.g. tokenizer.encode(text)"
        )
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    history = LMHistory()

    def evaluate(step: int) -> None:
        history.eval_steps.append(step)
        history.train_loss.append(evaluate_lm_loss(model, train, block_size, eval_windows))
        history.valid_loss.append(evaluate_lm_loss(model, valid, block_size, eval_windows))

    measuring = valid is not None and eval_every is not None
    for step in range(steps):
        if measuring and step % eval_every == 0:
            evaluate(step)
        started = time.perf_counter()
        model.train()
        inputs, targets = random_windows(train, block_size, batch_size, generator)  # (batch, T) each
        logits = model(inputs.to(device))  # (batch, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        history.step_loss.append(loss.item())
        history.seconds += time.perf_counter() - started
    if measuring:
        evaluate(steps)
    model.eval()
    return history
