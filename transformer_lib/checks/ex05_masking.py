"""Checks for lesson 05's exercises: causal, padding, decoder and sliding-window masks, how many weights survive
the masks, and a masked softmax fixed so that blocked keys get weight 0 and nothing becomes NaN."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ._feedback import CheckResult, Exercise, Hint

_TOKENS = torch.tensor([[7, 3, 9, 4], [5, 8, 0, 0], [6, 0, 0, 0]])  # (batch, T), pad id 0
# (batch, T), pad id 0: lengths 5 and 2 padded on the right, 3 padded on the left
_DECODER_TOKENS = torch.tensor([[7, 3, 9, 4, 2], [5, 8, 0, 0, 0], [0, 0, 6, 1, 4]])

_OTHER_PAD = torch.tensor([[4, 0, 2, 11, 11], [0, 7, 11, 11, 11]])  # (batch, T), pad id 11; 0 is a real token
_PAD_ID_HARDCODED = Hint("compare the tokens with the pad_id argument, not with 0", id="pad-id-hardcoded")

INVERTED = Hint("your polarity is inverted: True means attention is allowed", id="inverted-polarity")
NOT_BOOLEAN = Hint("return a bool mask (True = allowed), not 0/1 numbers: masked_fill and ~ need bools",
                   id="mask-not-boolean")


def look_ahead_mask(student_fn: Callable) -> CheckResult:
    """Check a function size -> (size, size) bool mask, True where query i may attend to key j (j <= i)."""
    ex = Exercise("look_ahead_mask")
    with ex.run():
        got = ex.call(student_fn, 4)
        expected = causal_mask(4)
        if not ex.compare(
            "the causal mask for 4 tokens",
            got,
            expected,
            hint="query i (row) may see keys j <= i (columns): the lower triangle including the diagonal",
            mistakes={
                Hint("your polarity is inverted (True = blocked, as nn.MultiheadAttention wants): "
                     "the course's masks are True where attention is allowed", id="inverted-polarity"): ~expected,
                Hint("you allowed the future and blocked the past: queries are rows, so keep the lower triangle "
                     "(torch.tril), not the upper", id="upper-triangle"): expected.T,
                Hint("the diagonal must be allowed: a token may attend to itself", id="diagonal-blocked"): (
                    expected.tril(diagonal=-1)
                ),
                NOT_BOOLEAN: expected.float(),
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        ex.compare("the causal mask for 1 token", ex.call(student_fn, 1), causal_mask(1))
    return ex.result


def key_padding_mask(student_fn: Callable) -> CheckResult:
    """Check a function (tokens (batch, T), pad_id) -> (batch, 1, 1, T) bool, True where the key is real."""
    ex = Exercise("key_padding_mask")
    with ex.run():
        got = ex.call(student_fn, _TOKENS, 0)
        expected = padding_mask(_TOKENS, 0)
        if not ex.compare(
            "the padding mask of 3 sentences of lengths 4, 2 and 1 (pad id 0)",
            got,
            expected,
            hint="compare the tokens with pad_id, then add two axes: mask[:, None, None, :]",
            mistakes={
                Hint("your polarity is inverted: mark real tokens True, padding False", id="inverted-polarity"): (
                    ~expected
                ),
                Hint("add the heads and queries axes so the mask broadcasts: shape (batch, 1, 1, T)",
                     id="broadcast-axes-missing"): expected[:, 0, 0],
                Hint("the padding mask hides padding KEYS, the last axis: shape it (batch, 1, 1, T), not "
                     "(batch, 1, T, 1), which would hide padding queries", id="padding-on-query-axis"): (
                    expected.transpose(-2, -1)
                ),
                NOT_BOOLEAN: expected.float(),
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        ex.compare("2 sentences padded with token 11 (pad_id=11), where token 0 is a real word",
                   ex.call(student_fn, _OTHER_PAD, 11), padding_mask(_OTHER_PAD, 11),
                   hint="compare the tokens with the pad_id argument",
                   mistakes={_PAD_ID_HARDCODED: padding_mask(_OTHER_PAD, 0)})
    return ex.result


def decoder_mask(student_fn: Callable) -> CheckResult:
    """Check a function (tokens (batch, T), pad_id) -> (batch, 1, T, T) bool: key j in the past and real."""
    ex = Exercise("decoder_mask")
    with ex.run():
        length = _DECODER_TOKENS.shape[1]
        causal = causal_mask(length)  # (T, T)
        real_keys = padding_mask(_DECODER_TOKENS, 0)  # (batch, 1, 1, T)
        real_queries = real_keys.transpose(-2, -1)  # (batch, 1, T, 1)
        expected = causal & real_keys  # (batch, 1, T, T)
        right_padded = torch.arange(length) < (_DECODER_TOKENS != 0).sum(dim=1, keepdim=True)  # (batch, T)
        if not ex.compare(
            "the decoder mask of 3 sentences padded to 5 (pad id 0): lengths 5, 2 (padded on the right), "
            "3 (padded on the left)",
            ex.call(student_fn, _DECODER_TOKENS, 0),
            expected,
            hint="allowed = the causal mask (T, T) & the padding mask (batch, 1, 1, T); broadcasting gives "
            "(batch, 1, T, T)",
            mistakes={
                Hint("a key must be in the past AND a real token: combine the masks with &, not |",
                     id="masks-combined-with-or"): causal | real_keys,
                Hint("the padding mask hides padding KEYS (columns): shape it (batch, 1, 1, T), not (batch, 1, T, 1)",
                     id="padding-on-query-axis"): causal & real_queries,
                Hint("mask only the keys: the task allows a padding query to look at real keys in its past (its "
                     "output is ignored later), and masking its row leaves it with no key at all",
                     id="padding-queries-masked"): causal & real_keys & real_queries,
                INVERTED: ~expected,
                Hint("add the heads axis so the mask broadcasts against (batch, heads, T, T): shape (batch, 1, T, T)",
                     id="heads-axis-missing"): expected[:, 0],
                Hint("you returned only the causal mask: the padding keys must be blocked too",
                     id="padding-mask-forgotten"): causal,
                Hint("you returned only the padding mask: the future must be blocked too",
                     id="causal-mask-forgotten"): real_keys,
                Hint("you built the keys from each sentence's length, as if every sentence were padded on the "
                     "right: the third one is padded on the left; compare each token with pad_id",
                     id="padding-assumed-on-the-right"): causal & right_padded[:, None, None, :],
            },
        ):
            return ex.result  # the first failure stops: one hint, one diagnosis
        other_pad = torch.where(_DECODER_TOKENS == 0, 11, _DECODER_TOKENS)  # the same sentences, padded with 11
        ex.compare(
            "the same batch padded with token 11 (pad_id=11)",
            ex.call(student_fn, other_pad, 11),
            causal & padding_mask(other_pad, 11),
            hint="compare the tokens with the pad_id argument, not with 0",
            mistakes={_PAD_ID_HARDCODED: causal & padding_mask(other_pad, 0)},
        )
    return ex.result


def _window(size: int, window: int) -> torch.Tensor:
    """The reference: query i may see keys i - window + 1 … i, built from the core's causal mask."""
    causal = causal_mask(size)  # (T, T): j <= i
    return causal & ~causal.tril(diagonal=-window)  # drop the keys j <= i - window


