"""Widgets of lessons 03-06: changing a control changes the state they display; and the core functions behind the
lesson 03 and 06 widgets (``unit_variance_scores``, ``record_attention``)."""

import math

import matplotlib
import pytest
import torch

from transformer_lib import (
    MultiHeadAttention,
    Transformer,
    TransformerConfig,
    make_translation_task,
    record_attention,
    sinusoidal_encoding,
    unit_variance_scores,
)
from transformer_lib.views.masking import masking_widget
from transformer_lib.views.multi_head_attention import attention_name, plot_heads, translator_heads_widget
from transformer_lib.views.positional_encoding import ENCODING_COLUMN_LABEL, plot_encoding
from transformer_lib.views.queries_keys_values import scaling_widget

matplotlib.use("Agg")


def test_masking_widget_shows_which_outputs_an_edit_moves_under_each_mask():
    w = masking_widget(short_length=3, kind="none", position=4)
    assert w.state["weights"].shape == (2, 6, 6) and w.state["labels"][1][3:] == ["<pad>"] * 3
    assert w.state["moved_a"] == [0, 1, 2, 3, 4, 5] and w.state["moved_b"] == [0, 1, 2]  # no mask: everything moves
    w.controls["mask"].value = "causal"
    assert w.state["moved_a"] == [4, 5] and w.state["moved_b"] == []  # only the edited position and later ones
    assert torch.all(w.state["change"][:, :4] == 0)  # earlier outputs are exactly unchanged
    w.controls["mask"].value = "padding"
    assert w.state["moved_a"] == [0, 1, 2, 3, 4, 5] and w.state["moved_b"] == []  # a <pad> edit reaches no real token
    w.controls["position"].value = 1
    assert w.state["moved_b"] == [0, 1, 2] and w.state["edited_b"] == "cat"
    w.controls["mask"].value = "both"
    assert w.state["moved_a"] == [1, 2, 3, 4, 5] and w.state["moved_b"] == [1, 2]
    torch.testing.assert_close(w.state["weights"].sum(-1), torch.ones(2, 6, dtype=torch.float64))
    with pytest.raises(ValueError, match="short_length=7"):
        masking_widget(short_length=7)


def test_plots_have_titles_and_labels():
    ax = plot_encoding(sinusoidal_encoding(4, 4))
    assert ax.get_title() and ax.get_xlabel() == ENCODING_COLUMN_LABEL and ax.get_ylabel() == "position pos"
    fig = plot_heads(torch.full((2, 3, 3), 1 / 3), ["x", "y", "z"], ["x", "y", "z"])
    assert [a.get_title() for a in fig.axes[:2]] == ["head 0", "head 1"]


def test_unit_variance_scores_grow_as_the_square_root_of_d_k_on_the_same_vectors():
    wide = unit_variance_scores(256, num_queries=256, num_keys=64)
    assert wide.shape == (256, 64) and wide.dtype == torch.float64
    assert abs(wide.std().item() / math.sqrt(256) - 1) < 0.05
    first = unit_variance_scores(1, num_queries=256, num_keys=64)
    second = unit_variance_scores(2, num_queries=256, num_keys=64) - first  # the second components' products alone
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(256, 512, generator=generator, dtype=torch.float64)
    k = torch.randn(64, 512, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(second, q[:, 1:2] @ k[:, 1:2].T)
    with pytest.raises(ValueError, match="d_k=600 must be in 1 … max_d_k=512"):
        unit_variance_scores(600)


def test_scaling_widget_shows_the_spread_grow_and_the_scale_undo_it():
    w = scaling_widget(d_k=4)
    assert w.state["scores"].shape == (128, 16) and not w.state["scaled"]
    torch.testing.assert_close(w.state["scores"], unit_variance_scores(4))
    saturated_at_4 = w.state["mean_largest"]
    w.controls["d_k"].value = 512
    assert abs(w.state["std"] / w.state["sqrt_d_k"] - 1) < 0.1
    assert w.state["mean_largest"] > max(saturated_at_4, 0.9)
    w.controls["scale"].value = True
    assert abs(w.state["std"] - 1) < 0.1 and w.state["mean_largest"] < 0.4
    torch.testing.assert_close(w.state["row"].sum(), torch.tensor(1.0, dtype=torch.float64))
    assert w.state["largest_weight"] == w.state["row"].max().item()


def tiny_translator():
    task = make_translation_task(num_train=20, num_valid=2, num_test=4, num_unseen=0)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab),
                                          d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=2,
                                          d_ff=16, dropout=0.0, max_len=32, share_embeddings=False))
    return model, task


def test_record_attention_returns_every_blocks_weights_by_name():
    model, task = tiny_translator()
    src, tgt = task.encode_pairs(task.test[:3])
    maps = record_attention(model, src, tgt[:, :-1])
    names = [name for name, module in model.named_modules() if isinstance(module, MultiHeadAttention)]
    assert list(maps) == names and len(names) == 1 + 2 * 2
    assert maps["encoder_layers.0.self_attn"].shape == (3, 2, src.shape[1], src.shape[1])
    assert maps["decoder_layers.1.multihead_attn"].shape == (3, 2, tgt.shape[1] - 1, src.shape[1])
    causal = maps["decoder_layers.0.self_attn"]
    assert torch.all(causal.triu(diagonal=1) == 0)  # the decoder's masked self-attention sees no future
    assert not any(module._forward_hooks or module._forward_pre_hooks for module in model.modules())
    assert not model.training


def test_attention_name_says_what_a_block_does():
    assert attention_name("encoder_layers.0.self_attn") == "encoder layer 0: self-attention"
    assert attention_name("decoder_layers.1.self_attn") == "decoder layer 1: masked self-attention"
    assert attention_name("decoder_layers.1.multihead_attn") == "decoder layer 1: cross-attention"


def test_translator_heads_widget_follows_sentence_block_and_head():
    model, task = tiny_translator()
    pairs = task.test[:2]
    w = translator_heads_widget(model, task, pairs, attention="decoder layer 1: cross-attention")
    source, target = pairs[0]
    assert w.state["query_labels"] == [*target, "<eos>"] and w.state["key_labels"] == [*source, "<eos>"]
    src, tgt = task.encode_pairs(pairs[:1])
    expected = record_attention(model, src, tgt[:, :-1])["decoder_layers.1.multihead_attn"][0]
    torch.testing.assert_close(w.state["weights"], expected[0])
    w.controls["head"].value = 1
    torch.testing.assert_close(w.state["weights"], expected[1])
    w.controls["attention"].value = "encoder layer 0: self-attention"
    assert w.state["query_labels"] == w.state["key_labels"] == [*source, "<eos>"]
    w.controls["sentence"].value = 1
    source, target = pairs[1]
    w.controls["attention"].value = "decoder layer 0: masked self-attention"
    assert w.state["query_labels"] == [*target, "<eos>"] and w.state["key_labels"] == ["<bos>", *target]
    assert torch.all(w.state["weights"].triu(diagonal=1) == 0)
    assert w.state["top_keys"][0] == "<bos>"  # the first decoder query may only look at itself
