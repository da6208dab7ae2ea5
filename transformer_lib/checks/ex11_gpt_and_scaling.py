"""Checks for lesson 11's exercises: the decoder-only (GPT) mask, baseline losses predicted by hand, one cached GPT
decoding step, the stopping step read from a loss curve, a scaling law fitted to losses of several model sizes,
AdamW's next step from its saved state, and a stopped run resumed from its checkpoint."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..device import single_thread
from ..evaluation import baseline_losses, bigram_probabilities, unigram_probabilities
from ..gpt import GPT, GPTConfig
from ..masks import causal_mask, padding_mask
from ..optim import AdamW
from ..scaling import fit_power_law
from ..training import LMHistory, LMTrainingState, train_gpt
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch, format_value


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
    """Exercise 2's texts as ids of the vocabulary a = 0, b = 1, c = 2: training "ababababac", held-out "abac"."""
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


# -- AdamW's next step, from PyTorch's saved state ----------------------------------------------------------------

ADAMW_TOLERANCE = {"atol": 1e-12, "rtol": 1e-9}  # float64: the same formula in another order agrees to ~1e-15


def _adamw_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, dict[str, Any], dict[str, Any]]]:
    """(description, w, g, state, group): a weight after k steps of ``torch.optim.AdamW`` and the gradient of step
    k + 1, with the optimiser's saved state and hyper-parameters (``state_dict()["state"][0]`` and its
    ``param_groups[0]``), the step count an int. Three weights: (4, 3) after 3 steps; (3, 5) not contiguous after
    1 step, other betas and a large eps; (6,) with gradients of about 1e-4 after 7 steps."""
    generator = torch.Generator().manual_seed(11)
    settings = [("a (4, 3) weight after 3 steps, lr 0.01, weight_decay 0.1", (4, 3), 3, 1.0,
                 dict(lr=1e-2, weight_decay=0.1)),
                ("a (3, 5) weight, not contiguous, after 1 step: betas (0.8, 0.99), eps 0.01, weight_decay 0.5",
                 (5, 3), 1, 1.0, dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-2, weight_decay=0.5)),
                ("a (6,) bias with gradients of about 1e-4, after 7 steps, default hyper-parameters", (6,), 7, 1e-4,
                 {})]
    cases = []
    for description, shape, steps, scale, options in settings:
        w = torch.nn.Parameter(torch.randn(*shape, generator=generator, dtype=torch.float64))
        optimizer = torch.optim.AdamW([w], **options)
        for _ in range(steps):
            w.grad = scale * torch.randn(*shape, generator=generator, dtype=torch.float64)
            optimizer.step()
        g = scale * torch.randn(*shape, generator=generator, dtype=torch.float64)
        saved = optimizer.state_dict()
        weight, gradient = w.detach().clone(), g
        if len(shape) == 2 and shape[0] == 5:  # handed over transposed: (3, 5), not contiguous
            weight = weight.T
            gradient = gradient.T
            saved["state"][0] = {key: value.T if key != "step" else value for key, value in saved["state"][0].items()}
        saved["state"][0]["step"] = int(saved["state"][0]["step"])  # PyTorch keeps a float32 tensor: an int here
        group = {key: value for key, value in saved["param_groups"][0].items() if key != "params"}
        cases.append((description, weight, gradient, saved["state"][0], group))
    return cases


