"""Lesson 03 widget: what the √d_k scale is for (``scaling_widget``)."""

from __future__ import annotations

import math
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from ..attention import softmax, unit_variance_scores
from .plots import bar_chart
from .widget import LessonWidget, State


def scaling_widget(d_k: int = 64, max_d_k: int = 512, num_queries: int = 128, num_keys: int = 16,
                   seed: int = 0) -> LessonWidget:
    """Random unit-variance queries and keys of ``d_k`` components: the spread of their scores and one softmax row.

    ``.controls``: ``"d_k"`` (slider, 1 … ``max_d_k``) and ``"scale"`` (checkbox: divide the scores by √d_k).
    ``.state``: ``"d_k"``, ``"scores"`` (num_queries, num_keys), the scores softmax receives; ``"std"`` (their
    standard deviation) beside ``"sqrt_d_k"``; ``"weights"`` (num_queries, num_keys); ``"row"`` (num_keys,),
    query 0's weights; ``"largest_weight"`` (its largest) and ``"mean_largest"`` (the largest weight of each row,
    averaged over the queries), beside ``"uniform"`` = 1 / num_keys. The scores come from
    ``transformer_lib.unit_variance_scores``, so raising d_k adds components to the same vectors.
    """
    controls = {
        "d_k": widgets.IntSlider(value=d_k, min=1, max=max_d_k, description="d_k"),
        "scale": widgets.Checkbox(value=False, description="divide by √d_k"),
    }
    keys = [str(j) for j in range(num_keys)]
    limit = 4 * math.sqrt(max_d_k)  # the histogram's range: 4 standard deviations at the largest d_k

    def compute(values: dict[str, Any]) -> State:
        width = values["d_k"]
        raw = unit_variance_scores(width, num_queries, num_keys, seed=seed, max_d_k=max_d_k)  # (queries, keys)
        scores = raw / math.sqrt(width) if values["scale"] else raw
        weights = softmax(scores)  # (num_queries, num_keys), each row sums to 1
        return {"d_k": width, "scores": scores, "std": float(scores.std()), "sqrt_d_k": math.sqrt(width),
                "scaled": values["scale"], "weights": weights, "row": weights[0],
                "largest_weight": float(weights[0].max()), "mean_largest": float(weights.max(-1).values.mean()),
                "uniform": 1 / num_keys}

    def draw(state: State, figure: Figure) -> None:
        left, right = figure.subplots(1, 2)
        left.hist(state["scores"].flatten().numpy(), bins=80, range=(-limit, limit), color="tab:blue")
        left.set_xlim(-limit, limit)
        divided = " / √d_k" if state["scaled"] else ""
        left.set_title(f"{state['scores'].numel()} scores q·k{divided}, d_k = {state['d_k']}: std {state['std']:.2f}")
        left.set_xlabel(f"score q·k{divided}")
        left.set_ylabel("count")
        bar_chart(state["row"], keys, title=f"softmax of query 0's {num_keys} scores (dashed: 1/{num_keys})",
                  xlabel="key", ylabel="weight", ax=right, annotate=False, ylim=(0.0, 1.05))
        right.axhline(state["uniform"], color="grey", linestyle="--")  # equal weights on every key

    readout = ("d_k = {d_k}: the scores softmax receives have standard deviation <b>{std:.2f}</b> "
               "(√d_k = {sqrt_d_k:.2f}); query 0's largest weight <b>{largest_weight:.3f}</b>, the mean over all "
               f"{num_queries} queries <b>{{mean_largest:.3f}}</b> (uniform: {{uniform:.3f}})")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 3.6))
