"""int8 weights: per-channel absmax quantization, its error bound, the memory it saves, PyTorch's own as a reference."""

import warnings

import pytest
import torch
from torch import nn

from transformer_lib import GPT, GPTConfig, set_seed
from transformer_lib.quantization import (
    AllocationPeak,
    Int8Linear,
    dequantize_int8,
    int8_scales,
    quantize_int8,
    quantize_linear_layers,
    state_nbytes,
)


def test_every_entry_is_within_half_a_step_of_its_row():
    torch.manual_seed(0)
    weight = torch.randn(6, 10) * torch.tensor([0.01, 0.1, 1.0, 5.0, 0.5, 2.0])[:, None]  # rows of different ranges
    values, scale = quantize_int8(weight)
    assert values.dtype == torch.int8 and scale.shape == (6, 1)
    assert values.abs().max() == 127  # each row's largest entry maps to ±127
    error = (dequantize_int8(values, scale) - weight).abs()  # (6, 10)
    assert torch.all(error <= scale / 2 * (1 + 1e-6))
    _, one_scale = quantize_int8(weight, per_channel=False)
    assert one_scale.shape == () and torch.all(scale <= one_scale)


def test_per_channel_integers_match_torch_quantize_per_channel():
    torch.manual_seed(1)
    weight = torch.randn(16, 32)
    values, scale = quantize_int8(weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch 2.13 warns that quantized tensors are deprecated
        theirs = torch.quantize_per_channel(weight, scale[:, 0].double(), torch.zeros(16, dtype=torch.long), 0,
                                            torch.qint8).int_repr()
    assert (values.int() - theirs.int()).abs().max() <= 1  # a division and a multiplication by 1/scale may round apart
    assert (values == theirs).float().mean() > 0.99


def test_an_all_zero_row_stays_zero():
    values, scale = quantize_int8(torch.zeros(2, 3))
    assert torch.all(values == 0) and torch.all(scale > 0)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="out_features, in_features"):
        int8_scales(torch.zeros(3))


def test_quantized_gpt_is_close_to_float_and_four_times_smaller():
    set_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, d_model=64, num_heads=4, num_layers=2, d_ff=128)).eval()
    quantized = quantize_linear_layers(model)
    assert not any(isinstance(m, nn.Linear) for m in quantized.modules())
    assert sum(isinstance(m, Int8Linear) for m in quantized.modules()) == 2 * 6 + 1
    assert any(isinstance(m, nn.Linear) for m in model.modules())  # the original is untouched
    ratio = state_nbytes(quantized, linear_weights_only=True) / state_nbytes(model, linear_weights_only=True)
    assert 0.25 < ratio < 0.3
    assert state_nbytes(quantized) < state_nbytes(model)
    tokens = torch.randint(50, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(quantized(tokens), model(tokens), atol=0.05, rtol=0.05)


def test_a_tied_output_layer_is_refused():
    model = GPT(GPTConfig(vocab_size=10, block_size=4, d_model=8, num_heads=2, d_ff=16, tie_output=True))
    with pytest.raises(ValueError, match="tie_output=False"):
        quantize_linear_layers(model)


def test_allocation_peak_counts_new_tensors_while_they_live():
    x, w = torch.randn(64, 64), torch.randn(256, 64)
    with torch.no_grad(), AllocationPeak() as peak:
        y = x @ w.T  # (64, 256) float32: 65 536 bytes
        y.t()  # a view: nothing new
        z = y.relu()  # another 65 536 while y lives
        del y, z
        small = torch.zeros(10)  # 40 bytes, after the others were freed
    assert peak.bytes == 2 * 64 * 256 * 4 and peak.alive == small.nbytes


def test_int8_linear_holds_one_float_copy_of_its_weight_during_a_call():
    """Stored, the int8 layer is a quarter of the float one; during a call it rebuilds the float32 weight once."""
    layer = nn.Linear(64, 256)
    quantized = Int8Linear(layer)
    x = torch.randn(1, 64)
    with torch.no_grad(), AllocationPeak() as float_peak:
        layer(x)
    with torch.no_grad(), AllocationPeak() as int8_peak:
        quantized(x)
    assert float_peak.bytes == 256 * 4  # the output row only
    assert int8_peak.bytes == 256 * 64 * 4 + 256 * 4  # the rebuilt weight and the output
