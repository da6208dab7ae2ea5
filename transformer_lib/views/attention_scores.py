"""Lesson 02 widget: one query scored against labelled keys, softmax with a temperature, weights as bars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..attention import entropy_bits, softmax
from .plots import bar_chart
from .widget import LessonWidget, State


def attention_scores_widget(
    words: Sequence[str],
    vectors: torch.Tensor,
    query_word: str | None = None,
    temperature: float = 1.0,
) -> LessonWidget:
    """Pick a query word and a temperature; see its dot-product scores with every word and the softmax weights.

    ``vectors`` (n, d) holds one vector per word of ``words``; each word is both a possible query and a key.
    The weights are ``softmax(scores / temperature)``. ``.controls``: ``"query"`` (dropdown), ``"temperature"``
    (slider); ``.state``: ``"query"``, ``"temperature"``, ``"scores"`` (n,), ``"weights"`` (n,),
    ``"largest_weight"``, ``"entropy_bits"`` (and ``"rounded_scores"`` for the read-out), updated on every change.
    """
    if vectors.dim() != 2 or vectors.shape[0] != len(words):
        raise ValueError(
            f"expected one vector per word: {len(words)} words and vectors of shape {tuple(vectors.shape)}; "
            "pass vectors of shape (len(words), d)."
        )
    keys = vectors.to(torch.float64)  # (n, d)
    controls = {
        "query": widgets.Dropdown(options=list(words), value=query_word or words[0], description="query"),
        "temperature": widgets.FloatLogSlider(
            value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature"
        ),
    }

    def compute(values: dict[str, Any]) -> State:
        scores = keys @ keys[list(words).index(values["query"])]  # (n,)
        weights = softmax(scores / values["temperature"])  # (n,)
        return {**values, "scores": scores, "rounded_scores": [round(s, 2) for s in scores.tolist()],
                "weights": weights, "largest_weight": float(weights.max()), "entropy_bits": entropy_bits(weights)}

    def draw(state: State, figure: Figure) -> None:
        bar_chart(state["weights"], list(words), ax=figure.subplots(), ylim=(0.0, 1.1),
                  title=f"Attention weights of '{state['query']}' (T = {state['temperature']:.2f})",
                  xlabel="key word", ylabel="weight")

    readout = ("scores {rounded_scores} → softmax(scores / {temperature:.2f}): largest weight "
               "<b>{largest_weight:.3f}</b>, entropy <b>{entropy_bits:.2f}</b> bits")
    return LessonWidget(controls, compute, readout, draw, figsize=(max(4.0, 0.9 * len(words) + 1.5), 3.0))
