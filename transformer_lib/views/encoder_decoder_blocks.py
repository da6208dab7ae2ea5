"""Lesson 07 plots and widget: gradient norms per layer and training curves of post-LN and pre-LN stacks, and a
depth slider that recomputes both stacks' gradient norms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..layers import feed_forward_gradient_norms
from .widget import LessonWidget, State


def plot_gradient_norms(norms: dict[str, Sequence[float]], title: str) -> Axes:
    """One line per variant: the gradient norm of each layer's parameters, layer 1 (bottom) to the top."""
    _, ax = plt.subplots(figsize=(7, 3))
    for label, values in norms.items():
        ax.plot(range(1, len(values) + 1), values, "o-", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("layer (1 = closest to the input)")
    ax.set_ylabel("gradient norm")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_curves(steps: Sequence[int], curves: dict[str, Sequence[float]], title: str, ylabel: str) -> Axes:
    """One line per training run (e.g. validation loss against steps)."""
    _, ax = plt.subplots(figsize=(7, 3))
    for label, values in curves.items():
        ax.plot(steps, values, "o-", label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    return ax


VARIANTS = {"post-LN (paper)": False, "pre-LN": True}


def gradient_depth_widget(num_layers: int = 6, max_layers: int = 24) -> LessonWidget:
    """A depth slider; for a freshly initialised stack of that many encoder layers, post-LN and pre-LN, the gradient
    norm of each layer's feed-forward weights (``feed_forward_gradient_norms``, the measurement of lesson 07).

    The axes stay fixed (layers 1 to ``max_layers``, norms 0.05 to 0.3 on a log scale), so moving the slider shows
    the pre-LN curve sinking as the stack deepens while the post-LN one stays. ``.controls``: ``"layers"``;
    ``.state``: ``"layers"``, ``"norms"`` (variant -> one norm per layer, bottom to top), ``"post_top"``,
    ``"pre_top"``, ``"post_bottom"``, ``"pre_bottom"``. Each depth is computed once (about 0.1 s per stack of 24
    layers on one idle core) and kept.
    """
    computed: dict[int, dict[str, list[float]]] = {}
    controls = {"layers": widgets.IntSlider(value=num_layers, min=1, max=max_layers, description="layers")}

    def compute(values: dict[str, Any]) -> State:
        depth = values["layers"]
        if depth not in computed:
            computed[depth] = {label: feed_forward_gradient_norms(depth, norm_first)
                               for label, norm_first in VARIANTS.items()}
        norms = computed[depth]
        post, pre = norms["post-LN (paper)"], norms["pre-LN"]
        return {"layers": depth, "norms": norms, "post_top": post[-1], "pre_top": pre[-1],
                "post_bottom": post[0], "pre_bottom": pre[0]}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        for label, values in state["norms"].items():
            ax.plot(range(1, len(values) + 1), values, "o-", label=label)
        ax.set_yscale("log")
        ax.set_xlim(0.5, max_layers + 0.5)
        ax.set_ylim(0.05, 0.3)
        ax.set_xlabel("layer (1 = closest to the input)")
        ax.set_ylabel("gradient norm")
        ax.set_title(f"Feed-forward weights' gradient norm per layer at initialisation ({state['layers']} layers)")
        ax.legend(loc="lower left")

    readout = ("depth <b>{layers}</b>: the top layer's feed-forward gradient norm is <b>{post_top:.3f}</b> post-LN "
               "and <b>{pre_top:.3f}</b> pre-LN; the bottom layer's {post_bottom:.3f} post-LN and {pre_bottom:.3f} "
               "pre-LN")
    return LessonWidget(controls, compute, readout, draw, figsize=(7.0, 3.2))
