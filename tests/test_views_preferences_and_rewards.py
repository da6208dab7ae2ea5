"""Lesson 16's views: the curves draw one line per run, and the widget recomputes the group advantages, the raw
advantages and the clipped objective's gradient from the rewards, the constant, ε and the ratio the learner sets."""

import matplotlib
import pytest

from transformer_lib import DPOHistory
from transformer_lib.views.preferences_and_rewards import dpo_curves, group_advantage_widget, reward_curves

matplotlib.use("Agg")


def test_the_widget_follows_the_rewards_the_constant_the_ratio_and_eps():
    w = group_advantage_widget()
    assert w.state["right"] == 2 and w.state["raw"] == [1.0, 1.0] + [0.0] * 6
    assert w.state["group"][0] == pytest.approx(3 ** 0.5, rel=1e-5)  # 2 right of 8: (1 − 0.25) / sqrt(0.1875)
    assert w.state["group_gradient"] == w.state["group"]  # ratio 1: the gradient is A itself
    group = list(w.state["group"])
    w.controls["shift"].value = 1.0
    assert w.state["group"] == pytest.approx(group) and w.state["raw"] == [2.0, 2.0] + [1.0] * 6
    w.controls["ratio"].value = 1.5  # past 1 + ε: every positive advantage loses its gradient
    assert w.state["raw_clipped"] == 8 and w.state["group_clipped"] == 2
    assert w.state["group_gradient"][2] == pytest.approx(1.5 * group[2])  # a negative A keeps ratio · A
    assert "<b>2</b> samples under the group advantages and <b>8</b>" in w.readout.value
    w.controls["clip_eps"].value = 0.5  # 1.5 is inside [0.5, 1.5]: nothing is clipped
    assert w.state["raw_clipped"] == 0 and w.state["group_clipped"] == 0
    for k in range(1, 9):
        w.controls[f"right {k}"].value = True
    assert w.state["group"] == [0.0] * 8 and w.state["group_gradient"] == [0.0] * 8  # a tied group: exactly 0


def test_the_bar_colours_follow_the_checkboxes_not_the_shifted_rewards():
    w = group_advantage_widget()
    colours = ["C2", "C2"] + ["C3"] * 6  # samples 1 and 2 right: green, the rest red
    assert w.state["colours"] == colours
    for shift in (2.0, 3.0, -1.0):  # +2 makes every reward above 0.5, -1 every one at or below 0
        w.controls["shift"].value = shift
        assert w.state["colours"] == colours
    w.controls["right 3"].value = True
    assert w.state["colours"] == ["C2"] * 3 + ["C3"] * 5


def test_the_curves_draw_one_line_per_run():
    dpo = DPOHistory(step_loss=[0.69, 0.5], step_margin=[0.0, 0.4], step_ranked_right=[0.0, 0.9])
    figure = dpo_curves({"β = 1": dpo, "β = 0.1": dpo})
    assert [len(ax.lines) for ax in figure.axes] == [2, 2]
    figure = reward_curves({"a": [0.1, 0.2], "b": [0.3, 0.1], "c": [0.0, 0.0]}, "rewards")
    assert len(figure.axes[0].lines) == 3 and figure.axes[0].get_title() == "rewards"
