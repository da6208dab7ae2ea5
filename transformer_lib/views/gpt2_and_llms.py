"""Lesson 12 views: a widget that trains BPE on the learner's own text, one merge at a time, and a widget for the
memory of attention's score-sized matrices at long contexts."""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ..bpe import BPETokenizer, bpe_merge_steps
from ..scaling import score_memory_mib
from .widget import LessonWidget, State

TOKEN_COLOURS = ("#dbeafe", "#fde68a", "#bbf7d0", "#fecaca", "#e9d5ff")  # neighbouring tokens told apart by colour


def _shown(token: bytes) -> str:
    """A token as a reader sees it: its text, a space as ␣, a newline as ↵, a byte that is only part of a
    character as its escape (``\\xc3``)."""
    text = token.decode("utf-8", errors="backslashreplace")
    return text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


def _tokens_html(tokenizer: BPETokenizer, ids: list[int], max_tokens: int) -> str:
    """The tokens as coloured boxes (the first ``max_tokens``), the text's own characters, HTML-escaped. Between two
    boxes an invisible ``|`` keeps the boundaries in the read-out's plain text (the widget's still picture)."""
    boxes = [
        f'<span style="background:{TOKEN_COLOURS[n % len(TOKEN_COLOURS)]};border:1px solid #999;border-radius:3px;'
        f'padding:0 2px;margin:1px;font-family:monospace;white-space:pre">{html.escape(_shown(tokenizer.vocab[i]))}'
        "</span>"
        for n, i in enumerate(ids[:max_tokens])
    ]
    more = f" … and {len(ids) - max_tokens} more" if len(ids) > max_tokens else ""
    return '<div style="line-height:1.9">' + '<span style="font-size:0">|</span>'.join(boxes) + more + "</div>"


def bpe_merges_widget(
    text: str = "low lower lowest newer newest wider widest", max_merges: int = 30, merges: int = 5,
    max_tokens: int = 200,
) -> LessonWidget:
    """A text box and a slider for the number of merges k: BPE is trained on the text itself, and the widget shows
    the text's tokens after k merges, the merge just applied and how the token count fell.

    ``.controls``: ``"text"``, ``"merges"`` (k, 0 … ``max_merges``); ``.state``: those two values, ``"done"`` (the
    merges applied: k, or fewer when every piece is already one token), ``"tokens"`` (the tokens after them, as
    bytes), ``"counts"`` (the token count after 0, 1, … merges, up to ``max_merges``), ``"count"``, ``"bytes"``,
    ``"merge_text"`` and ``"tokens_html"``, updated on every change. At most ``max_tokens`` tokens are drawn.
    """
    controls = {
        "text": widgets.Text(value=text, description="your text", continuous_update=False,
                             layout=widgets.Layout(width="95%")),
        "merges": widgets.IntSlider(value=merges, min=0, max=max_merges, description="merges k"),
    }

    @lru_cache(maxsize=8)
    def trained(text: str) -> tuple[BPETokenizer, list[list[int]]]:  # one training per text, not per slider move
        return bpe_merge_steps(text, max_merges)

    def compute(values: dict[str, Any]) -> State:
        tokenizer, steps = trained(values["text"])
        done = min(values["merges"], len(tokenizer.merges))
        ids = steps[done]
        if done == 0:
            merge_text = "no merge yet: every token is one byte"
        else:
            first, second = (tokenizer.vocab[i] for i in tokenizer.merges[done - 1])
            replaced = len(steps[done - 1]) - len(ids)
            merge_text = (f"merge {done} was <b>{html.escape(_shown(first))}</b> + "
                          f"<b>{html.escape(_shown(second))}</b> → <b>{html.escape(_shown(first + second))}</b>, "
                          f"replaced {replaced}×: {len(steps[done - 1])} → {len(ids)} tokens")
        if done < values["merges"]:
            merge_text += f"; no pair is left after {done} merges: every piece is one token"
        return {**values, "done": done, "tokens": [tokenizer.vocab[i] for i in ids],
                "counts": [len(step) for step in steps], "count": len(ids), "bytes": len(steps[0]),
                "merge_text": merge_text, "tokens_html": _tokens_html(tokenizer, ids, max_tokens)}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        counts = state["counts"]
        ax.plot(range(len(counts)), counts, "-", color="tab:gray", label="after each merge")
        ax.plot([state["done"]], [state["count"]], "o", color="tab:red", label=f"after {state['done']} merges")
        ax.set_title("Tokens in your text as BPE learns merges on it")
        ax.set_xlabel("merges learnt (k)")
        ax.set_ylabel("tokens")
        ax.set_xlim(0, max(max_merges, 1))
        ax.set_ylim(0, max(counts) * 1.05 + 1)
        ax.legend(loc="upper right", fontsize="small")

    readout = "<b>{count}</b> tokens for {bytes} bytes after {done} merges ({merge_text}): {tokens_html}"
    return LessonWidget(controls, compute, readout, draw, figsize=(6.0, 2.6))


