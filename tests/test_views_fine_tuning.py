"""Lesson 15's views: the rank plot draws, and the widget answers with every model and follows its controls."""

import matplotlib
import torch

from transformer_lib import GPT, CharTokenizer, GPTConfig
from transformer_lib.sft import END
from transformer_lib.views.fine_tuning import fine_tuning_widget, rank_plot

matplotlib.use("Agg")


def test_rank_plot_labels_each_rank_with_its_share():
    figure = rank_plot([1, 2, 4], [0.6, 0.9, 0.95], [0.02, 0.04, 0.08], full=0.99, base=0.0)
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.texts] == ["2.0%", "4.0%", "8.0%"]
    assert ax.get_xlabel() == "rank r"


def test_the_widget_answers_the_typed_instruction_with_each_model():
    tokenizer = CharTokenizer("abcdefghijklmnopqrstuvwxyz0123456789 {}~")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(tokenizer), block_size=32, d_model=16, num_heads=2, num_layers=1,
                          d_ff=32)).eval()
    w = fine_tuning_widget({"a": model, "b": model}, tokenizer, task="count", argument="Py-thon!")
    assert w.state["prompt"] == "{count python}" and w.state["expected"] == "6" + END  # letters only, lower-case
    assert w.state["answers"]["a"] == w.state["answers"]["b"]
    assert all(0 < p <= 1 for _, p, _ in w.state["answers"]["a"])
    for place, (char, p, right) in enumerate(w.state["answers"]["a"]):  # the right character's probability too
        assert right is None if place >= 2 else (right == p if char == "6~"[place] else 0 <= right <= p)
    w.controls["argument"].value = "!!"
    assert w.state["prompt"] == "{count abc}"  # no letters: a default argument
