"""Drive the lesson 00 and 01 widgets headless: move a slider, read the state it produced."""

import math

import pytest

from transformer_lib.views.similarity import vector_angle_widget
from transformer_lib.views.start_here import softmax_temperature_widget


def test_softmax_widget_starts_at_the_seed_weights():
    w = softmax_temperature_widget()
    assert [round(x, 2) for x in w.state["weights"]] == [0.40, 0.30, 0.15, 0.15]
    assert w.state["top_word"] == "Orange"


def test_lower_temperature_sharpens_and_higher_flattens():
    w = softmax_temperature_widget()
    w.controls["temperature"].value = 0.1
    assert w.state["temperature"] == pytest.approx(0.1)
    assert w.state["weights"][0] > 0.9
    w.controls["temperature"].value = 10.0
    assert max(w.state["weights"]) - min(w.state["weights"]) < 0.05
    assert sum(w.state["weights"]) == pytest.approx(1.0)


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
