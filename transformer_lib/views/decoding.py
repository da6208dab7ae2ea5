"""Lesson 10 views: a widget for temperature / top-k / top-p sampling, and the KV-cache timing plot."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from ..decoding import top_k_filter, top_p_filter
from .attention_scores import entropy_bits
from .plots import bar_chart


def sampling_distribution(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """The probabilities ``sample_next_token`` draws from: (V,) logits -> (V,) probabilities."""
    filtered = top_p_filter(top_k_filter(logits / temperature, top_k), top_p)
    return filtered.softmax(dim=-1)


def sampling_widget(logits: torch.Tensor, token_labels: Sequence[str], temperature: float = 1.0) -> widgets.VBox:
    """Sliders for temperature, top-k and top-p over one next-token distribution; bars show what may be drawn.

    ``logits``: (V,) with one label per token. ``.controls``: ``"temperature"``, ``"top_k"``, ``"top_p"``;
    ``.state``: ``"probabilities"`` (V,), ``"kept"`` (tokens with probability > 0), ``"largest"``,
    ``"entropy_bits"``, updated on every change.
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
    readout = widgets.HTML()
    plot = widgets.Output()
    box = widgets.VBox([*controls.values(), readout, plot])
    box.controls = controls
    box.state = {}

    def update(_change: object = None) -> None:
        values = {name: control.value for name, control in controls.items()}
        probabilities = sampling_distribution(logits.double(), **values)  # (V,)
        box.state.update(
            probabilities=probabilities,
            kept=int((probabilities > 0).sum()),
            largest=float(probabilities.max()),
            entropy_bits=entropy_bits(probabilities),
        )
        readout.value = (
            f"{box.state['kept']} of {vocab_size} tokens can be drawn; the likeliest has probability "
            f"<b>{box.state['largest']:.3f}</b>; entropy <b>{box.state['entropy_bits']:.2f}</b> bits"
        )
        with plot:
            plot.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * vocab_size + 1.5), 3.0))
            bar_chart(
                probabilities,
                list(token_labels),
                title=f"Next-token probabilities (T={values['temperature']:.2f}, k={values['top_k']}, "
                f"p={values['top_p']:.2f})",
                xlabel="token",
                ylabel="probability",
                ax=ax,
                ylim=(0.0, 1.05),
            )
            plt.show()
            plt.close(fig)

    for control in controls.values():
        control.style.description_width = "initial"  # the whole label, not "temperat…"
        control.observe(update, names="value")
    update()
    return box


def plot_time_per_token(
    positions: Sequence[int], cached_ms: Sequence[float], uncached_ms: Sequence[float], ax: plt.Axes | None = None
) -> plt.Axes:
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
