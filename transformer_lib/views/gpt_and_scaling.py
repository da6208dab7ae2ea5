"""Lesson 11 views: training and held-out loss beside the baselines, and held-out loss against the characters trained
on (the log-log plot with a fitted power law is shared: :func:`~transformer_lib.views.plots.loglog_with_fit`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from ..training import LMHistory


def loss_curves(history: LMHistory, baselines: dict[str, float], title: str, ax: Axes | None = None) -> Axes:
    """Training and held-out loss at each evaluation step of ``history``, and each baseline's held-out loss as a
    dotted horizontal line labelled with its name."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history.eval_steps, history.train_loss, "o-", label="GPT, training split")
    ax.plot(history.eval_steps, history.valid_loss, "s-", label="GPT, held-out split")
    for (name, loss), colour in zip(baselines.items(), ("tab:gray", "tab:olive", "tab:purple"), strict=False):
        ax.axhline(loss, linestyle=":", color=colour, label=f"{name} baseline, held-out ({loss:.2f})")
    ax.set_title(title)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.legend(fontsize="small")
    return ax


def token_sweep(
    characters: Sequence[float], losses: dict[str, Sequence[float]], title: str, ax: Axes | None = None
) -> Axes:
    """Held-out loss against the characters trained on, one line per model (``losses``: label -> one loss per entry
    of ``characters``), on log-log axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, values in losses.items():
        ax.loglog(characters, values, "o-", markersize=3, label=label)
    ax.set_title(title)
    ax.set_xlabel("characters trained on, D")
    ax.set_ylabel("held-out loss (nats per character)")
    ax.legend(fontsize="small")
    return ax
