"""Checks for lesson 11's exercises: one online-softmax update step, the decoder-only (GPT) mask, baseline losses
predicted by hand, one cached GPT decoding step, the stopping step read from a loss curve, and a scaling law fitted
to losses of several model sizes."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ..attention import scaled_dot_product_attention
from ..chunked_attention import online_softmax_update
from ..evaluation import baseline_losses, bigram_probabilities, unigram_probabilities
from ..gpt import GPT, GPTConfig
from ..masks import causal_mask, padding_mask
from ..scaling import fit_power_law
from ..training import LMHistory
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch


def _chunk_cases() -> list[tuple[str, tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]]:
    """(description, the running statistics before, scores (T_q, C), values (C, d_v)): the first chunk, from the start
    (max -inf, sum 0); then the second, which raises one row's maximum (row 0) and leaves the others' (rows 1, 2)."""
    generator = torch.Generator().manual_seed(11)
    scores = torch.randn(3, 7, generator=generator, dtype=torch.float64)  # (T_q, 7 keys)
    scores[0, 4] = 5.0  # a new maximum arrives in the second chunk
    scores[1:, 1] = 4.0  # the first chunk's maximum stays the largest
    values = torch.randn(7, 2, generator=generator, dtype=torch.float64)  # (7 keys, d_v)
    start = (torch.full((3, 1), float("-inf"), dtype=torch.float64), torch.zeros(3, 1, dtype=torch.float64),
             torch.zeros(3, 2, dtype=torch.float64))
    after_first = online_softmax_update(*start, scores[:, :3], values[:3])
    return [("the first chunk of 3 keys, from the start (max -inf, sums 0)", start, scores[:, :3], values[:3]),
            ("a second chunk of 4 keys: row 0's maximum rises, rows 1 and 2 keep theirs", after_first, scores[:, 3:],
             values[3:])]


def online_softmax_step(student_fn: Callable) -> CheckResult:
    """Check a function (running_max, running_sum, accumulator, scores, values) -> the three updated statistics, on
    the two chunks of 3 queries' 7 keys. The maximum, the sum and the accumulator are compared in order and the first
    wrong one ends the check (the later ones follow from it); after both chunks, accumulator / sum must be the
    softmax-weighted values."""
    ex = Exercise("online_softmax_step")
    with ex.run():
        got = None
        for number, (description, before, scores, values) in enumerate(_chunk_cases()):
            expected = online_softmax_update(*before, scores, values)
            got = ex.call(student_fn, *[t.clone() for t in before], scores, values)
            three = isinstance(got, tuple | list) and len(got) == 3
            if (number == 0 or not three) and not ex.require(
                "returns three tensors (new_max, new_sum, new_accumulator)",
                three,
                problem=f"got {type(got).__name__}",
                hint="return new_max, new_sum, new_accumulator",
            ):
                return ex.result
            old_max, old_sum, old_accumulator = before
            new_max = expected[0]
            weights = torch.exp(scores - new_max)  # (T_q, C)
            rescale = torch.exp(old_max - new_max)  # (T_q, 1)
            old_max_weights = torch.exp(scores - old_max)  # this chunk weighted with the old maximum
            chunk_only = scores.amax(-1, keepdim=True)
            parts = [
                ("the new running maximum", got[0], new_max,
                 "the larger of the old maximum and this chunk's maximum (keepdim=True)",
                 {Hint("the maximum so far: the larger of the old maximum and this chunk's, not this chunk's alone",
                       id="chunk-max-only"): chunk_only}),
                ("the new running sum", got[1], expected[1],
                 "multiply the old sum by exp(old_max - new_max), then add this chunk's exp(scores - new_max)",
                 {Hint("rescale the old sum by exp(old_max - new_max): it was computed with the old maximum",
                       id="sum-not-rescaled"): old_sum + weights.sum(-1, keepdim=True),
                  Hint("the rescaling factor is exp(old_max - new_max), at most 1: yours is upside down",
                       id="rescale-sign-flipped"): old_sum / rescale + weights.sum(-1, keepdim=True),
                  Hint("weigh this chunk's scores with the NEW maximum, exp(scores - new_max), as the rescaled old "
                       "sum is", id="chunk-weighted-with-old-max"):
                      old_sum * rescale + old_max_weights.sum(-1, keepdim=True)}),
                ("the new accumulator", got[2], expected[2],
                 "rescale the old accumulator like the sum, then add exp(scores - new_max) @ values",
                 {Hint("rescale the old accumulator by exp(old_max - new_max) too", id="accumulator-not-rescaled"):
                      old_accumulator + weights @ values,
                  Hint("keep the accumulator unnormalised: divide by the running sum only once, after the last "
                       "chunk", id="accumulator-normalised-early"): expected[2] / expected[1]}),
            ]
            for what, got_part, expected_part, hint, mistakes in parts:
                if not ex.compare(f"{description}: {what}", got_part, expected_part, hint=hint,
                                  mistakes={h: v for h, v in mistakes.items()
                                            if describe_mismatch(v, expected_part) is not None}):
                    return ex.result
        all_scores = torch.cat([scores for _, _, scores, _ in _chunk_cases()], dim=-1)  # (T_q, 7)
        all_values = torch.cat([values for _, _, _, values in _chunk_cases()])  # (7, d_v)
        exact, _ = scaled_dot_product_attention(all_scores, torch.eye(7, dtype=torch.float64), all_values, scale=1.0)
        ex.compare("accumulator / sum after both chunks equals softmax(all scores) @ values", got[2] / got[1], exact)
    return ex.result


def _mask_cases() -> list[tuple[str, torch.Tensor, int]]:
    """(description, tokens (batch, T), pad_id): the lesson's two rows padded with 0; three rows of 5 padded with 3 (0
    a real token), one without padding, stored transposed (not contiguous)."""
    stored = torch.tensor([[5, 9, 0], [6, 3, 2], [7, 3, 0], [0, 3, 4], [8, 3, 1]])  # (T, batch)
    return [("two sequences, the second with 2 padding tokens (pad_id 0)", torch.tensor([[5, 6, 7, 8], [9, 4, 0, 0]]),
             0),
            ("three sequences of 5 with 0, 4 and 0 padding tokens (pad_id 3, 0 a real token), not contiguous",
             stored.T, 3)]


def decoder_only_mask(student_fn: Callable) -> CheckResult:
    """Check a function (tokens (batch, T), pad_id) -> (batch, 1, T, T) bool: causal and hiding padded keys."""
    ex = Exercise("decoder_only_mask")
    with ex.run():
        for description, tokens, pad_id in _mask_cases():
            batch, length = tokens.shape
            got = ex.call(student_fn, tokens.clone(), pad_id)
            causal = causal_mask(length).expand(batch, 1, length, length)  # (batch, 1, T, T)
            padding = padding_mask(tokens, pad_id).expand(batch, 1, length, length)  # (batch, 1, T, T)
            expected = causal & padding
            mistakes = {
                Hint("hide the padding keys too: combine the causal mask with the padding mask",
                     id="padding-not-masked"): causal,
                Hint("a GPT must not see the future: combine the padding mask with the causal mask",
                     id="causal-mask-missing"): padding,
                Hint("True means allowed: your mask is inverted", id="mask-inverted"): ~expected,
                Hint("the future lies above the diagonal (queries are rows): keep the lower triangle",
                     id="upper-triangle-kept"): causal.transpose(-2, -1) & padding,
                Hint("hide the padding KEYS (the last axis, shape (batch, 1, 1, T)), not the padded queries' rows: "
                     "a row with no allowed key has only -inf scores, and its softmax is NaN (0/0)",
                     id="padding-on-queries"): causal & padding.transpose(-2, -1),  # keys hidden too: the same mask
                Hint("use the pad_id passed in: here it is 3, and 0 is a real token", id="pad-id-hardcoded"):
                    causal & padding_mask(tokens, 0).expand(batch, 1, length, length),
            }
            if not ex.compare(
                f"the mask for {description}", got, expected,
                hint="combine causal_mask(T) (T, T) and the key padding mask (batch, 1, 1, T) with &",
                mistakes={h: v for h, v in mistakes.items() if describe_mismatch(v, expected) is not None},
            ):
                break  # one batch's hint is enough
    return ex.result


BITS = Hint("use the natural logarithm (nats), not log2 (bits)", id="bits-not-nats")
NO_SMOOTHING = Hint("add one to every count (add-one smoothing) before dividing", id="no-add-one-smoothing")
NO_VOCABULARY_IN_DENOMINATOR = Hint("with add-one smoothing, add the vocabulary size (3) to the denominator too, so "
                                    "that the probabilities still sum to 1", id="smoothing-denominator-unchanged")


def _small_text() -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise 3's texts as ids of the vocabulary a = 0, b = 1, c = 2: training "ababababac", held-out "abac"."""
    ids = {"a": 0, "b": 1, "c": 2}
    return tuple(torch.tensor([ids[char] for char in text]) for text in ("ababababac", "abac"))


