"""Checks for lesson 14's exercises: the accept/reject rule of speculative sampling (edge cases included), the
tokens per target call predicted from k = 1's counts, the acceptance rate counted over examined proposals, and which
layer's int8 quantization hurts the loss most."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..device import set_seed
from ..gpt import GPT, GPTConfig
from ..quantization import Int8Linear
from ..speculative import acceptance_probability, expected_tokens_per_call, residual_distribution
from ._feedback import CheckResult, Exercise, Hint

# p, the target's probabilities, and q, the draft's: the draft over-proposes tokens 1 and 3 (q > p), under-proposes 0
P = torch.tensor([0.40, 0.10, 0.25, 0.05, 0.20], dtype=torch.float64)
Q = torch.tensor([0.20, 0.30, 0.25, 0.15, 0.10], dtype=torch.float64)
# after top-k filtering: token 1 has p = q = 0 (neither model can draw it), token 4 only the draft can draw
P_FILTERED = torch.tensor([0.50, 0.00, 0.30, 0.20, 0.00], dtype=torch.float64)
Q_FILTERED = torch.tensor([0.30, 0.00, 0.40, 0.10, 0.20], dtype=torch.float64)


def acceptance_rule(student_fn: Callable) -> CheckResult:
    """Check a function (p (V,), q (V,)) -> (accept (V,), correction (V,)): the probability of keeping each proposed
    token and the distribution a rejected proposal's replacement is drawn from."""
    ex = Exercise("acceptance_rule")
    with ex.run():
        got = ex.call(student_fn, P.clone(), Q.clone())
        if not ex.require("returns two tensors (accept, correction)", isinstance(got, tuple | list) and len(got) == 2,
                          hint="return accept, correction"):
            return ex.result
        accept, correction = got
        expected_accept = acceptance_probability(P, Q)
        ex.compare(
            "the probability of keeping each proposed token", accept, expected_accept,
            hint=Hint(idea="keep a token for sure where the draft under-proposes it (q <= p); where q > p keep it "
                           "only with probability p/q", code="torch.clamp(p / q, max=1.0)"),
            mistakes={
                Hint(idea="accepting when q > p without the probability p/q: then the draft's over-proposed tokens "
                          "come out as often as the draft proposes them, not as the target wants",
                     code="accept = torch.minimum(torch.ones_like(p), p / q)", id="accept-without-ratio"):
                    torch.ones_like(P),
                Hint(idea="cap the ratio at 1: a probability cannot exceed 1 (where q < p the token is always kept)",
                     id="uncapped-ratio"): P / Q,
                Hint(idea="the ratio is p / q (target over draft), not q / p", id="inverted-ratio"): (
                    torch.clamp(Q / P, max=1.0)),
            },
        )
        missing = (P - Q).clamp(min=0)
        ex.compare(
            "the distribution of the correction after a rejection", correction, residual_distribution(P, Q),
            hint=Hint(idea="draw the correction from what the target wants and the accepted proposals did not give: "
                           "max(0, p - q), renormalised", code="r = (p - q).clamp(min=0); correction = r / r.sum()"),
            mistakes={
                Hint(idea="sampling the correction from p counts the accepted tokens' probability twice: use "
                          "max(0, p - q), renormalised", code="r = (p - q).clamp(min=0); correction = r / r.sum()",
                     id="correction-from-p"): P,
                Hint(idea="renormalise max(0, p - q) so it sums to 1", id="residual-not-normalised"): missing,
                Hint(idea="it is max(0, p - q): the tokens the draft under-proposed need the extra probability",
                     id="residual-inverted"): (Q - P).clamp(min=0) / (Q - P).clamp(min=0).sum(),
            },
        )
        output = Q * accept + (1 - (Q * accept).sum()) * correction  # kept proposals plus corrections
        ex.compare("the tokens come out distributed exactly as p", output, P,
                   hint="with the right accept and correction, q·accept + P(reject)·correction equals p")

        got = ex.call(student_fn, P_FILTERED.clone(), Q_FILTERED.clone())
        accept, correction = got
        finite = bool(torch.isfinite(accept).all() and (accept >= 0).all() and (accept <= 1).all())
        ex.require(
            "after top-k filtering every keep probability is a probability (where q = 0 the token is never proposed, "
            "so any value in [0, 1] is right there)", finite, problem=f"got {accept}",
            hint=Hint(idea="p / q is 0 / 0 = NaN where both are 0, and clamping keeps NaN: choose the entry without "
                           "dividing there, e.g. with torch.where(q > 0, torch.clamp(p / q, max=1), 0)",
                      code="accept = torch.where(q > p, p / q, torch.ones_like(p))", id="nan-where-both-zero"))
        if finite:
            ex.compare("after top-k filtering, q·accept: the chance each token is proposed and kept, min(p, q)",
                       Q_FILTERED * accept, torch.minimum(P_FILTERED, Q_FILTERED),
                       hint="keep with probability min(1, p/q) wherever the draft can propose the token (q > 0)")
            kept = Q_FILTERED * accept  # (V,)
            ex.compare("after top-k filtering the tokens come out distributed exactly as p",
                       kept + (1 - kept.sum()) * correction, P_FILTERED,
                       hint="the correction is max(0, p - q), renormalised, as above")

        got = ex.call(student_fn, P.clone(), P.clone())
        accept, correction = got
        ex.compare("the keep probability when the draft equals the target (p = q)", accept, torch.ones_like(P),
                   hint="where q <= p every proposal is kept")
        ex.require(
            "when p = q the correction is still a distribution (no NaN)",
            bool(torch.isfinite(correction).all() and torch.isclose(correction.sum(), torch.tensor(1.0).double())),
            problem=f"got {correction}",
            hint=Hint(idea="max(0, p - q) is all zeros when p = q, and 0 / 0 = NaN (nothing is ever rejected then, "
                           "but the output q·accept + 0·NaN is NaN too): when its sum is 0, return any distribution, "
                           "e.g. p itself", code="correction = missing / total if total > 0 else p",
                      id="nan-when-p-equals-q"))
    return ex.result


