"""Measuring a character-level language model: its mean loss on fixed windows of a split, and the losses of three
baselines that need no neural network (uniform, unigram and bigram character models).

Every loss is a cross-entropy in nats per character: the mean of ``-ln p(next character)``; ``ln V`` is the loss of
a uniform guess over V characters. Shape legend: N = characters in a split, V = vocabulary size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .text_data import random_windows


@torch.no_grad()
def evaluate_lm_loss(
    model: nn.Module, data: torch.Tensor, block_size: int, windows: int = 64, batch_size: int = 32, seed: int = 1234
) -> float:
    """Mean next-character loss of ``model`` over ``windows`` windows of ``data`` (N,), drawn from a fixed seed.

    The same seed gives the same windows at every call, so training and held-out splits, and a model at different
    steps, are measured the same way. Puts the model in eval mode (no dropout).
    """
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    for start in range(0, windows, batch_size):
        inputs, targets = random_windows(data, block_size, min(batch_size, windows - start), generator)
        logits = model(inputs.to(device))  # (batch, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten(), reduction="sum").item()
        count += targets.numel()
    return total / count


def unigram_probabilities(train: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """How often each character occurs in ``train`` (N,), plus ``smoothing`` each, normalised: (V,) float64."""
    counts = torch.bincount(train, minlength=vocab_size).double() + smoothing  # (V,)
    return counts / counts.sum()


def bigram_probabilities(train: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """P(next | previous) counted over the neighbouring pairs of ``train`` (N,), plus ``smoothing`` each:
    (V, V) float64, row = previous character, each row summing to 1."""
    pairs = train[:-1] * vocab_size + train[1:]  # (N - 1,): one id per (previous, next) pair
    counts = torch.bincount(pairs, minlength=vocab_size**2).double().view(vocab_size, vocab_size) + smoothing
    return counts / counts.sum(dim=1, keepdim=True)  # (V, V)


def baseline_losses(train: torch.Tensor, valid: torch.Tensor, vocab_size: int) -> dict[str, float]:
    """Held-out loss (nats per character, on ``valid``) of three models counted on ``train``.

    ``uniform``: every character equally likely, ``ln V``; ``unigram``: each character's frequency; ``bigram``:
    the frequency of each character after the previous one. Add-one smoothing gives unseen characters and pairs a
    small probability instead of 0 (a loss of infinity).
    """
    unigram = unigram_probabilities(train, vocab_size)  # (V,)
    bigram = bigram_probabilities(train, vocab_size)  # (V, V)
    return {
        "uniform": math.log(vocab_size),
        "unigram": -unigram[valid].log().mean().item(),
        "bigram": -bigram[valid[:-1], valid[1:]].log().mean().item(),  # each character predicted from the one before
    }