def baseline_predictions(student_fn: Callable) -> CheckResult:
    """Check a function () -> {"uniform": …, "unigram": …, "bigram": …}: held-out losses predicted by hand."""
    ex = Exercise("baseline_predictions")
    with ex.run():
        got = ex.call(student_fn)
        names = ("uniform", "unigram", "bigram")
        if not ex.require(
            'returns a dict with the keys "uniform", "unigram" and "bigram"',
            isinstance(got, dict) and set(got) == set(names),
            problem=f"got {got!r}"[:200],
            hint='return {"uniform": ..., "unigram": ..., "bigram": ...}',
        ):
            return ex.result
        train, valid = _small_text()
        expected = baseline_losses(train, valid, 3)
        unsmoothed_unigram = unigram_probabilities(train, 3, smoothing=0.0)
        unsmoothed_bigram = bigram_probabilities(train, 3, smoothing=0.0)
        unsmoothed = {
            "unigram": -unsmoothed_unigram[valid].log().mean().item(),
            "bigram": -unsmoothed_bigram[valid[:-1], valid[1:]].log().mean().item(),
        }
        every_position = -bigram_probabilities(train, 3)[valid[:-1], valid[1:]].log().sum().item() / len(valid)
        hints = {
            "uniform": "every one of the 3 characters is equally likely: -ln(1/3)",
            "unigram": "P(char) = (count in the training text + 1) / (10 + 3); average -ln P over the 4 held-out "
            "characters",
            "bigram": "P(next | previous) = (count of the pair + 1) / (count of pairs starting with previous + 3); "
            "average -ln P over the 3 held-out pairs",
        }
        # add-one smoothing with the vocabulary size left out of the denominator: (count + 1) / count of contexts
        counts, pairs = torch.bincount(train, minlength=3).double(), torch.zeros(3, 3, dtype=torch.float64)
        pairs.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1, dtype=torch.float64), accumulate=True)
        plain_denominator = {
            "unigram": -((counts[valid] + 1) / len(train)).log().mean().item(),
            "bigram": -((pairs[valid[:-1], valid[1:]] + 1) / pairs.sum(1)[valid[:-1]]).log().mean().item(),
        }
        for name in names:
            mistakes = {BITS: expected[name] / math.log(2)}
            if name in unsmoothed:
                mistakes[NO_SMOOTHING] = unsmoothed[name]
                mistakes[NO_VOCABULARY_IN_DENOMINATOR] = plain_denominator[name]
            if name == "bigram":
                mistakes[Hint("4 held-out characters give 3 pairs: divide by 3, not 4",
                              id="averaged-over-characters-not-pairs")] = every_position
            ex.compare(
                f"your predicted {name} loss", torch.tensor(float(got[name]), dtype=torch.float64),
                torch.tensor(expected[name], dtype=torch.float64), hint=hints[name], mistakes=mistakes, atol=1e-3,
            )
    return ex.result


