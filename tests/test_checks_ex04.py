"""The lesson 04 checks accept the solutions, spot stubs, and name the typical mistakes (degrees, swaps)."""

import math

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex04_positional_encoding as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def encoding(num_positions, d_model, to_angle=lambda a: a, swap=False):
    pe = torch.zeros(num_positions, d_model)
    for p in range(num_positions):
        for j in range(d_model // 2):
            angle = to_angle(p / 10000 ** (2 * j / d_model))
            first, second = (math.cos, math.sin) if swap else (math.sin, math.cos)
            pe[p, 2 * j], pe[p, 2 * j + 1] = first(angle), second(angle)
    return pe


def shift(offset, d_model, sign=1.0, to_angle=lambda a: a):
    m = torch.zeros(d_model, d_model)
    for j in range(d_model // 2):
        a = to_angle(offset * 10000 ** (-2 * j / d_model))
        m[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor(
            [[math.cos(a), sign * math.sin(a)], [-sign * math.sin(a), math.cos(a)]]
        )
    return m


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.positional_encoding_matrix, check.shift_matrix):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 2


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
