"""Lesson 13's views: the plots draw, and the widget's state is the core's scores of what was typed."""

import matplotlib
import matplotlib.pyplot as plt
import torch

from transformer_lib import GPT, GPTConfig, set_seed
from transformer_lib.induction import InductionHistory, encode_symbols, induction_score, previous_token_score
from transformer_lib.interpret import attention_patterns
from transformer_lib.views.inside_a_trained_model import (
    all_head_patterns,
    half_loss_curves,
    induction_head_widget,
    patching_map,
    phase_change_curves,
    rank_by_depth,
    score_table,
)

matplotlib.use("Agg")


def tiny_model():
    set_seed(0)
    return GPT(GPTConfig(vocab_size=64, block_size=16, d_model=16, num_heads=2, num_layers=2,
                         feed_forward=False)).eval()


def test_the_plots_draw():
    history = InductionHistory(first_half=[4.0] * 60, repeated_half=[4.0 - i / 20 for i in range(60)])
    ax = half_loss_curves(history, uniform=4.16)
    assert len(ax.lines) == 3
    assert len(half_loss_curves(history, uniform=4.16, control=history).lines) == 4  # and the one-layer model's
    history.score_steps = [0, 25, 50]
    history.last_layer_induction, history.layer_0_previous = [0.1, 0.5, 0.9], [0.1, 0.3, 0.4]
    figure = phase_change_curves(history, 0.09, 0.14)
    top, bottom = figure.axes
    assert len(top.lines) == 1 and len(bottom.lines) == 4  # the loss; two scores and their chance levels
    assert bottom.get_xlabel() == "training step"
    figure = all_head_patterns(torch.rand(2, 2, 5, 5), list("abcde"), "patterns")
    assert len(figure.axes) == 4
    axes = score_table(torch.rand(2, 2), torch.rand(2, 2))
    assert axes[0].get_title() == "previous-token score"
    reach = torch.tensor([[False, True, True], [True, False, False]])
    ax = patching_map(torch.rand(2, 3), reach, ["a", "b"], "patches", "depth")
    assert [t.get_text() for t in ax.texts].count("·") == 3  # the cells a patch cannot reach are marked, not numbered
    ax = rank_by_depth(torch.randint(0, 5, (3, 10)), "ranks")
    assert ax.get_ylabel() == "rank of the correct next token"
    plt.close("all")


def test_the_widget_shows_the_cores_scores_of_the_typed_sequence():
    model = tiny_model()
    w = induction_head_widget(model, text="abcabc", layer=1, head=1)
    tokens = encode_symbols("abcabc", 64)[None]
    weights = attention_patterns(model, tokens)[1, :, 1]  # (1, T, T)
    torch.testing.assert_close(w.state["weights"], weights[0])
    assert w.state["previous"] == previous_token_score(weights[:, None]).item()
    assert w.state["induction"] == induction_score(weights[:, None], tokens).item()
    w.controls["text"].value = "abc def"  # no repeat; the space is not a token
    assert w.state["induction"] is None and w.state["tokens"] == "abcdef" and w.state["dropped"] == 1
    assert "no repeat" in w.readout.value
    w.controls["text"].value = "x" * 40  # longer than the context: cut to block_size
    assert len(w.state["tokens"]) == 16