def _tiny_gpt() -> GPT:
    with torch.random.fork_rng():
        torch.manual_seed(11)
        config = GPTConfig(vocab_size=12, block_size=16, d_model=16, num_heads=2, num_layers=2, d_ff=32)
        return GPT(config).double().eval()


def cached_next_logits(student_fn: Callable) -> CheckResult:
    """Check a function (model, cache, tokens (batch, t)) -> (batch, V): the next logits, feeding only new tokens."""
    ex = Exercise("cached_next_logits")
    with ex.run(), torch.no_grad():
        model = _tiny_gpt()
        tokens = torch.randint(12, (2, 6), generator=torch.Generator().manual_seed(3))  # (batch, t)
        expected = model(tokens)[:, -1]  # (batch, V): one full pass
        for seen, situation in ((0, "the first call (empty cache, a prompt of 6)"), (5, "a later step (5 cached)")):
            cache, twin = model.new_cache(), model.new_cache()
            for each in (cache, twin):
                if seen:
                    model(tokens[:, :seen], cache=each)
            got = ex.call(student_fn, model, cache, tokens)
            mistakes = {
                Hint("with a cache, feed only the tokens it has not seen: tokens[:, len(cache):]",
                     id="seen-tokens-fed-again"): model(tokens, cache=twin)[:, -1],
                Hint("return the last position only, shaped (batch, V): [:, -1], not [:, -1:]",
                     id="position-axis-kept"): expected[:, None],
            }
            if not seen:
                mistakes[Hint("on the first call the cache is empty and the whole prompt is new: feed "
                              "tokens[:, len(cache):], not tokens[:, -1:]", id="prompt-not-fed")] = (
                    model(tokens[:, -1:])[:, -1])
            if not ex.compare(
                f"the next logits at {situation}", got, expected, mistakes=mistakes,
                hint="feed tokens[:, len(cache):] with cache=cache and return the last position, shaped (batch, V)",
            ):
                break  # the cache's size follows from what was fed: no second hint for one mistake
            ex.require(
                f"after {situation} the cache holds all 6 positions",
                len(cache) == 6,
                problem=f"it holds {len(cache)}",
                hint=Hint("call the model with cache=cache, so that it appends the new keys and values",
                          id="cache-not-passed"),
            )
    return ex.result


