"""Lesson 06 views: one heatmap per head, and a widget to inspect the heads of a trained translator sentence by
sentence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import nn

from ..data import BOS, EOS, TranslationTask
from ..masks import padding_mask
from ..multi_head import MultiHeadAttention, record_attention
from ..two_relations import TwoRelationsHistory
from .plots import heatmap
from .widget import LessonWidget, State


def plot_heads(weights: torch.Tensor, query_labels: Sequence[str], key_labels: Sequence[str],
               title: str = "Attention weights per head", query_axis: str = "query") -> Figure:
    """Draw weights (heads, T_q, T_k) as one labelled heatmap per head, side by side; return the figure.
    ``query_axis`` names the rows (e.g. "query: the word it predicts" for a decoder)."""
    heads = weights.shape[0]
    fig, axes = plt.subplots(1, heads, figsize=(4.2 * heads, 3.8), squeeze=False)
    for h, ax in enumerate(axes[0]):
        heatmap(weights[h], query_labels, key_labels, title=f"head {h}", xlabel="key", ylabel=query_axis,
                ax=ax, vmin=0.0, vmax=1.0, colorbar=False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_two_relations(runs: dict[str, Sequence[TwoRelationsHistory]], title: str) -> Axes:
    """One colour per model, one line per seed: the held-out share of positions with both relations right, against
    the training step."""
    _, ax = plt.subplots(figsize=(7, 3))
    for colour, (label, histories) in enumerate(runs.items()):
        for seed, history in enumerate(histories):
            ax.plot(history.steps, history.both, "o-", color=f"C{colour}", label=label if seed == 0 else None)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("both outputs right (held out)")
    ax.set_title(title)
    ax.legend()
    return ax


def attention_name(module_name: str) -> str:
    """A translator's attention module by what it does: ``"decoder_layers.1.multihead_attn"`` ->
    ``"decoder layer 1: cross-attention"``."""
    stack, layer, kind = module_name.split(".")
    side = stack.removesuffix("_layers")
    what = "cross-attention" if kind == "multihead_attn" else \
        "masked self-attention" if side == "decoder" else "self-attention"
    return f"{side} layer {layer}: {what}"


def translator_heads_widget(model: nn.Module, task: TranslationTask, pairs: Sequence[tuple[list[str], list[str]]],
                            attention: str | None = None) -> LessonWidget:
    """Pick a sentence pair, an attention block of a trained translator and a head: that head's weights, with the
    tokens on both axes.

    ``model``: a ``transformer_lib.Transformer`` trained on ``task``; ``pairs``: (source words, target words).
    ``attention``: the block shown first (default: the model's last). Each change runs one teacher-forced pass
    through ``transformer_lib.record_attention``. ``.controls``:
    ``"sentence"`` (index into ``pairs``), ``"attention"`` (e.g. ``"encoder layer 0: self-attention"``), ``"head"``.
    ``.state``: ``"weights"`` (T_q, T_k) of that head, ``"query_labels"`` (a decoder row by the word it must
    predict: ``[*target, "<eos>"]``; an encoder row by its source word), ``"key_labels"`` (by the token each key
    position reads), ``"top_keys"`` (the key each query weights most) and ``"mean_largest"`` (the largest weight of
    each row, averaged).
    """
    pad = task.src_vocab.pad_id
    names = {}  # label -> module name, in the model's order
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            names[attention_name(name)] = name
    heads = model.config.num_heads
    controls = {
        "sentence": widgets.Dropdown(options=[(" ".join(source), i) for i, (source, _) in enumerate(pairs)],
                                     value=0, description="sentence"),
        "attention": widgets.Dropdown(options=list(names), value=attention or list(names)[-1],
                                      description="attention"),
        "head": widgets.IntSlider(value=0, min=0, max=heads - 1, description="head"),
    }

    def compute(values: dict[str, Any]) -> State:
        source, target = pairs[values["sentence"]]
        src, tgt = task.encode_pairs([(source, target)])  # (1, S), (1, T + 2) with <bos> … <eos>
        decoder_input = tgt[:, :-1]  # teacher forcing: <bos> and the target, without <eos>
        device = next(model.parameters()).device
        recorded = record_attention(model, src.to(device), decoder_input.to(device),
                                    src_mask=padding_mask(src, pad).to(device))
        module = names[values["attention"]]
        weights = recorded[module][0, values["head"]].cpu()  # (T_q, T_k)
        source_tokens, decoder_tokens, predicted = [*source, EOS], [BOS, *target], [*target, EOS]
        queries = source_tokens if module.startswith("encoder") else predicted  # a decoder row: the word it predicts
        keys = decoder_tokens if module.endswith("self_attn") and module.startswith("decoder") else source_tokens
        top = weights.argmax(dim=-1)  # (T_q,)
        return {"sentence": " ".join(source), "translation": " ".join(target), "attention": values["attention"],
                "head": values["head"], "weights": weights, "query_labels": queries, "key_labels": keys,
                "query_axis": "query" if module.startswith("encoder") else "query: the word it predicts",
                "top_keys": [keys[j] for j in top.tolist()],
                "mean_largest": float(weights.max(dim=-1).values.mean())}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        heatmap(state["weights"], state["query_labels"], state["key_labels"],
                title=f"{state['attention']}, head {state['head']}", xlabel="key", ylabel=state["query_axis"], ax=ax,
                vmin=0.0, vmax=1.0)

    readout = ("'{sentence}' → '{translation}'. {attention}, head {head}: a query's largest weight is "
               "<b>{mean_largest:.2f}</b> on average")
    return LessonWidget(controls, compute, readout, draw, figsize=(6.5, 5.0))
