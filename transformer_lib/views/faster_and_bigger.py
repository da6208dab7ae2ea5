"""Plots and the widget of lesson 14: speculative decoding's acceptance against k, and int8 weight ranges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..speculative import expected_speedup, expected_tokens_per_call
from .widget import LessonWidget, State


def acceptance_plot(ks: Sequence[int], acceptance: Sequence[float], share_kept: Sequence[float],
                    tokens_per_call: Sequence[float], predicted: Sequence[float]) -> Figure:
    """Two panels against k: the acceptance rate α (kept over examined proposals) beside the share of all proposals
    kept; and the measured tokens per target call beside ``predicted``, what independent acceptance at each k's α
    gives (``expected_tokens_per_call``)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.plot(ks, acceptance, "o-", label="α: kept / examined")
    left.plot(ks, share_kept, "s--", label="kept / proposed (unexamined counted as rejected)")
    left.set(title="Acceptance against k", xlabel="k (tokens proposed per round)", ylabel="rate", ylim=(0, 1.05))
    left.legend(loc="lower left")
    right.plot(ks, tokens_per_call, "o-", label="measured")
    right.plot(ks, predicted, "x--", label="1 + α + … + α^k (independent acceptance)")
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


def speculative_widget(acceptance: float = 0.7, k: int = 4, draft_cost: float = 0.1,
                       verify_costs: Sequence[float] | None = None) -> LessonWidget:
    """Sliders for the acceptance rate α, k and the draft's cost per call relative to the target's (c); reads out
    the expected tokens per target call and the speed-up over plain decoding, and plots both against k.

    ``.controls``: ``"acceptance"``, ``"k"``, ``"draft_cost"``; ``.state``: those, ``"tokens_per_call"``,
    ``"speedup"``, ``"best_k"`` (the k of the largest speed-up) and the curves over k.
    Speed-up = tokens per call / (k · c + v) (``expected_speedup``), with v a target pass over k + 1 tokens relative
    to a pass over one: ``verify_costs`` gives the measured v for k = 1, 2, …, and k ranges over those; without it,
    v = 1 (Leviathan et al.'s assumption) and k runs from 1 to 16.
    """
    costs = np.array(verify_costs if verify_costs is not None else [1.0] * 16, dtype=float)  # v for k = 1 … len
    controls = {
        "acceptance": widgets.FloatSlider(value=acceptance, min=0.0, max=0.99, step=0.01, description="acceptance α"),
        "k": widgets.IntSlider(value=k, min=1, max=len(costs), description="k"),
        "draft_cost": widgets.FloatSlider(value=draft_cost, min=0.0, max=1.0, step=0.01,
                                          description="draft cost c"),
    }

    def compute(values: dict[str, Any]) -> State:
        a, cost = values["acceptance"], values["draft_cost"]
        ks = np.arange(1, len(costs) + 1)
        per_call = np.array([expected_tokens_per_call(a, int(kk)) for kk in ks])
        speedups = np.array([expected_speedup(a, int(kk), cost, v) for kk, v in zip(ks, costs, strict=True)])
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
