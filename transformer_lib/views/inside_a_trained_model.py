"""Lesson 13 views: the loss of each half and the heads' scores during training, every head's attention pattern, a
table of scores, the logit lens's ranks by depth, and a widget to find the induction head by hand."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ..gpt import GPT
from ..induction import SYMBOLS, InductionHistory, encode_symbols, induction_score, previous_token_score
from ..interpret import attention_patterns
from .plots import heatmap
from .widget import LessonWidget, State


def _smooth(losses: Sequence[float], window: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, moving means): the mean of the ``window`` losses up to each step (steps counted from 1)."""
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    return np.arange(window, len(losses) + 1), smooth


def half_loss_curves(history: InductionHistory, uniform: float, control: InductionHistory | None = None,
                     window: int = 25, ax: plt.Axes | None = None) -> plt.Axes:
    """Each half's loss at every training step (a moving mean over ``window`` steps), ln V dotted, and the repeated
    half of a ``control`` run (the one-layer model) where given."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    for losses, label in ((history.first_half, "first half (random tokens)"),
                          (history.repeated_half, "repeated half")):
        ax.plot(*_smooth(losses, window), label=label)
    if control is not None:
        ax.plot(*_smooth(control.repeated_half, window), color="tab:red", label="repeated half, one-layer model")
    ax.axhline(uniform, linestyle=":", color="tab:gray", label=f"uniform guess, ln V = {uniform:.2f}")
    ax.set_title(f"Loss on each half during training (mean of the last {window} steps)")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.legend(fontsize="small")
    return ax


def phase_change_curves(history: InductionHistory, chance_induction: float, chance_previous: float,
                        window: int = 25) -> Figure:
    """Two panels over the same training steps. Top: the repeated half's loss (a moving mean over ``window``
    steps). Bottom: the last layer's highest induction score and layer 0's highest previous-token score, measured
    every few steps, with their chance levels dotted."""
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 5.6), sharex=True)
    top.plot(*_smooth(history.repeated_half, window), color="tab:orange", label="repeated half")
    top.set_title(f"The repeated half's loss (mean of the last {window} steps)")
    top.set_ylabel("nats per token")
    top.legend(fontsize="small")
    for scores, chance, colour, label in (
        (history.last_layer_induction, chance_induction, "tab:purple", "top induction score, last layer"),
        (history.layer_0_previous, chance_previous, "tab:green", "top previous-token score, layer 0"),
    ):
        bottom.plot(history.score_steps, scores, "o-", markersize=3, color=colour, label=label)
        bottom.axhline(chance, linestyle=":", color=colour, label=f"its chance level (uniform attention), {chance:.2f}")
    bottom.set_ylim(0, 1)
    bottom.set_title("The heads' top scores on a fixed batch of repeated sequences")
    bottom.set_xlabel("training step")
    bottom.set_ylabel("score")
    bottom.legend(fontsize="small")
    figure.tight_layout()
    return figure


def all_head_patterns(weights: torch.Tensor, labels: Sequence[str], title: str) -> Figure:
    """One small heatmap per head: ``weights`` (layers, heads, T, T) of one sequence, rows = queries."""
    layers, heads = weights.shape[:2]
    figure, axes = plt.subplots(layers, heads, figsize=(2.8 * heads, 2.9 * layers), squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            heatmap(weights[layer, head], labels, labels, f"layer {layer}, head {head}", "key", "query",
                    ax=axes[layer, head], annotate=False, vmin=0.0, vmax=1.0, colorbar=False)
            axes[layer, head].tick_params(labelsize=6)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def score_table(previous: torch.Tensor, induction: torch.Tensor, ax: plt.Axes | None = None) -> plt.Axes:
    """Both scores of every head, (layers, heads) each, side by side as heatmaps on one colour scale."""
    if ax is None:
        _, ax = plt.subplots(1, 2, figsize=(8, 2.6))
    layers, heads = previous.shape
    rows, cols = [f"layer {i}" for i in range(layers)], [f"head {h}" for h in range(heads)]
    heatmap(previous, rows, cols, "previous-token score", "head", "layer", ax=ax[0], vmin=0, vmax=1)
    heatmap(induction, rows, cols, "induction score", "head", "layer", ax=ax[1], vmin=0, vmax=1)
    ax[0].figure.tight_layout()
    return ax


def patching_map(restored: torch.Tensor, reach: torch.Tensor, row_labels: Sequence[str], title: str, ylabel: str,
                 ax: plt.Axes | None = None) -> plt.Axes:
    """The share of a prediction restored by each patch, ``restored`` (rows, T), as a heatmap in which the places a
    patch cannot reach (``reach`` (rows, T) False: the runs do not differ there, or the place cannot influence the
    prediction) are grey and marked "·" instead of a number: they are 0 by construction, not a finding."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 + 0.6 * restored.shape[0]))
    shown = restored.detach().double().masked_fill(~reach, float("nan"))  # (rows, T): NaN where unreachable
    heatmap(shown, row_labels, [str(p) for p in range(restored.shape[1])], title, "position", ylabel, ax=ax,
            annotate=False, vmin=-0.1, vmax=1.0)
    ax.set_facecolor("lightgrey")  # NaN cells are not drawn: the background shows through
    for i, j in zip(*np.nonzero(reach.numpy()), strict=True):
        value = shown[i, j].item()
        ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=9, color="white" if value < 0.5 else "black")
    for i, j in zip(*np.nonzero(~reach.numpy()), strict=True):
        ax.text(j, i, "·", ha="center", va="center", fontsize=9, color="dimgrey")
    return ax


