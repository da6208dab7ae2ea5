"""Checks for lesson 14's exercises: the probability of every token list one sampled round of speculative decoding
can emit (edge cases of top-k filtering included), the tokens per target call predicted at a new k over α's interval
counted from rounds, and which layer's int8 quantization hurts the loss most."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from ..device import set_seed
from ..gpt import GPT, GPTConfig
from ..quantization import Int8Linear
from ..speculative import acceptance_interval, expected_tokens_per_call, round_probability
from ._feedback import CheckResult, Exercise, Hint

# Rounds of k = 2 over V = 4 tokens: p (k + 1, V) the target's rows, q (k, V) the draft's. In row 0 token 3 has
# p > 0 = q (top-k filtered the draft and not the target), in row 1 token 2 has p = q = 0 (filtered from both).
P_ROUND = torch.tensor([[0.40, 0.10, 0.20, 0.30], [0.50, 0.25, 0.00, 0.25], [0.10, 0.20, 0.30, 0.40]],
                       dtype=torch.float64)
Q_ROUND = torch.tensor([[0.50, 0.30, 0.20, 0.00], [0.40, 0.35, 0.00, 0.25]], dtype=torch.float64)


NAN_WHERE_DRAFT_FILTERED = Hint(
    idea="p / q divides by 0 where the draft filtered a token out (q = 0): the draft never proposes it, so no kept "
         "proposal is ever that token; the chance of drawing and keeping x is min(p, q), which needs no division",
    code="torch.minimum(p[i], q[i])[x] for each kept proposal", id="nan-where-draft-filtered")
NAN_WHEN_P_EQUALS_Q = Hint(
    idea="where p = q the residual max(0, p − q) is all zeros and renormalising it is 0 / 0; but a rejection "
         "followed by the draw of x has probability max(0, p[n, x] − q[n, x]) itself, with no division",
    code="(p[n] - q[n]).clamp(min=0)[x] for the last token of a round that stopped at row n", id="nan-when-p-equals-q")


def _round_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, Hint | None]]:
    """(what, p, q, the hint for a NaN there): the rounds the check enumerates."""
    k1_p = torch.tensor([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]], dtype=torch.float64).t().contiguous().t()
    k1_q = torch.tensor([[0.2, 9.0, 0.7, 9.0, 0.1, 9.0]], dtype=torch.float64)[:, ::2]  # (1, 3): every second entry
    return [
        ("k = 2, V = 4, with a token the draft filtered out (p > 0 = q) and one filtered from both (p = q = 0)",
         P_ROUND, Q_ROUND, NAN_WHERE_DRAFT_FILTERED),
        ("k = 2, a draft equal to the target (p = q in both rows)", P_ROUND, P_ROUND[:2].clone(),
         NAN_WHEN_P_EQUALS_Q),
        ("k = 1, V = 3, p and q as non-contiguous views", k1_p, k1_q, None),
        ("k = 3, V = 2, the draft sure of token 0 where the target is sure of token 1",
         torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0], [0.3, 0.7]], dtype=torch.float64),
         torch.tensor([[0.7, 0.3], [0.5, 0.5], [1.0, 0.0]], dtype=torch.float64), NAN_WHERE_DRAFT_FILTERED),
    ]


def _outcomes(k: int, vocab_size: int) -> list[tuple[int, ...]]:
    """Every token list one round can emit: 1 to k + 1 tokens."""
    return [o for length in range(1, k + 2) for o in itertools.product(range(vocab_size), repeat=length)]


def _round_variant(p: torch.Tensor, q: torch.Tensor, emitted: tuple[int, ...], bug: str) -> float:
    """A classic wrong probability of one round's outcome, written out (the right one is the core's)."""
    n, k = len(emitted) - 1, q.shape[0]
    keep = q if bug == "always-keep" else p[:k] if bug == "uncapped" else torch.minimum(p[:k], q)  # (k, V)
    kept = math.prod(keep[i, emitted[i]].item() for i in range(n))
    if n == k:
        return kept * p[k, emitted[n]].item()
    missing = (p[n] - q[n]).clamp(min=0)  # (V,)
    replacement = {"always-keep": 0 * missing, "uncapped": 0 * missing, "from-p": missing.sum() * p[n],
                   "unweighted": missing / missing.sum()}[bug]
    return kept * replacement[emitted[n]].item()


def _as_float(value):
    """A number, or a one-element tensor or array, as a float; anything else unchanged (the check then says so)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 or isinstance(value, np.ndarray) and value.size == 1:
        return float(value.item())
    return float(value) if isinstance(value, int | float | np.number) and not isinstance(value, bool) else value


