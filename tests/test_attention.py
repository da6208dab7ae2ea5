"""softmax and scaled_dot_product_attention against PyTorch's own, plus their error messages."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import entropy_bits, scaled_dot_product_attention, softmax


def _qkv(q_shape, k_shape, v_shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=generator, dtype=torch.float64) for shape in (q_shape, k_shape, v_shape))


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_equals_torch(dim):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(softmax(x, dim=dim), torch.softmax(x, dim=dim))


def test_softmax_is_stable_on_huge_scores():
    x = torch.tensor([[1000.0, 999.0, -1000.0], [1e30, 0.0, 1e30]], dtype=torch.float64)
    naive = x.exp() / x.exp().sum(dim=-1, keepdim=True)
    assert torch.isnan(naive).any()  # the naive formula overflows: inf / inf
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))
    assert not torch.isnan(softmax(x)).any()


def test_softmax_handles_minus_infinity_like_torch():
    x = torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3])
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1), equal_nan=True)


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape",
    [
        ((4, 8), (4, 8), (4, 8)),  # one sequence, self-attention
        ((2, 5, 8), (2, 7, 8), (2, 7, 3)),  # batched, T_q != T_k, d_v != d_k
        ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 4)),  # (batch, heads, T, d)
        ((2, 3, 5, 8), (1, 3, 6, 8), (2, 1, 6, 4)),  # broadcast batch and head dimensions
    ],
)
def test_attention_equals_torch_without_mask(q_shape, k_shape, v_shape):
    q, k, v = _qkv(q_shape, k_shape, v_shape)
    output, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v))
    assert weights.shape == output.shape[:-1] + (k.shape[-2],)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64))


@pytest.mark.parametrize("mask_shape", [(5, 6), (2, 1, 5, 6), (2, 1, 1, 6), (2, 3, 5, 6)])
def test_attention_equals_torch_with_boolean_mask(mask_shape):
    q, k, v = _qkv((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 4), seed=2)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[..., 0] = True  # every query may see at least one key (the case without one is tested below)
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_attention_equals_torch_with_a_causal_mask():
    q, k, v = _qkv((2, 4, 8), (2, 4, 8), (2, 4, 8), seed=4)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask=causal)[0], expected)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask=causal, need_weights=False)[0], expected)


def test_attention_scale_argument_equals_torch():
    q, k, v = _qkv((3, 8), (5, 8), (5, 2), seed=5)
    output, _ = scaled_dot_product_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, scale=1.0))


def test_fully_masked_query_gets_zero_weights_and_zero_output():
    q, k, v = _qkv((1, 3, 4), (1, 5, 4), (1, 5, 2), seed=6)
    q.requires_grad_(True)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may see no key at all
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.isnan(output).any()
    assert (weights[0, 1] == 0).all() and (output[0, 1] == 0).all()
    torch.testing.assert_close(weights[0, [0, 2]].sum(-1), torch.ones(2, dtype=torch.float64))
    output.sum().backward()
    assert not torch.isnan(q.grad).any()


def test_a_query_without_keys_gives_zero_like_torch_2_13s_function_and_mhas_fast_path():
    """What attention.py's docstring says of PyTorch for a query that may see no key, checked on this version."""
    q, k, v = _qkv((1, 3, 4), (1, 5, 4), (1, 5, 4), seed=6)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    ours, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))  # 0 in both
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True, dtype=torch.float64)
    x, self_mask = q, ~mask[:, :3]  # self-attention (query = key = value), as the fast path requires
    default_path, _ = mha(x, x, x, attn_mask=self_mask)  # training mode: NaN for that query
    assert default_path[0, 1].isnan().all() and not default_path[0, [0, 2]].isnan().any()
    with torch.no_grad():
        fast_path, _ = mha.eval()(x, x, x, attn_mask=self_mask, need_weights=False)
    assert (fast_path[0, 1] == 0).all()


