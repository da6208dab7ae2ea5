"""Lesson 07 plots: gradient norms per layer and training curves of post-LN and pre-LN stacks."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes


def plot_gradient_norms(norms: dict[str, Sequence[float]], title: str) -> Axes:
    """One line per variant: the gradient norm of each layer's parameters, layer 1 (bottom) to the top."""
    _, ax = plt.subplots(figsize=(7, 3))
    for label, values in norms.items():
        ax.plot(range(1, len(values) + 1), values, "o-", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("layer (1 = closest to the input)")
    ax.set_ylabel("gradient norm")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_curves(steps: Sequence[int], curves: dict[str, Sequence[float]], title: str, ylabel: str) -> Axes:
    """One line per training run (e.g. validation loss against steps)."""
    _, ax = plt.subplots(figsize=(7, 3))
    for label, values in curves.items():
        ax.plot(steps, values, "o-", label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    return ax
