"""Lesson 09 plots: learning-rate schedules, loss curves and cross-attention maps (mean of heads, or per head)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

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


def plot_loss_curves(histories: History | dict[str, History], title: str = "Training and validation loss") -> Axes:
    """The plain (unsmoothed) cross-entropy per target token: of each training batch, and on the validation split
    every few steps, so the two curves measure the same thing. Several runs share the axes, one colour each."""
    if isinstance(histories, History):
        histories = {"": histories}
    _, ax = plt.subplots(figsize=(8, 3.5))
    for index, (name, history) in enumerate(histories.items()):
        color, prefix = f"C{index}", f"{name}: " if name else ""
        if history.train_cross_entropy:
            ax.plot(history.steps, history.train_cross_entropy, color=color, alpha=0.3,
                    label=f"{prefix}training batches")
        ax.plot(history.valid_steps, history.valid_loss, "o-", color=color, markersize=3, label=f"{prefix}validation")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy per target token")
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


def plot_cross_attention_heads(weights: Sequence[torch.Tensor], source_words: Sequence[str],
                               target_words: Sequence[str]) -> Figure:
    """One heatmap per decoder layer and head: ``weights`` holds one (heads, T, S) tensor per layer, as
    ``cross_attention_weights(...)[layer][sentence]``. Rows = predicted target words, columns = source words."""
    layers, heads = len(weights), weights[0].shape[0]
    figure, axes = plt.subplots(layers, heads, figsize=(10, 2.8 * layers), squeeze=False, constrained_layout=True)
    for layer, layer_weights in enumerate(weights):
        for head in range(heads):
            ax = axes[layer][head]
            heatmap(layer_weights[head], target_words, source_words, title=f"layer {layer}, head {head}",
                    xlabel="source word" if layer == layers - 1 else "", ylabel="predicts" if head == 0 else "",
                    ax=ax, annotate=False, vmin=0.0, vmax=1.0, colorbar=False)
            ax.tick_params(labelsize=7)
            if head > 0:
                ax.set_yticklabels([])
            if layer < layers - 1:
                ax.set_xticklabels([])
    figure.suptitle("Cross-attention of every decoder head (rows: the target word each position predicts)")
    return figure