def attention_memory_widget(
    length: int = 4096, chunk_size: int = 256, heads: int = 1,
    measured: tuple[Sequence[int], Sequence[float], Sequence[float]] | None = None,
) -> LessonWidget:
    """Sliders for the sequence length T, the chunk size and the number of heads; reads out and plots the memory of
    one attention layer's score-sized matrices for one sequence in float32.

    It counts two T × T matrices per head for the naive path (the scores, and the softmax weights written while the
    scores still exist) and two T × chunk for the chunked one, nothing else (not Q, K, V, the output or the
    weights kept for a backward pass). The plot draws both counts against T on log-log axes and marks the chosen T;
    ``measured = (lengths, naive_mib, chunked_mib)`` adds peak memory measured for one head and chunks of 256 keys.
    ``.controls``: ``"log2_length"``, ``"chunk_size"``, ``"heads"``; ``.state``: those three values, ``"length"``,
    ``"naive_mib"``, ``"chunked_mib"``, ``"ratio"``, updated on every change.
    """
    controls = {
        "log2_length": widgets.IntSlider(value=int(np.log2(length)), min=7, max=17, description="log₂ T"),
        "chunk_size": widgets.Dropdown(options=[64, 128, 256, 512, 1024], value=chunk_size, description="chunk"),
        "heads": widgets.IntSlider(value=heads, min=1, max=96, description="heads"),
    }
    lengths = 2 ** np.arange(7, 18)  # T = 128 … 131072, the slider's range

    def compute(values: dict[str, Any]) -> State:
        length = 2 ** values["log2_length"]
        settings = {"heads": values["heads"], "matrices": 2}
        naive = score_memory_mib(length, None, **settings)
        chunked = score_memory_mib(length, values["chunk_size"], **settings)
        curves = {
            "naive": [score_memory_mib(int(t), None, **settings) for t in lengths],
            "chunked": [score_memory_mib(int(t), values["chunk_size"], **settings) for t in lengths],
        }
        return {**values, "length": length, "naive_mib": naive, "chunked_mib": chunked, "ratio": chunked / naive,
                "curves": curves}

    def draw(state: State, figure: Figure) -> None:
        ax = figure.subplots()
        ax.loglog(lengths, state["curves"]["naive"], "-", color="tab:red", label="naive: 2 · heads · T² numbers")
        ax.loglog(lengths, state["curves"]["chunked"], "-", color="tab:green",
                  label=f"chunks of {state['chunk_size']}: 2 · heads · T · {state['chunk_size']}")
        ax.loglog([state["length"]] * 2, [state["chunked_mib"], state["naive_mib"]], "o", color="black",
                  label=f"T = {state['length']}")
        if measured is not None:
            measured_lengths, naive_mib, chunked_mib = measured
            ax.loglog(measured_lengths, naive_mib, "x", color="tab:red", label="measured peak, 1 head, naive")
            ax.loglog(measured_lengths, chunked_mib, "x", color="tab:green",
                      label="measured peak, 1 head, chunks of 256")
        ax.set_title(f"Score-sized matrices of one layer, {state['heads']} head(s), float32")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel("MiB")
        ax.legend(fontsize="small")

    readout = ("T = {length}: scores and softmax weights need <b>{naive_mib:,.1f} MiB</b> at once; chunks of "
               "{chunk_size} keys need <b>{chunked_mib:,.1f} MiB</b> ({ratio:.4f} of it)")
    return LessonWidget(controls, compute, readout, draw, figsize=(6.5, 4.0))
