"""How the cost of attention grows with the sequence length: power-law fits and the memory of the score matrices.

Shape legend: T = sequence length, chunk = keys per chunk in chunked attention.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIB = 2**20  # bytes in one mebibyte


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Fit ``y ≈ c · x**slope`` by a least-squares straight line through (log x, log y); returns ``(slope, c)``.

    On log-log axes a power law is a straight line whose slope is the exponent: 2 means y grows like x².
    """
    log_x, log_y = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    if log_x.ndim != 1 or log_x.shape != log_y.shape or log_x.size < 2:
        raise ValueError(
            f"fit_power_law needs x and y of the same length, at least 2 points each; got shapes {log_x.shape} and "
            f"{log_y.shape}"
        )
    slope, intercept = np.polyfit(log_x, log_y, 1)
    return float(slope), float(np.exp(intercept))


def score_memory_mib(length: int, chunk_size: int | None, heads: int = 1, bytes_per_number: int = 4) -> float:
    """MiB that one attention layer's scores need for one sequence: ``heads · T · T`` numbers at once, or
    ``heads · T · chunk`` when the keys are processed ``chunk_size`` at a time (``chunked_attention``).

    ``bytes_per_number``: 4 for float32, 2 for float16 / bfloat16.
    """
    columns = length if chunk_size is None else min(chunk_size, length)
    return heads * length * columns * bytes_per_number / MIB