def sliding_window_mask(student_fn: Callable) -> CheckResult:
    """Check a function (size, window) -> (size, size) bool: query i sees keys i - window + 1 … i."""
    ex = Exercise("sliding_window_mask")
    with ex.run():
        size, window = 6, 3
        expected = _window(size, window)
        rows, cols = torch.arange(size)[:, None], torch.arange(size)  # query i, key j
        if not ex.compare(
            "a window of 3 over 6 tokens",
            ex.call(student_fn, size, window),
            expected,
            hint="query i (row) may see key j (column) when i - window < j <= i",
            mistakes={
                Hint("off by one: a window of w holds w keys, the query's own included: i - w < j <= i",
                     id="window-one-too-wide"): _window(size, window + 1),
                Hint("off by one: a window of w holds w keys, the query's own included (not w - 1)",
                     id="window-one-too-narrow"): _window(size, window - 1),
                Hint("a decoder's window looks back only: the keys after the query (the future) must stay blocked",
                     id="window-looks-both-ways"): (rows - cols).abs() < window,
                Hint("you blocked the old keys but opened the future: keep the causal mask too",
                     id="causal-mask-forgotten"): cols > rows - window,
                Hint("queries are rows and keys are columns: your mask is transposed", id="mask-transposed"): (
                    expected.T
                ),
                INVERTED: ~expected,
            },
        ) or not ex.compare("a window of 1 over 4 tokens (each token sees only itself)", ex.call(student_fn, 4, 1),
                            _window(4, 1)):
            return ex.result  # the first failure stops: one hint, one diagnosis
        ex.compare("a window of 5 over 3 tokens (wider than the sequence: the causal mask)",
                   ex.call(student_fn, 3, 5), _window(3, 5))
    return ex.result


