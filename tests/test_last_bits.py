"""The "last bits moved" test setting (course_tools/last_bits.py): it moves results by exactly one ulp, keeps what any
machine computes exactly, rounds one code path alike every time, and it bites: a bitwise comparison of two code
paths, such as lesson 06's dropout check as it was before it compared with a tolerance, fails under it (and in
the notebook step: tests/test_nbval_bites.py)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from course_tools import ROOT
from course_tools.last_bits import LAST_BITS_VARIABLE, _move_in_place, move_last_bits, with_last_bits_moved

# Lesson 06's attention-dropout check as it stood when it failed on an AMD CPU: the library's dropped attention
# weights compared bit for bit with nn.MultiheadAttention's, two float64 code paths.
LESSON_06_DROPOUT = """
import torch
from torch import nn
from transformer_lib import MultiHeadAttention, copy_multihead_weights, set_seed

set_seed(3)
d_model, heads, p = 8, 2, 0.5
reference = nn.MultiheadAttention(d_model, heads, dropout=p, batch_first=True).double()
x = torch.randn(2, 6, d_model, dtype=torch.float64)
with torch.no_grad():
    torch.manual_seed(0)
    _, dropped = reference.train()(x, x, x, average_attn_weights=False)
ours = MultiHeadAttention(d_model, heads, dropout=p).double()
copy_multihead_weights(reference, ours)
with torch.no_grad():
    torch.manual_seed(0)
    _, ours_dropped = ours.train()(x, x, x)
assert torch.equal(ours_dropped == 0, dropped == 0), "the same entries dropped"
{comparison}
print("passed")
"""
BITWISE = "assert torch.equal(ours_dropped, dropped), 'bit for bit'"
TOLERANT = "torch.testing.assert_close(ours_dropped, dropped)"


def run_python(code: str, moved: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(LAST_BITS_VARIABLE, None)
    if moved:
        env = with_last_bits_moved(env)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def ulps_moved(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    integer = {np.float32: np.int32, np.float64: np.int64}[before.dtype.type]
    return after.view(integer).astype(np.int64) - before.view(integer).astype(np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_rounded_entry_moves_exactly_one_ulp(dtype):
    values = np.random.default_rng(0).standard_normal(10_000).astype(dtype)
    moved = values.copy()
    _move_in_place(moved, salt=12345)
    steps = ulps_moved(values, moved)
    low_bits = 0xFF if dtype == np.float32 else 0xFFFF
    exact_looking = (values.view(steps.dtype if dtype == np.float64 else np.int32) & low_bits) == 0
    np.testing.assert_array_equal(steps == 0, exact_looking)  # kept: only those ending in zeros (1 in 256 for float32)
    assert set(np.unique(steps[~exact_looking])) == {-1, 1}
    assert 0.45 < (steps == 1).mean() < 0.55  # up and down about equally often
    np.testing.assert_allclose(moved, values, rtol=2 * np.finfo(dtype).eps, atol=0)


def test_exact_looking_entries_inf_and_nan_stay():
    values = np.array([0.0, -0.0, 1.0, 11.0, 0.25, -6.5, np.inf, -np.inf, np.nan, 1 / 3], dtype=np.float64)
    moved = values.copy()
    _move_in_place(moved, salt=7)
    np.testing.assert_array_equal(moved[:9], values[:9])  # small integers and short fractions: exact everywhere
    assert ulps_moved(values[9:], moved[9:])[0] in (-1, 1)


def test_same_code_path_rounds_alike_and_another_path_differently():
    a = torch.randn(32, 32, dtype=torch.float64)
    first, again, other = (torch.mm(a, a) for _ in range(3))
    assert torch.equal(move_last_bits(first, salt=1), move_last_bits(again, salt=1))
    assert not torch.equal(move_last_bits(first.clone(), salt=1), move_last_bits(other, salt=2))


def test_a_result_that_needs_gradients_keeps_them():
    a = torch.randn(4, 4, requires_grad=True)
    move_last_bits(a @ a.T, salt=3).sum().backward()
    torch.testing.assert_close(a.grad, 2 * a.detach().sum(0).expand(4, 4))  # d/da of sum(a aᵀ) = 2 · column sums


def test_the_setting_wraps_torchs_matrix_products_in_a_new_process():
    code = textwrap.dedent("""
        import torch, torch.nn.functional as F
        a, b = torch.randn(16, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64)
        products = [torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.Tensor.__matmul__,
                    torch.Tensor.__rmatmul__, torch.Tensor.matmul, F.linear, F.scaled_dot_product_attention]
        wrapped = [getattr(getattr(f, "__code__", None), "co_filename", "").endswith("last_bits.py") for f in products]
        print(sum(wrapped), torch.equal(a @ b, torch.mm(a, b)), torch.equal(a @ b, torch.matmul(a, b)))
    """)
    plain, moved = run_python(code, moved=False), run_python(code, moved=True)
    assert plain.stdout.split() == ["0", "True", "True"], plain.stderr  # one BLAS call three ways: identical bits
    # matmul and mm, two code paths, round apart; `@` is matmul itself, so it rounds alike, from any line
    assert moved.stdout.split() == ["10", "False", "True"], moved.stderr


def test_lesson_06s_old_bitwise_dropout_check_fails_under_the_setting():
    moved = run_python(LESSON_06_DROPOUT.format(comparison=BITWISE), moved=True)
    assert moved.returncode != 0 and "bit for bit" in moved.stderr, moved.stdout + moved.stderr
    fixed = run_python(LESSON_06_DROPOUT.format(comparison=TOLERANT), moved=True)
    assert fixed.returncode == 0 and fixed.stdout.strip() == "passed", fixed.stderr
