"""Lesson 01 widget: two 2-D vectors, their dot product and their cosine similarity, live."""

from __future__ import annotations

import math

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..similarity import cosine_similarity
from .plots import figure_to_png


def vector_from_polar(length: float, angle_degrees: float) -> torch.Tensor:
    """The 2-D vector of the given length pointing ``angle_degrees`` anticlockwise from the x axis.  # (2,)"""
    angle = math.radians(angle_degrees)
    return torch.tensor([length * math.cos(angle), length * math.sin(angle)], dtype=torch.float64)


def _draw_arrows(a: torch.Tensor, b: torch.Tensor, state: dict[str, float]) -> bytes:
    """PNG of ``a`` and ``b`` drawn as arrows from the origin, with the dot product and cosine in the title."""
    figure = Figure(figsize=(4.2, 4.2))
    ax = figure.subplots()
    for vector, name, color in ((a, "a", "tab:blue"), (b, "b", "tab:orange")):
        x, y = vector.tolist()
        ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color, "lw": 2})
        ax.text(x * 1.08, y * 1.08, name, color=color, fontsize=12, ha="center", va="center")
    reach = max(state["length_a"], state["length_b"]) * 1.25
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("feature 1")
    ax.set_ylabel("feature 2")
    ax.set_title(f"a·b = {state['dot']:.2f}   cos = {state['cosine']:.2f}")
    return figure_to_png(figure)


def vector_angle_widget(angle: float = 60.0, length_a: float = 2.0, length_b: float = 1.0) -> widgets.VBox:
    """Sliders for the angle between two 2-D vectors and their lengths; shows a·b and cos(a, b) live.

    Vector ``a`` lies on the x axis; ``b`` is turned ``angle`` degrees from it. The returned box exposes
    ``.controls`` (``"angle"``, ``"length_a"``, ``"length_b"`` sliders) and ``.state`` (the vectors' lengths,
    the angle, ``"dot"`` and ``"cosine"``), updated on every change.
    """
    controls = {
        "angle": widgets.FloatSlider(value=angle, min=0, max=180, step=5, description="angle (°)"),
        "length_a": widgets.FloatSlider(value=length_a, min=0.5, max=4, step=0.5, description="|a|"),
        "length_b": widgets.FloatSlider(value=length_b, min=0.5, max=4, step=0.5, description="|b|"),
    }
    readout = widgets.HTML()
    plot = widgets.Image(format="png")
    box = widgets.VBox([*controls.values(), readout, plot])
    box.controls = controls
    box.state = {}

    def update(_change: object = None) -> None:
        a = vector_from_polar(controls["length_a"].value, 0.0)  # (2,)
        b = vector_from_polar(controls["length_b"].value, controls["angle"].value)  # (2,)
        box.state.update(
            angle=controls["angle"].value,
            length_a=float(a.norm()),
            length_b=float(b.norm()),
            dot=float(a @ b),
            cosine=float(cosine_similarity(a, b)),
        )
        readout.value = (
            f"a·b = |a| |b| cos θ = {box.state['length_a']:.2f} × {box.state['length_b']:.2f} × "
            f"{box.state['cosine']:.3f} = <b>{box.state['dot']:.3f}</b>; "
            f"cosine similarity = <b>{box.state['cosine']:.3f}</b> (lengths do not change it)"
        )
        plot.value = _draw_arrows(a, b, box.state)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
