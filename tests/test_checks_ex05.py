"""The lesson 05 checks accept the solutions, spot stubs, and name the typical mistakes (polarity, NaN, windows),
each recognised as itself: the hint's text is shown and its id is the diagnosis the class report counts."""

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex05_masking as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED

CHECKS = (check.look_ahead_mask, check.key_padding_mask, check.decoder_mask, check.sliding_window_mask,
          check.surviving_weights, check.masked_softmax)


def causal(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


def keys(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :]


def queries(tokens, pad_id):
    return (tokens != pad_id)[:, None, :, None]


def decoder(tokens, pad_id):
    return causal(tokens.shape[1]) & keys(tokens, pad_id)


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


def test_look_ahead_mask_accepts_the_solution_and_names_polarity_triangle_diagonal_and_dtype():
    assert check.look_ahead_mask(causal).ok
    blocked_future = lambda n: torch.ones(n, n, dtype=torch.bool).triu(1)  # noqa: E731
    upper = lambda n: torch.ones(n, n, dtype=torch.bool).triu()  # noqa: E731
    strict = lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)  # noqa: E731
    numbers = lambda n: torch.ones(n, n).tril()  # noqa: E731
    assert_rejected_with(check.look_ahead_mask(blocked_future), "your polarity is inverted")
    assert_diagnosed(check.look_ahead_mask(blocked_future), "inverted-polarity")
    assert_rejected_with(check.look_ahead_mask(upper), "keep the lower triangle")
    assert_diagnosed(check.look_ahead_mask(upper), "upper-triangle")
    assert_rejected_with(check.look_ahead_mask(strict), "the diagonal must be allowed")
    assert_diagnosed(check.look_ahead_mask(strict), "diagonal-blocked")
    assert_rejected_with(check.look_ahead_mask(numbers), "expected a boolean result")
    assert_rejected_with(check.look_ahead_mask(numbers), "return a bool mask")
    assert_diagnosed(check.look_ahead_mask(numbers), "mask-not-boolean")


def test_key_padding_mask_accepts_the_solution_and_names_polarity_shape_axis_and_dtype():
    assert check.key_padding_mask(keys).ok
    padding_true = lambda t, pad: (t == pad)[:, None, None, :]  # noqa: E731
    flat = lambda t, pad: t != pad  # noqa: E731
    numbers = lambda t, pad: keys(t, pad).long()  # noqa: E731
    assert_rejected_with(check.key_padding_mask(padding_true), "polarity is inverted")
    assert_diagnosed(check.key_padding_mask(padding_true), "inverted-polarity")
    assert_rejected_with(check.key_padding_mask(flat), "shape (batch, 1, 1, T)")
    assert_diagnosed(check.key_padding_mask(flat), "broadcast-axes-missing")
    assert_rejected_with(check.key_padding_mask(queries), "hide padding queries")
    assert_diagnosed(check.key_padding_mask(queries), "padding-on-query-axis")
    assert_rejected_with(check.key_padding_mask(numbers), "not 0/1 numbers")
    assert_diagnosed(check.key_padding_mask(numbers), "mask-not-boolean")


def test_decoder_mask_accepts_the_solution_and_names_each_wrong_combination():
    assert check.decoder_mask(decoder).ok
    either = lambda t, pad: causal(t.shape[1]) | keys(t, pad)  # noqa: E731
    query_rows = lambda t, pad: causal(t.shape[1]) & queries(t, pad)  # noqa: E731
    both = lambda t, pad: causal(t.shape[1]) & keys(t, pad) & queries(t, pad)  # noqa: E731
    inverted = lambda t, pad: ~decoder(t, pad)  # noqa: E731
    no_heads_axis = lambda t, pad: decoder(t, pad)[:, 0]  # noqa: E731
    only_causal = lambda t, pad: causal(t.shape[1])  # noqa: E731
    zero_pad = lambda t, pad: decoder(t, 0)  # noqa: E731
    assert_rejected_with(check.decoder_mask(either), "combine the masks with &, not |")
    assert_diagnosed(check.decoder_mask(either), "masks-combined-with-or")
    assert_rejected_with(check.decoder_mask(query_rows), "hides padding KEYS (columns)")
    assert_diagnosed(check.decoder_mask(query_rows), "padding-on-query-axis")
    assert_rejected_with(check.decoder_mask(both), "mask only the keys")
    assert_diagnosed(check.decoder_mask(both), "padding-queries-masked")
    assert_rejected_with(check.decoder_mask(inverted), "your polarity is inverted")
    assert_diagnosed(check.decoder_mask(inverted), "inverted-polarity")
    assert_rejected_with(check.decoder_mask(no_heads_axis), "add the heads axis")
    assert_diagnosed(check.decoder_mask(no_heads_axis), "heads-axis-missing")
    assert_rejected_with(check.decoder_mask(only_causal), "you returned only the causal mask")
    assert_diagnosed(check.decoder_mask(only_causal), "padding-mask-forgotten")
    assert_rejected_with(check.decoder_mask(keys), "you returned only the padding mask")
    assert_diagnosed(check.decoder_mask(keys), "causal-mask-forgotten")
    assert_rejected_with(check.decoder_mask(zero_pad), "not with 0")
    assert_diagnosed(check.decoder_mask(zero_pad), "pad-id-hardcoded")


