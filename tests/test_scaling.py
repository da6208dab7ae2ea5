"""Power-law fits and the memory of attention's score matrices (lesson 11)."""

import numpy as np
import pytest

from transformer_lib import fit_power_law, score_memory_mib


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