def predict_tokens_per_call(student_fn: Callable) -> CheckResult:
    """Check a function (kept: kept proposals per round at k = 1, each 0 or 1; k) -> the tokens per target call
    predicted at k, if each proposal is kept independently with the acceptance rate those rounds estimate."""
    ex = Exercise("predict_tokens_per_call")
    with ex.run():
        for kept, k in (([1, 1, 0, 1, 1], 3), ([1, 0, 1, 1, 0, 1, 1, 1], 4), ([0, 0, 1, 0], 2), ([1, 1, 1], 5)):
            got = ex.call(student_fn, list(kept), k)
            alpha = sum(kept) / len(kept)  # at k = 1 every round examines its one proposal
            ex.compare(
                f"kept at k = 1: {kept}; predicted tokens per call at k = {k}", got,
                expected_tokens_per_call(alpha, k),
                hint=Hint(idea="at k = 1 every round examines its one proposal, so α = kept / rounds; at k the i-th "
                               "proposal is used only if the first i were all kept (probability α^i), and the target "
                               "adds one token of its own every call",
                          code="a = sum(kept) / len(kept); sum(a ** i for i in range(k + 1))"),
                mistakes={
                    Hint(idea="count the target's own token: every call adds one, even when the first proposal is "
                              "rejected", id="no-own-token"): expected_tokens_per_call(alpha, k) - 1,
                    Hint(idea="a later proposal counts only if every earlier one was kept: α^i, not α each",
                         id="independent-terms"): 1 + alpha * k,
                    Hint(idea="the k-th proposal counts too: the powers run from α^0 to α^k, k + 1 terms",
                         code="sum(a ** i for i in range(k + 1))", id="one-term-short"): (
                        expected_tokens_per_call(alpha, k - 1)),
                    Hint(idea="a round of k proposals is not k rounds of one: it stops at its first rejection, so "
                              "the k = 1 tokens per call do not scale with k", id="scaled-by-k"): k * (1 + alpha),
                },
            )
    return ex.result


def acceptance_from_rounds(student_fn: Callable) -> CheckResult:
    """Check a function (kept: list of kept proposals per round, k) -> the acceptance rate counted as Leviathan et al.
    do: kept proposals over examined ones (each round examines its kept proposals and its first rejection, if any)."""
    ex = Exercise("acceptance_from_rounds")
    with ex.run():
        cases = (([4, 1, 0, 4, 2, 3], 4), ([3, 3, 3], 3), ([2, 0, 1], 3), ([0, 0, 0, 0], 2), ([1, 0, 1, 1], 1),
                 ([1, 1, 1], 2), ([6, 6, 2, 6], 6))
        for kept, k in cases:
            got = ex.call(student_fn, list(kept), k)
            total, rounds = sum(kept), len(kept)
            examined = total + sum(n < k for n in kept)
            ex.compare(
                f"kept per round {kept}, k = {k}", got, total / examined,
                hint=Hint(idea="a round examines its proposals in order and stops at the first rejection: count the "
                               "kept ones plus that one rejection (none when all k were kept)",
                          code="sum(kept) / sum(n + (n < k) for n in kept)"),
                mistakes={
                    Hint(idea="proposals after the first rejection were never examined: they are not rejections, "
                              "leave them out of the denominator", id="counted-unexamined"): total / (k * rounds),
                    Hint(idea="a round in which all k proposals were kept has no rejection: count one only where "
                              "n < k", id="rejection-in-every-round"): total / (total + rounds),
                    Hint(idea="that is the kept proposals per round (tokens per call minus one), not a probability: "
                              "divide by the examined proposals", id="kept-per-round"): total / rounds,
                },
            )
        got = ex.call(student_fn, [], 4)
        ex.require("no rounds at all: nothing examined, so no estimate (return nan, not a ZeroDivisionError)",
                   isinstance(got, float) and got != got, problem=f"got {got!r}",
                   hint=Hint(idea="with no examined proposal kept / examined is 0 / 0: return float('nan') there "
                                  "instead of dividing", code="return sum(kept) / examined if examined else "
                                                              "float('nan')"))
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
