"""Lesson 04 views: the sinusoidal encoding as a heatmap, and a widget exploring one position's vector."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..positions import dot_products_by_offset, sinusoidal_encoding
from .plots import bar_chart, heatmap
from .widget import LessonWidget, State

# Column i of the encoding holds sin (even i) or cos (odd i) of pair j = i // 2, which turns by ω_j per position.
ENCODING_COLUMN_LABEL = "column i: sin (even i) or cos (odd i) of pair j = i // 2"


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


def positional_encoding_widget(position: int = 3, d_model: int = 16, max_offset: int = 60) -> LessonWidget:
    """Sliders for a position and d_model; shows PE(position) and the curve PE(position)·PE(position + k).

    ``.controls``: ``"position"``, ``"d_model"``; ``.state``: ``"position"``, ``"d_model"``, ``"vector"``
    (d_model,), ``"dots"`` (max_offset + 1,) and the last of them, ``"last_dot"``, updated on every change.
    """
    controls = {
        "position": widgets.IntSlider(value=position, min=0, max=100, description="position"),
        "d_model": widgets.IntSlider(value=d_model, min=2, max=64, step=2, description="d_model"),
    }

    def compute(values: dict[str, Any]) -> State:
        pos, width = values["position"], values["d_model"]
        dots = dot_products_by_offset(width, pos, max_offset)  # (max_offset + 1,)
        vector = sinusoidal_encoding(pos + 1, width)[pos]  # (d_model,)
        return {**values, "vector": vector, "dots": dots, "last_dot": float(dots[-1]), "max_offset": max_offset}

    def draw(state: State, figure: Figure) -> None:
        pos, width = state["position"], state["d_model"]
        left, right = figure.subplots(1, 2)
        bar_chart(state["vector"], [str(j) for j in range(width)], title=f"PE({pos}), d_model = {width}",
                  xlabel=ENCODING_COLUMN_LABEL, ylabel="value", ax=left, annotate=width <= 16, ylim=(-1.1, 1.1))
        right.plot(range(max_offset + 1), state["dots"].numpy(), marker=".")
        right.set_title(f"PE({pos}) · PE({pos} + k)")
        right.set_xlabel("offset k")
        right.set_ylabel("dot product")

    readout = ("PE({position}) · PE({position} + k) = <b>{dots[0]:.2f}</b> at k = 0 (d_model / 2), {dots[1]:.2f} at "
               "k = 1, {last_dot:.2f} at k = {max_offset}")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 3.2))
