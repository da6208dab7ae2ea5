"""Power laws in lesson 11: how the cost of attention grows with the sequence length (the memory of the score
matrices), and how a language model's loss falls with its number of parameters (a fit of L(N) = a · N^(-α)).

Shape legend: T = sequence length, chunk = keys per chunk in chunked attention.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import nn

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


def score_memory_mib(
    length: int, chunk_size: int | None, heads: int = 1, bytes_per_number: int = 4, matrices: int = 1
) -> float:
    """MiB that one attention layer's score-sized matrices need for one sequence: ``matrices · heads · T · T``
    numbers at once, or ``matrices · heads · T · chunk`` when the keys are processed ``chunk_size`` at a time
    (``chunked_attention``).

    ``matrices``: how many such matrices are alive together, 1 for the scores alone, 2 for the scores and the
    softmax weights that the readable path writes while the scores still exist. ``bytes_per_number``: 4 for
    float32, 2 for float16 / bfloat16.
    """
    columns = length if chunk_size is None else min(chunk_size, length)
    return matrices * heads * length * columns * bytes_per_number / MIB


def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters of a GPT without its vocabulary and position tables, the N of Kaplan et al.'s scaling laws.

    Leaves out ``token_embedding``, ``position_embedding`` and an untied output ``head`` (a (V, d_model) table
    like the token embedding); counts the blocks and the final LayerNorm, about 12 · layers · d_model² when
    d_ff = 4 · d_model. A tensor shared by two modules counts once.
    """
    tables = {id(module.weight) for name in ("token_embedding", "position_embedding", "head")
              if (module := getattr(model, name, None)) is not None}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)
