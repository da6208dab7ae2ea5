"""Sinusoidal encoding, PositionalEncoding, learned positions and RoPE."""

import math

import pytest
import torch

from transformer_lib import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    apply_rope,
    scaled_dot_product_attention,
    shift_rotation,
    sinusoidal_encoding,
)


def test_seed_example_in_radians():
    pe = sinusoidal_encoding(4, 4)
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.841, 0.540, 0.010, 1.000],
            [0.909, -0.416, 0.020, 1.000],
            [0.141, -0.990, 0.030, 1.000],
        ]
    )
    torch.testing.assert_close(pe, expected, atol=5e-4, rtol=0)


def test_matches_the_formula_and_pairs_share_a_frequency():
    d_model, base = 8, 10000.0
    pe = sinusoidal_encoding(50, d_model, base)
    for pos in (0, 7, 49):
        for j in range(d_model // 2):
            angle = pos / base ** (2 * j / d_model)
            assert pe[pos, 2 * j].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * j + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_odd_d_model_is_rejected():
    with pytest.raises(ValueError, match="d_model=5 must be a positive even number"):
        sinusoidal_encoding(3, 5)


def test_a_shift_is_one_rotation_for_all_positions():
    d_model, offset = 6, 3
    pe = sinusoidal_encoding(40, d_model).double()
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    rotation = torch.zeros(d_model, d_model, dtype=torch.float64)
    for m, w in enumerate(frequencies):
        c, s = math.cos(offset * w), math.sin(offset * w)
        rotation[2 * m : 2 * m + 2, 2 * m : 2 * m + 2] = torch.tensor([[c, -s], [s, c]])  # rows: PE(p) @ M_k
    torch.testing.assert_close(pe[:-offset] @ rotation, pe[offset:], atol=1e-6, rtol=0)
    torch.testing.assert_close(shift_rotation(offset, d_model).double(), rotation, atol=1e-6, rtol=0)


def test_shift_rotation_matches_the_hand_built_matrix():
    pe = sinusoidal_encoding(40, 6).double()
    rotation = shift_rotation(3, 6).double()
    torch.testing.assert_close(pe[:-3] @ rotation, pe[3:], atol=1e-6, rtol=0)
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(6, dtype=torch.float64), atol=1e-6, rtol=0)


def test_rope_turns_the_other_way_from_the_shift_of_the_sinusoid():
    """Moving PE forward by k is RoPE's rotation at position -k: the (sin, cos) pairs turn from feature 2m+1 towards
    2m, RoPE from 2m towards 2m+1."""
    pe = sinusoidal_encoding(40, 8).double()  # (40, 8)
    k = 5
    torch.testing.assert_close(apply_rope(pe[:-k], positions=torch.full((35,), -k)), pe[k:], atol=1e-6, rtol=0)
    assert not torch.allclose(apply_rope(pe[:-k], positions=torch.full((35,), k)), pe[k:], atol=1e-3)


def test_dot_product_depends_only_on_the_offset():
    pe = sinusoidal_encoding(60, 16).double()
    dots = pe @ pe.T
    for k in range(5):
        diagonal = torch.diagonal(dots, offset=k)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-5, rtol=0)


def test_positional_encoding_adds_then_drops_out():
    module = PositionalEncoding(d_model=4, max_len=10)
    x = torch.zeros(2, 3, 4)
    torch.testing.assert_close(module(x), sinusoidal_encoding(3, 4).expand(2, 3, 4))
    module_with_dropout = PositionalEncoding(d_model=4, max_len=10, dropout=0.5).train()
    torch.manual_seed(0)
    out = module_with_dropout(torch.ones(1, 10, 4))
    assert (out == 0).any()
    with pytest.raises(ValueError, match="up to 10 positions"):
        module(torch.zeros(1, 11, 4))


def test_learned_positions_are_trained_and_cannot_extrapolate():
    module = LearnedPositionalEmbedding(max_len=5, d_model=4)
    out = module(torch.zeros(1, 5, 4))
    out.sum().backward()
    assert module.embedding.weight.grad is not None
    with pytest.raises(ValueError, match="cannot extrapolate"):
        module(torch.zeros(1, 6, 4))


def test_rope_keeps_norms_and_makes_scores_depend_on_offset_only():
    torch.manual_seed(0)
    q = torch.randn(8, dtype=torch.float64)
    k = torch.randn(8, dtype=torch.float64)

    def score(p, s):
        rq = apply_rope(q.expand(1, 8), positions=torch.tensor([p]))
        rk = apply_rope(k.expand(1, 8), positions=torch.tensor([s]))
        return (rq @ rk.T).item()

    assert score(3, 1) == pytest.approx(score(13, 11), abs=1e-10)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-3)
    x = torch.randn(2, 4, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(apply_rope(x).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(apply_rope(x)[..., 0, :], x[..., 0, :])  # position 0: no rotation


def test_rope_in_attention_is_shift_invariant():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 6, 8, dtype=torch.float64) for _ in range(3))
    out, _ = scaled_dot_product_attention(apply_rope(q), apply_rope(k), v)
    shifted = torch.arange(6) + 100
    out_shifted, _ = scaled_dot_product_attention(apply_rope(q, shifted), apply_rope(k, shifted), v)
    torch.testing.assert_close(out, out_shifted)


def test_rope_rejects_odd_width_and_wrong_positions():
    with pytest.raises(ValueError, match="d_head=3"):
        apply_rope(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"positions must be shaped \(2,\)"):
        apply_rope(torch.zeros(2, 4), positions=torch.arange(3))


@pytest.mark.parametrize("module", [lambda p: PositionalEncoding(8, 10, dropout=p),
                                    lambda p: LearnedPositionalEmbedding(10, 8, dropout=p)])
@pytest.mark.parametrize("dropout", [1.0, -0.2])
def test_position_modules_refuse_dropout_outside_zero_to_one(module, dropout):
    with pytest.raises(ValueError, match=rf"dropout={dropout} is outside \[0, 1\)"):
        module(dropout)


def test_learned_positions_of_the_wrong_width_name_the_fix():
    with pytest.raises(ValueError, match=r"vectors of width 8, got input of shape \(1, 4, 6\): .* d_model=6"):
        LearnedPositionalEmbedding(10, 8)(torch.zeros(1, 4, 6))


def test_sinusoidal_encoding_needs_at_least_one_position():
    with pytest.raises(ValueError, match="num_positions=0 must be at least 1"):
        sinusoidal_encoding(0, 8)
