"""Lessons 10-11 views: the sampling and attention-memory widgets react to their controls; the power-law fit."""

import matplotlib
import numpy as np
import pytest
import torch

from transformer_lib.views.decoding import sampling_distribution, sampling_widget
from transformer_lib.views.scaling import attention_memory_widget, fit_power_law, score_memory_mib

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


def test_sampling_distribution_at_temperature_one_is_the_softmax():
    logits = torch.tensor([0.3, -0.2, 1.5])
    torch.testing.assert_close(sampling_distribution(logits, 1.0, 3, 1.0), logits.softmax(-1))


def test_attention_memory_widget_reads_out_the_score_memory():
    box = attention_memory_widget(length=8192, chunk_size=256, heads=1)
    assert box.state["naive_mib"] == pytest.approx(256.0)  # 8192² float32 numbers
    assert box.state["chunked_mib"] == pytest.approx(8.0)
    box.controls["log2_length"].value = 14
    assert box.state["naive_mib"] == pytest.approx(1024.0)
    assert box.state["ratio"] == pytest.approx(256 / 16384)


def test_fit_power_law_recovers_the_exponent():
    x = np.array([128, 256, 512, 1024])
    slope, scale = fit_power_law(x, 3e-6 * x**2.0)
    assert slope == pytest.approx(2.0) and scale == pytest.approx(3e-6)
    assert score_memory_mib(1024, None) == pytest.approx(4.0)
