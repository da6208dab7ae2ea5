"""Checks for lesson 13's exercises: a duplicate-token score from attention weights, the chance level of the
induction score over all random repeated sequences (duplicates included), and where an activation patch can reach."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from ..induction import (
    duplicate_token_score,
    earlier_occurrences,
    induction_score,
    uniform_attention,
)
from ..interpret import residual_patch_reach
from ._feedback import CheckResult, Exercise, Hint

# Sequences the two scores are checked on: 4 occurs four times (so a query can have several earlier occurrences,
# not always half a sequence back), and in the second 2 follows itself (the key after that occurrence is the query
# itself).
SEQUENCES = (torch.tensor([4, 7, 1, 4, 9, 4, 7, 1, 4, 9]), torch.tensor([2, 2, 5, 3, 2, 5, 3, 8]))
ALL_QUERIES = Hint(idea="average only over the queries whose token occurred before: the others have nothing to look "
                        "back at, and counting them as 0 drags the score down",
                   code="divide by the number of queries with an earlier occurrence, not by T",
                   id="mean-over-all-queries")


def _random_causal_weights(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """(…, T, T) random attention weights, zero above the diagonal, rows summing to 1 (float64)."""
    length = shape[-1]
    scores = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return scores.masked_fill(torch.ones(length, length, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)


def _as_number(value):
    """A one-element tensor as a float; anything else unchanged (the comparison then says what is wrong)."""
    return float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 else value


def _per_query(weights: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """The summed weight on ``keys`` (batch, T, T) bool, averaged over ``queries`` (batch, T) bool and the batch:
    ``weights`` (batch, heads, T, T) -> (heads,)."""
    on_keys = (weights * keys[:, None]).sum(-1)  # (batch, heads, T)
    return (on_keys * queries[:, None]).sum(dim=(0, 2)) / queries.sum()


def duplicate_token_score_of(student_fn: Callable) -> CheckResult:
    """Check a function (weights (batch, heads, T, T), tokens (batch, T)) -> (heads,): every head's duplicate-token
    score over a batch."""
    ex = Exercise("duplicate_token_score_of")
    with ex.run():
        for seed, sequence in enumerate(SEQUENCES):
            tokens = torch.stack([sequence, sequence.flip(0)])  # (2, T): two sequences of the same tokens
            length = tokens.shape[1]
            weights = _random_causal_weights((2, 3, length, length), 13 + seed)  # (batch, heads, T, T)
            expected = duplicate_token_score(weights, tokens)  # (heads,)
            got = ex.call(student_fn, weights.clone(), tokens.clone())
            earlier = earlier_occurrences(tokens)  # (batch, T, T): keys j < i holding the query's token
            has_earlier = earlier.any(-1)  # (batch, T)
            with_self = earlier | torch.eye(length, dtype=torch.bool)  # keys j <= i: the query's own key too
            if not ex.compare(
                f"three heads' duplicate-token scores on {' '.join(map(str, sequence.tolist()))} and its reverse",
                got,
                expected,
                hint="mask (batch, T, T) = same token at query i and key j, and j < i; sum the weights on the mask "
                     "per query; average over the queries that have an earlier occurrence, in every sequence",
                mistakes={
                    Hint(idea="off by one: you measured the weight on the key after each earlier occurrence, which is "
                              "the induction score; a duplicate-token head looks at the occurrence itself",
                         code="keys j < i with tokens[j] == tokens[i], not j + 1", id="induction-offset"):
                        induction_score(weights, tokens),
                    Hint(idea="every token equals itself: count only keys j < i, not the query's own position i, or "
                              "every head that attends to itself looks like a duplicate-token head",
                         code="same & torch.ones(T, T, dtype=torch.bool).tril(-1): tril(-1), not tril()",
                         id="self-included"):
                        _per_query(weights, with_self, torch.ones_like(has_earlier)),
                    ALL_QUERIES: _per_query(weights, earlier, has_earlier) * has_earlier.sum() / has_earlier.numel(),
                },
                atol=1e-6,
            ):
                break  # one diagnosis per mistake
    return ex.result


# (half, V): every first half of V tokens is enumerated, so the chance level pooled over all of them is the core's
# induction score of uniform attention on that batch. V = 1 repeats one token everywhere; half = 1 makes the target of
# the one repeated query the query itself.
CHANCE_CASES = ((3, 2), (2, 5), (4, 3), (5, 4), (1, 3), (3, 1))


def _chance_over_all(half: int, vocab_size: int) -> float:
    """The induction score of uniform attention pooled over every sequence of ``half`` tokens, repeated."""
    firsts = torch.tensor(list(itertools.product(range(vocab_size), repeat=half)))  # (V^half, half)
    batch = torch.cat([firsts, firsts], dim=1)  # (V^half, T)
    return induction_score(uniform_attention(2 * half).expand(len(batch), 1, -1, -1), batch).item()


def _chance_variant(half: int, vocab_size: int, bug: str) -> float:
    """A classic wrong chance level, in closed form: E[weight on targets] over E[queries with an earlier
    occurrence], each summed over the positions, with one part counted wrongly."""
    v, keys = float(vocab_size), (lambda i: i if bug == "no-self" else i + 1)  # keys query i spreads over
    first = [m / v / keys(m) if m else 0.0 for m in range(half)]  # (half,): query m's expected target weight
    second = [(1 + (half - 1 + (0 if bug == "copies" else m)) / v) / keys(half + m) for m in range(half)]
    counted = [1 - (1 - 1 / v) ** m for m in range(half)]  # P(query m of the first half has an earlier occurrence)
    if bug == "distinct":
        return sum(1 / keys(half + m) for m in range(half)) / half
    if bug == "second-half-only":
        return sum(second) / half
    if bug == "all-queries":
        return (sum(first) + sum(second)) / (2 * half)
    return (sum(first) + sum(second)) / (half + sum(counted))


def chance_induction_score(student_fn: Callable) -> CheckResult:
    """Check a function (half, vocab_size) -> float: the induction score of a head attending evenly over its causal
    prefix, pooled over all repeated sequences whose first half is drawn uniformly with replacement."""
    ex = Exercise("chance_induction_score")
    mistakes_of = {
        Hint(idea="tokens are drawn with replacement: a first half can hold a token twice, and then its queries have "
                  "more than one target, and some first-half queries have one too",
             id="duplicates-ignored"): "distinct",
        Hint(idea="a first-half query whose token occurred before (a duplicate) has an earlier occurrence too: it "
                  "counts in both the targets' weight and the number of queries",
             code="query m < half: expected targets m / V; P(it has one) = 1 - (1 - 1/V)^m",
             id="first-half-left-out"): "second-half-only",
        Hint(idea="a repeated-half query also finds its token among the repeated half's earlier positions, "
                  "whenever an earlier first-half token equals it",
             code="query half + m: 1 + (half - 1)/V + m/V expected targets", id="repeated-half-copies-missed"):
            "copies",
        ALL_QUERIES: "all-queries",
        Hint(idea="query i sees i + 1 keys, itself included: each gets 1 / (i + 1), not 1 / i",
             id="prefix-without-self"): "no-self",
    }
    with ex.run():
        for half, vocab_size in CHANCE_CASES:
            got = _as_number(ex.call(student_fn, half, vocab_size))
            if not ex.compare(
                    f"the chance level for half = {half}, V = {vocab_size}, pooled over all {vocab_size ** half} "
                    "first halves", got, _chance_over_all(half, vocab_size), atol=1e-9, rtol=1e-7,
                    hint=Hint(idea="pooled over many sequences the score is (expected weight on targets, summed over "
                                   "the queries) / (expected number of queries with an earlier occurrence); both "
                                   "sums run over the first half's queries too",
                              code="by linearity, a query's expected number of targets is the sum over earlier "
                                   "positions of P(same token)"),
                    mistakes={hint: _chance_variant(half, vocab_size, bug) for hint, bug in mistakes_of.items()}):
                return ex.result  # one diagnosis per mistake
        length = 20
        distinct = torch.cat([torch.arange(length // 2)] * 2)[None]  # (1, 20): no token twice in the first half
        ex.compare("your prediction's case: half = 10 and V = 10⁹, where a duplicate is all but impossible",
                   _as_number(ex.call(student_fn, 10, 10**9)),
                   induction_score(uniform_attention(length)[None, None], distinct).item(), atol=1e-6,
                   hint="with V this large the first half holds no token twice: each repeated-half query i has one "
                        "target, weighted 1 / (i + 1)")
    return ex.result


def _reach_variant(clean: torch.Tensor, corrupted: torch.Tensor, position: int, num_layers: int,
                   bug: str) -> torch.Tensor:
    """A classic wrong reach map (layers + 1, T) bool: one rule of causality forgotten."""
    changed = (clean[:1] if bug == "first-row" else clean) != (corrupted[:1] if bug == "first-row" else corrupted)
    changed = changed.any(dim=0)  # (T,)
    at = torch.arange(clean.shape[1])  # (T,)
    spread = changed if bug == "not-spread" else at >= int(changed.nonzero()[0]) if changed.any() else changed
    seen = torch.ones_like(changed) if bug == "future" else at <= position  # (T,)
    reach = torch.zeros(num_layers + 1, clean.shape[1], dtype=torch.bool)
    reach[0] = (spread if bug == "embeddings" else changed) & seen
    reach[1:num_layers] = spread & seen
    reach[num_layers] = spread & (seen if bug == "last" else at == position)
    return reach


def patch_reach(student_fn: Callable) -> CheckResult:
    """Check a function (clean, corrupted (batch, T), position, num_layers) -> (num_layers + 1, T) bool: where a
    residual-stream patch of the clean run into the corrupted one can change the prediction at ``position``."""
    ex = Exercise("patch_reach")
    generator = torch.Generator().manual_seed(13)
    clean = torch.randint(12, (3, 12), generator=generator)  # (3, 12)
    two_rows = clean.clone()
    two_rows[0, 5] = (clean[0, 5] + 1) % 12  # row 0 changed at 5, row 2 at 3: the batch differs at both
    two_rows[2, 3] = (clean[2, 3] + 1) % 12
    at_two = clean.clone()
    at_two[:, 2] = (clean[:, 2] + 1) % 12
    layout = clean.t().contiguous().t(), at_two.t().contiguous().t()  # the same tokens, non-contiguous
    cases = (("rows changed at different positions (3 in one, 5 in another), read at 8, 2 layers", clean, two_rows,
              8, 2), ("changed at 2, read at 2, 1 layer", clean, at_two, 2, 1),
             ("changed at 2, read at 10, 3 layers, non-contiguous tokens", *layout, 10, 3),
             ("changed at 5 and 3, read at 1 (before any change), 2 layers", clean, two_rows, 1, 2))
    mistakes_of = {
        Hint(idea="the batch's rows were corrupted at different positions: a place differs when it differs in any "
                  "row", id="first-row-only"): "first-row",
        Hint(idea="the embeddings hold only each position's own token and position: they differ only where a token "
                  "was changed", id="embeddings-differ-everywhere"): "embeddings",
        Hint(idea="after the last block no attention is left: only the stream at the read position is unembedded "
                  "into its prediction", id="last-depth-any-position"): "last",
        Hint(idea="attention is causal: a stream after the read position never reaches its prediction",
             id="future-positions"): "future",
        Hint(idea="after a block, attention has carried the change to every later position, not only to the "
                  "changed ones", id="difference-not-spread"): "not-spread",
    }
    with ex.run():
        for what, clean_tokens, corrupted_tokens, position, num_layers in cases:
            got = ex.call(student_fn, clean_tokens, corrupted_tokens, position, num_layers)
            if isinstance(got, list | tuple):  # nested lists of bools are a right answer too
                got = torch.as_tensor(got)
            expected = residual_patch_reach(clean_tokens, corrupted_tokens, position, num_layers)
            if not ex.compare(
                    f"the places a patch can reach: {what}", got, expected,
                    hint=Hint(idea="a place matters when the two runs' streams differ there and the place can reach "
                                   "the prediction at the read position",
                              code="row 0: changed tokens; rows 1 … L − 1: from the first change on; row L: the read "
                                   "position only; and nothing after the read position"),
                    mistakes={hint: _reach_variant(clean_tokens, corrupted_tokens, position, num_layers, bug)
                              for hint, bug in mistakes_of.items()}):
                break  # one diagnosis per mistake
    return ex.result
