"""Lesson 00 widget: the road map as data. A slider walks a sentence the learner types through the steps the course
builds, from words to next-token probabilities, showing the tensor at each step, its shape and the lessons that
build it."""

from __future__ import annotations

import math
from typing import Any

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure
from torch import nn

from ..attention import scaled_dot_product_attention, softmax
from ..masks import causal_mask
from ..positions import sinusoidal_encoding
from .plots import bar_chart, heatmap
from .widget import LessonWidget, State

PIPELINE_VOCABULARY = ("a", "cat", "dog", "mat", "on", "sat", "the")
PIPELINE_SENTENCE = "the cat sat on the"

# (name, the lessons that build it, what happens) for each step of the pipeline.
PIPELINE_STEPS = (
    ("text", "lesson 12",
     "the text is cut into tokens (here one word is one token; lesson 12 builds a real tokenizer)"),
    ("token ids", "lesson 01", "the vocabulary maps each token to its row number, its id"),
    ("token vectors", "lesson 01",
     "an embedding table (vocab_size, d_model) gives each id its row: one vector per token"),
    ("+ positions", "lesson 04", "a vector per position is added, so that word order is visible"),
    ("attention weights", "lessons 02, 03, 05",
     "each token scores every earlier token; softmax turns each row of scores into weights that sum to 1"),
    ("attention output", "lessons 03, 06, 07",
     "each token's new vector is a weighted average of value vectors; blocks of this are stacked"),
    ("next-token probabilities", "lessons 08, 09, 10, 11",
     "the last token's vector becomes one score per vocabulary word, and softmax makes them probabilities"),
)


def pipeline_widget(sentence: str = PIPELINE_SENTENCE, d_model: int = 8, step: int = 0, seed: int = 0) -> LessonWidget:
    """A ``step`` slider over the stages of a decoder-only Transformer applied to a sentence the learner types.

    The model is untrained: its weights are drawn at random from ``seed`` once, so the numbers show shapes and flow,
    not knowledge (lesson 09 trains a model); typing another sentence runs the same model on it. Words must be in
    :data:`PIPELINE_VOCABULARY`: the starting ``sentence`` raises a ValueError otherwise, and words typed later
    that are not are left out (the read-out names them). ``.controls``: ``"sentence"``, ``"step"``; ``.state``:
    ``"step"``, ``"name"``, ``"lessons"``, ``"what"``, ``"tokens"`` (T words), ``"skipped"`` (words left out),
    ``"ids"`` (T,), ``"shape"`` of the step's tensor and ``"tensor"`` itself, updated on every change.
    """
    unknown = [token for token in sentence.split() if token not in PIPELINE_VOCABULARY]
    if unknown or not sentence.split():
        raise ValueError(f"the sentence {sentence!r} has words outside the vocabulary {list(PIPELINE_VOCABULARY)}: "
                         f"{unknown}; use only those words.")
    vocab_size = len(PIPELINE_VOCABULARY)
    generator = torch.Generator().manual_seed(seed)
    draw_random = lambda *shape: torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    embedding = nn.Embedding.from_pretrained(draw_random(vocab_size, d_model))  # row id = that token's vector
    w_q, w_k, w_v = (draw_random(d_model, d_model) / math.sqrt(d_model) for _ in range(3))  # (d_model, d_model)
    w_out = draw_random(d_model, vocab_size) / math.sqrt(d_model)  # (d_model, vocab_size)

    def run(tokens: list[str]) -> tuple:
        """The tensor of every step for ``tokens`` (T words), through the one random model."""
        T = len(tokens)
        ids = torch.tensor([PIPELINE_VOCABULARY.index(token) for token in tokens])  # (T,)
        vectors = embedding(ids)  # (T, d_model)
        x = vectors + sinusoidal_encoding(T, d_model).to(torch.float64)  # (T, d_model)
        output, weights = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=causal_mask(T))  # (T, d), (T, T)
        probabilities = softmax(output[-1] @ w_out)  # (vocab_size,) for the token after the last one
        return tokens, ids, vectors, x, weights, output, probabilities

    controls = {
        "sentence": widgets.Text(value=sentence, description="sentence", continuous_update=False),
        "step": widgets.IntSlider(value=step, min=0, max=len(PIPELINE_STEPS) - 1, description="step"),
    }

    def compute(values: dict[str, Any]) -> State:
        typed = values["sentence"].split()
        tokens = [token for token in typed if token in PIPELINE_VOCABULARY] or ["the"]
        skipped = [token for token in typed if token not in PIPELINE_VOCABULARY]
        tensors = run(tokens)
        name, lessons, what = PIPELINE_STEPS[values["step"]]
        tensor = tensors[values["step"]]
        shape = f"{len(tokens)} tokens" if isinstance(tensor, list) else str(tuple(tensor.shape))
        note = f" · not in the vocabulary, left out: {' '.join(skipped)}" if skipped else ""
        return {"step": values["step"], "name": name, "lessons": lessons, "what": what, "tokens": tokens,
                "skipped": skipped, "note": note, "ids": tensors[1], "tensor": tensor, "shape": shape,
                "last_step": len(PIPELINE_STEPS) - 1}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        step, tensor, title = state["step"], state["tensor"], f"step {state['step']}: {state['name']}"
        tokens, ids, T = state["tokens"], state["ids"], len(state["tokens"])
        dims = [str(j) for j in range(d_model)]
        if step in (0, 1):  # the tokens as boxes; then their ids under them, and the whole vocabulary
            ax.set_axis_off()
            ax.set_title(title)
            for i, token in enumerate(tokens):
                ax.text((i + 0.5) / T, 0.75, token, ha="center", va="center", fontsize=14,
                        bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "tab:blue"})
                if step == 1:
                    ax.text((i + 0.5) / T, 0.45, f"id {int(ids[i])}", ha="center", va="center", fontsize=13,
                            color="tab:orange")
            if step == 1:
                listed = ",  ".join(f"{i}: {word}" for i, word in enumerate(PIPELINE_VOCABULARY))
                ax.text(0.5, 0.1, f"vocabulary (id: token)   {listed}", ha="center", va="center", fontsize=9)
        elif step in (2, 3, 5):
            heatmap(tensor, tokens, dims, title, "component of the vector", "token", ax=ax, fmt=".1f")
        elif step == 4:
            heatmap(tensor, tokens, tokens, title, "key (token looked at)", "query (token updated)", ax=ax,
                    vmin=0.0, vmax=1.0)
        else:
            bar_chart(tensor, list(PIPELINE_VOCABULARY), f"{title} after '{tokens[-1]}' (untrained)",
                      "next token", "probability", ax=ax, ylim=(0.0, 1.0))

    readout = ("step {step} of {last_step} · <b>{name}</b>, shape <b>{shape}</b> · {lessons}: {what}{note}")
    return LessonWidget(controls, compute, readout, draw, figsize=(6.5, 3.4))
