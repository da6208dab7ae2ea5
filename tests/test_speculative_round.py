"""round_probability, the distribution of what one sampled round of speculative decoding emits, against an
exhaustive sum over every outcome and against rounds drawn by speculative_accept."""

import itertools
import math

import pytest
import torch

from bounds import bound, bound_seeds
from transformer_lib.speculative import round_probability, speculative_accept

# k = 2 rows over V = 4 tokens: in row 0 token 3 has p > 0 = q (top-k filtered the draft, not the target); in row
# 1 token 2 has p = q = 0.
P = torch.tensor([[0.40, 0.10, 0.20, 0.30], [0.50, 0.25, 0.00, 0.25], [0.10, 0.20, 0.30, 0.40]], dtype=torch.float64)
Q = torch.tensor([[0.50, 0.30, 0.20, 0.00], [0.40, 0.35, 0.00, 0.25]], dtype=torch.float64)


def outcomes(k, vocab_size):
    """Every token list a round can emit: 1 to k + 1 tokens."""
    for length in range(1, k + 2):
        yield from itertools.product(range(vocab_size), repeat=length)


def test_the_outcomes_sum_to_one_and_the_first_token_is_distributed_as_p():
    probabilities = {o: round_probability(P, Q, torch.tensor(o)).item() for o in outcomes(2, 4)}
    assert math.isclose(sum(probabilities.values()), 1.0, abs_tol=1e-12)
    first = torch.zeros(4, dtype=torch.float64)
    for emitted, probability in probabilities.items():
        first[emitted[0]] += probability
    torch.testing.assert_close(first, P[0])  # the rule's exactness, counted over whole rounds
    beta = torch.minimum(P[:2], Q).sum(-1)  # (2,): each row's chance of keeping a proposal
    mean_length = sum(len(o) * prob for o, prob in probabilities.items())
    assert math.isclose(mean_length, 1 + beta[0] + beta[0] * beta[1], abs_tol=1e-12)


def test_a_draft_equal_to_the_target_never_rejects_and_nothing_is_nan():
    rows = P[:2]
    for emitted in outcomes(2, 4):
        probability = round_probability(P, rows, torch.tensor(emitted))
        assert not probability.isnan()
        if len(emitted) < 3:
            assert probability == 0  # nothing is ever rejected
    assert math.isclose(sum(round_probability(P, rows, torch.tensor(o)).item() for o in outcomes(2, 4)), 1.0,
                        abs_tol=1e-12)


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # `course.py bounds`: seeds 0-4 in three CPU kernel settings
def test_rounds_drawn_by_speculative_accept_follow_it(seed):
    """40,000 rounds drawn by the library's sampler: every outcome's frequency lies within 5 standard errors of its
    probability (a false alarm about once in 3 million per outcome); an outcome of probability 0 is never drawn."""
    generator = torch.Generator().manual_seed(seed)
    rounds = 40_000
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(rounds):
        proposals = torch.stack([torch.multinomial(row, 1, generator=generator)[0] for row in Q])  # (k,)
        emitted = tuple(speculative_accept(P, Q, proposals, generator).tolist())
        counts[emitted] = counts.get(emitted, 0) + 1
    largest = 0.0  # the largest |frequency - probability| of any possible outcome, in standard errors
    for emitted in outcomes(2, 4):
        probability = round_probability(P, Q, torch.tensor(emitted)).item()
        if probability == 0:
            assert emitted not in counts, emitted
            continue
        standard_error = math.sqrt(probability * (1 - probability) / rounds)
        largest = max(largest, abs(counts.get(emitted, 0) / rounds - probability) / standard_error)
    bound("largest distance of an outcome's frequency from its probability, in standard errors", largest,
          at_most=5.0)


def test_a_round_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="emits 1 to k"):
        round_probability(P, Q, torch.tensor([0, 1, 2, 3]))
