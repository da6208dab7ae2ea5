"""The GPT: its block equals the encoder layer and PyTorch's layer given a causal mask, its fused causal attention
equals the readable path, its KV cache equals recomputation, and GPT-2's options are configuration."""

import pytest
import torch
from torch import nn

from transformer_lib import causal_mask, copy_encoder_layer_weights
from transformer_lib.gpt import GPT, Block, CausalSelfAttention, GPTConfig
from transformer_lib.layers import EncoderLayer


def _small_gpt(vocab_size: int = 10, **overrides) -> GPT:
    torch.manual_seed(0)
    sizes = dict(block_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64)
    return GPT(GPTConfig(vocab_size, **{**sizes, **overrides})).eval()


def _x(batch: int = 2, length: int = 7, d_model: int = 8) -> torch.Tensor:
    return torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def test_a_block_is_the_encoder_layer_given_a_causal_mask():
    torch.manual_seed(0)
    block = Block(GPTConfig(10, d_model=8, num_heads=2, d_ff=16)).double().eval()
    layer = EncoderLayer(8, 2, 16, dropout=0.0, norm_first=True).double().eval()
    layer.load_state_dict(block.state_dict())  # same parameter names
    x = _x()
    torch.testing.assert_close(block(x), layer(x, causal_mask(7)))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_a_block_equals_pytorchs_pre_ln_encoder_layer_with_a_causal_mask(activation):
    torch.manual_seed(0)
    torch_layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation, norm_first=True,
                                             batch_first=True).double().eval()
    ours = EncoderLayer(8, 2, 16, dropout=0.0, norm_first=True).double()
    copy_encoder_layer_weights(torch_layer, ours)
    block = Block(GPTConfig(10, d_model=8, num_heads=2, d_ff=16, activation=activation)).double().eval()
    block.load_state_dict(ours.state_dict())
    x = _x()
    expected = torch_layer(x, src_mask=~causal_mask(7))  # PyTorch's boolean masks: True = blocked
    torch.testing.assert_close(block(x), expected)


def test_fused_causal_attention_equals_the_readable_path_with_and_without_a_cache():
    torch.manual_seed(0)
    attention = CausalSelfAttention(8, 2).double().eval()
    x = _x()
    fused, none = attention(x)  # is_causal=True
    readable, weights = attention(x, need_weights=True)  # causal_mask + readable softmax
    assert none is None and weights.shape == (2, 2, 7, 7)
    torch.testing.assert_close(fused, readable)
    assert torch.all(weights.triu(diagonal=1) == 0)
    cache = GPT(GPTConfig(10, d_model=8, num_heads=2, num_layers=1)).new_cache().layers[0]
    first, _ = attention(x[:, :4], cache=cache)
    rest, rest_weights = attention(x[:, 4:], cache=cache, need_weights=True)  # 3 new rows after 4 cached
    assert rest_weights.shape == (2, 2, 3, 7) and len(cache) == 7
    torch.testing.assert_close(torch.cat((first, rest), dim=1), fused)


def test_the_kv_cache_gives_the_logits_of_one_full_pass():
    model = _small_gpt().double()
    tokens = torch.randint(10, (2, 16), generator=torch.Generator().manual_seed(1))  # (batch, block_size)
    full = model(tokens)  # (2, 16, 10)
    cache = model.new_cache()
    pieces = [model(tokens[:, :5], cache=cache)]  # a prompt of 5, then 3 at once, then one at a time
    pieces.append(model(tokens[:, 5:8], cache=cache))
    pieces += [model(tokens[:, t : t + 1], cache=cache) for t in range(8, 16)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full)
    assert len(cache) == 16
    with pytest.raises(ValueError, match=r"a context of 17 tokens \(16 cached\) exceeds block_size=16"):
        model(tokens[:, :1], cache=cache)


def test_logits_shape_and_causality():
    model = _small_gpt()
    tokens = torch.arange(16)[None] % 10  # (1, 16)
    changed = tokens.clone()
    changed[0, 10:] = 0
    logits, changed_logits = model(tokens), model(changed)
    assert logits.shape == (1, 16, 10)
    torch.testing.assert_close(logits[:, :10], changed_logits[:, :10])  # the future cannot change the past
    assert not torch.allclose(logits[:, 10:], changed_logits[:, 10:])


def test_gpt2_options_are_configuration():
    gpt2_like = _small_gpt(activation="gelu_tanh", bias=True, tie_output=True)
    assert gpt2_like.head.weight is gpt2_like.token_embedding.weight
    assert gpt2_like.blocks[0].activation(torch.tensor([1.0])).item() == pytest.approx(0.841192, abs=1e-6)
    no_bias = _small_gpt(bias=False)
    linear_names = [name for name, module in no_bias.named_modules() if isinstance(module, nn.Linear)]
    assert linear_names and all(no_bias.get_submodule(n).bias is None for n in linear_names)
    assert sum(p.numel() for p in gpt2_like.parameters()) < sum(p.numel() for p in _small_gpt().parameters())


def test_a_context_longer_than_the_block_names_the_fix():
    message = r"a context of 17 tokens \(0 cached\) exceeds block_size=16: pass the last 16"
    with pytest.raises(ValueError, match=message):
        _small_gpt()(torch.zeros(1, 17, dtype=torch.long))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_heads=0), "d_model=32 and num_heads=0 must both be at least 1"),
        (dict(num_heads=3), "d_model=32 is not divisible by num_heads=3: .* e.g. 2 or 4 or 8"),
        (dict(dropout=1.0), r"dropout=1.0 is outside \[0, 1\)"),
        (dict(vocab_size=0), r"vocab_size=0 must be at least 1: pass len\(tokenizer\)"),
        (dict(block_size=0), "block_size=0 must be at least 1"),
        (dict(activation="swish"), r"activation='swish' is unknown: choose one of \['gelu', 'gelu_tanh', 'relu'\]"),
    ],
)
def test_impossible_configs_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{"vocab_size": 10, "block_size": 16, "d_model": 32, "num_heads": 2, **overrides})


@pytest.mark.parametrize(
    "tokens, error, message",
    [
        (torch.tensor([[0, 10]]), ValueError, r"token id 10 in tokens is outside the vocabulary of 10 tokens "
                                              r"\(valid ids are 0 … 9\)"),
        (torch.tensor([[-3, 1]]), ValueError, "token id -3 in tokens is outside the vocabulary"),
        (torch.tensor([[0.0, 1.0]]), TypeError, r"got dtype torch.float32: .* tokens.long\(\)"),
        (torch.zeros(2, 0, dtype=torch.long), ValueError, r"tokens is empty, shape \(2, 0\)"),
    ],
)
def test_bad_token_ids_are_clear_errors(tokens, error, message):
    with pytest.raises(error, match=message):
        _small_gpt()(tokens)
