"""Lesson 17's views: two scales of one loss side by side, a membership check's two distributions, and a widget: how
often a test of n items ranks the truly better of two models first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..confidence import items_to_separate, pick_rate, wilson_interval
from .widget import LessonWidget, State


def loss_scales_plot(names: Sequence[str], per_token: Sequence[float], per_byte: Sequence[float],
                     axes: Sequence[Axes]) -> None:
    """Two bar charts of the same models: the mean loss per token (nats) and bits per byte."""
    for ax, values, title, label in ((axes[0], per_token, "loss per token", "nats per token"),
                                     (axes[1], per_byte, "bits per byte", "bits per byte of text")):
        ax.bar(range(len(names)), values, color=[f"C{k}" for k in range(len(names))])
        ax.set_xticks(range(len(names)), names, rotation=15)
        ax.set(title=title, ylabel=label, xlabel="model")


def membership_plot(leaked: Sequence[float], unseen: Sequence[float], threshold: float, ax: Axes) -> None:
    """Histograms of a membership score for leaked and unseen chunks, and the threshold below which a chunk is
    flagged as leaked."""
    bins = np.linspace(min(min(leaked), min(unseen)), max(max(leaked), max(unseen)), 30)
    ax.hist(unseen, bins=bins, alpha=0.6, label="unseen chunks", color="C0")
    ax.hist(leaked, bins=bins, alpha=0.6, label="leaked chunks", color="C3")
    ax.axvline(threshold, color="black", linestyle="--", label=f"threshold {threshold:+.2f}")
    ax.set(title="Leaked model's bits per byte minus the control's, per chunk", xlabel="difference (bits per byte)",
           ylabel="chunks")
    ax.legend(fontsize=8)


def comparison_widget() -> LessonWidget:
    """Set two models' true accuracies and a test's size n: how often the test scores the better model higher
    (:func:`~transformer_lib.confidence.pick_rate`), the items it takes to do so 95 times in 100
    (:func:`~transformer_lib.confidence.items_to_separate`), and the 95 % Wilson half-width at that n.

    ``.controls``: ``"better"``, ``"gap"`` (points), ``"items"``; ``.state``: ``"rate"``, ``"needed"`` (None when
    the gap is 0), ``"half_width"``, the curve ``"sizes"``/``"rates"``."""
    controls: dict[str, widgets.ValueWidget] = {
        "better": widgets.FloatSlider(value=0.70, min=0.05, max=0.95, step=0.05, description="better model's accuracy"),
        "gap": widgets.FloatSlider(value=3.0, min=0.0, max=20.0, step=1.0, description="gap (points)"),
        "items": widgets.IntSlider(value=50, min=10, max=2000, step=10, description="items n"),
    }

    def compute(values: dict[str, Any]) -> State:
        better, worse = values["better"], max(values["better"] - values["gap"] / 100, 0.0)
        sizes = np.unique(np.geomspace(10, 5000, 40).astype(int)).tolist()
        needed = items_to_separate(better, worse) if worse < better else None
        low, high = wilson_interval(round(better * values["items"]), values["items"])
        verdict = ("no number of items separates two equal models" if needed is None
                   else f"it takes <b>{needed}</b> items to do so 95 times in 100")
        return {"rate": pick_rate(better, worse, values["items"]), "needed": needed, "verdict": verdict,
                "half_width": (high - low) / 2, "sizes": sizes, "rates": [pick_rate(better, worse, n) for n in sizes],
                "items": values["items"]}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        ax.semilogx(state["sizes"], state["rates"], color="C0", label="chance the better model scores higher")
        ax.plot([state["items"]], [state["rate"]], "o", color="C3", label=f"n = {state['items']}")
        ax.axhline(0.95, color="grey", linestyle=":", label="95 %")
        ax.axhline(0.5, color="grey", linestyle="--", label="a coin flip")
        ax.set(title="How often a test of n items ranks the better model first", xlabel="items n (log scale)",
               ylabel="probability", ylim=(0.45, 1.02))
        ax.legend(fontsize=8, loc="lower right")

    readout = ("On {items} items the better model scores higher <b>{rate:.0%}</b> of the time; {verdict}. A 95 % "
               "interval on one accuracy is ± {half_width:.1%} wide at this n.")
    return LessonWidget(controls, compute, readout, draw, figsize=(7.0, 3.4))
