"""Lesson 16's views: the curves draw one line per run, and the widget shows the watched group of the step chosen."""

import matplotlib

from transformer_lib import DPOHistory, RLHistory
from transformer_lib.views.preferences_and_rewards import dpo_curves, grpo_group_widget, reward_curves

matplotlib.use("Agg")


def history() -> RLHistory:
    return RLHistory(step_reward=[0.25, 0.5, 0.75], step_kl=[0.0, 0.1, 0.2],
                     watched_responses=[["a~", "b~", "c~"], ["a~", "a~", "b~"], ["a~", "a~", "a~"]],
                     watched_rewards=[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]],
                     watched_advantages=[[1.41, -0.71, -0.71], [0.71, 0.71, -1.41], [0.0, 0.0, 0.0]],
                     watched="{last xya}")


def test_the_widget_shows_the_watched_group_at_the_chosen_step():
    w = grpo_group_widget(history())
    assert w.state["responses"] == ["a~", "b~", "c~"] and w.state["right"] == 1
    w.controls["step"].value = 2
    assert w.state["advantages"] == [0.0, 0.0, 0.0] and w.state["right"] == 3
    assert "3 of 3 samples" in w.readout.value and "0.75" in w.readout.value
    assert w.controls["step"].max == 2


def test_the_curves_draw_one_line_per_run():
    dpo = DPOHistory(step_loss=[0.69, 0.5], step_margin=[0.0, 0.4], step_ranked_right=[0.0, 0.9])
    figure = dpo_curves({"β = 1": dpo, "β = 0.1": dpo})
    assert [len(ax.lines) for ax in figure.axes] == [2, 2]
    figure = reward_curves({"a": [0.1, 0.2], "b": [0.3, 0.1], "c": [0.0, 0.0]}, "rewards")
    assert len(figure.axes[0].lines) == 3 and figure.axes[0].get_title() == "rewards"
