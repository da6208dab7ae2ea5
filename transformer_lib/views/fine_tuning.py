"""Plots and the widget of lesson 15: held-out accuracy against LoRA's rank, and the answers of a base, a fully
fine-tuned and a LoRA model to one instruction, character by character."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from torch import nn

from ..data import CharTokenizer
from ..sft import END, TASKS, Instruction, answer_probabilities
from .widget import LessonWidget, State


def rank_plot(ranks: Sequence[int], accuracies: Sequence[float], shares: Sequence[float], full: float,
              base: float, guesser: float | None = None) -> Figure:
    """Held-out exact match of LoRA at each rank (log-2 axis, each point labelled with its trainable share), beside
    full fine-tuning's, the base model's and (when given) a guesser's that reads no letters, as lines."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot(ranks, accuracies, "o-", label="LoRA")
    for rank, accuracy, share in zip(ranks, accuracies, shares, strict=True):
        ax.annotate(f"{share:.1%}", (rank, accuracy), textcoords="offset points", xytext=(0, -14), ha="center",
                    fontsize=8)
    ax.axhline(full, color="C1", linestyle="--", label="full fine-tuning")
    ax.axhline(base, color="grey", linestyle=":", label="base model")
    if guesser is not None:
        ax.axhline(guesser, color="C2", linestyle="-.", label="guesser (reads no letters)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ranks), [str(r) for r in ranks])
    ax.set(title="Held-out exact match against LoRA's rank (labels: share of parameters trained)",
           xlabel="rank r", ylabel="exact match", ylim=(-0.05, 1.05))
    ax.legend(loc="center right")
    fig.tight_layout()
    return fig


def _clean_argument(text: str) -> str:
    """The argument an instruction takes, from free text: its first 8 lower-case letters ("abc" if none)."""
    return re.sub(r"[^a-z]", "", text.lower())[:8] or "abc"


def fine_tuning_widget(models: Mapping[str, nn.Module], tokenizer: CharTokenizer, task: str = "last",
                       argument: str = "python") -> LessonWidget:
    """Pick a task and type its letters (up to 8; training had 3 to 6): every model in ``models`` (name -> model,
    e.g. base, full, LoRA) answers greedily, and the figure shows the probability it gave each character of its answer
    (green where the character is right at its place, red where not; where it is wrong, an outlined bar shows the
    probability it gave the right character).

    ``.controls``: ``"task"``, ``"argument"``; ``.state``: ``"prompt"``, ``"expected"`` (the answer and ``END``),
    ``"answers"`` (name -> [(character, probability, probability of the right character), …]) and ``"correct"``
    (name -> bool).
    """
    controls = {
        "task": widgets.Dropdown(options=list(TASKS), value=task, description="task"),
        "argument": widgets.Text(value=argument, description="letters"),
    }

    def compute(values: dict[str, Any]) -> State:
        instruction = Instruction(values["task"], _clean_argument(values["argument"]))
        answers = {name: answer_probabilities(model, tokenizer, instruction.prompt, instruction.response)
                   for name, model in models.items()}
        correct = {name: "".join(c for c, _, _ in steps) == instruction.response for name, steps in answers.items()}
        summary = "; ".join(f"{name}: <b>{html.escape(''.join(c for c, _, _ in steps))}</b> "
                            f"{'✔' if correct[name] else '✘'}" for name, steps in answers.items())
        return {"prompt": instruction.prompt, "expected": instruction.response, "answers": answers,
                "correct": correct, "summary": summary, "prompt_html": html.escape(instruction.prompt),
                "expected_html": html.escape(instruction.response)}

    def draw(state: State, figure: Figure) -> None:
        axes = figure.subplots(1, len(state["answers"]), sharey=True, squeeze=False)[0]
        for ax, (name, steps) in zip(axes, state["answers"].items(), strict=True):
            expected = state["expected"]
            wrong = [i for i, (char, _, _) in enumerate(steps) if i >= len(expected) or char != expected[i]]
            ax.bar(range(len(steps)), [p for _, p, _ in steps],
                   color=["C3" if i in wrong else "C2" for i in range(len(steps))])
            shown = [i for i in wrong if steps[i][2] is not None]  # wrong places that have a right character
            ax.bar(shown, [steps[i][2] for i in shown], fill=False, edgecolor="C2", linewidth=1.5,
                   label="the right character" if shown else None)
            for i in shown:
                ax.annotate(expected[i], (i, steps[i][2]), textcoords="offset points", xytext=(0, 2), ha="center",
                            color="C2", fontsize=8)
            if shown:
                ax.legend(loc="upper right", fontsize=7)
            ax.set_xticks(range(len(steps)), [char for char, _, _ in steps])
            ax.set(title=f"{name} {'✔' if state['correct'][name] else '✘'}", ylim=(0, 1),
                   xlabel=f"answer characters ({END} ends)")
        axes[0].set_ylabel("probability")

    readout = "{prompt_html} → expected <b>{expected_html}</b>. {summary}"
    return LessonWidget(controls, compute, readout, draw, figsize=(9.0, 2.8))
