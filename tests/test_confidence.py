"""Intervals and paired comparisons (transformer_lib.confidence) against SciPy's, how often a test ranks the better of
two models first (against sums of SciPy's binomial probabilities) and the items it takes, and bits per byte by
hand."""

import math
from statistics import NormalDist

import numpy as np
import pytest
import torch
from scipy import stats

from transformer_lib import (
    acceptance_interval,
    bits_per_byte,
    bootstrap_interval,
    difference_interval,
    items_to_separate,
    mcnemar_test,
    pick_rate,
    wilson_interval,
)

Z95 = NormalDist().inv_cdf(0.975)


@pytest.mark.parametrize(("successes", "n"), [(0, 10), (1, 10), (37, 50), (50, 50), (7, 1000), (500, 1000)])
def test_wilson_interval_equals_scipys(successes, n):
    expected = stats.binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(successes, n, z=Z95)
    assert low == pytest.approx(expected.low, abs=1e-12) and high == pytest.approx(expected.high, abs=1e-12)


def test_wilson_interval_stays_in_zero_one_and_lesson_14s_acceptance_interval_is_it():
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    assert wilson_interval(0, 5)[1] > 0 and wilson_interval(5, 5)[0] < 1  # not a point at 0 or n
    assert acceptance_interval(30, 40) == wilson_interval(30, 40)
    for bad in ((-1, 5), (6, 5), (0, 0)):
        with pytest.raises(ValueError, match="need 0 <= successes <= n"):
            wilson_interval(*bad)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_interval_equals_scipys_percentile_bootstrap(seed):
    values = np.random.default_rng(100 + seed).integers(0, 2, 60).astype(float)  # right or wrong on 60 items
    expected = stats.bootstrap((values,), np.mean, n_resamples=2000, confidence_level=0.9, method="percentile",
                               rng=np.random.default_rng(seed)).confidence_interval
    low, high = bootstrap_interval(values, confidence=0.9, resamples=2000, seed=seed)
    assert low == pytest.approx(expected.low, abs=1e-12) and high == pytest.approx(expected.high, abs=1e-12)


def test_bootstrap_interval_takes_any_statistic_that_reduces_the_last_axis():
    values = np.random.default_rng(3).normal(size=40)
    expected = stats.bootstrap((values,), np.median, n_resamples=1000, method="percentile",
                               rng=np.random.default_rng(0)).confidence_interval
    low, high = bootstrap_interval(values, statistic=np.median, resamples=1000, seed=0)
    assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    with pytest.raises(ValueError, match="at least 2 items"):
        bootstrap_interval([1.0])


def shared_difficulty(n=50, seed=0):
    """Two models on the same items, right mostly where the item is easy: a 4-point gap in truth."""
    generator = np.random.default_rng(seed)
    easy = generator.random(n)  # (n,) how easy each item is
    a = (easy > 0.30).astype(float)
    b = (easy > 0.34).astype(float)
    return a, b


def test_paired_interval_is_narrower_than_unpaired_when_the_items_share_difficulty():
    a, b = shared_difficulty()
    paired = difference_interval(a, b, paired=True, resamples=4000)
    unpaired = difference_interval(a, b, paired=False, resamples=4000)
    assert paired[0] <= a.mean() - b.mean() <= paired[1]
    assert paired[1] - paired[0] < 0.5 * (unpaired[1] - unpaired[0])
    assert unpaired[0] < 0 < unpaired[1]  # unpaired, the gap looks like noise
    assert paired[0] >= 0  # paired: b is never right where a is wrong
    with pytest.raises(ValueError, match="same items"):
        difference_interval(a, b[:-1])


def test_mcnemar_equals_scipys_exact_binomial_test_on_the_discordant_items():
    generator = np.random.default_rng(4)
    for _ in range(20):
        a, b = generator.random(80) < 0.7, generator.random(80) < 0.6
        only_a, only_b, p = mcnemar_test(a, b)
        assert only_a == int(np.sum(a & ~b)) and only_b == int(np.sum(~a & b))
        assert p == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-12)
    assert mcnemar_test([True, False], [True, False]) == (0, 0, 1.0)  # no item tells them apart