def _surviving_weights(lengths: tuple[int, ...], size: int) -> list[int]:
    """The reference: count the non-zero weights of the core's attention under the decoder mask."""
    tokens = torch.tensor([[1] * n + [0] * (size - n) for n in lengths])  # (batch, T), pad id 0
    mask = causal_mask(size) & padding_mask(tokens, 0)  # (batch, 1, T, T)
    scores = torch.randn(len(lengths), 1, size, size, generator=torch.Generator().manual_seed(0),
                         dtype=torch.float64)
    identity = torch.eye(size, dtype=torch.float64)  # keys = identity, so query @ keys.T = the scores
    _, weights = scaled_dot_product_attention(scores, identity, identity, mask=mask, scale=1.0)
    return (weights != 0).sum(dim=(1, 2, 3)).tolist()


def surviving_weights(student_fn: Callable) -> CheckResult:
    """Check a prediction (lengths, size) -> list of counts of non-zero weights per sentence (decoder mask)."""
    ex = Exercise("surviving_weights")
    with ex.run():
        for lengths, size in (((5, 3, 1), 5), ((4, 2, 6), 6)):
            expected = _surviving_weights(lengths, size)
            if not ex.compare(
                f"sentences of lengths {', '.join(map(str, lengths))} padded to {size}",
                ex.call(student_fn, lengths, size),
                expected,
                hint="count, for each query row, the keys that are both in its past and real",
                mistakes={
                    Hint("the padding rows count too: a padding query still attends to the real keys in its past "
                         "(only the keys are masked)", id="padding-rows-not-counted"): [
                        n * (n + 1) // 2 for n in lengths
                    ],
                    Hint("the padding keys get weight 0 as well: the causal mask is not the only one",
                         id="padding-keys-counted"): [size * (size + 1) // 2 for _ in lengths],
                    Hint("the causal mask also zeroes every key after the query", id="future-keys-counted"): [
                        n * size for n in lengths
                    ],
                    Hint("you counted the zero weights: count the weights that are NOT zero",
                         id="counted-zero-weights"): [size * size - e for e in expected],
                },
            ):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result


def _zeroed_after(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The buggy function of the exercise: softmax over every key, then blocked weights zeroed."""
    return torch.softmax(scores, dim=-1) * mask


def _reference_weights(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The core's masked softmax of ``scores`` (..., T_q, T_k); -inf scores must sit at blocked keys."""
    finite = scores.masked_fill(~mask, 0.0)  # blocked scores do not count; identity keys need finite numbers
    identity = torch.eye(scores.shape[-1], dtype=scores.dtype)  # keys = identity, so query @ keys.T = the scores
    return scaled_dot_product_attention(finite, identity, identity, mask=mask, scale=1.0)[1]


def _padded_scores() -> tuple[torch.Tensor, torch.Tensor]:
    """Scores (batch=2, heads=2, T_q=3, T_k=5) of sentences with 5 and 2 real keys, and their key padding mask
    (2, 1, 1, 5); the padded keys hold what earlier steps may leave there: -inf, and one huge score."""
    tokens = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 0, 0, 0]])  # pad id 0
    mask = padding_mask(tokens, 0)  # (2, 1, 1, 5)
    scores = torch.randn(2, 2, 3, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    scores[1, :, :, 2] = float("-inf")  # a padded key already masked
    scores[1, :, :, 4] = 1000.0  # a padded key with a huge score: its exp would take every weight
    return scores, mask


def masked_softmax(student_fn: Callable) -> CheckResult:
    """Check a function (scores (..., T_q, T_k), mask bool) -> weights; masked keys get 0, no NaN anywhere, also
    when the scores hold -inf or huge numbers at padded keys; the scores must come back unchanged."""
    ex = Exercise("masked_softmax")
    with ex.run():
        blocked_rows = torch.tensor([[2.0, 1.0, 0.5], [0.3, 1.2, -1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
        batch_scores = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        cases = (
            ("weights for 3 queries: key 1 blocked, nothing blocked, every key blocked", blocked_rows,
             torch.tensor([[True, False, True], [True, True, True], [False, False, False]])),
            ("a batch of scores (2, 4, 4) with a causal mask (4, 4) (broadcasting)", batch_scores, causal_mask(4)),
            ("scores (batch=2, heads=2, T_q=3, T_k=5) of sentences with 5 and 2 real keys, padding mask "
             "(2, 1, 1, 5); padded keys hold -inf and 1000", *_padded_scores()),
        )
        for what, scores, mask in cases:  # the first failure stops: one hint, one diagnosis
            given = scores.clone()
            got = ex.call(student_fn, given, mask)
            if not torch.equal(given, scores):
                ex.require("your function leaves the scores unchanged", False, problem="it changed them",
                           hint=Hint("your function changed the scores it was given (an in-place step such as "
                                     "masked_fill_): they are the caller's data; masked_fill, without the _, "
                                     "returns a new tensor", id="modified-input"))
                break
            expected = _reference_weights(scores, mask)
            mistakes = {
                Hint("blocked keys still get weight: fill them with -inf before the softmax, not 0",
                     id="masked-with-zero"): torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1),
                Hint("the mask polarity is inverted: True means the key is allowed", id="inverted-polarity"):
                    _reference_weights(scores.masked_fill(torch.isneginf(scores), 0.0), ~mask),
            }
            if torch.isneginf(scores).any():  # earlier cases passed, so only this case's pitfall is left to name
                lost = expected.clone()
                lost[1] = 0.0  # sentence 1's allowed weights underflow: its padded keys hold -inf and 1000
                mistakes[Hint("your weights are 0 for the short sentence, whose padded keys hold -inf and 1000: "
                              "those scores reached your arithmetic before the mask did (a softmax or a maximum over "
                              "every key, or -inf × 0 = NaN when multiplying by the mask). Fill the blocked scores "
                              "with -inf (masked_fill) first, then take the softmax",
                              id="padded-scores-before-mask")] = lost
            else:
                zeroed = _zeroed_after(scores, mask)
                mistakes.update({
                    Hint("this is the buggy function's result: the allowed weights no longer sum to 1. Mask the "
                         "scores with -inf before the softmax", id="masked-after-softmax"): zeroed,
                    Hint("a row with no allowed key divides 0 by 0: give such rows all-zero weights",
                         id="nan-in-fully-blocked-row"): zeroed / zeroed.sum(-1, keepdim=True),
                    Hint("a row with no allowed key must get weight 0 everywhere: a large negative fill such as -1e9 "
                         "spreads it evenly over its blocked keys instead", id="fully-blocked-row-uniform"):
                        torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1),
                })
            if not ex.compare(what, got, expected,
                              hint="fill blocked scores with -inf, take the softmax, then set rows with no allowed key "
                                   "to 0",
                              mistakes=mistakes):
                break
    return ex.result
