"""Lesson 03 widget: the attention weights of a short sentence, with the √d_k scale, temperature and query live."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from ..attention import scaled_dot_product_attention
from .attention_scores import entropy_bits
from .plots import bar_chart, heatmap


def attention_heatmap_widget(
    words: Sequence[str],
    queries: torch.Tensor,
    keys: torch.Tensor,
    query_word: str | None = None,
) -> widgets.VBox:
    """Heatmap of ``softmax(Q Kᵀ · scale / temperature)`` for a labelled sentence, and one query's row as bars.

    ``queries`` and ``keys`` are (T, d_k), one row per word of ``words``. Controls (``.controls``): ``"scale"``
    (checkbox: divide by √d_k or not), ``"temperature"`` (slider) and ``"query"`` (dropdown: the row to inspect).
    ``.state`` holds ``"weights"`` (T, T), ``"row"`` (T,) for the inspected query, ``"scale"`` (the factor used),
    ``"largest_weight"`` and ``"entropy_bits"`` of that row, updated on every change.
    """
    if queries.dim() != 2 or queries.shape != keys.shape or queries.shape[0] != len(words):
        raise ValueError(
            f"expected queries and keys of shape (T, d_k) with T = {len(words)} words; got "
            f"{tuple(queries.shape)} and {tuple(keys.shape)}."
        )
    d_k = queries.shape[-1]
    controls = {
        "scale": widgets.Checkbox(value=True, description=f"divide by √d_k = {math.sqrt(d_k):.2f}"),
        "temperature": widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.05, description="temperature"),
        "query": widgets.Dropdown(options=list(words), value=query_word or words[0], description="query"),
    }
    readout = widgets.HTML()
    plot = widgets.Output()
    box = widgets.VBox([*controls.values(), readout, plot])
    box.controls = controls
    box.state = {}
    q = queries.to(torch.float64)  # (T, d_k)
    k = keys.to(torch.float64)  # (T, d_k)

    def update(_change: object = None) -> None:
        scale = (1.0 / math.sqrt(d_k) if controls["scale"].value else 1.0) / controls["temperature"].value
        _, weights = scaled_dot_product_attention(q, k, k, scale=scale)  # (T, T); values unused here
        row_index = list(words).index(controls["query"].value)
        row = weights[row_index]  # (T,)
        box.state.update(
            weights=weights,
            row=row,
            scale=scale,
            largest_weight=float(row.max()),
            entropy_bits=entropy_bits(row),
        )
        readout.value = (
            f"scores multiplied by <b>{scale:.3f}</b>; '{controls['query'].value}' gives its largest weight "
            f"<b>{box.state['largest_weight']:.3f}</b>, entropy <b>{box.state['entropy_bits']:.2f}</b> bits "
            f"(uniform: {math.log2(len(words)):.2f})"
        )
        with plot:
            plot.clear_output(wait=True)
            fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), width_ratios=[1.2, 1])
            heatmap(weights, list(words), list(words), title="Attention weights (rows sum to 1)",
                    xlabel="key", ylabel="query", ax=left, vmin=0.0, vmax=1.0)
            left.add_patch(plt.Rectangle((-0.5, row_index - 0.5), len(words), 1, fill=False, ec="red", lw=2))
            bar_chart(row, list(words), title=f"Row of '{controls['query'].value}'", xlabel="key",
                      ylabel="weight", ax=right, ylim=(0.0, 1.1))
            fig.tight_layout()
            plt.show()
            plt.close(fig)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
