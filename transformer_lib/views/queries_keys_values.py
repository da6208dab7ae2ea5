"""Lesson 03 widgets: what the √d_k scale is for (``scaling_widget``), and the attention weights of a short sentence
with the scale, a temperature and the query live (``attention_heatmap_widget``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..attention import entropy_bits, scaled_dot_product_attention, softmax, unit_variance_scores
from .plots import bar_chart, heatmap
from .widget import LessonWidget, State


def attention_heatmap_widget(
    words: Sequence[str],
    queries: torch.Tensor,
    keys: torch.Tensor,
    query_word: str | None = None,
) -> LessonWidget:
    """Heatmap of ``softmax(Q Kᵀ · scale / temperature)`` for a labelled sentence, and one query's row as bars.

    ``queries`` and ``keys`` are (T, d_k), one row per word of ``words``. ``.controls``: ``"scale"`` (checkbox:
    divide by √d_k or not), ``"temperature"`` (slider) and ``"query"`` (dropdown: the row to inspect). ``.state``:
    ``"weights"`` (T, T), ``"query"``, ``"row"`` (T,) for that query, ``"scale"`` (the factor used),
    ``"largest_weight"`` and ``"entropy_bits"`` of that row (``"uniform_bits"`` for equal weights), updated on every
    change.
    """
    if queries.dim() != 2 or queries.shape != keys.shape or queries.shape[0] != len(words):
        raise ValueError(
            f"expected queries and keys of shape (T, d_k) with T = {len(words)} words; got "
            f"{tuple(queries.shape)} and {tuple(keys.shape)}."
        )
    d_k = queries.shape[-1]
    q = queries.to(torch.float64)  # (T, d_k)
    k = keys.to(torch.float64)  # (T, d_k)
    uniform_bits = math.log2(len(words))  # the entropy of equal weights on every word
    controls = {
        "scale": widgets.Checkbox(value=True, description=f"divide by √d_k = {math.sqrt(d_k):.2f}"),
        "temperature": widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.05, description="temperature"),
        "query": widgets.Dropdown(options=list(words), value=query_word or words[0], description="query"),
    }

    def compute(values: dict[str, Any]) -> State:
        scale = (1.0 / math.sqrt(d_k) if values["scale"] else 1.0) / values["temperature"]
        _, weights = scaled_dot_product_attention(q, k, k, scale=scale)  # (T, T); the values are not needed here
        row_index = list(words).index(values["query"])
        row = weights[row_index]  # (T,)
        return {"weights": weights, "query": values["query"], "row_index": row_index, "row": row, "scale": scale,
                "largest_weight": float(row.max()), "entropy_bits": entropy_bits(row), "uniform_bits": uniform_bits}

    def draw(state: State, figure: Figure) -> None:
        left, right = figure.subplots(1, 2, width_ratios=[1.2, 1])
        heatmap(state["weights"], list(words), list(words), title="Attention weights (rows sum to 1)",
                xlabel="key", ylabel="query", ax=left, vmin=0.0, vmax=1.0)
        left.add_patch(Rectangle((-0.5, state["row_index"] - 0.5), len(words), 1, fill=False, ec="red", lw=2))
        bar_chart(state["row"], list(words), title=f"Row of '{state['query']}'", xlabel="key", ylabel="weight",
                  ax=right, ylim=(0.0, 1.1))

    readout = ("scores multiplied by <b>{scale:.3f}</b>; '{query}' gives its largest weight "
               "<b>{largest_weight:.3f}</b>, entropy <b>{entropy_bits:.2f}</b> bits (uniform: {uniform_bits:.2f})")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 3.8))


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
