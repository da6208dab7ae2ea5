"""Lesson 04 views: the sinusoidal encoding as a heatmap."""

from __future__ import annotations

import torch
from matplotlib.axes import Axes

from .plots import heatmap

# Column i of the encoding holds sin (even i) or cos (odd i) of pair m = i // 2, which turns by ω_m per position.
ENCODING_COLUMN_LABEL = "column i: sin (even i) or cos (odd i) of pair m = i // 2"


def plot_encoding(
    encoding: torch.Tensor, title: str = "Sinusoidal positional encoding", ax: Axes | None = None
) -> Axes:
    """Draw an encoding matrix (positions, d_model) with positions as rows and its columns i as columns."""
    positions, d_model = encoding.shape
    annotate = positions * d_model <= 64  # numbers are readable only on small matrices
    return heatmap(
        encoding,
        [str(p) for p in range(positions)],
        [str(j) for j in range(d_model)],
        title=title,
        xlabel=ENCODING_COLUMN_LABEL,
        ylabel="position pos",
        ax=ax,
        annotate=annotate,
        cmap="RdBu",
        vmin=-1.0,
        vmax=1.0,
    )
