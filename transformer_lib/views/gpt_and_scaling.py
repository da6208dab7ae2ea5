"""Lesson 11 views: training and held-out loss beside the baselines, log-log plots with a fitted power law (and a
reference slope to compare with, and error bars over seeds), held-out loss against the characters trained on, and a
widget for the memory of attention's score-sized matrices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

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
    x: Sequence[float], y: Sequence[float], title: str, xlabel: str, ylabel: str, ax: Axes | None = None,
    reference: tuple[float, str] | None = None, digits: int = 2, yerr: Sequence[float] | None = None,
) -> tuple[Axes, float]:
    """Measurements as dots on log-log axes plus the fitted line ``c · x**slope``; returns ``(ax, slope)``.

    ``reference``: ``(slope, label)`` of a second line drawn through the fit's middle, to compare steepness only.
    ``digits``: decimals of the slope in the legend. ``yerr``: error bars (e.g. the standard deviation over seeds
    of the means in ``y``).
    """
    slope, scale = fit_power_law(x, y)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8))
    grid = np.geomspace(min(x), max(x), 50)
    if yerr is None:
        ax.loglog(x, y, "o", label="measured")
    else:
        ax.errorbar(x, y, yerr=yerr, fmt="o", capsize=3, label="measured: mean ± sd over seeds")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.loglog(grid, scale * grid**slope, "--", label=f"fit: slope {slope:.{digits}f}")
    if reference is not None:
        middle = np.sqrt(min(x) * max(x))  # the geometric middle of the x range
        ref_slope, ref_label = reference
        ax.loglog(grid, scale * middle**slope * (grid / middle) ** ref_slope, ":", color="gray", label=ref_label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax, slope


def token_sweep(
    characters: Sequence[float], losses: dict[str, Sequence[float]], title: str, ax: Axes | None = None
) -> Axes:
    """Held-out loss against the characters trained on, one line per model (``losses``: label -> one loss per entry
    of ``characters``), on log-log axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, values in losses.items():
        ax.loglog(characters, values, "o-", markersize=3, label=label)
    ax.set_title(title)
    ax.set_xlabel("characters trained on, D")
    ax.set_ylabel("held-out loss (nats per character)")
    ax.legend(fontsize="small")
    return ax


def attention_memory_widget(
    length: int = 4096, chunk_size: int = 256, heads: int = 1,
    measured: tuple[Sequence[int], Sequence[float], Sequence[float]] | None = None,
) -> LessonWidget:
    """Sliders for the sequence length T, the chunk size and the number of heads; reads out and plots the memory of
    one attention layer's score-sized matrices for one sequence in float32.

    It counts two T × T matrices per head for the naive path (the scores, and the softmax weights written while the
    scores still exist) and two T × chunk for the chunked one, nothing else (not Q, K, V, the output or the
    weights kept for a backward pass). The plot draws both counts against T on log-log axes and marks the chosen T;
    ``measured = (lengths, naive_mib, chunked_mib)`` adds peak memory measured for one head and chunks of 256 keys.
    ``.controls``: ``"log2_length"``, ``"chunk_size"``, ``"heads"``; ``.state``: those three values, ``"length"``,
    ``"naive_mib"``, ``"chunked_mib"``, ``"ratio"``, updated on every change.
    """
    controls = {
        "log2_length": widgets.IntSlider(value=int(np.log2(length)), min=7, max=17, description="log₂ T"),
        "chunk_size": widgets.Dropdown(options=[64, 128, 256, 512, 1024], value=chunk_size, description="chunk"),
        "heads": widgets.IntSlider(value=heads, min=1, max=96, description="heads"),
    }
    lengths = 2 ** np.arange(7, 18)  # T = 128 … 131072, the slider's range

    def compute(values: dict[str, Any]) -> State:
        length = 2 ** values["log2_length"]
        settings = {"heads": values["heads"], "matrices": 2}
        naive = score_memory_mib(length, None, **settings)
        chunked = score_memory_mib(length, values["chunk_size"], **settings)
        curves = {
            "naive": [score_memory_mib(int(t), None, **settings) for t in lengths],
            "chunked": [score_memory_mib(int(t), values["chunk_size"], **settings) for t in lengths],
        }
        return {**values, "length": length, "naive_mib": naive, "chunked_mib": chunked, "ratio": chunked / naive,
                "curves": curves}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        ax.loglog(lengths, state["curves"]["naive"], "-", color="tab:red", label="naive: 2 · heads · T² numbers")
        ax.loglog(lengths, state["curves"]["chunked"], "-", color="tab:green",
                  label=f"chunks of {state['chunk_size']}: 2 · heads · T · {state['chunk_size']}")
        ax.loglog([state["length"]] * 2, [state["chunked_mib"], state["naive_mib"]], "o", color="black",
                  label=f"T = {state['length']}")
        if measured is not None:
            measured_lengths, naive_mib, chunked_mib = measured
            ax.loglog(measured_lengths, naive_mib, "x", color="tab:red", label="measured peak, 1 head, naive")
            ax.loglog(measured_lengths, chunked_mib, "x", color="tab:green",
                      label="measured peak, 1 head, chunks of 256")
        ax.set_title(f"Score-sized matrices of one layer, {state['heads']} head(s), float32")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel("MiB")
        ax.legend(fontsize="small")

    readout = ("T = {length}: scores and softmax weights need <b>{naive_mib:,.1f} MiB</b> at once; chunks of "
               "{chunk_size} keys need <b>{chunked_mib:,.1f} MiB</b> ({ratio:.4f} of it)")
    return LessonWidget(controls, compute, readout, draw, figsize=(6.5, 4.0))
