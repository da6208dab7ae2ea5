"""Plots and the widget of lesson 14: speculative decoding's acceptance against k, and int8 weight ranges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..speculative import expected_tokens_per_call
from .widget import LessonWidget, State


def acceptance_plot(ks: Sequence[int], acceptance: Sequence[float], tokens_per_call: Sequence[float]) -> Figure:
    """Two panels against k: the measured acceptance rate, and the measured tokens per target call beside what
    independent acceptance at the measured rate predicts (``expected_tokens_per_call``)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.plot(ks, acceptance, "o-")
    left.set(title="Share of proposed tokens the target kept", xlabel="k (tokens proposed per round)",
             ylabel="acceptance rate", ylim=(0, 1.05))
    predicted = [expected_tokens_per_call(a, k) for a, k in zip(acceptance, ks, strict=True)]
    right.plot(ks, tokens_per_call, "o-", label="measured")
    right.plot(ks, predicted, "x--", label="1 + a + … + a^k (independent acceptance)")
    right.plot(ks, [k + 1 for k in ks], ":", color="grey", label="k + 1 (every proposal kept)")
    right.set(title="New tokens per target call", xlabel="k (tokens proposed per round)", ylabel="tokens per call")
    right.legend()
    fig.tight_layout()
    return fig


def weight_ranges_plot(weight: np.ndarray, name: str) -> Figure:
    """The largest |w| of each output channel (row) of one weight, sorted, beside the one largest of the tensor: the
    per-tensor scale is set by the tallest bar, the per-channel scale by each bar itself."""
    row_max = np.sort(np.abs(weight).max(axis=1))[::-1]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(np.arange(len(row_max)), row_max, width=1.0, label="largest |w| of the row (per-channel scale × 127)")
    ax.axhline(row_max[0], color="C3", label="largest |w| of the tensor (per-tensor scale × 127)")
    ax.set(title=f"Weight range of each output channel of {name}, sorted", xlabel="output channel (sorted)",
           ylabel="largest |w|")
    ax.legend()
    fig.tight_layout()
    return fig


def speculative_widget(acceptance: float = 0.7, k: int = 4, draft_cost: float = 0.1) -> LessonWidget:
    """Sliders for the acceptance rate a, k and the draft's cost per token relative to the target's call; reads out
    the expected tokens per target call and the speed-up over plain decoding, and plots both against k.

    ``.controls``: ``"acceptance"``, ``"k"``, ``"draft_cost"``; ``.state``: those, ``"tokens_per_call"``,
    ``"speedup"``, ``"best_k"`` (the k of the largest speed-up, 1 … 16) and the curves over k.
    Speed-up = tokens per call / (1 + k · draft cost), counting a target call over k + 1 tokens as one plain step.
    """
    controls = {
        "acceptance": widgets.FloatSlider(value=acceptance, min=0.0, max=0.99, step=0.01, description="acceptance a"),
        "k": widgets.IntSlider(value=k, min=1, max=16, description="k"),
        "draft_cost": widgets.FloatSlider(value=draft_cost, min=0.0, max=1.0, step=0.01,
                                          description="draft cost / target call"),
    }

    def compute(values: dict[str, Any]) -> State:
        a, cost = values["acceptance"], values["draft_cost"]
        ks = np.arange(1, 17)
        per_call = np.array([expected_tokens_per_call(a, int(kk)) for kk in ks])
        speedups = per_call / (1 + ks * cost)
        chosen = values["k"] - 1
        return {**values, "ks": ks, "per_call": per_call, "speedups": speedups,
                "tokens_per_call": float(per_call[chosen]), "speedup": float(speedups[chosen]),
                "best_k": int(ks[speedups.argmax()])}

    def draw(state: State, figure: Figure) -> None:
        left, right = figure.subplots(1, 2)
        left.plot(state["ks"], state["per_call"], "o-", markersize=3)
        left.plot(state["k"], state["tokens_per_call"], "o", color="C3")
        left.set(title="tokens per target call", xlabel="k (proposals per round)", ylabel="tokens")
        right.plot(state["ks"], state["speedups"], "o-", markersize=3)
        right.axhline(1.0, color="grey", linestyle=":")
        right.plot(state["k"], state["speedup"], "o", color="C3")
        right.set(title="speed-up over plain decoding", xlabel="k (proposals per round)", ylabel="speed-up (×)")

    readout = ("k = {k}: <b>{tokens_per_call:.2f}</b> tokens per target call, expected speed-up "
               "<b>{speedup:.2f}×</b>; the best k here is {best_k}")
    return LessonWidget(controls, compute, readout, draw, figsize=(8.0, 3.0))
