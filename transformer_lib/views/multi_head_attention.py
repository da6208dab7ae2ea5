"""Lesson 06 views: one heatmap per head, and a widget to inspect a head and a query token."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .plots import bar_chart, heatmap
from .widget import LessonWidget, State


def plot_heads(weights: torch.Tensor, query_labels: Sequence[str], key_labels: Sequence[str],
               title: str = "Attention weights per head") -> Figure:
    """Draw weights (heads, T_q, T_k) as one labelled heatmap per head, side by side; return the figure."""
    heads = weights.shape[0]
    fig, axes = plt.subplots(1, heads, figsize=(4.2 * heads, 3.8), squeeze=False)
    for h, ax in enumerate(axes[0]):
        heatmap(weights[h], query_labels, key_labels, title=f"head {h}", xlabel="key", ylabel="query",
                ax=ax, vmin=0.0, vmax=1.0, colorbar=False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def head_widget(weights: torch.Tensor, words: Sequence[str], query: str | None = None) -> LessonWidget:
    """Pick a head and a query token: the head's heatmap and that query's attention row update.

    ``weights``: (heads, T, T) self-attention weights over ``words``. ``.controls``: ``"head"``, ``"query"``;
    ``.state``: ``"head"``, ``"query"`` (the word), ``"query_index"``, ``"row"`` (T,), ``"top_key"`` (the key the
    query attends to most) and its weight ``"largest_weight"``.
    """
    heads, length, _ = weights.shape
    if length != len(words):
        raise ValueError(f"weights of shape {tuple(weights.shape)} need {length} words, got {len(words)}")
    controls = {
        "head": widgets.IntSlider(value=0, min=0, max=heads - 1, description="head"),
        "query": widgets.Dropdown(  # options are (label, index) pairs: a word may occur twice
            options=[(w, i) for i, w in enumerate(words)],
            value=list(words).index(query) if query else 0,
            description="query",
        ),
    }

    def compute(values: dict[str, Any]) -> State:
        h, q = values["head"], values["query"]
        row = weights[h, q]  # (T,)
        top = int(row.argmax())
        return {"head": h, "query": words[q], "query_index": q, "row": row, "top_key": words[top],
                "largest_weight": float(row[top])}

    def draw(state: State, figure: Figure) -> None:
        h, q = state["head"], state["query_index"]
        left, right = figure.subplots(1, 2)
        heatmap(weights[h], words, words, title=f"head {h}", xlabel="key", ylabel="query", ax=left,
                vmin=0.0, vmax=1.0)
        bar_chart(state["row"], words, title=f"head {h}: where '{words[q]}' (query {q}) looks", xlabel="key",
                  ylabel="weight", ax=right, ylim=(0.0, 1.1))

    readout = ("head {head}: '{query}' (query {query_index}) gives its largest weight, <b>{largest_weight:.2f}</b>, "
               "to '{top_key}'")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 3.8))
