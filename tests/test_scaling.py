"""Power-law fits and the memory of attention's score matrices (lesson 11)."""

import numpy as np
import pytest

from transformer_lib import GPT, GPTConfig, fit_power_law, score_memory_mib
from transformer_lib.scaling import non_embedding_parameters


def test_fit_power_law_recovers_exponent_and_factor():
    x = np.array([128, 256, 512, 1024])
    slope, scale = fit_power_law(x, 3e-6 * x**2.0)
    assert slope == pytest.approx(2.0) and scale == pytest.approx(3e-6)
    slope, scale = fit_power_law([1.0, 10.0, 100.0], [5.0, 5.0 * 10**0.5, 50.0])
    assert slope == pytest.approx(0.5) and scale == pytest.approx(5.0)


def test_fit_power_law_rejects_mismatched_or_too_few_points():
    with pytest.raises(ValueError, match=r"same length, at least 2 points each; got shapes \(3,\) and \(2,\)"):
        fit_power_law([1, 2, 3], [1, 4])
    with pytest.raises(ValueError, match="at least 2 points"):
        fit_power_law([1], [1])


def test_score_memory_grows_with_t_squared_and_chunks_cut_it_to_t_times_chunk():
    assert score_memory_mib(1024, None) == pytest.approx(4.0)  # 1024² float32 numbers
    assert score_memory_mib(8192, None) == pytest.approx(256.0)
    assert score_memory_mib(8192, 256) == pytest.approx(8.0)  # 8192 · 256 numbers
    assert score_memory_mib(100, 256) == score_memory_mib(100, None)  # a chunk longer than T is one chunk
    assert score_memory_mib(1024, None, heads=12, bytes_per_number=2) == pytest.approx(24.0)
    assert score_memory_mib(1024, None, matrices=2) == pytest.approx(8.0)  # scores and softmax weights
    assert score_memory_mib(8192, 256, heads=2, matrices=2) == pytest.approx(32.0)


def test_fit_power_law_gives_a_scaling_exponent_as_minus_the_slope():
    n = np.array([1e3, 1e4, 1e5])
    slope, scale = fit_power_law(n, 4.0 * n**-0.076)  # L(N) = a · N^(-α) with α = 0.076
    assert -slope == pytest.approx(0.076) and scale == pytest.approx(4.0)


@pytest.mark.parametrize("tie_output", [False, True])
def test_non_embedding_parameters_leave_out_the_vocabulary_and_position_tables(tie_output):
    config = GPTConfig(vocab_size=50, block_size=16, d_model=32, num_heads=4, num_layers=2, d_ff=128,
                       tie_output=tie_output)
    model = GPT(config)
    total = sum(p.numel() for p in model.parameters())
    tables = 50 * 32 + 16 * 32 + (0 if tie_output else 50 * 32)  # token, position, untied head
    assert non_embedding_parameters(model) == total - tables
    per_block = 4 * (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32) + 2 * 2 * 32  # attention, MLP, 2 LayerNorms
    assert non_embedding_parameters(model) == 2 * per_block + 2 * 32  # + the final LayerNorm
    assert abs(non_embedding_parameters(model) / (12 * 2 * 32**2) - 1) < 0.1  # about 12 · layers · d_model²
