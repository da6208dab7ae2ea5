"""Plots and the widget of lesson 16: DPO's and the RL runs' training curves, and a live group of 8 samples whose
rewards the learner sets, with their group advantages, raw advantages and the clipped objective's gradient."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..rl import advantages_for, clipped_objective, group_advantages
from .widget import LessonWidget, State


def dpo_curves(histories: Mapping[str, Any]) -> Figure:
    """The implicit reward margin and the share of pairs ranked right per step, one line per DPO run (name ->
    :class:`~transformer_lib.dpo.DPOHistory`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.2))
    for name, history in histories.items():
        left.plot(history.step_margin, label=name)
        right.plot(history.step_ranked_right, label=name)
    left.set(title="Implicit reward margin r̂_w − r̂_l", xlabel="step", ylabel="mean over the batch")
    right.set(title="Pairs ranked right (margin > 0)", xlabel="step", ylabel="share of the batch", ylim=(-0.05, 1.05))
    left.legend()
    fig.tight_layout()
    return fig


def reward_curves(rewards: Mapping[str, Sequence[float]], title: str) -> Figure:
    """The mean reward of each step's samples, one line per run (name -> rewards per step)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for name, values in rewards.items():
        ax.plot(values, label=name)
    ax.set(title=title, xlabel="step", ylabel="mean reward of the samples", ylim=(-0.05, 1.05))
    ax.legend()
    fig.tight_layout()
    return fig


def group_advantage_widget(group_size: int = 8) -> LessonWidget:
    """Toggle each sample's reward (1 right, 0 wrong), add a constant to every reward, set ε and one ratio
    π_θ / π_old shared by the samples: the group advantages (:func:`~transformer_lib.rl.group_advantages`) beside
    the raw rewards REINFORCE uses as advantages, and for each sample the gradient of the clipped objective
    (:func:`~transformer_lib.rl.clipped_objective`) with respect to its log-probability under either advantage.

    ``.controls``: ``"right 1"`` … ``"right G"``, ``"shift"``, ``"clip_eps"``, ``"ratio"``; ``.state``:
    ``"rewards"``, ``"group"`` and ``"raw"`` (advantages), ``"group_gradient"`` and ``"raw_gradient"`` (lists of G
    floats), ``"right"`` and the clipped counts ``"group_clipped"``, ``"raw_clipped"``, and ``"colours"``, each
    bar's colour, set by the checkboxes (green right, red wrong) whatever constant the rewards carry.
    """
    controls: dict[str, widgets.ValueWidget] = {
        f"right {k}": widgets.Checkbox(value=k <= 2, description=f"sample {k} right", indent=False)
        for k in range(1, group_size + 1)}
    controls["shift"] = widgets.FloatSlider(value=0.0, min=-1.0, max=3.0, step=0.5,
                                            description="constant added to every reward")
    controls["clip_eps"] = widgets.FloatSlider(value=0.2, min=0.05, max=0.5, step=0.05, description="ε")
    controls["ratio"] = widgets.FloatSlider(value=1.0, min=0.5, max=1.5, step=0.05, description="ratio π_θ / π_old")

    def gradient(advantages: torch.Tensor, ratio: float, clip_eps: float) -> torch.Tensor:
        """d objective / d log π_θ of each sample, at the given ratio: (1, G) -> (1, G)."""
        new = torch.full_like(advantages, math.log(ratio), requires_grad=True)  # (1, G)
        clipped_objective(new, torch.zeros_like(advantages), advantages, clip_eps).sum().backward()
        return new.grad  # (1, G)

    def compute(values: dict[str, Any]) -> State:
        right = [float(values[f"right {k}"]) for k in range(1, group_size + 1)]
        rewards = torch.tensor([right], dtype=torch.float64) + values["shift"]  # (1 group, G)
        advantages = {"group": group_advantages(rewards), "raw": advantages_for(rewards, "none")}  # (1, G) each
        state: State = {"rewards": rewards[0].tolist(), "right": int(sum(right)), "ratio": values["ratio"],
                        "clip_eps": values["clip_eps"], "colours": ["C2" if r else "C3" for r in right]}
        for name, a in advantages.items():
            g = gradient(a, values["ratio"], values["clip_eps"])  # (1, G)
            state[name] = a[0].tolist()
            state[f"{name}_gradient"] = g[0].tolist()
            state[f"{name}_clipped"] = int(((g == 0) & (a != 0)).sum())
        return state

    def draw(state: State, figure: Figure) -> None:
        left, right = figure.subplots(1, 2)
        x = torch.arange(len(state["rewards"])).double()
        for ax, suffix, title in ((left, "", "advantage A"), (right, "_gradient", "gradient of the clipped objective")):
            ax.bar(x - 0.2, state["group" + suffix], width=0.4, color=state["colours"], label="group advantage")
            ax.bar(x + 0.2, state["raw" + suffix], width=0.4, color=state["colours"], alpha=0.45, hatch="//",
                   label="raw reward (REINFORCE)")
            ax.axhline(0, color="grey", linewidth=0.8)
            ax.set_xticks(x.tolist(), [f"{k + 1}" for k in range(len(x))])
            ax.set(title=title, xlabel="sample (green: right)", ylim=(-4.5, 6.5))
        left.legend(fontsize=8)
        right.set_ylabel("d objective / d log π_θ")

    readout = (f"{{right}} of {group_size} right. At ratio {{ratio:.2f}} with ε = {{clip_eps:.2f}}, the clip "
               "zeroes the gradient of <b>{group_clipped}</b> samples under the group advantages and "
               "<b>{raw_clipped}</b> under the raw rewards; a sample whose advantage is 0 gets no gradient either way")
    return LessonWidget(controls, compute, readout, draw, figsize=(9.0, 3.4))
