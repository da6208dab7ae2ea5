"""Lesson 11 views: log-log plots with a fitted power law, and a widget for the memory of attention scores."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

MIB = 2**20


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Fit ``y ≈ c · x**slope`` by a straight line through (log x, log y); returns ``(slope, c)``."""
    slope, intercept = np.polyfit(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)), 1)
    return float(slope), float(np.exp(intercept))


def loglog_with_fit(
    x: Sequence[float], y: Sequence[float], title: str, xlabel: str, ylabel: str, ax: plt.Axes | None = None
) -> tuple[plt.Axes, float]:
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


def score_memory_mib(length: int, chunk_size: int | None, heads: int = 1, bytes_per_number: int = 4) -> float:
    """MiB for one attention layer's score matrix: ``heads · T · T`` numbers, or ``heads · T · chunk`` in chunks."""
    columns = length if chunk_size is None else min(chunk_size, length)
    return heads * length * columns * bytes_per_number / MIB


def attention_memory_widget(length: int = 4096, chunk_size: int = 256, heads: int = 12) -> widgets.VBox:
    """Sliders for the sequence length T, the chunk size and the number of heads; reads out the score memory.

    ``.controls``: ``"log2_length"``, ``"chunk_size"``, ``"heads"``; ``.state``: ``"length"``, ``"naive_mib"``,
    ``"chunked_mib"``, ``"ratio"`` (float32 scores of one layer, one sequence), updated on every change.
    """
    controls = {
        "log2_length": widgets.IntSlider(value=int(np.log2(length)), min=7, max=17, description="log₂ T"),
        "chunk_size": widgets.Dropdown(options=[64, 128, 256, 512, 1024], value=chunk_size, description="chunk"),
        "heads": widgets.IntSlider(value=heads, min=1, max=96, description="heads"),
    }
    readout = widgets.HTML()
    box = widgets.VBox([*controls.values(), readout])
    box.controls = controls
    box.state = {}

    def update(_change: object = None) -> None:
        length = 2 ** controls["log2_length"].value
        naive = score_memory_mib(length, None, controls["heads"].value)
        chunked = score_memory_mib(length, controls["chunk_size"].value, controls["heads"].value)
        box.state.update(length=length, naive_mib=naive, chunked_mib=chunked, ratio=chunked / naive)
        readout.value = (
            f"T = {length}: the full score matrices need <b>{naive:,.1f} MiB</b>; chunks of "
            f"{controls['chunk_size'].value} keys need <b>{chunked:,.1f} MiB</b> ({chunked / naive:.4f} of it)"
        )

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
