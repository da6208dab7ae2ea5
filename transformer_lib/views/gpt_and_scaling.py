"""Lesson 11 views: training and held-out loss beside the baselines, log-log plots with a fitted power law, and a
widget for the memory of attention scores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from ..scaling import fit_power_law, score_memory_mib
from ..training import LMHistory
from .widget import LessonWidget, State


def loss_curves(history: LMHistory, baselines: dict[str, float], title: str, ax: Axes | None = None) -> Axes:
    """Training and held-out loss at each evaluation step of ``history``, and each baseline's held-out loss as a
    dotted horizontal line labelled with its name."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history.eval_steps, history.train_loss, "o-", label="GPT, training split")
    ax.plot(history.eval_steps, history.valid_loss, "s-", label="GPT, held-out split")
    for (name, loss), colour in zip(baselines.items(), ("tab:gray", "tab:olive", "tab:purple"), strict=False):
        ax.axhline(loss, linestyle=":", color=colour, label=f"{name} baseline, held-out ({loss:.2f})")
    ax.set_title(title)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.legend(fontsize="small")
    return ax


def loglog_with_fit(
    x: Sequence[float], y: Sequence[float], title: str, xlabel: str, ylabel: str, ax: Axes | None = None
) -> tuple[Axes, float]:
    """Measurements as dots on log-log axes plus the fitted line ``c · x**slope``; returns ``(ax, slope)``."""
    slope, scale = fit_power_law(x, y)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8))
    grid = np.geomspace(min(x), max(x), 50)
    ax.loglog(x, y, "o", label="measured")
    ax.loglog(grid, scale * grid**slope, "--", label=f"fit: slope {slope:.2f}")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax, slope


def attention_memory_widget(length: int = 4096, chunk_size: int = 256, heads: int = 12) -> LessonWidget:
    """Sliders for the sequence length T, the chunk size and the number of heads; reads out the score memory.

    ``.controls``: ``"log2_length"``, ``"chunk_size"``, ``"heads"``; ``.state``: those three values, ``"length"``,
    ``"naive_mib"``, ``"chunked_mib"``, ``"ratio"`` (float32 scores of one layer, one sequence),
    updated on every change.
    """
    controls = {
        "log2_length": widgets.IntSlider(value=int(np.log2(length)), min=7, max=17, description="log₂ T"),
        "chunk_size": widgets.Dropdown(options=[64, 128, 256, 512, 1024], value=chunk_size, description="chunk"),
        "heads": widgets.IntSlider(value=heads, min=1, max=96, description="heads"),
    }

    def compute(values: dict[str, Any]) -> State:
        length = 2 ** values["log2_length"]
        naive = score_memory_mib(length, None, values["heads"])
        chunked = score_memory_mib(length, values["chunk_size"], values["heads"])
        return {**values, "length": length, "naive_mib": naive, "chunked_mib": chunked, "ratio": chunked / naive}

    readout = ("T = {length}: the full score matrices need <b>{naive_mib:,.1f} MiB</b>; chunks of {chunk_size} keys "
               "need <b>{chunked_mib:,.1f} MiB</b> ({ratio:.4f} of it)")
    return LessonWidget(controls, compute, readout)
