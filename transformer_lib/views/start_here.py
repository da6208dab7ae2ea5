"""Lesson 00 widget: a first taste of attention, turning similarity scores into weights with a softmax."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..attention import softmax
from .plots import bar_chart
from .widget import LessonWidget, State

# The similarity of "Orange" to each word of "an apple and an orange" (the cosine table of lesson 01).
ORANGE_WORDS = ("Orange", "Apple", "And", "An")
ORANGE_SCORES = (1.0, 0.71, 0.0, 0.0)


def softmax_temperature_widget(
    scores: tuple[float, ...] = ORANGE_SCORES,
    words: tuple[str, ...] = ORANGE_WORDS,
    temperature: float = 1.0,
) -> LessonWidget:
    """A temperature slider over ``softmax(scores / temperature)``, drawn as one bar per word.

    ``.controls``: ``"temperature"``; ``.state``: ``"temperature"``, ``"weights"`` (a list that sums to 1),
    ``"top_word"`` and its weight ``"top_weight"``, updated on every change.
    """
    if len(scores) != len(words):
        raise ValueError(f"need one score per word: got {len(scores)} scores and {len(words)} words.")
    score_tensor = torch.tensor(scores, dtype=torch.float64)  # (n_words,)
    controls = {
        "temperature": widgets.FloatLogSlider(
            value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature"
        ),
    }

    def compute(values: dict[str, Any]) -> State:
        weights = softmax(score_tensor / values["temperature"])  # (n_words,)
        top = int(weights.argmax())
        return {**values, "weights": weights.tolist(), "top_word": words[top], "top_weight": float(weights[top])}

    def draw(state: State, figure: Figure) -> None:
        bar_chart(state["weights"], list(words), f"softmax(scores / {state['temperature']:.2f})", "word", "weight",
                  ax=figure.subplots(), ylim=(0, 1.1))

    readout = "at temperature {temperature:.2f}, <b>{top_word}</b> gets the largest weight, <b>{top_weight:.2f}</b>"
    return LessonWidget(controls, compute, readout, draw, figsize=(4.5, 3.0))
