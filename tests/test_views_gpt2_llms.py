"""Lesson 12 view: the BPE widget trains on the learner's text and follows its text box and merge slider."""

import matplotlib

from transformer_lib import bpe_merge_steps, train_bpe
from transformer_lib.views.gpt2_and_llms import bpe_merges_widget

matplotlib.use("Agg")


def test_bpe_merges_widget_shows_the_tokens_after_k_merges():
    text = "low lower lowest newer newest wider widest"
    box = bpe_merges_widget(text, max_merges=20, merges=0)
    assert box.state["tokens"] == [bytes([b]) for b in text.encode("utf-8")] and box.state["count"] == len(text)
    box.controls["merges"].value = 1
    assert box.state["tokens"].count(b"we") == 4  # the first merge, w + e, occurs 4 times
    assert box.state["count"] == len(text) - 4 and "replaced 4×" in box.readout.value
    assert "|" in box.readout.value  # the boundaries stay in the plain text of the still picture
    box.controls["merges"].value = 5
    tokenizer = train_bpe(text, 5)
    assert box.state["tokens"] == [tokenizer.vocab[i] for i in tokenizer.encode(text)]
    _, steps = bpe_merge_steps(text, 20)
    assert box.state["counts"] == [len(step) for step in steps]
    assert all(a > b for a, b in zip(box.state["counts"], box.state["counts"][1:], strict=False))


def test_bpe_merges_widget_follows_the_text_and_says_when_no_pair_is_left():
    box = bpe_merges_widget("aaa bb", max_merges=10, merges=10)
    assert box.state["done"] == 4 and box.state["tokens"] == [b"aaa", b" bb"]
    assert "no pair is left after 4 merges" in box.readout.value
    box.controls["text"].value = "naïve <b>{x}</b> 🙂"  # markup and braces are shown as text, not read as HTML
    assert b"".join(box.state["tokens"]).decode("utf-8") == "naïve <b>{x}</b> 🙂"
    assert "&lt;" in box.readout.value and "<b>{x}" not in box.readout.value
    box.controls["text"].value = ""
    assert box.state["count"] == 0 and box.state["done"] == 0
