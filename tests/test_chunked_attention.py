"""chunked_attention equals naive attention: several chunk sizes, masks, batch and head dimensions."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib.attention import scaled_dot_product_attention
from transformer_lib.chunked_attention import chunked_attention, online_softmax_update


def _qkv(batch=2, heads=3, t_q=7, t_k=11, d_k=8, d_v=5, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(batch, heads, t_q, d_k, generator=generator, dtype=dtype)
    k = torch.randn(batch, heads, t_k, d_k, generator=generator, dtype=dtype)
    v = torch.randn(batch, heads, t_k, d_v, generator=generator, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 11, 256])
def test_equal_to_naive_attention_for_any_chunk_size(chunk_size):
    q, k, v = _qkv()
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(
        chunked_attention(q, k, v, chunk_size=chunk_size), expected, atol=1e-5, rtol=1e-5
    )


def test_equal_in_float64_to_a_written_out_softmax():
    q, k, v = _qkv(dtype=torch.float64)
    weights = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
    torch.testing.assert_close(chunked_attention(q, k, v, chunk_size=4), weights @ v)


@pytest.mark.parametrize("chunk_size", [2, 5, 16])
def test_causal_mask(chunk_size):
    q, k, v = _qkv(t_q=9, t_k=9)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    torch.testing.assert_close(
        chunked_attention(q, k, v, causal, chunk_size=chunk_size), expected, atol=1e-5, rtol=1e-5
    )


def test_padding_mask_broadcast_over_heads_and_queries():
    q, k, v = _qkv()
    keep = torch.ones(2, 1, 1, 11, dtype=torch.bool)
    keep[0, ..., 6:] = False  # the first sequence has 6 real keys, the rest is padding
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(chunked_attention(q, k, v, keep, chunk_size=4), expected, atol=1e-5, rtol=1e-5)


def test_a_chunk_that_is_entirely_masked_changes_nothing():
    q, k, v = _qkv()
    keep = torch.ones(7, 11, dtype=torch.bool)
    keep[:, :4] = False  # with chunk_size=4 the whole first chunk is masked
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    got = chunked_attention(q, k, v, keep, chunk_size=4)
    assert not got.isnan().any()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_fully_masked_rows_give_zero():
    q, k, v = _qkv()
    keep = torch.ones(7, 11, dtype=torch.bool)
    keep[2] = False
    got = chunked_attention(q, k, v, keep, chunk_size=3)
    assert torch.equal(got[..., 2, :], torch.zeros_like(got[..., 2, :]))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(got[..., 3:, :], expected[..., 3:, :], atol=1e-5, rtol=1e-5)


def test_large_scores_do_not_overflow():
    q, k, v = _qkv()
    got = chunked_attention(q * 100, k * 100, v, chunk_size=3)
    expected = F.scaled_dot_product_attention(q * 100, k * 100, v)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_one_update_from_empty_state_is_a_plain_softmax():
    scores = torch.tensor([[1.0, 2.0, 0.5]])
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    m, s, acc = online_softmax_update(
        torch.full((1, 1), float("-inf")), torch.zeros(1, 1), torch.zeros(1, 2), scores, values
    )
    torch.testing.assert_close(m, torch.tensor([[2.0]]))
    torch.testing.assert_close(acc / s, torch.softmax(scores, dim=-1) @ values)


def test_bad_inputs_raise_value_errors_that_name_the_fix():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="same last dimension"):
        chunked_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="Every key needs exactly one value"):
        chunked_attention(q, k, v[..., :3, :])
    with pytest.raises(ValueError, match="positive"):
        chunked_attention(q, k, v, chunk_size=0)
    with pytest.raises(ValueError, match="do not broadcast; .* same batch and head dimensions"):
        chunked_attention(q, k[:1, :2], v[:1, :2])
    with pytest.raises(ValueError, match="empty tensor"):
        chunked_attention(q, k[..., :0, :], v[..., :0, :])


@pytest.mark.parametrize(
    "mask, message",
    [
        (torch.ones(7, 11), "must be a bool tensor .* got dtype torch.float32"),
        (torch.ones(11, 7, dtype=torch.bool), r"mask of shape \(11, 7\) does not broadcast .* \(2, 3, 7, 11\)"),
    ],
)
def test_masks_follow_the_same_rule_as_scaled_dot_product_attention(mask, message):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=message):
        chunked_attention(q, k, v, mask=mask)
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v, mask=mask)
