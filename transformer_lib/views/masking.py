"""Lesson 05 widget: edit one token of a padded batch and see which attention outputs move under each mask."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..attention import scaled_dot_product_attention
from ..masks import MASK_KINDS, build_mask
from .plots import bar_chart
from .widget import LessonWidget, State

PAD = "<pad>"
MOVED = 1e-9  # an output whose largest change is above this has moved; float64 round-off stays far below it


def masking_widget(
    words: Sequence[str] = ("the", "cat", "sat", "on", "the", "mat"),
    short_length: int = 3,
    kind: str = "both",
    position: int = 4,
    seed: int = 0,
) -> LessonWidget:
    """A batch of two sentences; replace the token at one position and see which outputs change, for each mask.

    Sentence a is ``words`` (T tokens); sentence b is its first ``short_length`` words, padded with ``<pad>`` to T.
    The ``position`` slider replaces the token at that position, in both sentences, by another token's vector (in b
    past its end, that is the ``<pad>`` slot's vector). Token vectors and the maps W^Q, W^K, W^V are fixed random
    numbers drawn on the CPU with ``seed``; a word that occurs twice has one vector. ``.controls``: ``"mask"``,
    ``"position"``; ``.state``: ``"kind"``, ``"position"``, ``"labels"`` (two lists of T words), ``"tokens"``
    (2, T) ids (0 = ``<pad>``), ``"weights"`` (2, T, T) before the edit, ``"change"`` (2, T) the largest change of
    each output, and ``"moved_a"``, ``"moved_b"``: the positions of real tokens whose output changed.
    """
    length = len(words)
    if not 1 <= short_length <= length:
        raise ValueError(f"short_length={short_length} must be between 1 and len(words)={length}")
    vocabulary = [PAD, *dict.fromkeys(words)]  # id 0 is <pad>, then each distinct word once
    generator = torch.Generator().manual_seed(seed)
    d = 4
    vectors = torch.randn(len(vocabulary), d, generator=generator, dtype=torch.float64)  # (vocab, d)
    edited_vector = torch.randn(d, generator=generator, dtype=torch.float64)  # (d,) the token put in by an edit
    w_q, w_k, w_v = (torch.randn(d, d, generator=generator, dtype=torch.float64) for _ in range(3))  # (d, d) each
    ids = [vocabulary.index(word) for word in words]
    tokens = torch.tensor([ids, ids[:short_length] + [0] * (length - short_length)])  # (2, T)
    labels = [[vocabulary[i] for i in row] for row in tokens.tolist()]
    x = vectors[tokens]  # (2, T, d)

    def attend(inputs: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        heads = inputs[:, None]  # (2, 1, T, d): one head
        output, weights = scaled_dot_product_attention(heads @ w_q, heads @ w_k, heads @ w_v, mask=mask)
        return output[:, 0], weights[:, 0]  # (2, T, d), (2, T, T)

    controls = {
        "mask": widgets.Dropdown(options=list(MASK_KINDS), value=kind, description="mask"),
        "position": widgets.IntSlider(value=position, min=0, max=length - 1, description="edit position"),
    }

    def compute(values: dict[str, Any]) -> State:
        mask = build_mask(values["mask"], tokens, pad_id=0)
        edited = x.clone()
        edited[:, values["position"]] = edited_vector  # the same new token in both sentences
        before, weights = attend(x, mask)
        after, _ = attend(edited, mask)
        change = (after - before).abs().amax(dim=-1)  # (2, T) the largest change of each output
        moved = [[i for i in range(length) if change[s, i] > MOVED and tokens[s, i] != 0] for s in range(2)]
        return {"kind": values["mask"], "position": values["position"], "labels": labels, "tokens": tokens,
                "weights": weights, "change": change, "moved_a": moved[0], "moved_b": moved[1],
                "edited_a": labels[0][values["position"]], "edited_b": labels[1][values["position"]]}

    def draw(state: State, figure: Figure) -> None:
        for s, ax in enumerate(figure.subplots(1, 2)):
            row_labels = [f"{i}: {word}" for i, word in enumerate(state["labels"][s])]
            bar_chart(state["change"][s], row_labels,
                      title=f"sentence {'ab'[s]}: '{state['labels'][s][state['position']]}' at {state['position']} "
                            f"edited, mask {state['kind']}",
                      xlabel="output position", ylabel="largest change of the output", ax=ax)
            for i, bar in enumerate(ax.patches):
                bar.set_color("tab:red" if i == state["position"] else "tab:grey" if tokens[s, i] == 0 else "tab:blue")

    readout = ("editing position {position} ('{edited_a}' in a, '{edited_b}' in b) under the mask <b>{kind}</b> "
               "moves the outputs of the real tokens at <b>{moved_a}</b> in sentence a and <b>{moved_b}</b> in "
               "sentence b (red: the edited position, grey: &lt;pad&gt;)")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 3.6))
