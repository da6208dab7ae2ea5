"""Lessons 10-11 views: the sampling and attention-memory widgets react to their controls."""

import matplotlib
import pytest
import torch

from transformer_lib import sampling_distribution
from transformer_lib.views.decoding import sampling_widget
from transformer_lib.views.gpt2_and_llms import attention_memory_widget
from transformer_lib.views.gpt_and_scaling import token_sweep
from transformer_lib.views.plots import loglog_with_fit

matplotlib.use("Agg")


def test_sampling_widget_follows_its_sliders():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    box = sampling_widget(logits, list("abcde"))
    assert box.state["kept"] == 5
    box.controls["top_k"].value = 2
    assert box.state["kept"] == 2
    torch.testing.assert_close(box.state["probabilities"].sum(), torch.tensor(1.0, dtype=torch.float64))
    box.controls["top_k"].value = 5
    before = box.state["entropy_bits"]
    box.controls["temperature"].value = 5.0
    assert box.state["entropy_bits"] > before  # a hotter temperature flattens the distribution
    box.controls["top_p"].value = 0.05
    assert box.state["kept"] == 1
    torch.testing.assert_close(box.state["probabilities"], sampling_distribution(logits.double(), 5.0, 5, 0.05))


def test_sampling_widget_reads_out_the_mass_it_renormalises_over():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    box = sampling_widget(logits, ["a", " ", "\n", "d", "e"])
    assert box.state["kept_mass"] == pytest.approx(1.0)
    box.controls["top_k"].value = 2
    before = logits.double().softmax(-1)
    assert box.state["kept_mass"] == pytest.approx(float(before[:2].sum()))  # the two likeliest, before renormalising
    assert box.state["largest"] == pytest.approx(float(before[0] / before[:2].sum()))
    assert "kept <b>2</b> of 5 tokens" in box.readout.value
    assert "renormalises over those 2" in box.readout.value
    box.controls["temperature"].value = 0.5
    sharper = (logits.double() / 0.5).softmax(-1)
    assert box.state["kept_mass"] == pytest.approx(float(sharper[:2].sum()))


def test_sampling_widget_starts_from_the_given_filters():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    box = sampling_widget(logits, list("abcde"), top_p=0.75)
    assert box.controls["top_p"].value == 0.75 and box.controls["top_k"].value == 5
    assert box.state["kept"] == 2  # the first token holds 0.56 < 0.75, so the second one is kept too


def test_attention_memory_widget_counts_scores_and_weights_and_plots_them():
    box = attention_memory_widget(length=8192, chunk_size=256, heads=1)
    assert box.state["naive_mib"] == pytest.approx(512.0)  # scores + softmax weights: 2 · 8192² float32 numbers
    assert box.state["chunked_mib"] == pytest.approx(16.0)  # 2 · 8192 · 256
    assert box.plot is not None
    picture = box.plot.value
    box.controls["log2_length"].value = 14
    assert box.state["naive_mib"] == pytest.approx(2048.0)
    assert box.state["ratio"] == pytest.approx(256 / 16384)
    box.controls["heads"].value = 12
    assert box.state["curves"]["naive"][0] == pytest.approx(12 * 2 * 128 * 128 * 4 / 2**20)
    assert box.plot.value != picture


def test_attention_memory_widget_draws_measured_points():
    box = attention_memory_widget(measured=([1024, 2048], [9.0, 35.0], [3.7, 7.6]))
    assert box.plot is not None and box.plot.value  # drew with the measured points


def test_loglog_with_fit_draws_error_bars_and_returns_the_fitted_slope():
    params, losses = [1e3, 1e4, 1e5], [3.0, 3.0 * 10**-0.1, 3.0 * 10**-0.2]
    ax, slope = loglog_with_fit(params, losses, "t", "N", "L", yerr=[0.01, 0.02, 0.01])
    assert slope == pytest.approx(-0.1)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert any("sd over seeds" in text.get_text() for text in ax.get_legend().get_texts())


def test_token_sweep_draws_one_line_per_model():
    ax = token_sweep([100, 200, 400], {"small": [3.0, 2.8, 2.7], "large": [2.9, 2.6, 2.4]}, "t")
    assert [line.get_label() for line in ax.get_lines()] == ["small", "large"]
    assert ax.get_xscale() == "log"
