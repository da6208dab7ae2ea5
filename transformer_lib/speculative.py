"""Speculative decoding: a small draft model proposes k tokens, the large target model checks them in one pass.

Leviathan, Kalman and Matias (2023) and Chen et al. (2023). Each round:

1. the draft generates k tokens, one at a time, with the library's generation loop (``decoding.generate_tokens``);
2. the target runs **once** over those k tokens (with its KV cache, only the new positions), which gives its logits
   after every prefix: k + 1 rows, one per proposed token and one after the last;
3. the longest prefix of proposals the target agrees with is kept, plus one token from the target itself: the
   correction at the first disagreement, or a bonus token after the k-th when all were kept.

A round therefore adds between 1 and k + 1 tokens for one target call. The target examines proposals in order and
stops at the first rejection: the ones after it are never examined. The acceptance rate is therefore counted as
Leviathan et al. define it (their α): the chance that a proposal is kept given that the ones before it were, estimated
by kept / examined.

Greedy (``temperature=None``): the target "agrees" when its own pick, ``pick(target_logits)``, equals the proposal,
and the output is the target's own greedy output, token for token. Sampling: the proposal x, drawn from the draft's
q, is kept with probability ``min(1, p(x) / q(x))`` (:func:`acceptance_probability`); a rejected one is replaced by a
draw from ``max(0, p - q)`` renormalised (:func:`residual_distribution`). Every token is then distributed exactly as
the target alone would draw it (:func:`speculative_token_distribution` computes that distribution and equals p).

Why step 2 is not the generation loop: that loop appends one token per call of ``next_logits``; verifying scores k + 1
positions in one call and appends a variable number. It reuses the loop's parts instead: the same picker (applied to
the k + 1 rows as a batch), the same ``sampling_distribution``, the same KV cache of ``GPT``.

Shape legend: T0 = prompt length, k = proposed tokens per round, V = vocabulary size.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from .confidence import wilson_interval
from .data import check_token_ids
from .decoding import Picker, generate_tokens, greedy_pick, sampling_distribution, sampling_picker
from .gpt import GPT, GPTCache


def truncate_cache(cache: GPTCache, length: int) -> None:
    """Keep the keys and values of the first ``length`` positions of every layer (drop the rejected proposals')."""
    for layer in cache.layers:
        if layer.key is not None:
            layer.key, layer.value = layer.key[:, :, :length], layer.value[:, :, :length]  # (1, heads, length, d_head)


class CachedLogits:
    """A GPT's logits with a KV cache that follows the text it is shown, also backwards.

    The cache remembers which tokens it holds; a call keeps the cached positions whose tokens still agree with the
    new text (the accepted ones), drops the rest, and runs the model only over what follows. ``calls`` counts the
    forward passes. The text must fit in ``block_size`` (learned positions end there).
    """

    def __init__(self, model: GPT):
        self.model = model
        self.cache = model.new_cache()
        self.seen: torch.Tensor | None = None  # (1, len(cache)): the tokens the cache holds
        self.calls = 0

    def last_positions(self, tokens: torch.Tensor, last: int) -> torch.Tensor:
        """``tokens``: (1, t) -> the logits after each of the last ``last`` prefixes, (1, last, V)."""
        self.calls += 1
        kept = 0
        if self.seen is not None:
            n = min(self.seen.shape[1], tokens.shape[1])
            kept = int((self.seen[0, :n] == tokens[0, :n]).long().cumprod(0).sum())  # length of the common prefix
        kept = min(kept, tokens.shape[1] - last)  # the last `last` positions must run to give their logits
        truncate_cache(self.cache, kept)
        logits = self.model(tokens[:, kept:], cache=self.cache)[:, -last:]  # (1, last, V)
        self.seen = tokens
        return logits

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """The generation loop's ``next_logits``: (1, t) -> (1, V)."""
        return self.last_positions(tokens, 1)[:, -1]


class RecordingPicker:
    """A picker that also keeps every logits row it was shown (the draft's, to compute q afterwards)."""

    def __init__(self, pick: Picker):
        self.pick = pick
        self.logits: list[torch.Tensor] = []

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:  # (1, V) -> (1,)
        self.logits.append(logits)
        return self.pick(logits)


def acceptance_probability(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """How likely a proposed token x is kept: ``min(1, p(x) / q(x))``. ``p``, ``q``: (…, V) -> (…, V).

    A token the draft proposes more often than the target would draw it (q > p) is kept only with probability p/q;
    one the draft under-proposes (q <= p) always. Tokens with q = 0 are never proposed (their entry is 1).
    """
    return torch.where(q > p, p / q.clamp(min=torch.finfo(q.dtype).tiny), torch.ones_like(p))


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Where a rejected proposal's replacement is drawn from: ``max(0, p - q)``, renormalised. (…, V) -> (…, V).

    It holds the probability the target wants and the accepted proposals did not deliver. When p = q nothing is ever
    rejected; the (unused) result is then p.
    """
    missing = (p - q).clamp(min=0)  # (…, V)
    total = missing.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, missing / total.clamp(min=torch.finfo(p.dtype).tiny), p)


def speculative_token_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The exact distribution of the token one accept/reject step outputs, (…, V) -> (…, V).

    Token x comes out either as the accepted proposal, probability ``q(x) · acceptance(x)``, or as the replacement
    after any rejection, probability ``P(reject) · residual(x)``. The sum is p (the lesson shows why).
    """
    accepted = q * acceptance_probability(p, q)  # (…, V): = min(p, q)
    rejected = 1 - accepted.sum(dim=-1, keepdim=True)  # (…, 1)
    return accepted + rejected * residual_distribution(p, q)


def round_probability(p: torch.Tensor, q: torch.Tensor, emitted: torch.Tensor) -> torch.Tensor:
    """The probability that one sampled round emits exactly the tokens ``emitted`` (n + 1,), 0 <= n <= k, when the
    target's and the draft's distributions do not depend on the tokens before (a toy in which every prefix gives the
    same rows): ``p`` (k + 1, V) the target's after each prefix, ``q`` (k, V) the draft's.

    The first n tokens are kept proposals, each with probability ``min(p, q)`` of its row; the last is the
    replacement after a rejection, ``P(reject) · residual = max(0, p - q)`` of row n (no division, so no 0 / 0
    where p = q), or the bonus token from ``p[k]`` when all k were kept. Returns a 0-dim tensor.
    """
    n = len(emitted) - 1
    k = q.shape[0]
    if not 0 <= n <= k or p.shape[0] != k + 1:
        raise ValueError(f"a round with p {tuple(p.shape)} and q {tuple(q.shape)} (k={k}) emits 1 to k + 1 = {k + 1} "
                         f"tokens: got {len(emitted)}")
    kept = torch.minimum(p[:n], q[:n]).gather(1, emitted[:n, None]).prod()  # the n proposals drawn and kept
    last = p[k] if n == k else (p[n] - q[n]).clamp(min=0)  # (V,): the bonus token, or a rejection and replacement
    return kept * last[emitted[n]]


def expected_tokens_per_call(acceptance: float, k: int) -> float:
    """Tokens one round adds on average when each proposal is kept independently with probability ``acceptance``:
    ``1 + a + a² + … + a^k`` (the target's own token always, the i-th proposal when the first i were kept)."""
    return float(sum(acceptance**i for i in range(k + 1)))


def acceptance_interval(accepted: int, examined: int, z: float = 1.96) -> tuple[float, float]:
    """A Wilson score interval for α = ``accepted`` / ``examined`` (95 % with z = 1.96): (low, high)
    (:func:`~transformer_lib.confidence.wilson_interval`).

    It treats the examined proposals as independent draws with one probability α. Acceptances that come in runs
    carry less information than that, so their true interval is wider than this one.
    """
    if not 0 <= accepted <= examined or examined == 0:
        raise ValueError(f"need 0 <= accepted <= examined and examined > 0: got accepted={accepted}, "
                         f"examined={examined}")
    return wilson_interval(accepted, examined, z)


def expected_speedup(acceptance: float, k: int, draft_cost: float, verify_cost: float = 1.0) -> float:
    """Plain decoding's time over speculative decoding's, per token: ``expected_tokens_per_call / (k·c + v)``.

    ``draft_cost`` c: one draft call's time over one target call's; ``verify_cost`` v: a target pass over k + 1
    tokens over a pass over one. With v = 1 this is Leviathan et al.'s improvement factor (Theorem 3.8),
    ``(1 - a^(k+1)) / ((1 - a)(k·c + 1))``; it ignores the bookkeeping between calls.
    """
    return expected_tokens_per_call(acceptance, k) / (k * draft_cost + verify_cost)


def simulate_acceptance(k: int, easy: float, hard: float, switch: float, rounds: int = 20_000,
                        seed: int = 0) -> tuple[float, float]:
    """Simulated rounds of k proposals over a text whose stretches are easy (each proposal kept with probability
    ``easy``) or hard (``hard``); the stretch changes before each examined proposal with probability ``switch``.
    ``easy == hard``: every proposal is kept independently; a small ``switch``: acceptances come in runs.

    Returns (α, tokens per call): α = kept / examined, counted as the lesson counts it, and the mean tokens a round
    adds (its kept proposals plus the target's own). Python's seeded ``random``, so every machine prints the same.
    """
    rng = random.Random(seed)
    is_easy = True
    kept_total = examined = 0
    for _ in range(rounds):
        kept = 0
        while kept < k:
            if rng.random() < switch:
                is_easy = not is_easy
            examined += 1
            if rng.random() >= (easy if is_easy else hard):
                break
            kept += 1
        kept_total += kept
    return kept_total / examined, (kept_total + rounds) / rounds


def verify_cost(model: GPT, context: torch.Tensor, k: int, repeats: int = 5) -> float:
    """v: the time of a pass over k + 1 new tokens over the time of a pass over one, both after the same cached
    ``context`` (1, t) (t > k + 1), as a verification step runs. The two passes alternate in one loop, so a busy
    machine slows both alike, and each keeps its fastest of ``repeats``."""
    model.eval()
    start = context.shape[1] - (k + 1)
    best = {1: float("inf"), k + 1: float("inf")}
    with torch.no_grad():
        cache = model.new_cache()
        model(context[:, :start], cache=cache)  # the cached text before the new tokens
        for _ in range(repeats):
            for n in best:
                truncate_cache(cache, start)
                started = time.perf_counter()
                model(context[:, start : start + n], cache=cache)  # (1, n, V)
                if context.device.type == "cuda":
                    torch.cuda.synchronize()
                best[n] = min(best[n], time.perf_counter() - started)
    return best[k + 1] / best[1]


class ForwardTimer:
    """Within ``with ForwardTimer(model) as timer:``, the seconds spent inside ``model``'s forward passes
    (``timer.seconds``) and their number (``timer.calls``), timed by hooks around each pass; ``timer.per_call`` is
    their mean. What a generation loop spends outside the passes is its bookkeeping."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.seconds = 0.0
        self.calls = 0
        self._started = 0.0
        self._hooks: list = []

    def _start(self, module: nn.Module, args: tuple) -> None:
        self._started = time.perf_counter()

    def _stop(self, module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        if output.device.type == "cuda":
            torch.cuda.synchronize()  # the pass has really finished, not only been queued
        self.seconds += time.perf_counter() - self._started
        self.calls += 1

    def __enter__(self) -> ForwardTimer:
        self._hooks = [self.model.register_forward_pre_hook(self._start), self.model.register_forward_hook(self._stop)]
        return self

    def __exit__(self, *exc: object) -> None:
        for hook in self._hooks:
            hook.remove()

    @property
    def per_call(self) -> float:
        return self.seconds / max(self.calls, 1)


def speculative_accept(
    p: torch.Tensor, q: torch.Tensor, proposed: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The sampling version's accept/reject rule for one round.

    ``p``: (k + 1, V) the target's probabilities after each prefix; ``q``: (k, V) the draft's, from which
    ``proposed`` (k,) were drawn. Returns the tokens to append, (n + 1,): the first n proposals, kept one by one
    with :func:`acceptance_probability`, then a draw from :func:`residual_distribution` at the first rejection, or
    from ``p[k]`` (the bonus token) when all k were kept. Random numbers come from ``generator`` (CPU).
    """
    p, q, proposed = p.cpu(), q.cpu(), proposed.cpu()
    keep = acceptance_probability(p[:-1], q).gather(1, proposed[:, None])[:, 0]  # (k,)
    for i in range(len(proposed)):
        if torch.rand((), generator=generator, dtype=keep.dtype) >= keep[i]:  # rejected
            replacement = torch.multinomial(residual_distribution(p[i], q[i]), 1, generator=generator)
            return torch.cat((proposed[:i], replacement))
    return torch.cat((proposed, torch.multinomial(p[-1], 1, generator=generator)))


@dataclass
class SpeculativeResult:
    """What :func:`speculative_generate` returns: the tokens and the counts that measure the speed-up."""

    tokens: torch.Tensor  # (1, T0 + T)
    target_calls: int  # forward passes of the target
    draft_calls: int  # forward passes of the draft
    proposed: int  # draft tokens proposed
    accepted: int  # of those, kept
    examined: int  # of those, compared by the target: the kept ones and each round's first rejection
    round_sizes: list[int] = field(default_factory=list)  # proposals of each round (k, the last round maybe fewer)

    @property
    def acceptance_rate(self) -> float:
        """Leviathan et al.'s α: the share of the examined proposals that were kept (a proposal after the first
        rejection of its round is never examined, so it counts neither way)."""
        return self.accepted / max(self.examined, 1)

    @property
    def share_kept(self) -> float:
        """Kept over all proposed tokens, the unexamined included: it falls with k even when α does not."""
        return self.accepted / max(self.proposed, 1)

    @property
    def tokens_per_target_call(self) -> float:
        """New tokens per forward pass of the target (plain decoding: exactly 1)."""
        return (self.accepted + self.target_calls) / max(self.target_calls, 1)  # each call adds one token of its own


@torch.no_grad()
def speculative_generate(
    target: GPT,
    draft: GPT,
    tokens: torch.Tensor,
    max_new_tokens: int,
    k: int = 4,
    pick: Picker = greedy_pick,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> SpeculativeResult:
    """Continue ``tokens`` (1, T0) by ``max_new_tokens`` tokens, the draft proposing up to ``k`` per round.

    Greedy (``temperature=None``): the draft proposes its greedy tokens, the target's choices are ``pick`` applied to
    its logits (``greedy_pick`` or ``GreedyWithMargin``); the result equals ``generate(target, tokens,
    max_new_tokens, pick)``. Sampling (a ``temperature``, optional ``top_k`` / ``top_p``): the draft samples with
    the same filters, :func:`speculative_accept` keeps or replaces; the tokens follow the target's sampling
    distribution. Both models share one vocabulary, and the whole text must fit in both ``block_size``.
    """
    if tokens.dim() != 2 or tokens.shape[0] != 1:
        raise ValueError(
            f"speculative_generate continues one text at a time: tokens has shape {tuple(tokens.shape)}, pass (1, T0)"
        )
    if k < 1:
        raise ValueError(f"k={k} must be at least 1: the draft proposes k tokens per round")
    if target.config.vocab_size != draft.config.vocab_size:
        raise ValueError(f"target and draft must share a vocabulary: vocab_size {target.config.vocab_size} and "
                         f"{draft.config.vocab_size}")
    check_token_ids(tokens, target.config.vocab_size, "prompt")
    longest = min(target.config.block_size, draft.config.block_size)
    if tokens.shape[1] + max_new_tokens > longest:
        raise ValueError(
            f"a prompt of {tokens.shape[1]} tokens plus max_new_tokens={max_new_tokens} exceeds block_size={longest}: "
            "speculative decoding here keeps the whole text in the KV cache; generate at most "
            f"{longest - tokens.shape[1]} tokens"
        )
    target.eval()
    draft.eval()
    target_logits, draft_logits = CachedLogits(target), CachedLogits(draft)
    sampling = temperature is not None
    filters = {"temperature": temperature, "top_k": top_k, "top_p": top_p} if sampling else {}
    proposed = accepted = examined = 0
    round_sizes = []
    goal = tokens.shape[1] + max_new_tokens
    while tokens.shape[1] < goal:
        k_now = min(k, goal - tokens.shape[1] - 1)  # the round's own target token fills the last place
        draft_pick = RecordingPicker(sampling_picker(generator=generator, **filters) if sampling else greedy_pick)
        drafted = generate_tokens(draft_logits, tokens, k_now, draft_pick)  # (1, t + k_now): the library's loop
        proposals = drafted[0, tokens.shape[1] :]  # (k_now,)
        scores = target_logits.last_positions(drafted, k_now + 1)[0]  # (k_now + 1, V): one target call
        if sampling:
            p = sampling_distribution(scores.float(), **filters).double()  # (k_now + 1, V)
            drafts = torch.cat(draft_pick.logits) if draft_pick.logits else scores[:0]  # (k_now, V)
            q = sampling_distribution(drafts.float(), **filters).double()  # (k_now, V), as the draft drew
            new = speculative_accept(p, q, proposals, generator).to(tokens.device)
        else:
            choices = pick(scores)  # (k_now + 1,): the target's own pick after each prefix
            agree = int((choices[:k_now] == proposals).long().cumprod(0).sum())
            new = torch.cat((proposals[:agree], choices[agree : agree + 1]))
        kept = len(new) - 1
        proposed += k_now
        accepted += kept
        examined += kept + (kept < k_now)  # the first rejected proposal was examined too; later ones were not
        round_sizes.append(k_now)
        tokens = torch.cat((tokens, new[None]), dim=1)  # (1, t + n + 1)
    return SpeculativeResult(tokens, target_logits.calls, draft_logits.calls, proposed, accepted, examined,
                             round_sizes)