def rank_by_depth(ranks: torch.Tensor, title: str, ax: plt.Axes | None = None) -> plt.Axes:
    """The median and the share of top-1 ranks of the correct next token at each depth: ``ranks``
    (depths, positions) long, depth 0 = the embeddings."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.4))
    depths = np.arange(ranks.shape[0])
    ax.plot(depths, ranks.float().median(dim=1).values.numpy(), "o-", label="median rank (0 = top prediction)")
    ax.set_xticks(depths, ["embeddings", *[f"after block {i}" for i in range(ranks.shape[0] - 1)]],
                  rotation=30 if ranks.shape[0] > 4 else 0)
    ax.set_yscale("symlog")
    ax.set_title(title)
    ax.set_ylabel("rank of the correct next token")
    ax.legend(fontsize="small")
    return ax


def induction_head_widget(model: GPT, text: str = "kqzfwmkqzfwm", layer: int = 0, head: int = 0) -> LessonWidget:
    """Pick a layer and a head and type a sequence (each character one token: ``a``-``z``, ``A``-``Z``, ``0``-``9``,
    ``.``, ``!``); shows that head's attention pattern on it and its two scores.

    The previous-token score is the mean weight on the key just before each query; the induction score the mean
    weight on the key after an earlier occurrence of the query's token, over the queries whose token occurred before
    (none: "no repeat"). Characters the model has no token for are dropped, and the text is cut to the model's
    context. ``.controls``: ``"layer"``, ``"head"``, ``"text"``; ``.state``: ``"tokens"`` (the characters used),
    ``"weights"`` (T, T), ``"previous"``, ``"induction"`` (None without a repeat), ``"dropped"``.
    """
    config = model.config
    allowed = SYMBOLS[: config.vocab_size]
    controls = {
        "layer": widgets.IntSlider(value=layer, min=0, max=config.num_layers - 1, description="layer"),
        "head": widgets.IntSlider(value=head, min=0, max=config.num_heads - 1, description="head"),
        "text": widgets.Text(value=text, description="sequence", continuous_update=False),
    }

    def compute(values: dict[str, Any]) -> State:
        kept = "".join(char for char in values["text"] if char in allowed)[: config.block_size]
        dropped = len(values["text"]) - len(kept)
        if len(kept) < 2:
            kept = (kept + "ab")[:2] if len(kept) == 1 else "ab"
        tokens = encode_symbols(kept, config.vocab_size)[None]  # (1, T)
        weights = attention_patterns(model, tokens)[values["layer"], :, values["head"]]  # (1, T, T)
        previous = previous_token_score(weights[:, None]).item()
        try:
            induction = induction_score(weights[:, None], tokens).item()
        except ValueError:  # no token occurs twice
            induction = None
        return {**values, "tokens": kept, "weights": weights[0], "previous": previous, "induction": induction,
                "induction_text": "no repeat" if induction is None else f"{induction:.2f}", "dropped": dropped}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        labels = list(state["tokens"])
        heatmap(state["weights"], labels, labels, f"layer {state['layer']}, head {state['head']}: attention weights",
                "key (attended to)", "query", ax=ax, annotate=len(labels) <= 12, vmin=0.0, vmax=1.0)

    readout = ("previous-token score <b>{previous:.2f}</b>, induction score <b>{induction_text}</b> "
               "({dropped} character(s) dropped)")
    return LessonWidget(controls, compute, readout, draw, figsize=(6.0, 5.0))
