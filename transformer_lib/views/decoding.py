"""Lesson 10 views: a widget for temperature / top-k / top-p sampling, and the KV-cache timing plot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..attention import entropy_bits
from ..decoding import sampling_distribution
from .plots import bar_chart
from .widget import LessonWidget, State


def sampling_widget(logits: torch.Tensor, token_labels: Sequence[str], temperature: float = 1.0) -> LessonWidget:
    """Sliders for temperature, top-k and top-p over one next-token distribution; bars show what may be drawn.

    ``logits``: (V,) with one label per token. ``.controls``: ``"temperature"``, ``"top_k"``, ``"top_p"``;
    ``.state``: those three values, ``"probabilities"`` (V,), ``"kept"`` (tokens with probability > 0) of
    ``"vocab_size"``, ``"largest"``, ``"entropy_bits"``, updated on every change.
    """
    if logits.dim() != 1 or logits.shape[0] != len(token_labels):
        raise ValueError(
            f"expected one logit per label: logits of shape {tuple(logits.shape)} and {len(token_labels)} labels"
        )
    vocab_size = logits.shape[0]
    controls = {
        "temperature": widgets.FloatLogSlider(
            value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature"
        ),
        "top_k": widgets.IntSlider(value=vocab_size, min=1, max=vocab_size, description="top-k"),
        "top_p": widgets.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p"),
    }

    def compute(values: dict[str, Any]) -> State:
        probabilities = sampling_distribution(logits.double(), **values)  # (V,)
        return {**values, "probabilities": probabilities, "kept": int((probabilities > 0).sum()),
                "vocab_size": vocab_size, "largest": float(probabilities.max()),
                "entropy_bits": entropy_bits(probabilities)}

    def draw(state: State, figure: Figure) -> None:
        bar_chart(state["probabilities"], list(token_labels), ax=figure.subplots(), ylim=(0.0, 1.05),
                  title=f"Next-token probabilities (T={state['temperature']:.2f}, k={state['top_k']}, "
                  f"p={state['top_p']:.2f})", xlabel="token", ylabel="probability")

    readout = ("{kept} of {vocab_size} tokens can be drawn; the likeliest has probability <b>{largest:.3f}</b>; "
               "entropy <b>{entropy_bits:.2f}</b> bits")
    return LessonWidget(controls, compute, readout, draw, figsize=(max(5.0, 0.45 * vocab_size + 1.5), 3.0))


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
