"""Lesson 05 widget: two padded sentences in one batch; combine masks and see each sentence's attention weights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..attention import scaled_dot_product_attention
from ..masks import MASK_KINDS, build_mask
from .plots import heatmap
from .widget import LessonWidget, State

PAD = "<pad>"


def masking_widget(
    words: Sequence[str] = ("the", "cat", "sat", "on", "the", "mat"),
    lengths: tuple[int, int] = (6, 3),
    kind: str = "both",
    seed: int = 0,
) -> LessonWidget:
    """Two sentences padded into one batch; choose a mask and their lengths, see each one's attention weights.

    Sentence b is ``words[:length]`` padded with ``<pad>`` to the longer length. Queries and keys are fixed random
    vectors (drawn on the CPU with ``seed``). ``.controls``: ``"mask"``, ``"length_a"``, ``"length_b"``;
    ``.state``: ``"kind"``, ``"tokens"`` (2, T), ``"weights"`` (2, T, T), ``"labels"`` (two lists of T words),
    ``"allowed"`` (how many of the ``"pairs"`` = T² query-key pairs of each sentence the mask lets through).
    """
    generator = torch.Generator().manual_seed(seed)
    vectors = torch.randn(len(words), 4, generator=generator, dtype=torch.float64)  # (n, d)
    controls = {
        "mask": widgets.Dropdown(options=list(MASK_KINDS), value=kind, description="mask"),
        "length_a": widgets.IntSlider(value=lengths[0], min=1, max=len(words), description="length a"),
        "length_b": widgets.IntSlider(value=lengths[1], min=1, max=len(words), description="length b"),
    }

    def compute(values: dict[str, Any]) -> State:
        sentence_lengths = (values["length_a"], values["length_b"])
        length = max(sentence_lengths)
        tokens = torch.tensor([[i + 1 if i < n else 0 for i in range(length)] for n in sentence_lengths])  # (2, T)
        x = torch.stack([vectors[:length]] * 2)[:, None]  # (2, 1, T, d): one head; <pad> rows hold any vector
        mask = build_mask(values["mask"], tokens, pad_id=0)
        _, weights = scaled_dot_product_attention(x, x, x, mask=mask)  # (2, 1, T, T)
        everything = torch.ones(2, 1, length, length, dtype=torch.bool)  # (2, 1, T, T)
        allowed = everything if mask is None else everything & mask  # (2, 1, T, T)
        labels = [[words[i] if i < n else PAD for i in range(length)] for n in sentence_lengths]
        return {"kind": values["mask"], "tokens": tokens, "weights": weights[:, 0], "labels": labels,
                "allowed": allowed.sum(dim=(1, 2, 3)).tolist(), "pairs": length * length}  # weights (2, T, T)

    def draw(state: State, figure: Figure) -> None:
        for name, ax, labels, w in zip("ab", figure.subplots(1, 2), state["labels"], state["weights"], strict=True):
            heatmap(w, labels, labels, title=f"sentence {name}, mask: {state['kind']}", xlabel="key",
                    ylabel="query", ax=ax, vmin=0.0, vmax=1.0)

    readout = ("mask <b>{kind}</b>: sentence a lets {allowed[0]} of its {pairs} query-key pairs through, sentence b "
               "{allowed[1]}; blocked pairs get weight 0")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 4.0))
