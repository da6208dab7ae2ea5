"""Checks for lesson 04's exercises: the sinusoidal encoding matrix and the rotation that shifts it."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..positions import shift_rotation, sinusoidal_encoding
from ._feedback import CheckResult, Exercise


def _encoding_with(angle_unit: float, swap: bool, num_positions: int, d_model: int) -> torch.Tensor:
    """Typical wrong encodings: angles in degrees (``angle_unit = pi/180``) or sin and cos swapped."""
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * frequencies * angle_unit
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    return torch.stack((first(angles), second(angles)), dim=-1).flatten(-2)


def _rotation_in_degrees(offset: int, d_model: int) -> torch.Tensor:
    """The shift matrix a learner gets by converting the angles k * w_j to degrees."""
    blocks = []
    for j in range(d_model // 2):
        angle = math.radians(offset * 10000.0 ** (-2 * j / d_model))
        blocks.append(torch.tensor([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]]))
    return torch.block_diag(*blocks)


def positional_encoding_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (num_positions, d_model) -> (num_positions, d_model) sinusoidal encoding."""
    ex = Exercise("positional_encoding_matrix")
    with ex.run():
        got = ex.call(student_fn, 4, 4)
        ex.compare(
            "the encoding of 'Show me the money' (4 positions, d_model = 4)",
            got,
            sinusoidal_encoding(4, 4),
            atol=1e-4,
            hint="even columns 2j hold sin(p / 10000**(2j/d_model)), odd columns 2j+1 the cos of the same angle",
            mistakes={
                "your angles are in degrees: torch.sin and torch.cos take radians, so do not convert": (
                    _encoding_with(math.pi / 180, False, 4, 4)
                ),
                "sin and cos are swapped: even columns hold the sine, odd columns the cosine": (
                    _encoding_with(1.0, True, 4, 4)
                ),
            },
        )
        ex.compare("a bigger encoding (50 positions, d_model = 16)", ex.call(student_fn, 50, 16),
                   sinusoidal_encoding(50, 16), atol=1e-4)
    return ex.result


def shift_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (offset, d_model) -> (d_model, d_model) matrix M with PE(p + offset) = M @ PE(p)."""
    ex = Exercise("shift_matrix")
    with ex.run():
        got = ex.call(student_fn, 3, 6)
        expected = shift_rotation(3, 6)
        ex.compare(
            "M_3 for d_model = 6",
            got,
            expected,
            atol=1e-5,
            hint="one 2x2 block [[cos(k w), sin(k w)], [-sin(k w), cos(k w)]] per sin/cos pair, zeros elsewhere",
            mistakes={
                "your rotation turns the wrong way: swap the signs of the two sin(k w) entries": expected.T,
                "your angles are in degrees: use k * w_j in radians": _rotation_in_degrees(3, 6),
            },
        )
        pe = sinusoidal_encoding(30, 8).double()
        moved = torch.as_tensor(ex.call(student_fn, 5, 8), dtype=torch.float64) @ pe[:-5].T  # (8, 25)
        ex.compare("M_5 moves every PE(p) to PE(p + 5) (d_model = 8, p = 0 … 24)", moved.T, pe[5:], atol=1e-4)
    return ex.result
