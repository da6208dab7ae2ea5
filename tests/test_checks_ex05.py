"""The lesson 05 checks accept the solutions, spot stubs, and name the typical mistakes (polarity, NaN, windows)."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib.checks import ex05_masking as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED

CHECKS = (check.look_ahead_mask, check.key_padding_mask, check.decoder_mask, check.sliding_window_mask,
          check.surviving_weights, check.masked_softmax)


def causal(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


def decoder(tokens, pad_id):
    return causal(tokens.shape[1]) & (tokens != pad_id)[:, None, None, :]


def window(size, width):
    i, j = torch.arange(size)[:, None], torch.arange(size)
    return (j <= i) & (j > i - width)


def surviving(lengths, size):
    return [n * (n + 1) // 2 + (size - n) * n for n in lengths]


def fixed_softmax(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.nan_to_num(0.0)


def test_stubs_are_not_attempted(capsys):
    for check_fn in CHECKS:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(CHECKS)


def test_look_ahead_mask_accepts_the_solution_and_names_inverted_polarity():
    assert check.look_ahead_mask(causal).ok
    assert_rejected_with(
        check.look_ahead_mask(lambda n: torch.ones(n, n, dtype=torch.bool).triu(1)), "your polarity is inverted"
    )
    assert_rejected_with(
        check.look_ahead_mask(lambda n: torch.ones(n, n, dtype=torch.bool).triu()), "keep the lower triangle"
    )
    assert_rejected_with(
        check.look_ahead_mask(lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)), "the diagonal must be allowed"
    )
    assert_rejected_with(check.look_ahead_mask(lambda n: torch.ones(n, n).tril()), "expected a boolean result")


def test_key_padding_mask_accepts_the_solution_and_names_polarity_and_shape():
    assert check.key_padding_mask(lambda t, pad: (t != pad)[:, None, None, :]).ok
    assert_rejected_with(check.key_padding_mask(lambda t, pad: (t == pad)[:, None, None, :]), "polarity is inverted")
    assert_rejected_with(check.key_padding_mask(lambda t, pad: t != pad), "shape (batch, 1, 1, T)")


def test_decoder_mask_accepts_the_solution_and_names_each_wrong_combination():
    assert check.decoder_mask(decoder).ok
    keys = lambda t, pad: (t != pad)[:, None, None, :]  # noqa: E731
    queries = lambda t, pad: (t != pad)[:, None, :, None]  # noqa: E731
    wrong = {
        "combine the masks with &, not |": lambda t, pad: causal(t.shape[1]) | keys(t, pad),
        "hides padding KEYS (columns)": lambda t, pad: causal(t.shape[1]) & queries(t, pad),
        "mask only the keys": lambda t, pad: causal(t.shape[1]) & keys(t, pad) & queries(t, pad),
        "your polarity is inverted": lambda t, pad: ~decoder(t, pad),
        "add the heads axis": lambda t, pad: decoder(t, pad)[:, 0],
        "you returned only the causal mask": lambda t, pad: causal(t.shape[1]),
        "you returned only the padding mask": keys,
    }
    for hint, fn in wrong.items():
        assert_rejected_with(check.decoder_mask(fn), hint)
    assert_rejected_with(check.decoder_mask(lambda t, pad: decoder(t, 0)), "not with 0")


def test_sliding_window_mask_accepts_the_solution_and_names_off_by_one_and_the_future():
    assert check.sliding_window_mask(window).ok
    i = lambda n: torch.arange(n)[:, None]  # noqa: E731
    j = lambda n: torch.arange(n)  # noqa: E731
    assert_rejected_with(check.sliding_window_mask(lambda n, w: window(n, w + 1)), "i - w < j <= i")
    assert_rejected_with(check.sliding_window_mask(lambda n, w: window(n, w - 1)), "(not w - 1)")
    assert_rejected_with(check.sliding_window_mask(lambda n, w: (i(n) - j(n)).abs() < w), "looks back only")
    assert_rejected_with(check.sliding_window_mask(lambda n, w: j(n) > i(n) - w), "keep the causal mask too")
    assert_rejected_with(check.sliding_window_mask(lambda n, w: window(n, w).T), "your mask is transposed")
    assert_rejected_with(check.sliding_window_mask(lambda n, w: ~window(n, w)), "polarity is inverted")


def test_surviving_weights_accepts_the_prediction_and_names_each_wrong_count():
    assert check.surviving_weights(surviving).ok
    assert check.surviving_weights(lambda lengths, size: torch.tensor(surviving(lengths, size))).ok
    wrong = {
        "the padding rows count too": lambda lengths, size: [n * (n + 1) // 2 for n in lengths],
        "the causal mask is not the only one": lambda lengths, size: [size * (size + 1) // 2] * len(lengths),
        "zeroes every key after the query": lambda lengths, size: [n * size for n in lengths],
        "you counted the zero weights": lambda lengths, size: [size * size - s for s in surviving(lengths, size)],
    }
    for hint, fn in wrong.items():
        assert_rejected_with(check.surviving_weights(fn), hint)


def test_masked_softmax_accepts_the_fix_and_names_the_bug_nan_zero_fill_and_polarity():
    assert check.masked_softmax(fixed_softmax).ok
    assert_rejected_with(
        check.masked_softmax(lambda s, m: torch.softmax(s, dim=-1) * m), "this is the buggy function's result"
    )
    renormalised = check.masked_softmax(
        lambda s, m: (torch.softmax(s, dim=-1) * m) / (torch.softmax(s, dim=-1) * m).sum(-1, keepdim=True)
    )
    assert_rejected_with(renormalised, "your result contains NaN")
    assert_rejected_with(renormalised, "divides 0 by 0")
    result = check.masked_softmax(lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1))
    assert_rejected_with(result, "your result contains NaN")
    assert_rejected_with(
        check.masked_softmax(lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), dim=-1)), "with -inf before"
    )
    assert_rejected_with(check.masked_softmax(lambda s, m: fixed_softmax(s, ~m)), "polarity is inverted")
