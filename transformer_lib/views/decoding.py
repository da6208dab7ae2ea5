"""Lesson 10 views: a widget for temperature / top-k / top-p sampling, and the KV-cache timing plot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..attention import entropy_bits
from ..decoding import sampling_distribution
from .widget import LessonWidget, State


def shown_token(token: str) -> str:
    """A token as a label a reader can see: a space as ␣, a newline as ⏎, a tab as ⇥, anything else as itself."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(token, token)


def sampling_widget(
    logits: torch.Tensor, token_labels: Sequence[str], temperature: float = 1.0, top_k: int | None = None,
    top_p: float = 1.0, labelled: int = 30,
) -> LessonWidget:
    """Sliders for the temperature τ, top-k and top-p over one next-token distribution.

    ``logits``: (V,) with one label per token. The plot ranks all V tokens by their logit (the order no setting
    changes) on a logarithmic probability axis: grey bars for ``softmax(logits / τ)`` before the filters, coloured
    bars for what is drawn from, the kept tokens renormalised so that they sum to 1; the ``labelled`` likeliest get
    their label. ``temperature``, ``top_k`` (None: all V) and ``top_p`` set the sliders' starting values.

    ``.controls``: ``"temperature"`` (τ), ``"top_k"``, ``"top_p"``; ``.state``: those three values,
    ``"probabilities"`` (V,) after the filters, ``"kept"`` (tokens with probability > 0) of ``"vocab_size"``,
    ``"kept_mass"`` (the probability those kept tokens had at this τ before renormalising), ``"largest"``,
    ``"entropy_bits"``, updated on every change.
    """
    if logits.dim() != 1 or logits.shape[0] != len(token_labels):
        raise ValueError(
            f"expected one logit per label: logits of shape {tuple(logits.shape)} and {len(token_labels)} labels"
        )
    vocab_size = logits.shape[0]
    logits = logits.detach().double().cpu()
    order = logits.argsort(descending=True)  # (V,) token ids, likeliest first at every τ
    labels = [shown_token(token_labels[i]) for i in order.tolist()]
    controls = {
        "temperature": widgets.FloatLogSlider(value=temperature, base=10, min=-1, max=1, step=0.05,
                                                 description="temperature τ"),
        "top_k": widgets.IntSlider(value=top_k or vocab_size, min=1, max=vocab_size, description="top-k"),
        "top_p": widgets.FloatSlider(value=top_p, min=0.05, max=1.0, step=0.05, description="top-p"),
    }

    def compute(values: dict[str, Any]) -> State:
        before = sampling_distribution(logits, values["temperature"])  # (V,) no filter yet
        probabilities = sampling_distribution(logits, **values)  # (V,) renormalised over the kept tokens
        kept = probabilities > 0
        return {**values, "probabilities": probabilities, "before": before, "kept": int(kept.sum()),
                "vocab_size": vocab_size, "kept_mass": float(before[kept].sum()),
                "largest": float(probabilities.max()), "entropy_bits": entropy_bits(probabilities)}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        ranks = np.arange(vocab_size)
        ax.bar(ranks, state["before"][order].numpy(), color="lightgray", width=0.9, label="softmax(logits / τ)")
        after = state["probabilities"][order].numpy()
        ax.bar(ranks[after > 0], after[after > 0], color="tab:blue", width=0.6,
               label="drawn from: kept tokens, renormalised")
        ax.set_yscale("log")
        ax.set_ylim(1e-5, 1.5)
        shown = min(labelled, vocab_size)
        ax.set_xticks(ranks[:shown], labels=labels[:shown], fontsize=8)
        ax.set_xlim(-1, vocab_size)
        ax.set_xlabel(f"tokens by rank (the {shown} likeliest labelled)")
        ax.set_ylabel("probability (log scale)")
        ax.set_title(f"Next-token probabilities (τ={state['temperature']:.2f}, k={state['top_k']}, "
                     f"p={state['top_p']:.2f})")
        ax.legend(fontsize="small", loc="upper right")

    readout = ("kept <b>{kept}</b> of {vocab_size} tokens, which held <b>{kept_mass:.1%}</b> of the probability at "
               "this τ; the draw renormalises over those {kept} only: the likeliest then has <b>{largest:.3f}</b>; "
               "entropy <b>{entropy_bits:.2f}</b> bits")
    return LessonWidget(controls, compute, readout, draw, figsize=(10.0, 3.6))


def plot_time_per_token(
    positions: Sequence[int], cached_ms: Sequence[float], uncached_ms: Sequence[float], ax: Axes | None = None
) -> Axes:
    """Milliseconds to produce the token at each position, with and without the KV cache."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    ax.plot(positions, uncached_ms, label="without cache: the whole prefix again")
    ax.plot(positions, cached_ms, label="with KV cache: only the new token")
    ax.set_title("Time to generate one token")
    ax.set_xlabel("position of the generated token")
    ax.set_ylabel("milliseconds")
    ax.set_ylim(bottom=0)
    ax.legend()
    return ax
