"""The lesson 04 checks accept the solutions, spot stubs, and name the typical mistakes (degrees, swaps, pairings)."""

import math

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex04_positional_encoding as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED, PASS_MARK


def encoding(num_positions, d_model, to_angle=lambda a: a, swap=False, exponent_sign=-1, first=0, columns=None):
    """The sinusoidal encoding written position by position; ``columns(j)`` places pair j's sine and cosine."""
    pe = torch.zeros(num_positions, d_model)
    for p in range(num_positions):
        for j in range(d_model // 2):
            angle = to_angle((first + p) * 10000 ** (exponent_sign * 2 * j / d_model))
            sin_cos = (math.cos, math.sin) if swap else (math.sin, math.cos)
            even, odd = columns(j) if columns else (2 * j, 2 * j + 1)
            pe[p, even], pe[p, odd] = sin_cos[0](angle), sin_cos[1](angle)
    return pe


def encoding_per_column(num_positions, d_model):
    """The classic loop over columns: column i uses pos / 10000**(i/d_model), sine if i is even, else cosine."""
    pe = torch.zeros(num_positions, d_model)
    for p in range(num_positions):
        for i in range(d_model):
            angle = p / 10000 ** (i / d_model)
            pe[p, i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    return pe


def shift(offset, d_model, sign=1.0, to_angle=lambda a: a, frequency=lambda j, d: 10000 ** (-2 * j / d)):
    m = torch.zeros(d_model, d_model)
    for j in range(d_model // 2):
        a = to_angle(offset * frequency(j, d_model))
        m[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor(
            [[math.cos(a), -sign * math.sin(a)], [sign * math.sin(a), math.cos(a)]]
        )
    return m


def wavelength(column, d_model, pair=lambda i: i // 2, exponent=lambda j: 2 * j, turn=2 * math.pi):
    return turn * 10000 ** (exponent(pair(column)) / d_model)


def score_terms(e_q, pe_q, e_k, pe_k, w_q, w_k):
    q_parts, k_parts = (e_q @ w_q, pe_q @ w_q), (e_k @ w_k, pe_k @ w_k)
    return torch.stack([q_parts[0] @ k_parts[0], q_parts[0] @ k_parts[1], q_parts[1] @ k_parts[0],
                        q_parts[1] @ k_parts[1]])


def rope(x, to_angle=lambda a: a, reverse=False, split_half=False, sign=1.0, in_place=False):
    """RoPE written pair by pair, with switches for the classic mistakes."""
    out = x if in_place else x.clone()
    source = out if in_place else x
    length, d = x.shape[-2:]
    for p in range(length):
        for j in range(d // 2):
            w = 10000 ** (-2 * ((d // 2 - 1 - j) if reverse else j) / d)
            a = sign * to_angle(p * w)
            first, second = (j, j + d // 2) if split_half else (2 * j, 2 * j + 1)
            even = source[..., p, first] * math.cos(a) - source[..., p, second] * math.sin(a)
            out[..., p, first] = even
            odd_from = even if in_place else source[..., p, first]
            out[..., p, second] = odd_from * math.sin(a) + source[..., p, second] * math.cos(a)
    return out


def test_stubs_are_not_attempted(capsys):
    checks = (check.positional_encoding_matrix, check.shift_matrix, check.column_wavelength, check.score_terms,
              check.rope)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_encoding_accepts_the_solution_and_names_degrees_and_swaps():
    assert check.positional_encoding_matrix(encoding).ok
    assert_rejected_with(
        check.positional_encoding_matrix(lambda n, d: encoding(n, d, math.radians)), "your angles are in degrees"
    )
    assert_rejected_with(
        check.positional_encoding_matrix(lambda n, d: encoding(n, d, swap=True)), "sin and cos are swapped"
    )


def test_shift_matrix_accepts_the_solution_and_names_the_direction_and_degrees():
    assert check.shift_matrix(shift).ok
    assert_rejected_with(check.shift_matrix(lambda k, d: shift(k, d, sign=-1.0)), "turns the wrong way")
    assert_rejected_with(check.shift_matrix(lambda k, d: shift(k, d, to_angle=math.radians)), "in degrees")


def test_wavelength_accepts_the_solution_and_names_each_mix_up():
    assert check.column_wavelength(wavelength).ok
    wrong = {
        "odd columns are off": lambda i, d: wavelength(i, d, pair=lambda i: i, exponent=lambda j: j),
        "column index i as the pair index j": lambda i, d: wavelength(i, d, pair=lambda i: i),
        "not j/d_model": lambda i, d: wavelength(i, d, exponent=lambda j: j),
        "a full turn is 2*pi radians": lambda i, d: wavelength(i, d, turn=1.0),
        "not 360": lambda i, d: wavelength(i, d, turn=360.0),
    }
    for hint, student_fn in wrong.items():
        assert_rejected_with(check.column_wavelength(student_fn), hint)


def test_score_terms_accepts_the_solution_and_names_swaps_projections_and_scaling():
    assert check.score_terms(score_terms).ok

    def swapped(e_q, pe_q, e_k, pe_k, w_q, w_k):
        return score_terms(e_q, pe_q, e_k, pe_k, w_q, w_k)[[0, 2, 1, 3]]

    result = check.score_terms(swapped)
    assert_rejected_with(result, "the middle terms are swapped")
    assert any(line.startswith(f"{PASS_MARK} the four terms add up") for line in result.lines)
    assert_rejected_with(
        check.score_terms(lambda e_q, pe_q, e_k, pe_k, w_q, w_k: score_terms(e_q, pe_q, e_k, pe_k, w_q, w_q)),
        "project the keys with W^K",
    )
    def unprojected(e_q, pe_q, e_k, pe_k, w_q, w_k):
        return torch.stack([e_q @ e_k, e_q @ pe_k, pe_q @ e_k, pe_q @ pe_k])

    assert_rejected_with(check.score_terms(unprojected), "project before taking dot products")
    assert_rejected_with(
        check.score_terms(lambda *args: score_terms(*args) / math.sqrt(args[-1].shape[-1])),
        "leave out the 1/sqrt(d_k)",
    )


def test_rope_accepts_the_solution_and_names_each_classic_bug():
    assert check.rope(rope).ok
    in_place = check.rope(lambda x: rope(x, in_place=True))
    assert_rejected_with(in_place, "already-rotated even ones")
    assert_rejected_with(in_place, "leaves its input unchanged")
    assert_rejected_with(in_place, "depends only on their offset")
    wrong = {
        "your angles are in degrees": dict(to_angle=math.radians),
        "your frequencies run in reverse": dict(reverse=True),
        "'rotate half' layout": dict(split_half=True),
        "you rotate the wrong way": dict(sign=-1.0),
    }
    for hint, mistake in wrong.items():
        result = check.rope(lambda x, mistake=mistake: rope(x, **mistake))
        assert_rejected_with(result, hint)
        # each of these is still a rotation per position, so the relative property holds: only the layout is wrong
        assert any(line.startswith(f"{PASS_MARK} one query vector") for line in result.lines), result.lines


def test_rope_reports_a_missing_return_without_crashing():
    result = check.rope(lambda x: None)
    assert_rejected_with(result, "did you forget a `return`?")
    assert result.total == 2


def test_each_named_mistake_is_diagnosed_as_itself():
    def keys_with_w_q(e_q, pe_q, e_k, pe_k, w_q, w_k):
        return score_terms(e_q, pe_q, e_k, pe_k, w_q, w_q)

    def unprojected(e_q, pe_q, e_k, pe_k, w_q, w_k):
        return torch.stack([e_q @ e_k, e_q @ pe_k, pe_q @ e_k, pe_q @ pe_k])

    def in_place_but_correct(x):  # right values, written into the caller's tensor
        x[...] = rope(x.clone())
        return x

    assert_diagnosed(check.positional_encoding_matrix(lambda n, d: encoding(n, d, math.radians)), "angles-in-degrees")
    assert_diagnosed(check.positional_encoding_matrix(lambda n, d: encoding(n, d, swap=True)), "sin-cos-swapped")
    assert_diagnosed(check.positional_encoding_matrix(lambda n, d: encoding(n, d, columns=lambda j: (j, j + d // 2))),
                     "sines-then-cosines")
    assert_diagnosed(check.positional_encoding_matrix(lambda n, d: encoding(n, d, exponent_sign=1)),
                     "exponent-sign-flipped")
    assert_diagnosed(check.positional_encoding_matrix(encoding_per_column), "odd-columns-own-frequency")
    assert_diagnosed(check.positional_encoding_matrix(lambda n, d: encoding(n, d, first=1)), "positions-from-one")
    assert_diagnosed(check.shift_matrix(lambda k, d: shift(k, d, sign=-1.0)), "rotation-wrong-way")
    assert_diagnosed(check.shift_matrix(lambda k, d: shift(k, d, to_angle=math.radians)), "angles-in-degrees")
    assert_diagnosed(check.shift_matrix(lambda k, d: shift(k, d, frequency=lambda j, d: 1.0)), "missing-frequency")
    assert_diagnosed(check.shift_matrix(lambda k, d: shift(k, d, frequency=lambda j, d: 10000 ** (2 * j / d))),
                     "exponent-sign-flipped")
    assert_diagnosed(check.column_wavelength(lambda i, d: wavelength(i, d, pair=lambda i: i, exponent=lambda j: j)),
                     "odd-columns-own-frequency")
    assert_diagnosed(check.column_wavelength(lambda i, d: wavelength(i, d, pair=lambda i: i)),
                     "column-index-as-pair-index")
    assert_diagnosed(check.column_wavelength(lambda i, d: wavelength(i, d, exponent=lambda j: j)), "exponent-j-not-2j")
    assert_diagnosed(check.column_wavelength(lambda i, d: wavelength(i, d, turn=1.0)), "missing-two-pi")
    assert_diagnosed(check.column_wavelength(lambda i, d: wavelength(i, d, turn=360.0)), "full-turn-360")
    assert_diagnosed(check.score_terms(lambda *args: score_terms(*args)[[0, 2, 1, 3]]), "middle-terms-swapped")
    assert_diagnosed(check.score_terms(keys_with_w_q), "keys-projected-with-wq")
    assert_diagnosed(check.score_terms(unprojected), "not-projected")
    assert_diagnosed(check.score_terms(lambda *args: score_terms(*args) / math.sqrt(args[-1].shape[-1])),
                     "scaled-by-sqrt-dk")
    assert_diagnosed(check.rope(lambda x: rope(x, in_place=True)), "overwrote-even-features")
    assert_diagnosed(check.rope(lambda x: rope(x, to_angle=math.radians)), "angles-in-degrees")
    assert_diagnosed(check.rope(lambda x: rope(x, reverse=True)), "frequencies-reversed")
    assert_diagnosed(check.rope(lambda x: rope(x, split_half=True)), "rotate-half-pairing")
    assert_diagnosed(check.rope(lambda x: rope(x, sign=-1.0)), "rotation-wrong-way")
    assert_diagnosed(check.rope(in_place_but_correct), "modified-input")


def test_rope_takes_float32_heads_stored_transposed_and_any_correct_layout_of_the_pairs():
    def by_pairs(x):  # view the last axis as (d/2, 2): fine on any layout whose last axis has stride 1
        length, width = x.shape[-2:]
        angles = torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (
            -torch.arange(0, width, 2, dtype=torch.float64) / width)  # (T, d/2)
        pairs = x.view(*x.shape[:-1], width // 2, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        return torch.stack((even * angles.cos() - odd * angles.sin(), even * angles.sin() + odd * angles.cos()),
                           dim=-1).flatten(-2)

    def flattened_with_view(x):  # view(-1, d) needs the batch and T axes to be contiguous
        length, width = x.shape[-2:]
        rows = x.view(-1, width)  # (batch * T, d)
        angles = torch.arange(length, dtype=torch.float64).repeat(rows.shape[0] // length)[:, None] * 10000.0 ** (
            -torch.arange(0, width, 2, dtype=torch.float64) / width)  # (batch * T, d/2)
        even, odd = rows[:, 0::2], rows[:, 1::2]
        return torch.stack((even * angles.cos() - odd * angles.sin(), even * angles.sin() + odd * angles.cos()),
                           dim=-1).flatten(-2).view(x.shape)

    assert check.rope(by_pairs).ok
    assert check.rope(lambda x: rope(x.double())).ok  # float64 output for float32 input: close enough
    result = check.rope(flattened_with_view)
    assert result.passed == 2, result.lines  # right on the contiguous batch
    assert_rejected_with(result, "raised RuntimeError")


def test_a_repeated_mistake_gets_one_hint():
    for result in (check.positional_encoding_matrix(lambda n, d: encoding(n, d, swap=True)),
                   check.shift_matrix(lambda k, d: shift(k, d, sign=-1.0)),
                   check.rope(lambda x: rope(x, reverse=True))):
        hints = [line for line in result.lines if line.startswith("  hint:")]
        assert len(hints) == len(set(hints)) == len(result.diagnoses), result.lines