def test_sliding_window_mask_accepts_the_solution_and_names_off_by_one_and_the_future():
    assert check.sliding_window_mask(window).ok
    i = lambda n: torch.arange(n)[:, None]  # noqa: E731
    j = lambda n: torch.arange(n)  # noqa: E731
    too_wide = lambda n, w: window(n, w + 1)  # noqa: E731
    too_narrow = lambda n, w: window(n, w - 1)  # noqa: E731
    both_ways = lambda n, w: (i(n) - j(n)).abs() < w  # noqa: E731
    no_causal = lambda n, w: j(n) > i(n) - w  # noqa: E731
    transposed = lambda n, w: window(n, w).T  # noqa: E731
    inverted = lambda n, w: ~window(n, w)  # noqa: E731
    assert_rejected_with(check.sliding_window_mask(too_wide), "i - w < j <= i")
    assert_diagnosed(check.sliding_window_mask(too_wide), "window-one-too-wide")
    assert_rejected_with(check.sliding_window_mask(too_narrow), "(not w - 1)")
    assert_diagnosed(check.sliding_window_mask(too_narrow), "window-one-too-narrow")
    assert_rejected_with(check.sliding_window_mask(both_ways), "looks back only")
    assert_diagnosed(check.sliding_window_mask(both_ways), "window-looks-both-ways")
    assert_rejected_with(check.sliding_window_mask(no_causal), "keep the causal mask too")
    assert_diagnosed(check.sliding_window_mask(no_causal), "causal-mask-forgotten")
    assert_rejected_with(check.sliding_window_mask(transposed), "your mask is transposed")
    assert_diagnosed(check.sliding_window_mask(transposed), "mask-transposed")
    assert_rejected_with(check.sliding_window_mask(inverted), "polarity is inverted")
    assert_diagnosed(check.sliding_window_mask(inverted), "inverted-polarity")


def test_surviving_weights_accepts_the_prediction_and_names_each_wrong_count():
    assert check.surviving_weights(surviving).ok
    assert check.surviving_weights(lambda lengths, size: torch.tensor(surviving(lengths, size))).ok
    real_rows_only = lambda lengths, size: [n * (n + 1) // 2 for n in lengths]  # noqa: E731
    causal_only = lambda lengths, size: [size * (size + 1) // 2] * len(lengths)  # noqa: E731
    padding_only = lambda lengths, size: [n * size for n in lengths]  # noqa: E731
    zeros = lambda lengths, size: [size * size - s for s in surviving(lengths, size)]  # noqa: E731
    assert_rejected_with(check.surviving_weights(real_rows_only), "the padding rows count too")
    assert_diagnosed(check.surviving_weights(real_rows_only), "padding-rows-not-counted")
    assert_rejected_with(check.surviving_weights(causal_only), "the causal mask is not the only one")
    assert_diagnosed(check.surviving_weights(causal_only), "padding-keys-counted")
    assert_rejected_with(check.surviving_weights(padding_only), "zeroes every key after the query")
    assert_diagnosed(check.surviving_weights(padding_only), "future-keys-counted")
    assert_rejected_with(check.surviving_weights(zeros), "you counted the zero weights")
    assert_diagnosed(check.surviving_weights(zeros), "counted-zero-weights")


def test_masked_softmax_accepts_the_fix_and_names_the_bug_nan_fills_and_polarity():
    assert check.masked_softmax(fixed_softmax).ok
    after = lambda s, m: torch.softmax(s, dim=-1) * m  # noqa: E731
    renormalised = lambda s, m: after(s, m) / after(s, m).sum(-1, keepdim=True)  # noqa: E731
    minus_inf = lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1)  # noqa: E731
    minus_big = lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), dim=-1)  # noqa: E731
    zero_fill = lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), dim=-1)  # noqa: E731
    inverted = lambda s, m: fixed_softmax(s, ~m)  # noqa: E731
    assert_rejected_with(check.masked_softmax(after), "this is the buggy function's result")
    assert_diagnosed(check.masked_softmax(after), "masked-after-softmax")
    assert_rejected_with(check.masked_softmax(renormalised), "your result contains NaN")
    assert_rejected_with(check.masked_softmax(renormalised), "divides 0 by 0")
    assert_diagnosed(check.masked_softmax(renormalised), "nan-in-fully-blocked-row")
    assert_rejected_with(check.masked_softmax(minus_inf), "your result contains NaN")
    assert_diagnosed(check.masked_softmax(minus_inf), "nan-in-fully-blocked-row")
    assert_rejected_with(check.masked_softmax(minus_big), "such as -1e9")
    assert_diagnosed(check.masked_softmax(minus_big), "fully-blocked-row-uniform")
    assert_rejected_with(check.masked_softmax(zero_fill), "with -inf before")
    assert_diagnosed(check.masked_softmax(zero_fill), "masked-with-zero")
    assert_rejected_with(check.masked_softmax(inverted), "polarity is inverted")
    assert_diagnosed(check.masked_softmax(inverted), "inverted-polarity")


