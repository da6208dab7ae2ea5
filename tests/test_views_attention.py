"""Drive the lesson 02-03 widgets without a browser: change a control, check the computed state follows."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from transformer_lib.views.attention_scores import attention_scores_widget  # noqa: E402

WORDS = ["Orange", "Phone", "Apple", "And", "An"]
FEATURES = torch.tensor([[0, 3, 0], [4, 0, 0], [2, 2, 0], [0, 0, 2], [0, 0, 3]], dtype=torch.float64)


SENTENCES = ["an apple and an orange", "an apple phone"]


def test_scores_widget_scores_the_query_against_every_token_of_the_sentence():
    box = attention_scores_widget(WORDS, FEATURES, SENTENCES, query_word="Apple")
    x = FEATURES[[4, 2, 3, 4, 0]]  # an apple and an orange: "an" is there twice, as two tokens
    assert box.state["tokens"] == SENTENCES[0].split() and box.state["query"] == 1
    torch.testing.assert_close(box.state["scores"], x @ FEATURES[2])
    torch.testing.assert_close(box.state["weights"], torch.softmax(x @ FEATURES[2], dim=0))
    torch.testing.assert_close(box.state["output"], box.state["weights"] @ x)
    box.controls["query"].value = "5 · orange"
    assert box.state["query"] == 4 and box.state["query_word"] == "orange"
    torch.testing.assert_close(box.state["scores"], x @ FEATURES[0])


def test_scores_widget_keeps_the_query_word_when_the_sentence_changes():
    box = attention_scores_widget(WORDS, FEATURES, SENTENCES, query_word="apple")
    box.controls["sentence"].value = "an apple phone"
    assert list(box.controls["query"].options) == ["1 · an", "2 · apple", "3 · phone"]
    assert box.state["query_word"] == "apple" and box.state["tokens"] == ["an", "apple", "phone"]
    torch.testing.assert_close(box.state["scores"], FEATURES[[4, 2, 1]] @ FEATURES[2])
    box.controls["query"].value = "3 · phone"  # not in the other sentence: the query goes back to its first token
    box.controls["sentence"].value = SENTENCES[0]
    assert box.state["query"] == 0 and box.state["query_word"] == "an" and box.controls["query"].value == "1 · an"


def test_scores_widget_temperature_sharpens_and_flattens():
    box = attention_scores_widget(WORDS, FEATURES, SENTENCES, query_word="Apple")
    at_one = box.state["largest_weight"]
    box.controls["temperature"].value = 0.1
    assert box.state["temperature"] == pytest.approx(0.1)
    assert box.state["largest_weight"] > at_one
    box.controls["temperature"].value = 10.0
    assert box.state["largest_weight"] < at_one
    assert box.state["entropy_bits"] > 0.9 * math.log2(len(SENTENCES[0].split()))


def test_scores_widget_rejects_mismatched_vectors_and_unknown_words():
    with pytest.raises(ValueError, match="expected one vector per word: 5 words and vectors of shape \\(4, 3\\)"):
        attention_scores_widget(WORDS, FEATURES[:4], SENTENCES)
    with pytest.raises(ValueError, match="outside the vocabulary: \\['pear'\\]"):
        attention_scores_widget(WORDS, FEATURES, ["an apple pear"])
