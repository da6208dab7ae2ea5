"""Widgets of lessons 04-06: changing a control changes the state they display."""

import matplotlib
import torch

from transformer_lib import sinusoidal_encoding
from transformer_lib.views.masking import masking_widget
from transformer_lib.views.multi_head_attention import head_widget, plot_heads
from transformer_lib.views.positional_encoding import ENCODING_COLUMN_LABEL, plot_encoding, positional_encoding_widget

matplotlib.use("Agg")


def test_positional_encoding_widget_follows_its_sliders():
    w = positional_encoding_widget(position=3, d_model=8, max_offset=10)
    torch.testing.assert_close(w.state["vector"], sinusoidal_encoding(4, 8)[3])
    assert w.state["dots"].shape == (11,)
    w.controls["d_model"].value = 4
    assert w.state["vector"].shape == (4,)
    w.controls["position"].value = 1
    torch.testing.assert_close(w.state["vector"], sinusoidal_encoding(2, 4)[1])
    assert abs(w.state["dots"][0].item() - 2.0) < 1e-6  # PE(p)·PE(p) = d_model / 2


def test_masking_widget_updates_weights_for_each_mask():
    w = masking_widget(lengths=(6, 3), kind="none")
    assert w.state["weights"].shape == (2, 6, 6)
    assert (w.state["weights"][:, 0, 1:] > 0).all()
    w.controls["mask"].value = "causal"
    assert torch.all(w.state["weights"].triu(diagonal=1) == 0)
    w.controls["mask"].value = "padding"
    assert torch.all(w.state["weights"][1, :, 3:] == 0) and w.state["labels"][1][3] == "<pad>"
    w.controls["length_b"].value = 5
    assert w.state["weights"][1, 0, 4] > 0 and torch.all(w.state["weights"][1, :, 5] == 0)
    w.controls["mask"].value = "both"
    torch.testing.assert_close(w.state["weights"].sum(-1), torch.ones(2, 6, dtype=torch.float64))
    assert w.state["allowed"] == [21, 20]  # a: 1 + 2 + … + 6; b: 1 + … + 5 for its words, 5 for its <pad> query


def test_head_widget_follows_head_and_query():
    weights = torch.softmax(torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(0)), dim=-1)
    words = ["a", "b", "a"]
    w = head_widget(weights, words)
    torch.testing.assert_close(w.state["row"], weights[0, 0])
    w.controls["head"].value = 1
    w.controls["query"].value = 2
    torch.testing.assert_close(w.state["row"], weights[1, 2])
    assert w.state["query"] == "a" and w.state["top_key"] == words[int(weights[1, 2].argmax())]


def test_plots_have_titles_and_labels():
    ax = plot_encoding(sinusoidal_encoding(4, 4))
    assert ax.get_title() and ax.get_xlabel() == ENCODING_COLUMN_LABEL and ax.get_ylabel() == "position p"
    fig = plot_heads(torch.full((2, 3, 3), 1 / 3), ["x", "y", "z"], ["x", "y", "z"])
    assert [a.get_title() for a in fig.axes[:2]] == ["head 0", "head 1"]
