"""Lesson 08 plot and widget: where the parameters of the full model are, and the three attention masks of an
encoder-decoder model for a padded sentence pair."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..model import encoder_decoder_masks
from .plots import heatmap
from .widget import LessonWidget, State

PAD = "<pad>"


def plot_parameter_breakdown(breakdowns: dict[str, dict[str, int]], title: str = "Where the parameters are") -> Axes:
    """Horizontal bars, one group of bars per model: millions of parameters in each component.

    ``breakdowns`` maps a model's name to its ``parameter_breakdown`` (component -> number of parameters).
    """
    _, ax = plt.subplots(figsize=(8, 3.5))
    components = list(next(iter(breakdowns.values())))
    height = 0.8 / len(breakdowns)
    for i, (model_name, counts) in enumerate(breakdowns.items()):
        positions = [c + i * height for c in range(len(components))]
        ax.barh(positions, [counts.get(c, 0) / 1e6 for c in components], height=height, label=model_name)
    ax.set_yticks([c + height * (len(breakdowns) - 1) / 2 for c in range(len(components))], components)
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    ax.set_ylabel("component")
    ax.set_title(title)
    ax.legend()
    return ax


def encoder_decoder_masks_widget(
    source: Sequence[str] = ("the", "cat", "sat", "on", "the", "mat", "<eos>"),
    target: Sequence[str] = ("<bos>", "die", "Katze", "saß", "auf", "der", "Matte"),
    lengths: tuple[int, int] = (5, 4),
    padding: tuple[int, int] = (2, 2),
    max_padding: int = 3,
) -> LessonWidget:
    """One sentence pair, each padded at the end; sliders for their lengths and padding; the three attention masks
    of a teacher-forced pass side by side, with token labels (``encoder_decoder_masks``).

    The source is ``source[:S]`` plus ``<pad>`` tokens, the decoder input ``target[:T]`` plus ``<pad>`` tokens.
    ``.controls``: ``"source_length"``, ``"source_padding"``, ``"target_length"``, ``"target_padding"``;
    ``.state``: ``"masks"`` (name -> (T_q, T_k) bool), ``"source_labels"``, ``"target_labels"``, ``"allowed"`` (name ->
    allowed query-key pairs), ``"pairs"`` (name -> all pairs), ``"padding_only"`` (pairs the target padding mask hides
    beyond the causal mask) and ``"pad_rows"`` (how many of those lie in rows of ``<pad>`` queries: all of them).
    """
    controls = {
        "source_length": widgets.IntSlider(value=lengths[0], min=1, max=len(source), description="source length"),
        "source_padding": widgets.IntSlider(value=padding[0], min=0, max=max_padding, description="source padding"),
        "target_length": widgets.IntSlider(value=lengths[1], min=1, max=len(target), description="target length"),
        "target_padding": widgets.IntSlider(value=padding[1], min=0, max=max_padding, description="target padding"),
    }

    def compute(values: dict[str, Any]) -> State:
        s_real, s_pad = values["source_length"], values["source_padding"]
        t_real, t_pad = values["target_length"], values["target_padding"]
        src = torch.tensor([[i + 1 for i in range(s_real)] + [0] * s_pad])  # (1, S), 0 = <pad>
        tgt = torch.tensor([[i + 1 for i in range(t_real)] + [0] * t_pad])  # (1, T)
        masks = {name: mask[0] for name, mask in encoder_decoder_masks(src, tgt, pad_id=0).items()}
        hidden_by_padding = masks["causal mask alone"] & ~masks["decoder self-attention"]  # (T, T)
        shown = {name: masks[name] for name in ("encoder self-attention", "decoder self-attention", "cross-attention")}
        return {
            "masks": shown,
            "source_labels": [*source[:s_real], *[PAD] * s_pad],
            "target_labels": [*target[:t_real], *[PAD] * t_pad],
            "allowed": {name: int(mask.sum()) for name, mask in shown.items()},
            "pairs": {name: mask.numel() for name, mask in shown.items()},
            "padding_only": int(hidden_by_padding.sum()),
            "pad_rows": int(hidden_by_padding[t_real:].sum()),
        }

    def draw(state: State, figure: Figure) -> None:
        src_labels, tgt_labels = state["source_labels"], state["target_labels"]
        axes = figure.subplots(1, 3, width_ratios=[len(src_labels), len(tgt_labels), len(src_labels)])
        rows_and_columns = {"encoder self-attention": (src_labels, src_labels, "source key", "source query"),
                            "decoder self-attention": (tgt_labels, tgt_labels, "target key", "target query"),
                            "cross-attention": (tgt_labels, src_labels, "source key (memory)", "target query")}
        for ax, (name, mask) in zip(axes, state["masks"].items(), strict=True):
            rows, columns, xlabel, ylabel = rows_and_columns[name]
            heatmap(mask.float(), rows, columns, title=f"{name}\n{state['allowed'][name]} of {state['pairs'][name]} "
                    "allowed", xlabel=xlabel, ylabel=ylabel, ax=ax, annotate=False, cmap="Blues", vmin=0.0,
                    vmax=1.0, colorbar=False)
            ax.tick_params(axis="x", labelrotation=90)

    readout = ("allowed query-key pairs (dark): encoder <b>{allowed[encoder self-attention]}</b> of "
               "{pairs[encoder self-attention]}, decoder <b>{allowed[decoder self-attention]}</b> of "
               "{pairs[decoder self-attention]}, cross <b>{allowed[cross-attention]}</b> of "
               "{pairs[cross-attention]}; the target padding mask hides {padding_only} pairs beyond the causal mask, "
               "{pad_rows} of them in rows of &lt;pad&gt; queries")
    return LessonWidget(controls, compute, readout, draw, figsize=(12.0, 4.2))