def round_probability_of(student_fn: Callable) -> CheckResult:
    """Check a function (p (k + 1, V), q (k, V), emitted (n + 1,)) -> the probability that one sampled round of
    speculative decoding emits exactly ``emitted``, when the rows do not depend on the tokens before."""
    ex = Exercise("round_probability")
    mistakes_of = {
        Hint(idea="a proposal the draft over-proposes (q > p) must survive a coin flip with probability p/q: kept "
                  "without it, a token comes out as often as the draft proposes it, and no round ever rejects",
             code="the chance that position i's proposal is x and is kept is min(p[i, x], q[i, x])",
             id="accept-without-ratio"): "always-keep",
        Hint(idea="q · p/q is p only where p <= q: the keep probability is capped at 1, so a drawn-and-kept "
                  "proposal has probability min(p, q), and rejections happen",
             code="torch.minimum(p[i], q[i])[x], not p[i, x]", id="uncapped-ratio"): "uncapped",
        Hint(idea="after a rejection the replacement comes from the residual max(0, p − q), not from p: drawing "
                  "from p gives again the probability the kept proposals already delivered",
             code="P(reject at row n) · residual(x) = max(0, p[n, x] − q[n, x])", id="correction-from-p"):
            "from-p",
        Hint(idea="the last token of a short round needs two events: a rejection at row n (probability "
                  "Σ max(0, p − q)) and then the draw of x from the renormalised residual; you left out the first",
             code="their product is max(0, p[n, x] − q[n, x]), with no division", id="rejection-not-weighted"):
            "unweighted",
    }
    with ex.run():
        for what, p, q, nan_hint in _round_cases():
            k, vocab_size = q.shape
            outcomes = _outcomes(k, vocab_size)
            got = [_as_float(ex.call(student_fn, p, q, torch.tensor(o))) for o in outcomes]
            bad = [(o, g) for o, g in zip(outcomes, got, strict=True)
                   if not (isinstance(g, float) and math.isfinite(g))]
            if not ex.require(
                    f"{what}: every outcome's probability is a number", not bad,
                    problem=f"for the tokens {list(bad[0][0])} you returned {bad[0][1]!r}" if bad else "",
                    hint=nan_hint if bad and isinstance(bad[0][1], float) and nan_hint else Hint(
                        idea="return one number per call: the probability of that token list",
                        id="not-a-finite-number")):
                break
            expected = [round_probability(p, q, torch.tensor(o)).item() for o in outcomes]
            if not ex.compare(
                    f"{what}: the probability of each of the {len(outcomes)} token lists a round can emit", got,
                    expected, atol=1e-9, rtol=1e-7,
                    hint=Hint(idea="a round emits n kept proposals, then one more token: the replacement after a "
                                   "rejection at row n, or the bonus token from the last row when all k were kept",
                              code="the product of min(p[i], q[i])[x_i] for i < n, times max(0, p[n] − q[n])[x_n] "
                                   "(n < k) or p[k][x_k] (n = k)"),
                    mistakes={hint: [_round_variant(p, q, o, bug) for o in outcomes]
                              for hint, bug in mistakes_of.items()}):
                break  # the same mistake would fail the next rounds too: one diagnosis is enough
    return ex.result


# (kept per round, k, k_new): 19 of 20 at k = 1 (the lesson's k = 1 rate), rounds with unexamined proposals, rounds
# that kept all k (no rejection to count), a prediction at a smaller k, and all k kept in every round (α's interval
# then reaches 1).
RANGE_CASES = (([1] * 19 + [0], 1, 3), ([4, 1, 0, 4, 2, 3], 4, 6), ([8, 2, 8, 5, 0, 8, 8], 8, 2),
               ([0, 1, 0, 0, 1], 2, 4), ([3, 3, 3], 3, 5))


def _ends(accepted: int, examined: int, powers: range) -> tuple[float, float]:
    """Σ α^i over ``powers`` at both ends of α's Wilson interval: a wrong count or a wrong sum, written out."""
    low, high = acceptance_interval(accepted, examined)
    return sum(low**i for i in powers), sum(high**i for i in powers)


def predicted_range(student_fn: Callable) -> CheckResult:
    """Check a function (kept: proposals kept per round at k, k, k_new) -> (low, high): the tokens per target call
    predicted at ``k_new``, 1 + α + … + α^k_new, at the two ends of α's 95 % Wilson interval, α counted over the
    examined proposals of the rounds at k."""
    ex = Exercise("predicted_range")
    with ex.run():
        for kept, k, k_new in RANGE_CASES:
            got = ex.call(student_fn, list(kept), k, k_new)
            total, rounds = sum(kept), len(kept)
            examined = total + sum(n < k for n in kept)

            expected = tuple(expected_tokens_per_call(a, k_new) for a in acceptance_interval(total, examined))
            mistakes = {
                Hint(idea="proposals after a round's first rejection were never examined: they are not rejections, "
                          "leave them out of the count α's interval is computed from", id="counted-unexamined"):
                    _ends(total, k * rounds, range(k_new + 1)),
                Hint(idea="a round that kept all k proposals has no rejection: count one rejection only where "
                          "n < k", id="rejection-in-every-round"): _ends(total, total + rounds, range(k_new + 1)),
                Hint(idea="count the target's own token: every call adds one, even when the first proposal is "
                          "rejected, so the sum starts at α^0 = 1", id="no-own-token"):
                    _ends(total, examined, range(1, k_new + 1)),
                Hint(idea="the k_new-th proposal counts too: the powers run from α^0 to α^k_new, k_new + 1 terms",
                     id="one-term-short"): _ends(total, examined, range(k_new)),
                Hint(idea="predict at the new k: the rounds measured at k give α, the sum runs to the new k",
                     id="measured-k-not-new-k"): _ends(total, examined, range(k + 1)),
            }
            if not ex.compare(
                    f"kept per round {kept} at k = {k}; predicted tokens per call at k = {k_new}", got, expected,
                    atol=1e-9, rtol=1e-7,
                    hint=Hint(idea="α = kept / examined (a round examines its kept proposals and its first rejection, "
                                   "if any); take both ends of acceptance_interval and put each into 1 + α + … + "
                                   "α^k_new (it grows with α)",
                              code="examined = sum(n + (n < k) for n in kept); acceptance_interval(sum(kept), "
                                   "examined)"),
                    mistakes={h: v for h, v in mistakes.items() if k != k_new or h.id != "measured-k-not-new-k"}):
                break  # one diagnosis per mistake
    return ex.result


