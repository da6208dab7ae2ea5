"""Plots for lessons 08-09: parameter breakdown, learning-rate schedules, loss curves, cross-attention maps."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from torch import nn

from ..model import Transformer
from ..training import History
from .plots import heatmap


def parameter_breakdown(model: Transformer) -> dict[str, int]:
    """Parameters per component: embeddings, encoder attention / FFN / norms, decoder ditto (shared tensors once)."""
    groups: dict[str, int] = {}
    seen: set[int] = set()
    for name, parameter in model.named_parameters():  # named_parameters lists a tied tensor only once
        if id(parameter) in seen:
            continue
        seen.add(id(parameter))
        if "embedding" in name or "output_projection" in name:
            group = "embeddings + output"
        else:
            stack = "encoder" if name.startswith("encoder") else "decoder"
            kind = "attention" if "attn" in name else "feed-forward" if "linear" in name else "layer norms"
            group = f"{stack} {kind}"
        groups[group] = groups.get(group, 0) + parameter.numel()
    return groups


def plot_parameter_breakdown(breakdowns: dict[str, dict[str, int]]) -> Axes:
    """Horizontal bars, one group of bars per model: millions of parameters in each component."""
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
    ax.set_title("Where the parameters are (37 000-token shared vocabulary)")
    ax.legend()
    return ax


def plot_learning_rates(steps: Sequence[int], schedules: dict[str, Sequence[float]], title: str) -> Axes:
    """One line per learning-rate schedule."""
    _, ax = plt.subplots(figsize=(7, 3))
    for label, values in schedules.items():
        ax.plot(steps, values, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_loss_curves(history: History, title: str = "Training and validation loss") -> Axes:
    """Per-step training loss (label-smoothed) and the validation cross-entropy, log scale."""
    _, ax = plt.subplots(figsize=(7, 3))
    ax.plot(history.steps, history.train_loss, label="training loss (label-smoothed)", alpha=0.7)
    ax.plot(history.valid_steps, history.valid_loss, "o-", label="validation cross-entropy")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss per target token")
    ax.set_title(title)
    ax.legend()
    return ax


@torch.no_grad()
def cross_attention_weights(model: Transformer, src: torch.Tensor, decoder_input: torch.Tensor,
                            src_mask: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Cross-attention weights of every decoder layer, each (batch, heads, T, S), for one teacher-forced pass.

    The layers ask their attention for no weights (so the fused kernel can run); hooks ask for them here.
    """
    captured: list[torch.Tensor] = []

    def want_weights(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return args, {**kwargs, "need_weights": True}

    def keep_weights(module: nn.Module, args: tuple, kwargs: dict, output: tuple) -> None:
        captured.append(output[1])

    handles = []
    for layer in model.decoder_layers:
        handles.append(layer.multihead_attn.register_forward_pre_hook(want_weights, with_kwargs=True))
        handles.append(layer.multihead_attn.register_forward_hook(keep_weights, with_kwargs=True))
    try:
        model.eval()
        model(src, decoder_input, src_mask=src_mask)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def plot_cross_attention(weights: torch.Tensor, source_words: Sequence[str], target_words: Sequence[str],
                         title: str, ax: Axes | None = None) -> Axes:
    """Heatmap of one sentence's cross-attention (T, S): rows = predicted target words, columns = source words."""
    return heatmap(weights, target_words, source_words, title=title, xlabel="source word (key)",
                   ylabel="target position (query)", ax=ax, annotate=False, vmin=0.0, vmax=1.0)
