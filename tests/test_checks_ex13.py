"""The lesson 13 checks accept the solutions, spot stubs, and name typical mistakes."""

import itertools
import math

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex13_inside_a_trained_model as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def duplicate(weights, tokens, shift=0, self_included=False, all_queries=False):
    """Every head's duplicate-token score over a batch, vectorised: weights (batch, heads, T, T), tokens (batch, T)
    -> (heads,). The keyword arguments make the classic mistakes."""
    length = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]  # (batch, T_q, T_k)
    mask = same & torch.ones(length, length, dtype=torch.bool).tril(0 if self_included else -1)
    keys = torch.zeros_like(mask)
    keys[:, :, shift:] = mask[:, :, : length - shift]  # shift 1: the key after each occurrence
    queries = mask.any(-1)  # (batch, T)
    per_query = (weights * keys[:, None]).sum(-1)  # (batch, heads, T)
    total = (per_query * queries[:, None]).sum(dim=(0, 2))  # (heads,)
    return total / (queries.numel() if all_queries else queries.sum())


def chance(half, vocab_size, bug=None):
    """The chance level in closed form: expected weight on targets over expected queries with an earlier occurrence,
    each summed over the positions; ``bug`` makes the classic mistakes."""
    v, shift = vocab_size, 0 if bug == "no self" else 1  # query i sees i + shift keys
    # first half: query m has m earlier positions, each holding its token with probability 1 / V
    weights = [m / v / (m + shift) if m else 0.0 for m in range(half)]
    queries = [1 - (1 - 1 / v) ** m for m in range(half)]
    repeated = [(1 + (half - 1 + (0 if bug == "copies" else m)) / v) / (half + m + shift) for m in range(half)]
    if bug == "distinct":
        return sum(1 / (half + m + 1) for m in range(half)) / half
    if bug == "second half only":
        return sum(repeated) / half
    if bug == "all queries":
        return (sum(weights) + sum(repeated)) / (2 * half)
    return (sum(weights) + sum(repeated)) / (sum(queries) + half)


def chance_by_sampling_every_sequence(half, vocab_size):
    """Right, written another way: every first half enumerated by hand, summed with exact fractions, as a tensor."""
    from fractions import Fraction
    weight, queries = Fraction(0), 0
    for first in itertools.product(range(vocab_size), repeat=half):
        tokens = first * 2
        for i, token in enumerate(tokens):
            count = tokens[:i].count(token)
            weight += Fraction(count, i + 1)
            queries += count > 0
    return torch.tensor(float(weight / queries), dtype=torch.float64)


def reach(clean, corrupted, position, num_layers, bug=None):
    """Where a patch can reach, from causality; ``bug`` makes the classic mistakes."""
    differs = clean[:1] != corrupted[:1] if bug == "first row" else clean != corrupted
    changed = differs.any(dim=0)  # (T,)
    at = torch.arange(clean.shape[1])
    if not changed.any():
        return torch.zeros(num_layers + 1, len(at), dtype=torch.bool)
    later = changed if bug == "not spread" else at >= changed.nonzero()[0, 0]
    seen = at >= 0 if bug == "future" else at <= position
    rows = [(later if bug == "embeddings" else changed) & seen]
    rows += [later & seen] * (num_layers - 1)
    rows.append(later & (seen if bug == "last" else at == position))
    return torch.stack(rows)


def reach_as_lists(clean, corrupted, position, num_layers):
    """Right, written another way: loops over depths and positions, returning nested lists of bools."""
    T = clean.shape[1]
    changed = [bool((clean[:, t] != corrupted[:, t]).any()) for t in range(T)]
    first = changed.index(True)
    last = num_layers
    return [[(changed[t] if d == 0 else t >= first) and (t == position if d == last else t <= position)
             for t in range(T)] for d in range(num_layers + 1)]


def test_stubs_are_not_attempted(capsys):
    checks = (check.duplicate_token_score_of, check.chance_induction_score, check.patch_reach)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_duplicate_token_score_accepts_the_solution():
    assert check.duplicate_token_score_of(duplicate).ok


def test_duplicate_token_score_rejects_a_constant():
    assert_rejected_with(check.duplicate_token_score_of(lambda w, t: 0.5), "duplicate-token scores")


def test_duplicate_token_score_names_typical_mistakes():
    induction = check.duplicate_token_score_of(lambda w, t: duplicate(w, t, shift=1))
    assert_rejected_with(induction, "which is the induction score")
    assert_diagnosed(induction, "induction-offset")
    with_self = check.duplicate_token_score_of(lambda w, t: duplicate(w, t, self_included=True))
    assert_rejected_with(with_self, "every token equals itself")
    assert_diagnosed(with_self, "self-included")
    every_query = check.duplicate_token_score_of(lambda w, t: duplicate(w, t, all_queries=True))
    assert_rejected_with(every_query, "average only over the queries whose token occurred before")
    assert_diagnosed(every_query, "mean-over-all-queries")


def test_the_closed_form_is_the_core_pooled_over_every_sequence():
    for half, vocab_size in check.CHANCE_CASES:
        assert math.isclose(chance(half, vocab_size), check._chance_over_all(half, vocab_size), abs_tol=1e-12)


def test_chance_induction_score_accepts_the_solution_written_two_ways():
    assert check.chance_induction_score(chance).ok
    assert check.chance_induction_score(
        lambda half, v: chance(half, v) if v > 10**6 else chance_by_sampling_every_sequence(half, v)).ok


def test_chance_induction_score_rejects_the_lessons_estimate():
    assert_rejected_with(check.chance_induction_score(lambda half, v: 0.084), "pooled over all 8 first halves")


def test_chance_induction_score_names_each_classic_mistake_once():
    def run(bug):
        result = check.chance_induction_score(lambda half, v, bug=bug: chance(half, v, bug))
        assert len(result.diagnoses) == 1
        return result

    assert_diagnosed(run("distinct"), "duplicates-ignored")
    assert_diagnosed(run("second half only"), "first-half-left-out")
    assert_diagnosed(run("copies"), "repeated-half-copies-missed")
    assert_diagnosed(run("all queries"), "mean-over-all-queries")
    assert_diagnosed(run("no self"), "prefix-without-self")


def test_patch_reach_accepts_the_solution_written_two_ways():
    assert check.patch_reach(reach).ok
    assert check.patch_reach(reach_as_lists).ok


def test_patch_reach_names_each_classic_mistake_once():
    def run(bug):
        result = check.patch_reach(lambda *a, bug=bug: reach(*a, bug))
        assert len(result.diagnoses) == 1
        return result

    assert_diagnosed(run("first row"), "first-row-only")
    assert_diagnosed(run("embeddings"), "embeddings-differ-everywhere")
    assert_diagnosed(run("last"), "last-depth-any-position")
    assert_diagnosed(run("future"), "future-positions")
    assert_diagnosed(run("not spread"), "difference-not-spread")


def test_patch_reach_wants_booleans():
    as_ints = check.patch_reach(lambda *a: reach(*a).long())
    assert_rejected_with(as_ints, "expected a boolean result")
