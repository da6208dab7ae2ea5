"""Checks for lesson 04's exercises: the encoding matrix, the shift rotation, a column's wavelength, the four
terms of a score, and a repaired RoPE."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..positions import apply_rope, shift_rotation, sinusoidal_encoding
from ._feedback import CheckResult, Exercise, Hint


def _encoding_with(num_positions: int, d_model: int, *, angle_unit: float = 1.0, swap: bool = False,
                   exponent_sign: float = -1.0, first_position: int = 0, concatenate: bool = False,
                   per_column: bool = False) -> torch.Tensor:
    """Typical wrong encodings: angles in degrees (``angle_unit = pi/180``), sin and cos swapped, the wavelength
    10000**(2j/d_model) used as the frequency (``exponent_sign = +1``), positions counted from 1, all sines then all
    cosines (``concatenate``), or each column i its own exponent i/d_model (``per_column``)."""
    positions = torch.arange(first_position, first_position + num_positions, dtype=torch.float64)[:, None]
    if per_column:  # column i: sin (i even) or cos (i odd) of pos / 10000**(i/d_model)
        angles = positions * 10000.0 ** (-torch.arange(d_model, dtype=torch.float64) / d_model)  # (T, d_model)
        return torch.where(torch.arange(d_model) % 2 == 0, torch.sin(angles), torch.cos(angles))
    frequencies = 10000.0 ** (exponent_sign * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = positions * frequencies * angle_unit  # (T, d_model/2)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if concatenate:
        return torch.cat((first(angles), second(angles)), dim=-1)
    return torch.stack((first(angles), second(angles)), dim=-1).flatten(-2)


def _encoding_mistakes(num_positions: int, d_model: int) -> dict[Hint, torch.Tensor]:
    """The classic wrong encodings, keyed by the hint that names each one."""
    return {
        Hint("your angles are in degrees: torch.sin and torch.cos take radians, so do not convert",
             id="angles-in-degrees"): _encoding_with(num_positions, d_model, angle_unit=math.pi / 180),
        Hint("sin and cos are swapped: even columns hold the sine, odd columns the cosine", id="sin-cos-swapped"):
            _encoding_with(num_positions, d_model, swap=True),
        Hint("you put all the sines first and all the cosines after: the paper interleaves them, sine in column 2j, "
             "cosine of the same angle in column 2j+1", id="sines-then-cosines"):
            _encoding_with(num_positions, d_model, concatenate=True),
        Hint("you multiplied the position by 10000**(2j/d_model): divide by it, so the frequency "
             "10000**(-2j/d_model) falls from 1 with j", id="exponent-sign-flipped"):
            _encoding_with(num_positions, d_model, exponent_sign=1.0),
        Hint("odd columns are off: the cosine in column 2j+1 uses the same angle as the sine in column 2j "
             "(you used 10000**(i/d_model) with i the column)", id="odd-columns-own-frequency"):
            _encoding_with(num_positions, d_model, per_column=True),
        Hint("your positions start at 1: the first token is position 0, so row 0 is [0, 1, 0, 1, …]",
             id="positions-from-one"): _encoding_with(num_positions, d_model, first_position=1),
    }


def _rotation_with(offset: int, d_model: int, *, angle_unit: float = 1.0, exponent_sign: float = -1.0,
                   with_frequency: bool = True) -> torch.Tensor:
    """Typical wrong shift matrices: angles k * w_j in degrees, the wavelength 10000**(2j/d_model) used as w_j
    (``exponent_sign = +1``), or every pair turned by k radians (``with_frequency = False``)."""
    blocks = []
    for j in range(d_model // 2):
        frequency = 10000.0 ** (exponent_sign * 2 * j / d_model) if with_frequency else 1.0
        angle = offset * frequency * angle_unit
        blocks.append(torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]],
                                   dtype=torch.float64))
    return torch.block_diag(*blocks)


def positional_encoding_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (num_positions, d_model) -> (num_positions, d_model) sinusoidal encoding."""
    ex = Exercise("positional_encoding_matrix")
    with ex.run():
        got = ex.call(student_fn, 4, 4)
        if not ex.compare(
            "the encoding of 'Show me the money' (4 positions, d_model = 4)",
            got,
            sinusoidal_encoding(4, 4),
            atol=1e-4,
            hint="even columns 2j hold sin(p / 10000**(2j/d_model)), odd columns 2j+1 the cos of the same angle",
            mistakes=_encoding_mistakes(4, 4),
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        ex.compare("a bigger encoding (50 positions, d_model = 16)", ex.call(student_fn, 50, 16),
                   sinusoidal_encoding(50, 16), atol=1e-4, mistakes=_encoding_mistakes(50, 16))
    return ex.result


def shift_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (offset, d_model) -> (d_model, d_model) matrix M with PE(pos + offset) = PE(pos) @ M."""
    ex = Exercise("shift_matrix")
    with ex.run():
        got = ex.call(student_fn, 3, 6)
        expected = shift_rotation(3, 6)
        if not ex.compare(
            "M_3 for d_model = 6",
            got,
            expected,
            atol=1e-5,
            hint="one 2x2 block [[cos(k w), -sin(k w)], [sin(k w), cos(k w)]] per sin/cos pair, zeros elsewhere",
            mistakes={
                Hint("your rotation turns the wrong way: swap the signs of the two sin(k w) entries",
                     id="rotation-wrong-way"): expected.T,
                Hint("your angles are in degrees: use k * w_j in radians", id="angles-in-degrees"):
                    _rotation_with(3, 6, angle_unit=math.pi / 180),
                Hint("every block turns by k radians: pair j turns by k * w_j, with its own frequency "
                     "w_j = 10000**(-2j/d_model)", id="missing-frequency"): _rotation_with(3, 6, with_frequency=False),
                Hint("you multiplied k by 10000**(2j/d_model): the frequency is w_j = 10000**(-2j/d_model), "
                     "so divide", id="exponent-sign-flipped"): _rotation_with(3, 6, exponent_sign=1.0),
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        pe = sinusoidal_encoding(30, 8).double()
        moved = pe[:-5] @ torch.as_tensor(ex.call(student_fn, 5, 8), dtype=torch.float64)  # (25, 8)
        ex.compare("PE(pos) M_5 is PE(pos + 5) (d_model = 8, pos = 0 … 24)", moved, pe[5:], atol=1e-4)
    return ex.result


# -- Exercise 3: a column's wavelength -------------------------------------------------------------------------------


def _measured_wavelengths(columns: list[int], d_model: int) -> torch.Tensor:
    """Each column's wavelength, measured on the library's encoding: 2*pi over the angle its pair turns per step."""
    pe = sinusoidal_encoding(2, d_model).double()  # PE(0), PE(1): (2, d_model)
    step = torch.atan2(pe[1, 0::2], pe[1, 1::2])  # angle turned per position by each pair, (d_model/2,)
    return 2 * math.pi / step[[column // 2 for column in columns]]  # (len(columns),)


def _wavelength_formula(columns: list[int], d_model: int, exponent: Callable[[int], int], turn: float) -> torch.Tensor:
    """Typical wrong wavelengths: ``turn * 10000**(exponent(column) / d_model)``."""
    return torch.tensor([turn * 10000.0 ** (exponent(c) / d_model) for c in columns], dtype=torch.float64)


def column_wavelength(student_fn: Callable) -> CheckResult:
    """Check a function (column, d_model) -> the number of positions after which that column of PE repeats."""
    ex = Exercise("column_wavelength")
    with ex.run():
        columns, d_model = [0, 1, 6, 13], 16
        got = [ex.call(student_fn, column, d_model) for column in columns]
        if not ex.compare(
            "wavelengths of columns 0, 1, 6 and 13 for d_model = 16, measured on sinusoidal_encoding",
            got,
            _measured_wavelengths(columns, d_model),
            hint="column i belongs to pair j = i // 2, which turns by omega_j = 10000**(-2j/d_model) radians per "
            "position: one full turn takes 2*pi / omega_j positions",
            mistakes={
                Hint("odd columns are off: column i belongs to pair j = i // 2, and the sine and cosine of a pair "
                     "share one frequency (you used 10000**(i/d_model))", id="odd-columns-own-frequency"):
                    _wavelength_formula(columns, d_model, lambda c: c, 2 * math.pi),
                Hint("you used the column index i as the pair index j: the exponent is 2j/d_model with j = i // 2",
                     id="column-index-as-pair-index"): _wavelength_formula(columns, d_model, lambda c: 2 * c,
                                                                           2 * math.pi),
                Hint("the exponent is 2j/d_model, not j/d_model", id="exponent-j-not-2j"): _wavelength_formula(
                    columns, d_model, lambda c: c // 2, 2 * math.pi),
                Hint("1 / omega_j is the number of positions per radian: a full turn is 2*pi radians",
                     id="missing-two-pi"): _wavelength_formula(columns, d_model, lambda c: 2 * (c // 2), 1.0),
                Hint("the angles are in radians, so a full turn is 2*pi, not 360", id="full-turn-360"):
                    _wavelength_formula(columns, d_model, lambda c: 2 * (c // 2), 360.0),
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        columns, d_model = [5, 40, 63], 64
        ex.compare(
            "wavelengths of columns 5, 40 and 63 for d_model = 64",
            [ex.call(student_fn, column, d_model) for column in columns],
            _measured_wavelengths(columns, d_model),
        )
    return ex.result


# -- Exercise 4: the four terms of a score --------------------------------------------------------------------------


def _score_inputs() -> tuple[torch.Tensor, ...]:
    """Words, positions 3 and 7 (d_model = 6) and two different, non-square projections to d_k = 4."""
    generator = torch.Generator().manual_seed(4)
    e_q, e_k = torch.randn(2, 6, dtype=torch.float64, generator=generator)
    w_q, w_k = torch.randn(2, 6, 4, dtype=torch.float64, generator=generator)
    pe = sinusoidal_encoding(8, 6).double()
    return e_q, pe[3], e_k, pe[7], w_q, w_k


def score_terms(student_fn: Callable) -> CheckResult:
    """Check a function (e_q, pe_q, e_k, pe_k, w_q, w_k) -> tensor (4,) of the four terms of the score q·k."""
    ex = Exercise("score_terms")
    with ex.run():
        e_q, pe_q, e_k, pe_k, w_q, w_k = _score_inputs()
        got = ex.call(student_fn, e_q, pe_q, e_k, pe_k, w_q, w_k)

        def score(query: torch.Tensor, key: torch.Tensor, w_key: torch.Tensor = w_k) -> torch.Tensor:
            return (query @ w_q) @ (key @ w_key)  # the raw score of one query vector and one key vector

        expected = torch.stack([score(e_q, e_k), score(e_q, pe_k), score(pe_q, e_k), score(pe_q, pe_k)])
        ex.compare(
            "[content-content, content-position, position-content, position-position] for a query at position 3 "
            "and a key at position 7 (d_model = 6, d_k = 4)",
            got,
            expected,
            hint="term 2 is (e_q W^Q)·(pe_k W^K): the query's word against the key's position",
            mistakes={
                Hint("the middle terms are swapped: content-position is the query's word against the key's position, "
                     "(e_q W^Q)·(pe_k W^K); position-content is (pe_q W^Q)·(e_k W^K)", id="middle-terms-swapped"):
                    expected[[0, 2, 1, 3]],
                Hint("project the keys with W^K, not W^Q: the two projections differ", id="keys-projected-with-wq"):
                    torch.stack([score(e_q, e_k, w_q), score(e_q, pe_k, w_q), score(pe_q, e_k, w_q),
                                 score(pe_q, pe_k, w_q)]),
                Hint("project before taking dot products: q = x W^Q and k = x W^K", id="not-projected"):
                    torch.stack([e_q @ e_k, e_q @ pe_k, pe_q @ e_k, pe_q @ pe_k]),
                Hint("these are terms of the raw score q·k: leave out the 1/sqrt(d_k) of attention",
                     id="scaled-by-sqrt-dk"): expected / math.sqrt(w_q.shape[-1]),
            },
        )
        if isinstance(got, torch.Tensor) and got.shape == (4,):
            full = ((e_q + pe_q) @ w_q) @ ((e_k + pe_k) @ w_k)
            ex.compare("the four terms add up to the full score ((e_q + pe_q) W^Q)·((e_k + pe_k) W^K)",
                       got.sum(), full)
    return ex.result


# -- Exercise 5: repair a broken RoPE ----------------------------------------------------------------------------------


def _rope_variant(x: torch.Tensor, angle_unit: float = 1.0, reverse: bool = False, split_half: bool = False,
                  sign: float = 1.0) -> torch.Tensor:
    """Typical wrong RoPEs: degrees, frequencies in reverse order, pairs (j, j + d/2), or turning the other way."""
    length, d = x.shape[-2:]
    frequencies = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    if reverse:
        frequencies = frequencies.flip(0)
    angles = sign * angle_unit * torch.arange(length, dtype=torch.float64)[:, None] * frequencies  # (T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    first, second = (x[..., : d // 2], x[..., d // 2 :]) if split_half else (x[..., 0::2], x[..., 1::2])
    rotated = (first * cos - second * sin, first * sin + second * cos)  # each (..., T, d/2)
    if split_half:
        return torch.cat(rotated, dim=-1)
    return torch.stack(rotated, dim=-1).flatten(-2)  # (..., T, d)


def _rope_overwriting(x: torch.Tensor) -> torch.Tensor:
    """The broken RoPE of the exercise: the odd features are computed from the already-rotated even ones."""
    out = x.clone()
    length, d = x.shape[-2:]
    angles = torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, d/2)
    out[..., 0::2] = out[..., 0::2] * torch.cos(angles) - out[..., 1::2] * torch.sin(angles)
    out[..., 1::2] = out[..., 0::2] * torch.sin(angles) + out[..., 1::2] * torch.cos(angles)
    return out


def rope(student_fn: Callable) -> CheckResult:
    """Check a function x (batch, T, d) -> x with each pair (2j, 2j+1) at position p rotated by p * omega_j, on a
    float64 batch and on a float32 one stored transposed (not contiguous); the input must come back unchanged."""
    ex = Exercise("rope")
    with ex.run():
        # the second input: float32 queries of another size, stored (T, batch, d) and transposed, as heads are
        stored = torch.randn(7, 3, 6, generator=torch.Generator().manual_seed(7)).transpose(0, 1)  # (3, 7, 6)
        cases = (("RoPE of a batch (2, 5, 8), compared with the library's apply_rope",
                  torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))),
                 ("RoPE of float32 (3, 7, 6), stored transposed (not contiguous), compared with apply_rope", stored))
        for what, x in cases:  # the first failure stops: one hint, one diagnosis
            given = x.clone()  # keeps the layout
            got = ex.call(student_fn, given)
            ex.compare(
                what,
                got,
                apply_rope(x),
                atol=1e-6,
                hint="even feature 2j becomes x_2j cos(p w_j) - x_2j+1 sin(p w_j), odd feature 2j+1 becomes "
                "x_2j sin(p w_j) + x_2j+1 cos(p w_j), with w_j = 10000**(-2j/d) and p the position",
                mistakes={
                    Hint("the odd features were computed from the already-rotated even ones: read x[..., 0::2] and "
                         "x[..., 1::2] before writing anything, and write into a new tensor",
                         id="overwrote-even-features"): _rope_overwriting(x),
                    Hint("your angles are in degrees: p * w_j is already in radians", id="angles-in-degrees"):
                        _rope_variant(x, math.pi / 180),
                    Hint("your frequencies run in reverse: pair j turns by w_j = 10000**(-2j/d), so the first pair "
                         "turns fastest", id="frequencies-reversed"): _rope_variant(x, reverse=True),
                    Hint("you paired feature j with j + d/2 (the 'rotate half' layout of some libraries); here a pair "
                         "is two adjacent features (2j, 2j+1), as in apply_rope", id="rotate-half-pairing"):
                        _rope_variant(x, split_half=True),
                    Hint("you rotate the wrong way: the even feature gets - x_2j+1 sin(p w_j), the odd one "
                         "+ x_2j sin(p w_j)", id="rotation-wrong-way"): _rope_variant(x, sign=-1.0),
                },
            )
            ex.require("your function leaves its input unchanged", torch.equal(given, x),
                       problem="it changed the tensor it was given",
                       hint=Hint("write the rotated features into a new tensor (torch.empty_like(x)): x is the "
                                 "caller's data", id="modified-input"))
            if not ex.result.ok:
                break
        if isinstance(got, torch.Tensor) and got.shape == x.shape:  # the relative property, on the same rule
            generator = torch.Generator().manual_seed(6)
            q, k = (torch.randn(8, dtype=torch.float64, generator=generator).repeat(1, 6, 1) for _ in range(2))
            scores = ex.call(student_fn, q)[0] @ ex.call(student_fn, k)[0].T  # (6, 6): one vector at positions 0 … 5
            diagonals = [torch.diagonal(scores, offset) for offset in range(-5, 6)]
            relative = all(torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-6)
                           for diagonal in diagonals)
            ex.require("one query vector and one key vector, placed at positions 0 … 5: the score depends only on "
                       "their offset", relative,
                       problem="two pairs of positions with the same offset got different scores",
                       hint="rotate every pair by a true rotation (cos and sin of the same angle, from the original "
                       "features), so that (R_p q)·(R_s k) = q·R_(s-p) k")
    return ex.result