def _library_adamw(w: torch.Tensor, g: torch.Tensor, state: dict[str, Any], group: dict[str, Any]
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """The library's AdamW from PyTorch's saved state: (new w, new m, new v, the steps taken after it)."""
    parameter = torch.nn.Parameter(w.clone())
    parameter.grad = g.clone()
    optimizer = AdamW([parameter], lr=group["lr"], betas=group["betas"], eps=group["eps"],
                      weight_decay=group["weight_decay"])
    optimizer.state[parameter] = {"step": int(state["step"]), "m": state["exp_avg"].clone(),
                                  "v": state["exp_avg_sq"].clone()}
    optimizer.step()
    after = optimizer.state[parameter]
    return parameter.detach(), after["m"], after["v"], after["step"]


DECAY_IN_MOMENT = Hint("you added weight_decay · w to the gradient: that is Adam's L2 penalty, which then goes "
                       "through m, v and the division by √v; AdamW shrinks the weight itself, beside the Adam step",
                       id="decay-inside-moment")
NO_BIAS_CORRECTION = Hint("you left out the bias correction: m and v start at 0, divide them by 1 − β₁ᵗ and 1 − β₂ᵗ",
                          id="bias-correction-missing")
OFF_BY_ONE_BEHIND = Hint("your bias correction is one step behind: the saved step counts the steps already taken, "
                         "and this one is the next", id="bias-correction-off-by-one")
OFF_BY_ONE_AHEAD = Hint("your bias correction is one step ahead: you counted this step twice",
                        id="bias-correction-off-by-one")
EPS_INSIDE = Hint("you put eps inside the square root: it is added to √v̂, outside it (as PyTorch does)",
                  id="eps-inside-sqrt")
DECAY_WITHOUT_LR = Hint("your decay shrinks the weight by weight_decay alone: AdamW multiplies it by the learning rate "
                        "too", id="decay-without-lr")
CORRECTED_STORED = Hint("you stored the bias-corrected moments: the state keeps the running means m and v themselves; "
                        "the correction is used for the step only", id="stored-corrected-moments")
STEP_NOT_ADVANCED = Hint("the saved step count must count this step too", id="step-count-not-advanced")


def _adamw_variant(w: torch.Tensor, g: torch.Tensor, state: dict[str, Any], group: dict[str, Any], variant: str
                   ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """(w, m, v) after the AdamW step with one classic mistake, None for what it leaves right (the saved step count is
    at least 1 in every case, so a correction one step behind never divides by 0)."""
    lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    t = int(state["step"]) + {"behind": 0, "ahead": 2}.get(variant, 1)  # this step's number is the saved count + 1
    gradient = g + decay * w if variant == "decay in moment" else g
    m = beta1 * state["exp_avg"] + (1 - beta1) * gradient
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * gradient**2
    if variant == "corrected stored":
        return None, m / (1 - beta1**t), v / (1 - beta2**t)
    m_hat, v_hat = (m, v) if variant == "no correction" else (m / (1 - beta1**t), v / (1 - beta2**t))
    scale = (v_hat + eps).sqrt() if variant == "eps inside" else v_hat.sqrt() + eps
    shrink = {"decay in moment": 0.0, "decay without lr": decay}.get(variant, lr * decay)
    new_w = w * (1 - shrink) - lr * m_hat / scale
    return (new_w, m, v) if variant == "decay in moment" else (new_w, None, None)


def _unambiguous(mistakes: dict[Hint, Any], right: Any, **tolerance: float) -> dict[Hint, Any]:
    """The mistakes whose value differs from the right one and from every other mistake's."""
    values = [value for value in mistakes.values() if value is not None]
    return {hint: value for hint, value in mistakes.items() if value is not None
            and describe_mismatch(value, right, **tolerance) is not None
            and sum(describe_mismatch(value, other, **tolerance) is None for other in values) == 1}


def adamw_next_step(student_fn: Callable) -> CheckResult:
    """Check ``adamw_next_step(w, g, state, group)`` -> (new w, new state), the step ``torch.optim.AdamW`` takes next
    from its saved state, against the library's ``AdamW``, on three weights; the first wrong one ends the check."""
    ex = Exercise("adamw_next_step")
    with ex.run():
        for description, w, g, state, group in _adamw_cases():
            expected_w, expected_m, expected_v, expected_step = _library_adamw(w, g, state, group)
            copied = {key: value.clone() if key != "step" else value for key, value in state.items()}
            result = ex.call(student_fn, w.clone(), g.clone(), copied, dict(group))
            returned = (isinstance(result, tuple | list) and len(result) == 2 and isinstance(result[1], dict)
                        and {"step", "exp_avg", "exp_avg_sq"} <= set(result[1]))
            if not ex.require(f"{description}: returns (w, state) with the state's three entries", returned,
                              problem=f"got {type(result).__name__}",
                              hint='return the new weight and a dict with "step", "exp_avg" and "exp_avg_sq"'):
                return ex.result
            new_w, new_state = result
            mistakes = {hint: _adamw_variant(w, g, state, group, variant) for hint, variant in (
                (DECAY_IN_MOMENT, "decay in moment"), (NO_BIAS_CORRECTION, "no correction"),
                (OFF_BY_ONE_BEHIND, "behind"), (OFF_BY_ONE_AHEAD, "ahead"), (EPS_INSIDE, "eps inside"),
                (DECAY_WITHOUT_LR, "decay without lr"), (CORRECTED_STORED, "corrected stored"))}
            for what, got, expected, index in (("exp_avg, the running mean of the gradient", new_state["exp_avg"],
                                                expected_m, 1),
                                               ("exp_avg_sq, the running mean of its square", new_state["exp_avg_sq"],
                                                expected_v, 2)):
                if not ex.compare(f"{description}: {what}", got, expected, **ADAMW_TOLERANCE,
                                  hint="mix in this step's gradient with weight 1 − β",
                                  mistakes=_unambiguous({hint: value[index] for hint, value in mistakes.items()},
                                                        expected, **ADAMW_TOLERANCE)):
                    return ex.result
            if not ex.compare(f"{description}: the saved step count", new_state["step"], expected_step,
                              hint=STEP_NOT_ADVANCED, mistakes={STEP_NOT_ADVANCED: int(state["step"])}):
                return ex.result
            if not ex.compare(f"{description}: the new weight", new_w, expected_w, **ADAMW_TOLERANCE,
                              hint="shrink the weight by lr · weight_decay, then step by lr · m̂ / (√v̂ + eps)",
                              mistakes=_unambiguous({hint: value[0] for hint, value in mistakes.items()}, expected_w,
                                                    **ADAMW_TOLERANCE)):
                return ex.result
    return ex.result


# -- resuming a stopped run ---------------------------------------------------------------------------------------

RESUME_STOP, RESUME_STEPS = 5, 10
RESUME_SETTINGS = {"batch_size": 4, "lr": 1e-2, "seed": 3}
RESUME_TOLERANCE = {"atol": 1e-10, "rtol": 1e-9}


def _resume_model(seed: int = 0) -> GPT:
    """The tiny float64 GPT the check trains, its weights drawn from ``seed``."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=12, block_size=8, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    return GPT(config).double()


def _resume_data() -> torch.Tensor:
    """(300,) token ids: a repeating pattern with noise, enough to learn from in a few steps."""
    generator = torch.Generator().manual_seed(5)
    pattern = torch.arange(300) % 7
    noise = torch.randint(0, 12, (300,), generator=generator)
    return torch.where(torch.rand(300, generator=generator) < 0.2, noise, pattern)


def _stopped_run() -> tuple[list[float], dict[str, Any]]:
    """The losses of an uninterrupted run of RESUME_STEPS steps, and the checkpoint of the same run stopped after
    RESUME_STOP: {"model": the weights, "optimizer": AdamW's state_dict(), "generator": the batch generator's
    state, "step": the steps taken}."""
    data = _resume_data()
    whole = train_gpt(_resume_model(), data, RESUME_STEPS, **RESUME_SETTINGS).step_loss
    model, state = _resume_model(), LMTrainingState()
    train_gpt(model, data, RESUME_STOP, state=state, **RESUME_SETTINGS)
    checkpoint = {"model": {name: tensor.clone() for name, tensor in model.state_dict().items()},
                  "optimizer": state.optimizer, "generator": state.generator, "step": state.step}
    return whole, checkpoint


FORGOT_WEIGHTS = Hint("the model does not hold the saved weights: load them into it", id="forgot-model-weights")
FORGOT_OPTIMIZER = Hint("AdamW started afresh: its moments and step count are in the checkpoint; a fresh AdamW starts "
                        "from zero moments, so from the first update after the stop it takes other steps",
                        id="forgot-optimizer-state")
FORGOT_GENERATOR = Hint("the batches after the stop are not the ones the uninterrupted run drew: the batch "
                        "generator's position is in the checkpoint", id="forgot-batch-generator")
FORGOT_STEP = Hint("the run went on from step 0: return the step it stopped at", id="forgot-step-count")


def _first_difference(got: list[float], expected: list[float]) -> str:
    """How the resumed run's losses differ from the uninterrupted run's after the stop: their number, else the first
    loss that differs, both values (the jump)."""
    if len(got) != len(expected):
        return f"the resumed run took {len(got)} steps, the uninterrupted run {len(expected)} after the stop"
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        if describe_mismatch(a, b, **RESUME_TOLERANCE) is not None:
            return (f"the first loss that differs is step {RESUME_STOP + index + 1}'s: the uninterrupted run's is "
                    f"{b:.4f}, the resumed run's {a:.4f} (all after the stop: uninterrupted {format_value(expected)}, "
                    f"resumed {format_value(got)})")
    return "they differ"  # not reached: the caller asks only when they differ


def _missing_part(checkpoint: dict[str, Any], model: GPT, optimizer: Any, generator: Any, step: Any) -> str | None:
    """The part of the checkpoint that the resumed objects lack, the first of "weights", "step", "generator" and
    "optimizer" (the order in which they change the losses after the stop), or None."""
    weights = model.state_dict()
    if any(not torch.equal(weights[name], tensor) for name, tensor in checkpoint["model"].items()):
        return "weights"
    if step == 0:
        return "step"
    if not torch.equal(generator.get_state(), checkpoint["generator"]):
        return "generator"  # it changes the first loss after the stop, the optimiser only the later ones
    return "optimizer" if not optimizer.state_dict()["state"] else None  # an AdamW that never stepped


def resume(student_fn: Callable) -> CheckResult:
    """Check ``resume(checkpoint, model)`` -> (optimizer, generator, step): a tiny GPT trained 10 steps in one go,
    against the same run stopped after 5 and continued by ``train_gpt`` from what the student's objects hold."""
    ex = Exercise("resume")
    with ex.run(), single_thread(), torch.random.fork_rng(devices=[]):  # the learner's global generator untouched
        whole, checkpoint = _stopped_run()
        model = _resume_model(seed=1)  # as in a new session: the same architecture, other weights
        result = ex.call(student_fn, checkpoint, model)
        returned = (isinstance(result, tuple | list) and len(result) == 3
                    and isinstance(result[0], torch.optim.Optimizer) and isinstance(result[1], torch.Generator))
        if not ex.require("returns (optimizer, generator, step)", returned,
                          problem=f"got {type(result).__name__}",
                          hint="return an AdamW over the model's parameters, a torch.Generator and the step"):
            return ex.result
        optimizer, generator, step = result
        missing = _missing_part(checkpoint, model, optimizer, generator, step)
        diagnosis = {"weights": FORGOT_WEIGHTS, "step": FORGOT_STEP, "generator": FORGOT_GENERATOR,
                     "optimizer": FORGOT_OPTIMIZER}.get(missing)
        state = LMTrainingState(step=int(step), optimizer=optimizer.state_dict(), generator=generator.get_state())
        continued = train_gpt(model, _resume_data(), RESUME_STEPS, state=state, **RESUME_SETTINGS).step_loss
        same = describe_mismatch(continued, whole[RESUME_STOP:], **RESUME_TOLERANCE) is None
        ex.require(f"stopped after {RESUME_STOP} steps and resumed, the losses of steps {RESUME_STOP + 1}-"
                   f"{RESUME_STEPS} equal the uninterrupted run's", same,
                   problem=_first_difference(continued, whole[RESUME_STOP:]),
                   hint=diagnosis or "the resumed run must start from everything the stopped one held")
    return ex.result
