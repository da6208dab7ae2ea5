"""Shared plotting helpers: labelled heatmaps (similarity, attention), bar charts (weights over tokens) and log-log
plots with a fitted power law (lessons 11 and 12).

Every helper draws on a given matplotlib ``Axes`` (or a new one), always sets a title and axis labels,
and returns the ``Axes`` so a lesson can add to it. The caller shows the figure with ``plt.show()``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..scaling import fit_power_law


def _to_numpy(values: torch.Tensor | np.ndarray | Sequence) -> np.ndarray:
    """A float NumPy copy of a tensor (any device), an array or a (nested) list."""
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().to(torch.float64).numpy()
    return np.asarray(values, dtype=np.float64)


def _readable_text_color(rgba: tuple[float, float, float, float]) -> str:
    """Black text on light cells, white text on dark ones."""
    red, green, blue, _ = rgba
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def heatmap(
    matrix: torch.Tensor | np.ndarray | Sequence,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str,
    xlabel: str,
    ylabel: str,
    ax: Axes | None = None,
    annotate: bool = True,
    fmt: str = ".2f",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw a 2-D ``matrix`` (rows, cols) as a labelled heatmap and return its ``Axes``.

    Row ``i`` is labelled ``row_labels[i]`` on the y axis (top to bottom), column ``j`` is
    ``col_labels[j]`` on the x axis. With ``annotate`` each cell shows its value formatted with ``fmt``
    (e.g. ``".2f"``) in black or white, whichever reads better on the cell's colour. ``vmin``/``vmax`` fix the
    colour scale (e.g. 0 and 1 for weights). Masked entries (``-inf`` scores) are blank,
    annotated ``-inf``.
    """
    values = _to_numpy(matrix)
    if values.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix (rows, cols); got shape {values.shape}.")
    if len(row_labels) != values.shape[0] or len(col_labels) != values.shape[1]:
        raise ValueError(
            f"labels do not match the matrix: {len(row_labels)} row labels and {len(col_labels)} column "
            f"labels for a matrix of shape {values.shape}."
        )
    if ax is None:
        size = (1.0 + 0.7 * values.shape[1], 0.8 + 0.55 * values.shape[0])
        _, ax = plt.subplots(figsize=(max(size[0], 3.5), max(size[1], 2.5)))
    shown = np.ma.masked_invalid(values)
    image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(values.shape[1]), labels=list(col_labels), rotation=45 if values.shape[1] > 6 else 0)
    ax.set_yticks(range(values.shape[0]), labels=list(row_labels))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(image, ax=ax)
    if annotate:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                value = values[i, j]
                text = "-inf" if np.isneginf(value) else format(value, fmt)
                color = _readable_text_color(image.cmap(image.norm(value))) if np.isfinite(value) else "black"
                ax.text(j, i, text, ha="center", va="center", color=color, fontsize=9)
    return ax


def bar_chart(
    values: torch.Tensor | np.ndarray | Sequence,
    labels: Sequence[str],
    title: str,
    xlabel: str,
    ylabel: str,
    ax: Axes | None = None,
    annotate: bool = True,
    fmt: str = ".2f",
    ylim: tuple[float, float] | None = None,
) -> Axes:
    """Draw one bar per label (e.g. attention weights over tokens) and return the ``Axes``.

    ``values`` has shape (n,) and ``labels`` n entries. With ``annotate`` each bar shows its value above it.
    """
    heights = _to_numpy(values)
    if heights.ndim != 1 or len(labels) != heights.shape[0]:
        raise ValueError(
            f"bar_chart expects values of shape (n,) and n labels; "
            f"got shape {heights.shape} and {len(labels)} labels."
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.5, 0.8 * len(labels) + 1.5), 3.0))
    bars = ax.bar(range(len(labels)), heights, color="tab:blue")
    ax.set_xticks(range(len(labels)), labels=list(labels))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if annotate:
        ax.bar_label(bars, labels=[format(h, fmt) for h in heights], padding=2, fontsize=9)
    return ax


def figure_to_png(figure: Figure, dpi: int = 90) -> bytes:
    """Render a figure to PNG bytes, e.g. for an ``ipywidgets.Image`` that a widget redraws on every change.

    Build such figures with ``matplotlib.figure.Figure`` (not ``plt.subplots``), so that nothing is shown in the
    notebook's output and nothing stays open in pyplot.
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


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