def test_padding_masks_take_the_pad_id_argument_and_left_padding():
    assert_diagnosed(check.key_padding_mask(lambda tokens, pad_id: (tokens != 0)[:, None, None, :]), "pad-id-hardcoded")
    assert_diagnosed(check.key_padding_mask(lambda tokens, pad_id: (tokens > 0)[:, None, None, :]), "pad-id-hardcoded")
    assert check.key_padding_mask(lambda tokens, pad_id: (tokens != pad_id).unsqueeze(1).unsqueeze(2)).ok
    assert check.key_padding_mask(lambda tokens, pad_id: (tokens != pad_id).view(len(tokens), 1, 1, -1)).ok

    def from_lengths(tokens, pad_id):  # right only when every sentence is padded on the right
        size = tokens.shape[1]
        real = torch.arange(size) < (tokens != pad_id).sum(dim=1, keepdim=True)  # (batch, T)
        return torch.ones(size, size, dtype=torch.bool).tril() & real[:, None, None, :]

    assert_diagnosed(check.decoder_mask(from_lengths), "padding-assumed-on-the-right")


def _masked(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def test_masked_softmax_meets_minus_inf_and_huge_scores_at_padded_keys():
    def renormalised(scores, mask):  # "divide by what is left": the huge padded score takes every weight first
        weights = torch.softmax(scores, dim=-1) * mask
        return torch.nan_to_num(weights / weights.sum(dim=-1, keepdim=True))

    def multiplied(scores, mask):  # -inf × 0 = NaN at the padded keys
        return torch.nan_to_num(torch.softmax(scores * mask - 1e9 * ~mask, dim=-1) * mask)

    def max_of_every_key(scores, mask):  # the maximum of the whole row includes the padded 1000
        exps = (scores - scores.amax(dim=-1, keepdim=True)).masked_fill(~mask, float("-inf")).exp()
        total = exps.sum(dim=-1, keepdim=True)
        return torch.where(total > 0, exps / total, torch.zeros_like(exps))

    def filled_in_place(scores, mask):  # the right weights, but the caller's scores are overwritten
        return torch.nan_to_num(torch.softmax(scores.masked_fill_(~mask, float("-inf")), dim=-1))

    for wrong in (renormalised, multiplied, max_of_every_key):
        result = check.masked_softmax(wrong)
        assert result.passed == 2, result.lines  # right on the first two cases
        assert_diagnosed(result, "padded-scores-before-mask")
    assert_diagnosed(check.masked_softmax(filled_in_place), "modified-input")
    assert check.masked_softmax(lambda scores, mask: torch.nan_to_num(_masked(scores, mask))).ok
    assert check.masked_softmax(lambda scores, mask: _masked(scores, mask).masked_fill(~mask, 0.0)).ok
    assert check.masked_softmax(lambda scores, mask: torch.where(mask.any(dim=-1, keepdim=True),
                                                                 _masked(scores, mask), 0.0)).ok
    assert check.masked_softmax(lambda scores, mask: torch.softmax(scores.masked_fill(~mask, -1e4), dim=-1)
                                * mask.any(dim=-1, keepdim=True)).ok
    assert check.masked_softmax(lambda scores, mask: torch.nan_to_num(_masked(scores.float(), mask))).ok


def test_a_repeated_mistake_gets_one_hint():
    for result in (check.look_ahead_mask(lambda size: torch.ones(size, size, dtype=torch.bool).triu()),
                   check.surviving_weights(lambda lengths, size: [n * (n + 1) // 2 for n in lengths]),
                   check.masked_softmax(lambda scores, mask: _masked(scores, ~mask).nan_to_num())):
        hints = [line for line in result.lines if line.startswith("  hint:")]
        assert len(hints) == len(result.diagnoses) == 1, result.lines
