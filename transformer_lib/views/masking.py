"""Lesson 05 views: masks and masked attention weights as heatmaps, and a widget to combine masks."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from .plots import heatmap

MASK_KINDS = ("none", "causal", "padding", "both")
PAD = "<pad>"


def build_mask(kind: str, tokens: torch.Tensor, pad_id: int) -> torch.Tensor | None:
    """The mask of one kind for token ids (batch, T): None, (T, T), (batch, 1, 1, T) or (batch, 1, T, T)."""
    if kind not in MASK_KINDS:
        raise ValueError(f"unknown mask kind {kind!r}: choose one of {MASK_KINDS}")
    length = tokens.shape[1]
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(length)
    if kind == "padding":
        return padding_mask(tokens, pad_id)
    return causal_mask(length) & padding_mask(tokens, pad_id)


def masking_widget(
    words: Sequence[str] = ("the", "cat", "sat", "on", "the", "mat"),
    lengths: tuple[int, int] = (6, 3),
    kind: str = "both",
    seed: int = 0,
) -> widgets.VBox:
    """Two sentences padded into one batch; choose a mask and their lengths, see each one's attention weights.

    Sentence b is ``words[:length]`` padded with ``<pad>`` to the longer length. Queries and keys are fixed random
    vectors (drawn on the CPU with ``seed``). ``.controls``: ``"mask"``, ``"length_a"``, ``"length_b"``;
    ``.state``: ``"kind"``, ``"tokens"`` (2, T), ``"weights"`` (2, T, T), ``"labels"`` (two lists of T words).
    """
    generator = torch.Generator().manual_seed(seed)
    vectors = torch.randn(len(words), 4, generator=generator, dtype=torch.float64)  # (n, d)
    controls = {
        "mask": widgets.Dropdown(options=list(MASK_KINDS), value=kind, description="mask"),
        "length_a": widgets.IntSlider(value=lengths[0], min=1, max=len(words), description="length a"),
        "length_b": widgets.IntSlider(value=lengths[1], min=1, max=len(words), description="length b"),
    }
    plot = widgets.Output()
    box = widgets.VBox([*controls.values(), plot])
    box.controls = controls
    box.state = {}

    def update(_change: object = None) -> None:
        sentence_lengths = (controls["length_a"].value, controls["length_b"].value)
        length = max(sentence_lengths)
        tokens = torch.tensor([[i + 1 if i < n else 0 for i in range(length)] for n in sentence_lengths])
        x = torch.stack([vectors[:length]] * 2)[:, None]  # (2, 1, T, d): one head; <pad> rows hold any vector
        mask = build_mask(controls["mask"].value, tokens, pad_id=0)
        _, weights = scaled_dot_product_attention(x, x, x, mask=mask)  # (2, 1, T, T)
        weights = weights[:, 0]  # (2, T, T)
        labels = [[words[i] if i < n else PAD for i in range(length)] for n in sentence_lengths]
        box.state.update(kind=controls["mask"].value, tokens=tokens, weights=weights, labels=labels)
        with plot:
            plot.clear_output(wait=True)
            fig, axes = plt.subplots(1, 2, figsize=(12, 4))
            for name, ax, row_labels, w in zip("ab", axes, labels, weights, strict=True):
                heatmap(w, row_labels, row_labels, title=f"sentence {name}, mask: {box.state['kind']}",
                        xlabel="key", ylabel="query", ax=ax, vmin=0.0, vmax=1.0)
            fig.tight_layout()
            plt.show()
            plt.close(fig)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box
