"""MultiHeadAttention: equal to nn.MultiheadAttention, clear errors, and the properties attention must have."""

import pytest
import torch
from torch import nn

from transformer_lib import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    copy_multihead_weights,
    merge_heads,
    padding_mask,
    split_heads,
)

D_MODEL, HEADS = 12, 3


def make_pair(bias: bool = True) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(D_MODEL, HEADS, bias=bias, batch_first=True).double()
    if bias:  # PyTorch initialises its biases to zero: make them count
        nn.init.normal_(reference.in_proj_bias)
        nn.init.normal_(reference.out_proj.bias)
    ours = MultiHeadAttention(D_MODEL, HEADS, bias=bias).double()
    copy_multihead_weights(reference, ours)
    return ours.eval(), reference.eval()


def random_input(batch: int = 2, length: int = 5) -> torch.Tensor:
    return torch.randn(batch, length, D_MODEL, dtype=torch.float64)


def test_split_and_merge_heads_are_inverse_and_slice_features_in_order():
    x = torch.arange(2 * 4 * 6, dtype=torch.float64).view(2, 4, 6)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 4, 2)
    torch.testing.assert_close(heads[:, 1], x[..., 2:4])
    torch.testing.assert_close(merge_heads(heads), x)


@pytest.mark.parametrize("bias", [True, False])
def test_equal_to_pytorch_without_mask(bias):
    ours, reference = make_pair(bias)
    torch.manual_seed(1)
    query, memory = random_input(length=4), random_input(length=6)
    out, weights = ours(query, memory, memory)
    expected, expected_weights = reference(query, memory, memory, average_attn_weights=False)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)
    assert weights.shape == (2, HEADS, 4, 6)


def test_equal_to_pytorch_with_causal_and_padding_masks():
    ours, reference = make_pair()
    torch.manual_seed(2)
    x = random_input(length=5)
    tokens = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]])
    keys_real = padding_mask(tokens, pad_id=0)
    causal = causal_mask(5)
    cases = [
        (causal, dict(attn_mask=~causal)),
        (keys_real, dict(key_padding_mask=~keys_real[:, 0, 0])),
        (causal & keys_real, dict(attn_mask=~causal, key_padding_mask=~keys_real[:, 0, 0])),
    ]
    for mask, torch_masks in cases:
        out, weights = ours(x, x, x, mask=mask)
        expected, expected_weights = reference(x, x, x, average_attn_weights=False, **torch_masks)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(weights, expected_weights)


@pytest.mark.parametrize("use_mask", [False, True])
def test_fused_path_equals_readable_path(use_mask):
    ours, _ = make_pair()
    torch.manual_seed(3)
    x = random_input()
    mask = causal_mask(5) if use_mask else None
    out, weights = ours(x, x, x, mask=mask)
    fused, no_weights = ours(x, x, x, mask=mask, need_weights=False)
    assert no_weights is None
    torch.testing.assert_close(fused, out)


def test_fully_masked_rows_give_zero_attention_not_nan_on_both_paths():
    ours, _ = make_pair()
    x = random_input(batch=1, length=3)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])
    for need_weights in (True, False):
        out, _ = ours(x, x, x, mask=mask, need_weights=need_weights)
        assert not torch.isnan(out).any()
        # a query with no allowed key gets attention output 0, so only the output bias remains
        torch.testing.assert_close(out[0, 1], ours.out_proj.bias)
    _, weights = ours(x, x, x, mask=mask)
    assert torch.all(weights[:, :, 1] == 0)


def test_permutation_equivariance_without_positions():
    ours, _ = make_pair()
    x = random_input(batch=1, length=6)
    order = torch.tensor([3, 0, 5, 1, 4, 2])
    out, _ = ours(x, x, x)
    out_shuffled, _ = ours(x[:, order], x[:, order], x[:, order])
    torch.testing.assert_close(out_shuffled, out[:, order])


def test_causality_future_tokens_do_not_change_the_past():
    ours, _ = make_pair()
    x = random_input(batch=1, length=6)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, D_MODEL, dtype=torch.float64)
    out, _ = ours(x, x, x, mask=causal_mask(6))
    out_changed, _ = ours(changed, changed, changed, mask=causal_mask(6))
    torch.testing.assert_close(out_changed[:, :4], out[:, :4])
    assert not torch.allclose(out_changed[:, 4:], out[:, 4:])


def test_padding_does_not_change_real_tokens():
    ours, _ = make_pair()
    torch.manual_seed(4)
    short = random_input(batch=1, length=3)
    padded = torch.cat([short, torch.randn(1, 2, D_MODEL, dtype=torch.float64)], dim=1)
    tokens = torch.tensor([[1, 2, 3, 0, 0]])
    alone, _ = ours(short, short, short, mask=causal_mask(3))
    batched, _ = ours(padded, padded, padded, mask=causal_mask(5) & padding_mask(tokens, 0))
    torch.testing.assert_close(batched[:, :3], alone)


