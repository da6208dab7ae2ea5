"""Lesson 14's views: the acceptance plot and the speculative-decoding widget, whose speed-up is Leviathan et al.'s
formula at the measured costs the lesson passes in."""

import math

import matplotlib

from transformer_lib.speculative import expected_speedup, expected_tokens_per_call
from transformer_lib.views.faster_and_bigger import acceptance_plot, speculative_widget

matplotlib.use("Agg")


def test_the_widget_starts_at_the_costs_it_is_given_and_follows_its_sliders():
    box = speculative_widget(acceptance=0.9, k=4, draft_cost=0.36, verify_costs=[1.1] * 16)
    assert math.isclose(box.state["speedup"], expected_speedup(0.9, 4, 0.36, 1.1))
    assert math.isclose(box.state["tokens_per_call"], expected_tokens_per_call(0.9, 4))
    box.controls["draft_cost"].value = 0.05
    assert math.isclose(box.state["speedup"], expected_speedup(0.9, 4, 0.05, 1.1))
    assert box.state["best_k"] > 4  # a cheaper draft pays for longer rounds
    box.controls["acceptance"].value = 0.3
    assert box.state["best_k"] < 4 and box.state["speedup"] < expected_speedup(0.9, 4, 0.05, 1.1)


def test_the_widget_uses_each_ks_own_verify_cost_and_only_the_measured_ks():
    costs = [1.0, 1.2, 1.5]  # v for k = 1, 2, 3
    box = speculative_widget(acceptance=0.8, k=3, draft_cost=0.2, verify_costs=costs)
    assert box.controls["k"].max == 3 and len(box.state["speedups"]) == 3
    for k, v in enumerate(costs, start=1):
        assert math.isclose(box.state["speedups"][k - 1], expected_speedup(0.8, k, 0.2, v))


def test_the_acceptance_plot_draws_both_counts_and_the_prediction():
    ks = [1, 2, 3]
    figure = acceptance_plot(ks, [0.9, 0.9, 0.9], [0.9, 0.85, 0.8], [1.9, 2.7, 3.4],
                             [expected_tokens_per_call(0.9, k) for k in ks])
    left, right = figure.axes
    assert len(left.lines) == 2 and len(right.lines) == 3
    assert list(right.lines[2].get_ydata()) == [2, 3, 4]  # the k + 1 ceiling
