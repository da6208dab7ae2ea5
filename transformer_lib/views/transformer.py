"""Lesson 08 plot: where the parameters of the full model are."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes


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