def test_cross_attention_output_has_the_decoder_length():
    ours, _ = make_pair()
    decoder, encoder = random_input(length=4), random_input(length=7)
    out, weights = ours(decoder, encoder, encoder)
    assert out.shape == (2, 4, D_MODEL) and weights.shape == (2, HEADS, 4, 7)


def test_kv_cache_one_token_at_a_time_equals_full_causal_attention():
    ours, _ = make_pair()
    x = random_input(length=6)
    full, _ = ours(x, x, x, mask=causal_mask(6))
    cache = KVCache()
    steps = [ours(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    assert len(cache) == 6 and cache.key.shape == (2, HEADS, 6, D_MODEL // HEADS)


def test_static_kv_cache_projects_the_encoder_output_once():
    ours, _ = make_pair()
    decoder, encoder = random_input(length=4), random_input(length=7)
    full, _ = ours(decoder, encoder, encoder)
    cache = KVCache(static=True)
    first, _ = ours(decoder[:, :1], encoder, encoder, cache=cache)
    cached_key = cache.key
    rest = [ours(decoder[:, t : t + 1], encoder, encoder, cache=cache)[0] for t in range(1, 4)]
    assert cache.key is cached_key and len(cache) == 7
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full)


def test_d_model_not_divisible_by_heads_is_a_clear_error():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3: .* e.g. 2 or 5"):
        MultiHeadAttention(10, 3)


def test_mismatched_shapes_are_clear_errors():
    ours, _ = make_pair()
    x = random_input()
    with pytest.raises(ValueError, match=r"\(batch, T, d_model\), got query \(5, 12\)"):
        ours(x[0], x[0], x[0])
    with pytest.raises(ValueError, match="last dimension d_model=12"):
        ours(x, x[..., :8], x[..., :8])
    with pytest.raises(ValueError, match="same batch size"):
        ours(x, x[:1], x[:1])
    with pytest.raises(ValueError, match="same length T_k"):
        ours(x, x, x[:, :3])


def test_masks_of_wrong_dtype_or_shape_are_clear_errors():
    ours, _ = make_pair()
    x = random_input()
    with pytest.raises(ValueError, match="must be a bool tensor .* got dtype torch.int64"):
        ours(x, x, x, mask=causal_mask(5).long())
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast .* \(2, 3, 5, 5\)"):
        ours(x, x, x, mask=causal_mask(4))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 5\) does not broadcast"):
        ours(x, x, x, mask=torch.ones(2, 5, dtype=torch.bool))


def test_copy_rejects_mismatched_sizes():
    reference = nn.MultiheadAttention(8, 2, batch_first=True)
    with pytest.raises(ValueError, match="sizes must match"):
        copy_multihead_weights(reference, MultiHeadAttention(8, 4))


@pytest.mark.parametrize("d_model, num_heads", [(12, 0), (12, -2), (0, 4)])
def test_zero_or_negative_heads_are_a_clear_error_not_a_zero_division(d_model, num_heads):
    with pytest.raises(ValueError, match=rf"d_model={d_model} and num_heads={num_heads} must both be at least 1"):
        MultiHeadAttention(d_model, num_heads)


def test_split_heads_uses_the_same_heads_check_and_names_the_shape():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3: .* e.g. 2 or 5"):
        split_heads(torch.zeros(1, 4, 10), 3)
    with pytest.raises(ValueError, match=r"\(batch, T, d_model\), got \(4, 10\): add a batch dimension"):
        split_heads(torch.zeros(4, 10), 2)
    with pytest.raises(ValueError, match=r"merge_heads expects x shaped \(batch, heads, T, d_head\)"):
        merge_heads(torch.zeros(4, 10))


@pytest.mark.parametrize("dropout", [-0.5, 1.0, 2.0])
def test_dropout_outside_zero_to_one_is_refused_at_construction(dropout):
    with pytest.raises(ValueError, match=rf"dropout={dropout} is outside \[0, 1\)"):
        MultiHeadAttention(12, 3, dropout=dropout)


def test_a_float_mask_is_refused_in_training_mode_and_without_weights_too():
    ours, _ = make_pair()
    x = random_input()
    for need_weights in (True, False):
        with pytest.raises(ValueError, match="must be a bool tensor .* got dtype torch.float32"):
            ours.train()(x, x, x, mask=causal_mask(5).float(), need_weights=need_weights)


def test_empty_sequences_are_a_clear_error():
    ours, _ = make_pair()
    x = random_input()
    with pytest.raises(ValueError, match="attention got an empty tensor"):
        ours(x[:, :0], x, x)
