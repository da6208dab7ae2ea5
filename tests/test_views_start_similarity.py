"""Drive the lesson 00 and 01 widgets headless: move a slider, read the state it produced."""

import math

import pytest
import torch

from transformer_lib import sinusoidal_encoding
from transformer_lib.views.similarity import vector_angle_widget
from transformer_lib.views.start_here import (
    PIPELINE_SENTENCE,
    PIPELINE_STEPS,
    PIPELINE_VOCABULARY,
    pipeline_widget,
)


def test_pipeline_widget_walks_the_sentence_through_each_step():
    w = pipeline_widget()
    assert w.state["step"] == 0 and w.state["tokens"] == PIPELINE_SENTENCE.split()
    T, vocab_size = len(w.state["tokens"]), len(PIPELINE_VOCABULARY)
    shapes = []
    for step in range(len(PIPELINE_STEPS)):
        w.controls["step"].value = step
        assert w.state["name"] == PIPELINE_STEPS[step][0] and w.state["name"] in w.readout.value
        shapes.append(w.state["shape"])
    assert shapes == [f"{T} tokens", f"({T},)", f"({T}, 8)", f"({T}, 8)", f"({T}, {T})", f"({T}, 8)",
                      f"({vocab_size},)"]


def test_pipeline_widget_computes_with_the_library():
    w = pipeline_widget()
    ids = w.state["ids"]
    assert [PIPELINE_VOCABULARY[i] for i in ids.tolist()] == w.state["tokens"]
    w.controls["step"].value = 2
    vectors = w.state["tensor"]
    w.controls["step"].value = 3
    torch.testing.assert_close(w.state["tensor"] - vectors,
                               sinusoidal_encoding(len(ids), 8).double())  # step 3 adds the positions
    w.controls["step"].value = 4
    weights = w.state["tensor"]
    assert not weights.triu(1).any()  # causal: no weight on a later token
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(ids), dtype=torch.float64))
    w.controls["step"].value = 6
    assert w.state["tensor"].sum().item() == pytest.approx(1.0)


def test_pipeline_widget_rejects_words_outside_its_vocabulary():
    with pytest.raises(ValueError, match=r"outside the vocabulary .*\['zebra'\]"):
        pipeline_widget("the zebra sat")


def test_a_typed_sentence_runs_through_the_same_model_and_unknown_words_are_left_out():
    w = pipeline_widget("the cat")
    w.controls["step"].value = 4
    short = w.state["tensor"]  # (2, 2) attention weights
    w.controls["sentence"].value = "the cat sat on a zebra mat"
    assert w.state["tokens"] == ["the", "cat", "sat", "on", "a", "mat"] and w.state["skipped"] == ["zebra"]
    assert w.state["shape"] == "(6, 6)" and "zebra" in w.readout.value
    torch.testing.assert_close(w.state["tensor"][:2, :2], short)  # causal: earlier rows ignore the added words
    w.controls["sentence"].value = "zebra"
    assert w.state["tokens"] == ["the"]  # nothing known left: the widget falls back to one word


def test_vector_widget_cosine_of_60_degrees_is_one_half():
    w = vector_angle_widget(angle=0.0, length_a=2.0, length_b=1.0)
    assert w.state["cosine"] == pytest.approx(1.0)
    w.controls["angle"].value = 60
    assert w.state["cosine"] == pytest.approx(0.5)
    assert w.state["dot"] == pytest.approx(2.0 * 1.0 * 0.5)
    w.controls["angle"].value = 90
    assert w.state["dot"] == pytest.approx(0.0, abs=1e-12)


def test_vector_widget_length_changes_the_dot_product_not_the_cosine():
    w = vector_angle_widget(angle=45.0, length_a=1.0, length_b=1.0)
    cosine = w.state["cosine"]
    w.controls["length_b"].value = 3.0
    assert w.state["cosine"] == pytest.approx(cosine)
    assert w.state["dot"] == pytest.approx(3.0 * math.cos(math.radians(45)))
    assert w.state["length_b"] == pytest.approx(3.0)


def test_the_plot_is_redrawn_when_a_slider_moves():
    w = vector_angle_widget()
    before = bytes(w.plot.value)
    w.controls["angle"].value = 120
    assert bytes(w.plot.value).startswith(b"\x89PNG") and bytes(w.plot.value) != before