def _histories() -> list[tuple[str, LMHistory]]:
    """A run that starts memorising (held-out loss lowest at step 300), one still improving at the end, and one
    measured at uneven steps whose held-out loss rises once, then falls lower."""
    steps = [0, 100, 200, 300, 400, 500]
    memorising = LMHistory(eval_steps=steps, train_loss=[4.6, 2.4, 1.9, 1.5, 1.1, 0.8],
                           valid_loss=[4.6, 2.5, 2.1, 2.0, 2.2, 2.5])
    improving = LMHistory(eval_steps=steps, train_loss=[4.7, 2.7, 2.5, 2.2, 2.0, 1.8],
                          valid_loss=[4.8, 2.3, 2.2, 2.0, 1.8, 1.7])
    bumpy = LMHistory(eval_steps=[0, 50, 150, 350, 750, 1550], train_loss=[4.6, 3.0, 2.5, 2.0, 1.6, 1.2],
                      valid_loss=[4.6, 3.1, 3.3, 2.4, 2.2, 2.3])
    return [("a run that memorises", memorising), ("a run still improving", improving),
            ("a run measured at uneven steps, its held-out loss rising once before its lowest", bumpy)]


def stopping_step(student_fn: Callable) -> CheckResult:
    """Check a function (eval_steps, train_loss, valid_loss) -> the step at which early stopping keeps the model."""
    ex = Exercise("stopping_step")
    with ex.run():
        for which, history in _histories():
            got = ex.call(student_fn, list(history.eval_steps), list(history.train_loss), list(history.valid_loss))
            steps, best_index = history.eval_steps, history.valid_loss.index(min(history.valid_loss))
            first_rise = next((i for i in range(len(steps) - 1) if history.valid_loss[i + 1] > history.valid_loss[i]),
                              len(steps) - 1)
            if not ex.compare(
                f"the stopping step of {which}", torch.tensor(got), torch.tensor(history.best_step()),
                hint="the step whose held-out loss is lowest",
                mistakes={
                    Hint("the training loss always falls: read the held-out loss", id="training-loss-read"):
                        history.eval_steps[history.train_loss.index(min(history.train_loss))],
                    Hint("return the step (eval_steps[i]), not the index i", id="index-not-step"): best_index,
                    Hint("return the step at which the held-out loss is lowest, not that loss",
                         id="loss-not-step"): min(history.valid_loss),
                    Hint("early stopping keeps the LOWEST held-out loss: argmin, not argmax",
                         id="argmax-not-argmin"): history.eval_steps[history.valid_loss.index(max(history.valid_loss))],
                    Hint("read the step from eval_steps: the evaluations are not always 100 steps apart",
                         id="step-interval-assumed"): best_index * 100,
                    Hint("the held-out loss can rise for one evaluation and fall lower later: keep the lowest over "
                         "the whole run, not the point before the first rise", id="stopped-at-first-rise"):
                        steps[first_rise],
                },
            ):
                break  # one run's hint is enough
    return ex.result


