"""Causal and padding masks: shapes, polarity (True = allowed) and their effect on attention."""

import pytest
import torch

from transformer_lib import MASK_KINDS, build_mask, causal_mask, padding_mask, scaled_dot_product_attention
from transformer_lib.masks import validate_mask


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


def test_causal_mask_of_size_zero_names_the_fix():
    with pytest.raises(ValueError, match=r"size >= 1, got size=0: pass the sequence length"):
        causal_mask(0)


def test_validate_mask_accepts_exactly_the_masks_that_broadcast_to_the_scores():
    scores_shape = (2, 4, 3, 5)  # (batch, heads, T_q, T_k)
    for shape in [(3, 5), (2, 1, 1, 5), (1, 5), (2, 4, 3, 5), (4, 1, 5)]:
        validate_mask(torch.ones(shape, dtype=torch.bool), scores_shape)
    for shape in [(5, 3), (3, 1, 1, 5), (1, 2, 4, 3, 5), (2, 5)]:  # wrong way round, wrong batch, extra dim
        with pytest.raises(ValueError, match=rf"mask of shape \({shape[0]}, .* does not broadcast"):
            validate_mask(torch.ones(shape, dtype=torch.bool), scores_shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_validate_mask_refuses_every_non_boolean_mask(dtype):
    with pytest.raises(ValueError, match=rf"must be a bool tensor \(True = attention allowed\), got dtype {dtype}"):
        validate_mask(torch.ones(3, 5, dtype=dtype), (3, 5))


def test_build_mask_gives_each_kind_and_combines_causal_and_padding():
    tokens = torch.tensor([[1, 2, 0], [3, 0, 0]])
    assert build_mask("none", tokens, pad_id=0) is None
    assert build_mask("causal", tokens, pad_id=0).tolist() == causal_mask(3).tolist()
    assert build_mask("padding", tokens, pad_id=0).tolist() == padding_mask(tokens, 0).tolist()
    both = build_mask("both", tokens, pad_id=0)
    assert both.shape == (2, 1, 3, 3)
    assert both[0, 0].tolist() == (causal_mask(3) & torch.tensor([True, True, False])).tolist()
    assert both[1, 0].tolist() == [[True, False, False]] * 3
    with pytest.raises(ValueError, match=r"unknown mask kind 'future': choose one of \('none'"):
        build_mask("future", tokens, pad_id=0)
    assert set(MASK_KINDS) == {"none", "causal", "padding", "both"}
