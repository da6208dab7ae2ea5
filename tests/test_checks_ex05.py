"""The lesson 05 checks accept the solutions, spot stubs, and name the typical mistakes (polarity, NaN)."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex05_masking as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def softmax_without_nan(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.nan_to_num(0.0)


def test_stubs_are_not_attempted(capsys):
    for check_fn in (check.look_ahead_mask, check.key_padding_mask, check.masked_softmax):
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 3


def test_look_ahead_mask_accepts_the_solution_and_names_inverted_polarity():
    assert check.look_ahead_mask(lambda n: torch.ones(n, n, dtype=torch.bool).tril()).ok
    assert_rejected_with(
        check.look_ahead_mask(lambda n: torch.ones(n, n, dtype=torch.bool).triu(1)), "your polarity is inverted"
    )
    assert_rejected_with(
        check.look_ahead_mask(lambda n: torch.ones(n, n, dtype=torch.bool).triu()), "keep the lower triangle"
    )
    assert_rejected_with(check.look_ahead_mask(lambda n: torch.ones(n, n).tril()), "expected a boolean result")


def test_key_padding_mask_accepts_the_solution_and_names_polarity_and_shape():
    assert check.key_padding_mask(lambda t, pad: (t != pad)[:, None, None, :]).ok
    assert_rejected_with(check.key_padding_mask(lambda t, pad: (t == pad)[:, None, None, :]), "polarity is inverted")
    assert_rejected_with(check.key_padding_mask(lambda t, pad: t != pad), "shape (batch, 1, 1, T)")


def test_masked_softmax_accepts_the_solution_and_rejects_nan_and_zero_fill():
    assert check.masked_softmax(softmax_without_nan).ok
    result = check.masked_softmax(lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1))
    assert_rejected_with(result, "your result contains NaN")
    assert_rejected_with(
        check.masked_softmax(lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), dim=-1)), "with -inf before"
    )
    assert_rejected_with(check.masked_softmax(lambda s, m: softmax_without_nan(s, ~m)), "polarity is inverted")
