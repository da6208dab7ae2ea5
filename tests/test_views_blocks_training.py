"""Lesson 07-09 plots draw, with titles and axis labels."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

from transformer_lib import Transformer, TransformerConfig, cross_attention_weights, parameter_breakdown  # noqa: E402
from transformer_lib.training import History  # noqa: E402
from transformer_lib.views.encoder_decoder_blocks import plot_curves, plot_gradient_norms  # noqa: E402
from transformer_lib.views.training import plot_cross_attention, plot_learning_rates, plot_loss_curves  # noqa: E402
from transformer_lib.views.transformer import plot_parameter_breakdown  # noqa: E402


def _model() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(9, 9, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=16,
                               dropout=0.0, max_len=10)
    return Transformer(config)


def test_parameter_breakdown_plot_has_one_bar_group_per_model():
    breakdown = parameter_breakdown(_model())
    ax = plot_parameter_breakdown({"toy": breakdown, "twice": {k: 2 * v for k, v in breakdown.items()}})
    assert ax.get_title() and ax.get_xlabel() == "parameters (millions)"
    assert len(ax.patches) == 2 * len(breakdown)


def test_cross_attention_plot_labels_source_and_target():
    model = _model()
    maps = cross_attention_weights(model, torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 6, 7]]))
    ax = plot_cross_attention(maps[1][0].mean(0), ["a", "b", "c", "<pad>"], ["x", "y", "z"], "cross")
    assert ax.get_xlabel() == "source word (key)" and ax.get_title() == "cross"


def test_curve_plots_have_titles_and_labels():
    history = History(steps=[1, 2], train_loss=[2.0, 1.0], lr=[1e-3, 1e-3], valid_steps=[2], valid_loss=[1.5])
    assert plot_loss_curves(history).get_ylabel()
    assert plot_learning_rates([1, 2], {"constant": [1e-3, 1e-3]}, "lr").get_ylabel() == "learning rate"
    assert plot_gradient_norms({"a": [1.0, 2.0]}, "g").get_title() == "g"
    assert plot_curves([1, 2], {"a": [1.0, 0.5]}, "c", "loss").get_ylabel() == "loss"


def test_encoder_decoder_masks_match_what_the_model_is_given():
    from transformer_lib import causal_mask, encoder_decoder_masks, padding_mask

    src, tgt = torch.tensor([[3, 4, 5, 0], [3, 0, 0, 0]]), torch.tensor([[1, 6, 0], [1, 7, 8]])
    masks = encoder_decoder_masks(src, tgt, pad_id=0)
    assert {name: tuple(m.shape) for name, m in masks.items()} == {
        "encoder self-attention": (2, 4, 4), "decoder self-attention": (2, 3, 3), "cross-attention": (2, 3, 4),
        "causal mask alone": (2, 3, 3)}
    assert torch.equal(masks["encoder self-attention"], padding_mask(src, 0)[:, 0].expand(2, 4, 4))
    assert torch.equal(masks["cross-attention"][1], torch.tensor([[True, False, False, False]] * 3))
    assert torch.equal(masks["decoder self-attention"][1], causal_mask(3))
    assert torch.equal(masks["decoder self-attention"][0], torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 0]]).bool())
