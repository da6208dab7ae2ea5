"""Plots and the widget of lesson 16: DPO's and the RL runs' training curves, and one prompt's group of sampled
responses with their rewards and group advantages at each step of a GRPO run."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..rl import RLHistory
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


def grpo_group_widget(history: RLHistory) -> LessonWidget:
    """Move the step: the watched prompt's group of sampled responses at that step of a GRPO run, each bar its group
    advantage (green where the reward is 1, red where it is 0), beside the run's reward curve with the step marked.

    ``.controls``: ``"step"``; ``.state``: ``"responses"``, ``"rewards"``, ``"advantages"`` (the history's, at that
    step) and ``"mean_reward"`` (the step's mean reward over all prompts).
    """
    controls = {"step": widgets.IntSlider(value=0, min=0, max=len(history.step_reward) - 1, description="step")}

    def compute(values: dict[str, Any]) -> State:
        step = values["step"]
        responses = history.watched_responses[step]
        rewards = history.watched_rewards[step]
        return {"step": step, "responses": responses, "rewards": rewards,
                "advantages": history.watched_advantages[step], "mean_reward": history.step_reward[step],
                "prompt_html": html.escape(history.watched), "right": int(sum(rewards)),
                "group": len(responses)}

    def draw(state: State, figure: Figure) -> None:
        left, right = figure.subplots(1, 2)
        colours = ["C2" if reward > 0 else "C3" for reward in state["rewards"]]
        left.bar(range(state["group"]), state["advantages"], color=colours)
        left.axhline(0, color="grey", linewidth=0.8)
        left.set_xticks(range(state["group"]), [repr(r) for r in state["responses"]], rotation=45, fontsize=8)
        left.set(title=f"{history.watched}: its group at step {state['step']}", ylabel="group advantage",
                 ylim=(-3, 3))
        right.plot(history.step_reward, color="C0")
        right.axvline(state["step"], color="C1", linestyle="--")
        right.set(title="mean reward of all samples", xlabel="step", ylim=(-0.05, 1.05))

    readout = ("step {step}: {right} of {group} samples for <b>{prompt_html}</b> are right; the step's mean reward "
               "over all prompts is {mean_reward:.2f}")
    return LessonWidget(controls, compute, readout, draw, figsize=(9.0, 3.2))
