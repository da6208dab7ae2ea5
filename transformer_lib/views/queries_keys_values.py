"""Lesson 03 widget: the attention weights of a short sentence, with the √d_k scale, temperature and query live."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..attention import entropy_bits, scaled_dot_product_attention
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