def pick_rate_by_scipy(accuracy_a, accuracy_b, n):
    """P(a's count > b's) + P(equal counts) / 2, summed over every pair of counts."""
    counts = np.arange(n + 1)
    joint = np.outer(stats.binom.pmf(counts, n, accuracy_a), stats.binom.pmf(counts, n, accuracy_b))  # [k_a, k_b]
    return joint[counts[:, None] > counts[None, :]].sum() + 0.5 * np.trace(joint)


@pytest.mark.parametrize(("accuracy_a", "accuracy_b", "n"),
                         [(0.7, 0.67, 1), (0.7, 0.67, 50), (0.9, 0.5, 13), (0.4, 0.6, 200), (0.05, 0.0, 30),
                          (1.0, 0.3, 7), (0.7, 0.67, 1500)])
def test_pick_rate_equals_the_sum_over_both_binomials(accuracy_a, accuracy_b, n):
    assert pick_rate(accuracy_a, accuracy_b, n) == pytest.approx(pick_rate_by_scipy(accuracy_a, accuracy_b, n),
                                                                 abs=1e-9)


def test_pick_rate_is_a_coin_flip_for_equal_models_and_grows_with_the_items():
    for accuracy, n in ((0.7, 1), (0.7, 100), (0.0, 10), (0.5, 2000)):
        assert pick_rate(accuracy, accuracy, n) == pytest.approx(0.5, abs=1e-9)
    rates = [pick_rate(0.7, 0.67, n) for n in (10, 100, 1000, 10_000)]
    assert rates == sorted(rates) and rates[0] > 0.5 and rates[-1] > 0.99
    assert pick_rate(0.67, 0.7, 100) == pytest.approx(1 - pick_rate(0.7, 0.67, 100), abs=1e-9)
    with pytest.raises(ValueError, match="need n >= 1"):
        pick_rate(0.7, 1.2, 10)


@pytest.mark.parametrize(("accuracy_a", "accuracy_b"), [(0.7, 0.67), (0.9, 0.8), (0.55, 0.45), (0.3, 0.35)])
def test_items_to_separate_is_the_first_n_that_ranks_the_better_model_first_95_times_in_100(accuracy_a, accuracy_b):
    n = items_to_separate(accuracy_a, accuracy_b)
    better, worse = max(accuracy_a, accuracy_b), min(accuracy_a, accuracy_b)
    assert pick_rate(better, worse, n) >= 0.95 > pick_rate(better, worse, n - 1)
    assert items_to_separate(accuracy_b, accuracy_a) == n  # either order


def test_items_to_separate_is_none_where_no_number_of_items_does():
    assert items_to_separate(0.7, 0.7) is None
    assert items_to_separate(0.7, 0.67, most=100) is None  # 3 points take far more than 100 items


def test_bits_per_byte_is_the_same_text_cost_whatever_the_tokens():
    text = "Straße, 東京 and café"  # characters of 1, 2 and 3 UTF-8 bytes
    characters = list(text)
    nats = torch.full((len(characters),), math.log(100.0), dtype=torch.float64)  # a uniform guess over 100 characters
    bytes_ = torch.tensor([len(c.encode()) for c in characters])
    direct = len(characters) * math.log2(100) / len(text.encode())
    assert bits_per_byte(nats, bytes_) == pytest.approx(direct, rel=1e-12)
    # The same probability of the text, cut into pairs of characters: half as many tokens, twice the loss per token
    pairs = [text[i : i + 2] for i in range(0, len(text), 2)]
    pair_nats = torch.tensor([math.log(100.0) * len(p) for p in pairs], dtype=torch.float64)
    pair_bytes = torch.tensor([len(p.encode()) for p in pairs])
    assert pair_nats.mean() > 1.8 * nats.mean()  # per token, the pairs look worse (the last is one character)
    assert bits_per_byte(pair_nats, pair_bytes) == pytest.approx(direct, rel=1e-12)  # per byte, the same
    # A special token (0 bytes) counts in neither sum; dividing by tokens instead of bytes is another number
    with_special = bits_per_byte(torch.cat((nats, torch.tensor([9.0], dtype=torch.float64))),
                                 torch.cat((bytes_, torch.tensor([0]))))
    assert with_special == pytest.approx(direct, rel=1e-12)
    assert nats.sum().item() / (math.log(2) * len(characters)) != pytest.approx(direct, rel=1e-3)
    with pytest.raises(ValueError, match="one byte count per token"):
        bits_per_byte(nats, bytes_[:-1])
