"""Lesson 04 views: the sinusoidal encoding as a heatmap, and a widget exploring one position's vector."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes

from ..positions import sinusoidal_encoding
from .plots import bar_chart, heatmap

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
        ylabel="position p",
        ax=ax,
        annotate=annotate,
        cmap="RdBu",
        vmin=-1.0,
        vmax=1.0,
    )


def dot_products_by_offset(d_model: int, position: int, max_offset: int) -> torch.Tensor:
    """PE(position) · PE(position + k) for k = 0 … max_offset, shaped (max_offset + 1,)."""
    encoding = sinusoidal_encoding(position + max_offset + 1, d_model).double()  # (T, d_model)
    return encoding[position:] @ encoding[position]  # (max_offset + 1,)


def positional_encoding_widget(position: int = 3, d_model: int = 16, max_offset: int = 60) -> widgets.VBox:
    """Sliders for a position and d_model; shows PE(position) and the curve PE(position)·PE(position + k).

    The returned box exposes ``.controls`` (``"position"``, ``"d_model"``) and ``.state`` (``"position"``,
    ``"d_model"``, ``"vector"`` (d_model,), ``"dots"`` (max_offset + 1,)), updated on every change.
    """
    controls = {
        "position": widgets.IntSlider(value=position, min=0, max=100, description="position"),
        "d_model": widgets.IntSlider(value=d_model, min=2, max=64, step=2, description="d_model"),
    }
    plot = widgets.Output()
    box = widgets.VBox([*controls.values(), plot])
    box.controls = controls
    box.state = {}

    def update(_change: object = None) -> None:
        pos, width = controls["position"].value, controls["d_model"].value
        vector = sinusoidal_encoding(pos + 1, width)[pos]  # (d_model,)
        dots = dot_products_by_offset(width, pos, max_offset)  # (max_offset + 1,)
        box.state.update(position=pos, d_model=width, vector=vector, dots=dots)
        with plot:
            plot.clear_output(wait=True)
            fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.2))
            bar_chart(vector, [str(j) for j in range(width)], title=f"PE({pos}), d_model = {width}",
                      xlabel=ENCODING_COLUMN_LABEL, ylabel="value", ax=left, annotate=width <= 16, ylim=(-1.1, 1.1))
            right.plot(range(max_offset + 1), dots.numpy(), marker=".")
            right.set_title(f"PE({pos}) · PE({pos} + k)")
            right.set_xlabel("offset k")
            right.set_ylabel("dot product")
            fig.tight_layout()
            plt.show()
            plt.close(fig)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
