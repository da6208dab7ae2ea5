"""Lesson 00 widget: a first taste of attention, turning similarity scores into weights with a softmax."""

from __future__ import annotations

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from .plots import bar_chart, figure_to_png

# The similarity of "Orange" to each word of "an apple and an orange" (the cosine table of lesson 01).
ORANGE_WORDS = ("Orange", "Apple", "And", "An")
ORANGE_SCORES = (1.0, 0.71, 0.0, 0.0)


def softmax_temperature_widget(
    scores: tuple[float, ...] = ORANGE_SCORES,
    words: tuple[str, ...] = ORANGE_WORDS,
    temperature: float = 1.0,
) -> widgets.VBox:
    """A temperature slider over ``softmax(scores / temperature)``, drawn as one bar per word.

    The returned box exposes ``.controls`` (``"temperature"``) and ``.state`` (``"temperature"``,
    ``"weights"`` as a list that sums to 1, and ``"top_word"``), updated on every change.
    """
    if len(scores) != len(words):
        raise ValueError(f"need one score per word: got {len(scores)} scores and {len(words)} words.")
    controls = {
        "temperature": widgets.FloatLogSlider(
            value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature",
            style={"description_width": "initial"},  # the whole label, not "temperat…"
        )
    }
    readout = widgets.HTML()
    plot = widgets.Image(format="png")
    box = widgets.VBox([controls["temperature"], readout, plot])
    box.controls = controls
    box.state = {}
    score_tensor = torch.tensor(scores, dtype=torch.float64)  # (n_words,)

    def update(_change: object = None) -> None:
        t = controls["temperature"].value
        weights = torch.softmax(score_tensor / t, dim=-1)  # (n_words,)
        box.state.update(temperature=t, weights=weights.tolist(), top_word=words[int(weights.argmax())])
        pairs = zip(words, box.state["weights"], strict=True)
        readout.value = "weights: " + ", ".join(f"{word} {weight:.2f}" for word, weight in pairs)
        figure = Figure(figsize=(4.5, 3.0))
        title = f"softmax(scores / {t:.2f})"
        bar_chart(weights, list(words), title, "word", "weight", ax=figure.subplots(), ylim=(0, 1.1))
        plot.value = figure_to_png(figure)

    controls["temperature"].observe(update, names="value")
    update()
    return box
