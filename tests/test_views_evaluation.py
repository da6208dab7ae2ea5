"""Lesson 17's views: the two loss scales draw one bar per model, the membership plot its two histograms and the
threshold, and the widget recomputes how often a test ranks the better model first from the accuracies and items the
learner sets."""

import matplotlib
import matplotlib.pyplot as plt
import pytest

from transformer_lib import pick_rate
from transformer_lib.views.evaluation import comparison_widget, loss_scales_plot, membership_plot

matplotlib.use("Agg")


def test_the_widget_follows_the_gap_and_the_items():
    w = comparison_widget()
    assert w.state["rate"] == pytest.approx(pick_rate(0.70, 0.67, 50), abs=1e-9)
    assert w.state["needed"] > w.state["items"]  # 3 points take more than 50 items
    assert len(w.state["sizes"]) == len(w.state["rates"])
    rate, half_width = w.state["rate"], w.state["half_width"]
    w.controls["items"].value = 1000
    assert w.state["rate"] > rate and w.state["half_width"] < half_width
    needed = w.state["needed"]
    w.controls["gap"].value = 10.0
    assert w.state["needed"] < needed
    w.controls["gap"].value = 0.0
    assert w.state["needed"] is None and w.state["rate"] == pytest.approx(0.5, abs=1e-9)
    assert "no number of items separates two equal models" in w.readout.value


def test_the_loss_scales_draw_one_bar_per_model_on_each_scale():
    figure, axes = plt.subplots(1, 2)
    loss_scales_plot(["char GPT", "BPE GPT"], [1.2, 2.1], [1.9, 1.7], axes)
    assert [ax.get_title() for ax in axes] == ["loss per token", "bits per byte"]
    assert [ax.get_ylabel() for ax in axes] == ["nats per token", "bits per byte of text"]
    assert all(len(ax.patches) == 2 and ax.get_xlabel() == "model" for ax in axes)
    assert [label.get_text() for label in axes[0].get_xticklabels()] == ["char GPT", "BPE GPT"]
    plt.close(figure)


def test_the_membership_plot_draws_both_histograms_and_the_threshold():
    figure, ax = plt.subplots()
    membership_plot([-0.4, -0.3, -0.2], [0.0, 0.05, -0.05, 0.1], -0.1, ax)
    assert ax.get_title() == "Leaked model's bits per byte minus the control's, per chunk"
    assert ax.get_xlabel() == "difference (bits per byte)" and ax.get_ylabel() == "chunks"
    assert {text.get_text() for text in ax.get_legend().get_texts()} == {
        "unseen chunks", "leaked chunks", "threshold -0.10"}
    assert len(ax.patches) == 2 * 29  # two histograms over the same 29 bins
    assert list(ax.lines[0].get_xdata()) == [-0.1, -0.1]
    plt.close(figure)
