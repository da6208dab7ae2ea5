"""Lesson 07-09 views: the parameter breakdown adds up, cross-attention weights are captured, plots draw."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

from transformer_lib import Transformer, TransformerConfig, count_parameters, padding_mask  # noqa: E402
from transformer_lib.training import History  # noqa: E402
from transformer_lib.views.blocks import plot_curves, plot_gradient_norms  # noqa: E402
from transformer_lib.views.training import (  # noqa: E402
    cross_attention_weights,
    parameter_breakdown,
    plot_cross_attention,
    plot_loss_curves,
    plot_parameter_breakdown,
)


def _model() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(9, 9, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=16,
                               dropout=0.0, max_len=10)
    return Transformer(config)


def test_parameter_breakdown_adds_up_to_the_count():
    model = _model()
    breakdown = parameter_breakdown(model)
    assert sum(breakdown.values()) == count_parameters(model)
    assert breakdown["embeddings + output"] == 9 * 8  # one shared, tied matrix
    assert plot_parameter_breakdown({"toy": breakdown}).get_title()


def test_cross_attention_weights_are_distributions_over_real_source_tokens():
    model = _model()
    src = torch.tensor([[3, 4, 5, 0]])
    maps = cross_attention_weights(model, src, torch.tensor([[1, 6, 7]]), src_mask=padding_mask(src, 0))
    assert len(maps) == 2 and maps[0].shape == (1, 2, 3, 4)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(1, 2, 3))
    assert (maps[1][..., 3] == 0).all()  # the padded source position gets no weight
    assert not model.decoder_layers[0].multihead_attn._forward_hooks  # hooks removed
    ax = plot_cross_attention(maps[1][0].mean(0), ["a", "b", "c", "<pad>"], ["x", "y", "z"], "cross")
    assert ax.get_xlabel() == "source word (key)"


def test_curve_plots_have_titles_and_labels():
    history = History(steps=[1, 2], train_loss=[2.0, 1.0], lr=[1e-3, 1e-3], valid_steps=[2], valid_loss=[1.5])
    assert plot_loss_curves(history).get_ylabel()
    assert plot_gradient_norms({"a": [1.0, 2.0]}, "g").get_title() == "g"
    assert plot_curves([1, 2], {"a": [1.0, 0.5]}, "c", "loss").get_ylabel() == "loss"
