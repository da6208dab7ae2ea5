"""The course's LayerNorm, EncoderLayer and DecoderLayer compute what PyTorch's modules compute."""

import pytest
import torch
from torch import nn

from transformer_lib import causal_mask, padding_mask
from transformer_lib.layers import DecoderLayer, DecoderLayerCache, EncoderLayer, LayerNorm, residual_connection
from transformer_lib.torch_interop import copy_decoder_layer_weights, copy_encoder_layer_weights

D_MODEL, HEADS, D_FF = 8, 2, 16


def _tokens_with_padding() -> torch.Tensor:
    return torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])  # (batch=2, T=5), pad id 0


def test_layer_norm_equals_torch():
    torch.manual_seed(0)
    ours, theirs = LayerNorm(D_MODEL).double(), nn.LayerNorm(D_MODEL).double()
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 4, D_MODEL, dtype=torch.float64) * 5 + 2
    torch.testing.assert_close(ours(x), theirs(x))
    mean, variance = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)  # the formula, by hand
    by_hand = (x - mean) / torch.sqrt(variance + 1e-5) * theirs.weight + theirs.bias
    torch.testing.assert_close(ours(x), by_hand)


def test_layer_norm_normalises_each_position_not_the_batch():
    x = torch.randn(4, 3, D_MODEL) * 7 + 3
    y = LayerNorm(D_MODEL)(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(4, 3), atol=1e-3, rtol=0)


def test_residual_connection_post_ln_and_pre_ln():
    torch.manual_seed(4)
    x = torch.randn(2, 3, D_MODEL, dtype=torch.float64)
    sublayer, norm, no_dropout = nn.Linear(D_MODEL, D_MODEL).double(), LayerNorm(D_MODEL).double(), nn.Identity()
    torch.testing.assert_close(residual_connection(x, sublayer, norm, no_dropout), norm(x + sublayer(x)))
    torch.testing.assert_close(residual_connection(x, sublayer, norm, no_dropout, norm_first=True),
                               x + sublayer(norm(x)))


def test_residual_connection_drops_the_sublayer_output_only():
    torch.manual_seed(5)
    x = torch.randn(4, 5, D_MODEL, dtype=torch.float64)
    out = residual_connection(x, torch.ones_like, nn.Identity(), nn.Dropout(0.5).train(), norm_first=True)
    kept = (out - x).round(decimals=9)  # 0 where dropped, 1 / (1 - p) = 2 where kept: x itself passes untouched
    assert set(kept.unique().tolist()) == {0.0, 2.0}


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    theirs, ours = theirs.double().eval(), ours.double().eval()
    copy_encoder_layer_weights(theirs, ours)
    tokens = _tokens_with_padding()
    x = torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    keep = padding_mask(tokens, 0)  # (batch, 1, 1, T), True = real token
    expected = theirs(x, src_key_padding_mask=~keep[:, 0, 0])
    got = ours(x, mask=keep)
    real = keep[:, 0, 0]  # compare real positions (PyTorch's fast path may zero padded rows)
    torch.testing.assert_close(got[real], expected[real])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    torch.manual_seed(1)
    theirs = nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    theirs, ours = theirs.double().eval(), ours.double().eval()
    copy_decoder_layer_weights(theirs, ours)
    src_tokens = _tokens_with_padding()
    memory = torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    x = torch.randn(2, 4, D_MODEL, dtype=torch.float64)
    keep = padding_mask(src_tokens, 0)
    expected = theirs(x, memory, tgt_mask=~causal_mask(4), memory_key_padding_mask=~keep[:, 0, 0])
    got = ours(x, memory, tgt_mask=causal_mask(4), memory_mask=keep)
    torch.testing.assert_close(got, expected)


def test_decoder_layer_cache_matches_full_computation():
    torch.manual_seed(2)
    layer = DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0).double().eval()
    memory = torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    x = torch.randn(2, 4, D_MODEL, dtype=torch.float64)
    full = layer(x, memory, tgt_mask=causal_mask(4))
    cache = DecoderLayerCache()
    steps = [layer(x[:, t : t + 1], memory, cache=cache) for t in range(4)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert len(cache.self_attn) == 4 and len(cache.cross_attn) == 5


def test_dropout_is_active_only_in_training():
    torch.manual_seed(3)
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5)
    x = torch.randn(1, 3, D_MODEL)
    assert not torch.equal(layer.train()(x), layer(x))
    torch.testing.assert_close(layer.eval()(x), layer(x))


def test_layer_norm_of_the_wrong_width_names_the_fix():
    with pytest.raises(ValueError, match=r"LayerNorm was built for vectors of 8 features, got input of shape "
                                         r"\(2, 3, 5\): its last dimension must be d_model"):
        LayerNorm(8)(torch.zeros(2, 3, 5))


def test_pre_ln_layers_with_the_wrong_width_raise_before_any_raw_pytorch_error():
    with pytest.raises(ValueError, match="LayerNorm was built for vectors of 12 features"):
        EncoderLayer(12, 3, 24, dropout=0.0, norm_first=True)(torch.zeros(1, 4, 8))


@pytest.mark.parametrize("layer", [EncoderLayer, DecoderLayer])
@pytest.mark.parametrize("dropout", [1.0, -0.1])
def test_layers_refuse_dropout_outside_zero_to_one(layer, dropout):
    with pytest.raises(ValueError, match=rf"dropout={dropout} is outside \[0, 1\)"):
        layer(12, 3, 24, dropout=dropout)


@pytest.mark.parametrize("layer", [EncoderLayer, DecoderLayer])
def test_layers_refuse_zero_heads(layer):
    with pytest.raises(ValueError, match="num_heads=0 must both be at least 1"):
        layer(12, 0, 24)
