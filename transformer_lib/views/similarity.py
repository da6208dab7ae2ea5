"""Lesson 01 widget: two 2-D vectors, their dot product and their cosine similarity, live."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from ..similarity import cosine_similarity, vector_from_polar
from .widget import LessonWidget, State


def vector_angle_widget(angle: float = 60.0, length_a: float = 2.0, length_b: float = 1.0) -> LessonWidget:
    """Sliders for the angle between two 2-D vectors and their lengths; shows a·b and cos(a, b) live.

    Vector ``a`` lies on the x axis; ``b`` is turned ``angle`` degrees from it. ``.controls``: ``"angle"``,
    ``"length_a"``, ``"length_b"``; ``.state``: ``"a"`` and ``"b"`` (2,), their lengths ``"length_a"`` and
    ``"length_b"``, ``"angle"``, ``"dot"`` and ``"cosine"``, updated on every change.
    """
    controls = {
        "angle": widgets.FloatSlider(value=angle, min=0, max=180, step=5, description="angle (°)"),
        "length_a": widgets.FloatSlider(value=length_a, min=0.5, max=4, step=0.5, description="|a|"),
        "length_b": widgets.FloatSlider(value=length_b, min=0.5, max=4, step=0.5, description="|b|"),
    }

    def compute(values: dict[str, Any]) -> State:
        a = vector_from_polar(values["length_a"], 0.0)  # (2,)
        b = vector_from_polar(values["length_b"], values["angle"])  # (2,)
        return {"a": a, "b": b, "angle": values["angle"], "length_a": float(a.norm()), "length_b": float(b.norm()),
                "dot": float(a @ b), "cosine": float(cosine_similarity(a, b))}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        for name, color in (("a", "tab:blue"), ("b", "tab:orange")):
            x, y = state[name].tolist()
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

    readout = ("a·b = |a| |b| cos θ = {length_a:.2f} × {length_b:.2f} × {cosine:.3f} = <b>{dot:.3f}</b>; "
               "cosine similarity = <b>{cosine:.3f}</b> (lengths do not change it)")
    return LessonWidget(controls, compute, readout, draw, figsize=(4.2, 4.2))