def test_dropout_zeroes_and_rescales_weights():
    q, k, v = _qkv((64, 8), (64, 8), (64, 8), seed=7)
    torch.manual_seed(0)
    _, dropped = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    _, kept = scaled_dot_product_attention(q, k, v)
    zeroed = dropped == 0
    assert 0.4 < zeroed.double().mean() < 0.6
    torch.testing.assert_close(dropped[~zeroed], 2 * kept[~zeroed])


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape, message",
    [
        ((4, 8), (4, 6), (4, 8), "query and key must have the same last dimension d_k"),
        ((4, 8), (5, 8), (4, 8), "key and value must have the same number of positions T_k"),
        ((8,), (4, 8), (4, 8), "attention needs at least 2-D tensors"),
        ((2, 4, 8), (3, 4, 8), (3, 4, 8), "leading (batch, heads) dimensions do not broadcast"),
    ],
)
def test_bad_shapes_raise_value_error_naming_shapes(q_shape, k_shape, v_shape, message):
    q, k, v = _qkv(q_shape, k_shape, v_shape)
    with pytest.raises(ValueError) as error:
        scaled_dot_product_attention(q, k, v)
    assert message in str(error.value)
    assert f"query {q_shape}" in str(error.value) or f"query {tuple(q_shape)}" in str(error.value)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(
    "mask, message",
    [
        (torch.ones(4, 5, dtype=torch.long), r"got dtype torch.int64: build it with causal_mask / padding_mask"),
        # a 0/1 float mask would be *added* to the scores (shifting them, blocking nothing): refused, not used
        (torch.ones(4, 5), r"must be a bool tensor \(True = attention allowed\), got dtype torch.float32"),
        (torch.ones(5, 4, dtype=torch.bool), r"mask of shape \(5, 4\) does not broadcast to the scores' shape "
                                             r"\(…, T_q, T_k\) = \(4, 5\): use \(T_q, T_k\) = \(4, 5\)"),
        (torch.ones(2, 4, 5, dtype=torch.bool), r"mask of shape \(2, 4, 5\) does not broadcast"),
    ],
)
def test_bad_masks_raise_value_error_on_both_paths(mask, message, need_weights):
    q, k, v = _qkv((4, 8), (5, 8), (5, 8))
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v, mask=mask, need_weights=need_weights)


def test_a_four_dimensional_mask_error_names_the_causal_and_padding_shapes():
    q, k, v = _qkv((2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 4))
    with pytest.raises(ValueError, match=r"\(batch, heads, T_q, T_k\) = \(2, 3, 5, 5\): use \(T_q, T_k\) for a "
                                         r"causal mask or \(batch, 1, 1, T_k\) for padding"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(3, 1, 1, 5, dtype=torch.bool))


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(
    "q_shape, k_shape", [((1, 0, 4), (1, 5, 4)), ((1, 3, 4), (1, 0, 4)), ((0, 3, 4), (0, 5, 4))]
)
def test_empty_inputs_raise_instead_of_a_silent_zero(q_shape, k_shape, need_weights):
    q, k, v = _qkv(q_shape, k_shape, k_shape)
    with pytest.raises(ValueError, match="attention got an empty tensor: .* at least one query and one key"):
        scaled_dot_product_attention(q, k, v, need_weights=need_weights)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("dropout_p", [-0.1, 1.0, 1.5])
def test_dropout_outside_zero_to_one_is_refused(dropout_p, need_weights):
    q, k, v = _qkv((4, 8), (5, 8), (5, 8))
    with pytest.raises(ValueError, match=rf"dropout_p={dropout_p} is outside \[0, 1\): .* e.g. 0.1, or 0.0"):
        scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, need_weights=need_weights)


def test_fused_path_without_weights_equals_the_readable_path():
    """need_weights=False may use PyTorch's fused kernel; it must give the same output, and still no NaN."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, dtype=torch.float64) for _ in range(3))  # (batch, heads, T, d)
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()  # causal: every query keeps a key
    fully_blocked = mask.clone()
    fully_blocked[1, 0, 2] = False  # query 2 of sequence 1 may look at nothing
    for m in (None, mask, fully_blocked):
        readable, weights = scaled_dot_product_attention(q, k, v, mask=m)
        fused, no_weights = scaled_dot_product_attention(q, k, v, mask=m, need_weights=False)
        assert weights is not None and no_weights is None
        torch.testing.assert_close(fused, readable)
        assert not fused.isnan().any()


def test_entropy_bits_of_one_hot_uniform_and_masked_weights():
    assert entropy_bits(torch.tensor([0.0, 1.0, 0.0])) == 0.0
    assert entropy_bits(torch.full((4,), 0.25)) == pytest.approx(2.0)
    assert entropy_bits(torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64)) == pytest.approx(1.0)  # masked keys
    with pytest.raises(ValueError, match=r"one distribution of shape \(n,\), got shape \(2, 2\)"):
        entropy_bits(torch.full((2, 2), 0.5))
