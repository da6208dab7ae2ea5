"""Lessons 10-11 views: the sampling and attention-memory widgets react to their controls."""

import matplotlib
import pytest
import torch

from transformer_lib import sampling_distribution
from transformer_lib.views.decoding import sampling_widget
from transformer_lib.views.gpt_and_scaling import attention_memory_widget

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


def test_attention_memory_widget_reads_out_the_score_memory():
    box = attention_memory_widget(length=8192, chunk_size=256, heads=1)
    assert box.state["naive_mib"] == pytest.approx(256.0)  # 8192² float32 numbers
    assert box.state["chunked_mib"] == pytest.approx(8.0)
    box.controls["log2_length"].value = 14
    assert box.state["naive_mib"] == pytest.approx(1024.0)
    assert box.state["ratio"] == pytest.approx(256 / 16384)