# Lesson 11's width ladder (d_model 8, 16, 32, 64; 2 blocks; at 1e-2), trained for 200 steps instead of the lesson's
# 125 by one train_width_ladder call: the non-embedding parameters N of each width and its held-out loss (nats per
# character), the mean over seeds 0, 1 and 2.
SCALING_PARAMS = [1760, 6592, 25472, 100096]
SCALING_LOSSES = [2.542, 2.417, 2.303, 2.118]


def scaling_fit(student_fn: Callable) -> CheckResult:
    """Check a function (params, losses) -> (alpha, a) fitting losses ≈ a · params**(-α_N) on log-log axes."""
    ex = Exercise("scaling_fit")
    with ex.run():
        got = ex.call(student_fn, list(SCALING_PARAMS), list(SCALING_LOSSES))
        if not ex.require(
            "returns two numbers (alpha, a)",
            isinstance(got, tuple | list) and len(got) == 2,
            problem=f"got {type(got).__name__}",
            hint="return alpha, a",
        ):
            return ex.result
        slope, scale = fit_power_law(SCALING_PARAMS, SCALING_LOSSES)
        log_n, log_loss = np.log(SCALING_PARAMS), np.log(SCALING_LOSSES)
        linear_slope = np.polyfit(SCALING_PARAMS, SCALING_LOSSES, 1)[0]
        swapped_slope = np.polyfit(log_loss, log_n, 1)[0]
        log10_intercept = np.polyfit(np.log10(SCALING_PARAMS), np.log10(SCALING_LOSSES), 1)[1]
        if not ex.compare(
            "the exponent α_N (alpha)", torch.tensor(float(got[0])), torch.tensor(-slope),
            hint=Hint(idea="alpha is minus the slope of the straight line through (log N, log L)",
                      code="slope, intercept = np.polyfit(np.log(params), np.log(losses), 1); alpha = -slope"),
            mistakes={
                Hint("the loss falls, so the slope is negative: alpha is minus the slope", id="slope-sign-kept"): slope,
                Hint("fit the line through the logarithms of both, not through N and L themselves",
                     id="fit-not-log-log"): -linear_slope,
                Hint("the line predicts log L from log N: log N goes first in np.polyfit", id="axes-swapped"):
                    -swapped_slope,
            },
        ):
            return ex.result  # a follows from the same line: one hint for one mistake
        ex.compare(
            "the factor a", torch.tensor(float(got[1])), torch.tensor(scale),
            hint=Hint(idea="a is the loss the line gives at N = 1: undo the logarithm of the intercept",
                      code="a = np.exp(intercept) (with natural logarithms)"),
            mistakes={
                Hint("the intercept is log a, not a: undo the logarithm", id="intercept-not-exponentiated"):
                    math.log(scale),
                Hint("undo the logarithm you took: 10**intercept after np.log10, np.exp after np.log",
                     id="log-base-mismatch"): math.exp(log10_intercept),
            },
        )
    return ex.result
