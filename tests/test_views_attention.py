"""Drive the lesson 02-03 widgets without a browser: change a control, check the computed state follows."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from transformer_lib.views.attention_scores import attention_scores_widget  # noqa: E402
from transformer_lib.views.queries_keys_values import attention_heatmap_widget  # noqa: E402

WORDS = ["Orange", "Phone", "Apple", "And", "An"]
FEATURES = torch.tensor([[0, 3, 0], [4, 0, 0], [2, 2, 0], [0, 0, 2], [0, 0, 3]], dtype=torch.float64)


def test_scores_widget_shows_the_chosen_querys_scores():
    box = attention_scores_widget(WORDS, FEATURES, query_word="Apple")
    torch.testing.assert_close(box.state["scores"], FEATURES @ FEATURES[2])
    torch.testing.assert_close(box.state["weights"], torch.softmax(FEATURES @ FEATURES[2], dim=0))
    box.controls["query"].value = "An"
    assert box.state["query"] == "An"
    torch.testing.assert_close(box.state["scores"], FEATURES @ FEATURES[4])


def test_scores_widget_temperature_sharpens_and_flattens():
    box = attention_scores_widget(WORDS, FEATURES, query_word="Apple")
    at_one = box.state["largest_weight"]
    box.controls["temperature"].value = 0.1
    assert box.state["temperature"] == pytest.approx(0.1)
    assert box.state["largest_weight"] > at_one
    box.controls["temperature"].value = 10.0
    assert box.state["largest_weight"] < at_one
    assert box.state["entropy_bits"] > 0.9 * math.log2(len(WORDS))


def test_scores_widget_rejects_mismatched_vectors():
    with pytest.raises(ValueError, match="expected one vector per word: 5 words and vectors of shape \\(4, 3\\)"):
        attention_scores_widget(WORDS, FEATURES[:4])


def test_heatmap_widget_scale_toggle_and_query_choice():
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(4, 64, generator=generator, dtype=torch.float64)
    keys = torch.randn(4, 64, generator=generator, dtype=torch.float64)
    words = ["the", "fluffy", "blue", "creature"]
    box = attention_heatmap_widget(words, queries, keys, query_word="blue")
    expected = torch.softmax(queries @ keys.T / 8.0, dim=-1)
    torch.testing.assert_close(box.state["weights"], expected)
    torch.testing.assert_close(box.state["row"], expected[2])
    scaled_entropy, scaled_largest = box.state["entropy_bits"], box.state["largest_weight"]
    box.controls["scale"].value = False  # unscaled scores are 8 times larger: the softmax saturates
    assert box.state["scale"] == 1.0
    assert box.state["entropy_bits"] < scaled_entropy
    assert box.state["largest_weight"] > max(scaled_largest, 0.9)
    box.controls["temperature"].value = 10.0
    assert box.state["scale"] == pytest.approx(0.1)
    box.controls["query"].value = "the"
    torch.testing.assert_close(box.state["row"], box.state["weights"][0])
    torch.testing.assert_close(box.state["weights"].sum(-1), torch.ones(4, dtype=torch.float64))
