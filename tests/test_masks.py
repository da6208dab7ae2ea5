"""Causal and padding masks: shapes, polarity (True = allowed) and their effect on attention."""

import pytest
import torch

from transformer_lib import causal_mask, padding_mask, scaled_dot_product_attention


def test_causal_mask_is_lower_triangle_including_diagonal():
    mask = causal_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    for query in range(4):
        for key in range(4):
            assert mask[query, key] == (key <= query)


def test_causal_mask_rejects_empty_size():
    with pytest.raises(ValueError, match="size >= 1"):
        causal_mask(0)


def test_padding_mask_marks_real_keys_and_broadcasts_over_heads_and_queries():
    tokens = torch.tensor([[5, 6, 7], [8, 0, 0]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, True], [True, False, False]]
    scores = torch.zeros(2, 4, 3, 3)  # (batch, heads, T_q, T_k)
    assert (scores.masked_fill(~mask, 1.0)).shape == scores.shape


def test_padding_mask_rejects_unbatched_tokens():
    with pytest.raises(ValueError, match=r"\(batch, T\), got shape \(3,\)"):
        padding_mask(torch.tensor([1, 2, 0]), pad_id=0)


def test_causal_mask_blocks_the_future_in_attention():
    torch.manual_seed(0)
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    _, weights = scaled_dot_product_attention(x, x, x, mask=causal_mask(5))
    assert torch.all(weights.triu(diagonal=1) == 0)
    changed = x.clone()
    changed[0, 3:] = torch.randn(2, 8, dtype=torch.float64)
    out, _ = scaled_dot_product_attention(x, x, x, mask=causal_mask(5))
    out_changed, _ = scaled_dot_product_attention(changed, changed, changed, mask=causal_mask(5))
    torch.testing.assert_close(out[0, :3], out_changed[0, :3])
    assert not torch.allclose(out[0, 3:], out_changed[0, 3:])
