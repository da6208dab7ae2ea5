"""Lesson 06 views: one heatmap per head, and a widget to inspect a head and a query token."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .plots import bar_chart, heatmap


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


def head_widget(weights: torch.Tensor, words: Sequence[str], query: str | None = None) -> widgets.VBox:
    """Pick a head and a query token: the head's heatmap and that query's attention row update.

    ``weights``: (heads, T, T) self-attention weights over ``words``. ``.controls``: ``"head"``, ``"query"``;
    ``.state``: ``"head"``, ``"query"``, ``"row"`` (T,), ``"top_key"`` (the key the query attends to most).
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
    plot = widgets.Output()
    box = widgets.VBox([*controls.values(), plot])
    box.controls = controls
    box.state = {}

    def update(_change: object = None) -> None:
        h, q = controls["head"].value, controls["query"].value
        row = weights[h, q]  # (T,)
        box.state.update(head=h, query=words[q], row=row, top_key=words[int(row.argmax())])
        with plot:
            plot.clear_output(wait=True)
            fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
            heatmap(weights[h], words, words, title=f"head {h}", xlabel="key", ylabel="query", ax=left,
                    vmin=0.0, vmax=1.0)
            bar_chart(row, words, title=f"head {h}: where '{words[q]}' (query {q}) looks", xlabel="key",
                      ylabel="weight", ax=right, ylim=(0.0, 1.1))
            fig.tight_layout()
            plt.show()
            plt.close(fig)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
