"""Lesson 02 widget: one query scored against labelled keys, softmax with a temperature, weights as bars."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from ..attention import softmax
from .plots import bar_chart


def entropy_bits(weights: torch.Tensor) -> float:
    """Entropy of one weight distribution (n,) in bits: 0 when all weight is on one key, log2(n) when uniform."""
    positive = weights[weights > 0]
    return float(-(positive * positive.log2()).sum())


def attention_scores_widget(
    words: Sequence[str],
    vectors: torch.Tensor,
    query_word: str | None = None,
    temperature: float = 1.0,
) -> widgets.VBox:
    """Pick a query word and a temperature; see its dot-product scores with every word and the softmax weights.

    ``vectors`` (n, d) holds one vector per word of ``words``; each word is both a possible query and a key.
    The weights are ``softmax(scores / temperature)``. The returned box exposes ``.controls`` (``"query"``
    dropdown, ``"temperature"`` slider) and ``.state`` (``"query"``, ``"temperature"``, ``"scores"`` (n,),
    ``"weights"`` (n,), ``"largest_weight"``, ``"entropy_bits"``), updated on every change.
    """
    if vectors.dim() != 2 or vectors.shape[0] != len(words):
        raise ValueError(
            f"expected one vector per word: {len(words)} words and vectors of shape {tuple(vectors.shape)}; "
            "pass vectors of shape (len(words), d)."
        )
    controls = {
        "query": widgets.Dropdown(options=list(words), value=query_word or words[0], description="query"),
        "temperature": widgets.FloatLogSlider(
            value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature"
        ),
    }
    readout = widgets.HTML()
    plot = widgets.Output()
    box = widgets.VBox([*controls.values(), readout, plot])
    box.controls = controls
    box.state = {}
    keys = vectors.to(torch.float64)  # (n, d)

    def update(_change: object = None) -> None:
        query = keys[list(words).index(controls["query"].value)]  # (d,)
        scores = keys @ query  # (n,)
        weights = softmax(scores / controls["temperature"].value)  # (n,)
        box.state.update(
            query=controls["query"].value,
            temperature=controls["temperature"].value,
            scores=scores,
            weights=weights,
            largest_weight=float(weights.max()),
            entropy_bits=entropy_bits(weights),
        )
        readout.value = (
            f"scores {[round(s, 2) for s in scores.tolist()]} → softmax(scores / {box.state['temperature']:.2f})"
            f": largest weight <b>{box.state['largest_weight']:.3f}</b>, "
            f"entropy <b>{box.state['entropy_bits']:.2f}</b> bits"
        )
        with plot:
            plot.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(words) + 1.5), 3.0))
            bar_chart(
                weights,
                list(words),
                title=f"Attention weights of '{box.state['query']}' (T = {box.state['temperature']:.2f})",
                xlabel="key word",
                ylabel="weight",
                ax=ax,
                ylim=(0.0, 1.1),
            )
            plt.show()
            plt.close(fig)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