def _damage_model() -> tuple[GPT, torch.Tensor]:
    """The model :func:`quantization_damage` is checked on, and its tokens (4, 16): a float64 GPT of 2 blocks (13
    linear layers) in which input feature 3 of ``blocks.0.linear1`` is an outlier. A factor 50 is moved from the
    LayerNorm before it (weight and bias of feature 3 divided by 50) into the layer (column 3 of its weight times 50):
    the model computes the same function, but every row of that weight now holds one entry 50 times its usual size."""
    set_seed(14)
    model = GPT(GPTConfig(vocab_size=12, block_size=16, d_model=16, num_heads=2, num_layers=2, d_ff=32)).double()
    block = model.blocks[0]
    with torch.no_grad():
        block.linear1.weight[:, 3] *= 50
        block.norm2.weight[3] /= 50
        block.norm2.bias[3] /= 50
    tokens = torch.randint(12, (4, 16), generator=torch.Generator().manual_seed(14))
    return model.eval(), tokens


def _damage(model: GPT, tokens: torch.Tensor, per_channel: bool = True, restore: bool = True,
            reverse: bool = False) -> list[float]:
    """KL(float ‖ int8) of each linear layer quantized alone (or, without ``restore``, on top of the earlier ones)."""
    with torch.no_grad():
        exact = model(tokens).log_softmax(-1)  # (batch, T, V)
        damage = []
        for name, layer in [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name)
            setattr(parent, child, Int8Linear(layer, per_channel))
            rounded = model(tokens).log_softmax(-1)  # (batch, T, V)
            first, second = (rounded, exact) if reverse else (exact, rounded)
            damage.append((first.exp() * (first - second)).sum(-1).mean().item())
            if restore:
                setattr(parent, child, layer)
    return damage


def quantization_damage(student_fn: Callable) -> CheckResult:
    """Check a function (model, tokens) -> a list with, for each ``nn.Linear`` (in ``named_modules`` order) replaced
    alone by an ``Int8Linear`` (one scale per output channel), the mean KL(float ‖ int8) of the next-token
    distributions."""
    ex = Exercise("quantization_damage")
    with ex.run():
        model, tokens = _damage_model()
        with torch.no_grad():
            before = model(tokens)
        got = ex.call(student_fn, model, tokens)
        expected = _damage(*_damage_model())
        ex.compare(
            "KL(float ‖ int8) for each of the 13 linear layers, each quantized alone", got, expected,
            atol=1e-12, rtol=1e-6,  # float64, values of about 1e-9 to 1e-4
            hint=Hint(idea="for each nn.Linear: put an Int8Linear of it in its place (setattr on its parent), "
                           "compare the next-token distributions with the float model's, then put the float layer "
                           "back", code="parent = model.get_submodule(parent_name); setattr(parent, child, "
                                        "Int8Linear(layer))"),
            mistakes={
                Hint(idea="put each float layer back before quantizing the next: otherwise each number adds up the "
                          "damage of every layer before it", id="not-restored"): _damage(*_damage_model(),
                                                                                         restore=False),
                Hint(idea="one scale per output channel: Int8Linear(layer) (per_channel=True, the default), not one "
                          "scale per tensor", id="per-tensor-scales"): _damage(*_damage_model(), per_channel=False),
                Hint(idea="KL(float ‖ int8) weighs by the float model's probabilities: sum p · (log p - log q) "
                          "with p the float model's", id="kl-reversed"): _damage(*_damage_model(), reverse=True),
            },
        )
        with torch.no_grad():
            after = model(tokens)
        ex.require("the model computes as before your call (every float layer put back)", torch.equal(after, before),
                   hint=Hint(idea="restore each float layer after measuring, so the model is unchanged at the end",
                             id="model-left-quantized"))
    return ex.result
