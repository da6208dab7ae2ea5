"""Lesson 09 plots: learning-rate schedules, loss curves and cross-attention maps."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes

from ..training import History
from .plots import heatmap


def plot_learning_rates(steps: Sequence[int], schedules: dict[str, Sequence[float]], title: str) -> Axes:
    """One line per learning-rate schedule."""
    _, ax = plt.subplots(figsize=(7, 3))
    for label, values in schedules.items():
        ax.plot(steps, values, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_loss_curves(history: History, title: str = "Training and validation loss") -> Axes:
    """Per-step training loss (label-smoothed) and the validation cross-entropy, log scale."""
    _, ax = plt.subplots(figsize=(7, 3))
    ax.plot(history.steps, history.train_loss, label="training loss (label-smoothed)", alpha=0.7)
    ax.plot(history.valid_steps, history.valid_loss, "o-", label="validation cross-entropy")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss per target token")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_cross_attention(weights: torch.Tensor, source_words: Sequence[str], target_words: Sequence[str],
                         title: str, ax: Axes | None = None) -> Axes:
    """Heatmap of one sentence's cross-attention (T, S): rows = predicted target words, columns = source words.

    The weights come from ``transformer_lib.cross_attention_weights``.
    """
    return heatmap(weights, target_words, source_words, title=title, xlabel="source word (key)",
                   ylabel="target position (query)", ax=ax, annotate=False, vmin=0.0, vmax=1.0)
