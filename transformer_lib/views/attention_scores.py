"""Lesson 02 widget: one word of a sentence attends to the sentence: its scores, its softmax weights at a
temperature τ, and the weighted average of the sentence's vectors that comes out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..attention import entropy_bits, softmax
from .plots import bar_chart
from .widget import LessonWidget, State


def _positions(tokens: Sequence[str]) -> list[str]:
    """Dropdown options for the query, one per token counted from 1: "2 · apple" is position 1 (0-based)."""
    return [f"{i + 1} · {token}" for i, token in enumerate(tokens)]


def attention_scores_widget(
    words: Sequence[str],
    vectors: torch.Tensor,
    sentences: Sequence[str],
    query_word: str | None = None,
    temperature: float = 1.0,
) -> LessonWidget:
    """Choose a sentence, one of its words as the query and a temperature τ; see the query's dot-product score with
    every token of the sentence, the weights ``softmax(scores / τ)`` and the new vector they make.

    ``words`` and ``vectors`` (vocab_size, d) are the vocabulary: row ``i`` is the vector of ``words[i]``. Each
    sentence is a string of vocabulary words separated by spaces (matched ignoring case); a word that occurs twice
    is two tokens. ``query_word`` picks the first query (default: the first token). ``.controls``: ``"sentence"``
    and ``"query"`` (dropdowns; the query's options are the chosen sentence's tokens, "2 · apple") and
    ``"temperature"`` (slider); ``.state``: ``"sentence"``, ``"tokens"`` (T words), ``"query"`` (a position),
    ``"query_word"``, ``"temperature"``, ``"scores"`` (T,), ``"weights"`` (T,), ``"output"`` (d,) the weighted
    average of the sentence's vectors, ``"largest_weight"``, ``"entropy_bits"`` and ``"mix"`` (the output
    written as weights times words), updated on every change.
    """
    if vectors.dim() != 2 or vectors.shape[0] != len(words):
        raise ValueError(
            f"expected one vector per word: {len(words)} words and vectors of shape {tuple(vectors.shape)}; "
            "pass vectors of shape (len(words), d)."
        )
    if not sentences:
        raise ValueError("give at least one sentence, e.g. sentences=['an apple and an orange'].")
    row_of = {word.lower(): i for i, word in enumerate(words)}
    tokens_of = {sentence: sentence.split() for sentence in sentences}
    for sentence, tokens in tokens_of.items():
        unknown = [token for token in tokens if token.lower() not in row_of]
        if unknown or not tokens:
            raise ValueError(
                f"the sentence {sentence!r} has words outside the vocabulary: {unknown}; "
                f"use only these words: {list(words)}."
            )
    table = vectors.to(torch.float64)  # (vocab_size, d)
    first = tokens_of[sentences[0]]
    lowered = [token.lower() for token in first]
    start = lowered.index(query_word.lower()) if query_word and query_word.lower() in lowered else 0
    controls = {
        "sentence": widgets.Dropdown(options=list(sentences), value=sentences[0], description="sentence"),
        "query": widgets.Dropdown(options=_positions(first), value=_positions(first)[start], description="query"),
        "temperature": widgets.FloatLogSlider(
            value=temperature, base=10, min=-1, max=1, step=0.05, description="temperature τ"
        ),
    }

    def follow_sentence(change: dict[str, Any]) -> None:
        """New sentence: offer its positions as queries, keeping the query word where the sentence has it."""
        word = controls["query"].value.split(" · ", 1)[1].lower()
        options = _positions(tokens_of[change["new"]])
        tokens = [token.lower() for token in tokens_of[change["new"]]]
        controls["query"].options = options
        controls["query"].value = options[tokens.index(word) if word in tokens else 0]

    # Registered before the widget wires its own observers, so the query's options are right when it recomputes.
    controls["sentence"].observe(follow_sentence, names="value")

    def compute(values: dict[str, Any]) -> State:
        tokens = tokens_of[values["sentence"]]
        options = _positions(tokens)
        query = options.index(values["query"]) if values["query"] in options else 0  # (mid-switch: the old one)
        x = table[[row_of[token.lower()] for token in tokens]]  # (T, d): the embedding lookup
        scores = x @ x[query]  # (T,) the query's dot product with every token
        weights = softmax(scores / values["temperature"])  # (T,) positive, sum to 1
        output = weights @ x  # (d,) the weighted average of the sentence's vectors
        mix = " + ".join(f"{w:.2f} {token}" for w, token in zip(weights.tolist(), tokens, strict=True))
        return {"sentence": values["sentence"], "tokens": tokens, "query": query, "query_word": tokens[query],
                "temperature": values["temperature"], "scores": scores, "weights": weights, "output": output,
                "largest_weight": float(weights.max()), "entropy_bits": entropy_bits(weights), "mix": mix}

    def draw(state: State, figure: Figure) -> None:
        score_ax, weight_ax = figure.subplots(1, 2)
        labels = [f"{i + 1} {token}" for i, token in enumerate(state["tokens"])]
        bar_chart(state["scores"], labels, f"scores of '{state['query_word']}'", "key (token looked at)",
                  "dot product", ax=score_ax)
        bar_chart(state["weights"], labels, f"softmax(scores / {state['temperature']:.2f})",
                  "key (token looked at)", "weight", ax=weight_ax, ylim=(0.0, 1.1))
        for ax in (score_ax, weight_ax):
            ax.patches[state["query"]].set_color("tab:orange")  # the query's own token
            ax.tick_params(axis="x", labelrotation=30)

    readout = ("'{query_word}' → {mix}; largest weight <b>{largest_weight:.3f}</b>, entropy "
               "<b>{entropy_bits:.2f}</b> bits")
    width = max(7.0, 1.4 * max(len(tokens) for tokens in tokens_of.values()) + 2.0)
    return LessonWidget(controls, compute, readout, draw, figsize=(width, 3.2))
