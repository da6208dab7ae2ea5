"""How sure is a measured score? Intervals for an accuracy, and two models compared on the same items.

- :func:`wilson_interval`: Wilson's score interval for a proportion, ``successes`` of ``n`` (an exact match, an
  acceptance rate). Unlike the textbook p ± z·√(p(1 − p)/n), it stays inside [0, 1] and does not shrink to a point at
  0 or n successes.
- :func:`bootstrap_interval`: the percentile bootstrap interval of a statistic of n items: the items resampled with
  replacement many times, the statistic computed on each resample, and the middle ``confidence`` of those values kept.
- :func:`difference_interval`: the bootstrap interval for the difference of two models' mean scores. On the same items
  it resamples the items together (``paired``), so what both models find easy or hard cancels out; resampling each
  model's scores on its own treats them as two unrelated samples and gives a wider interval.
- :func:`mcnemar_test`: McNemar's exact test on the same items: only the items where exactly one model is right count,
  and under "no difference" each of them is that model's by a fair coin.
- :func:`pick_rate` and :func:`items_to_separate`: how often a test of n items ranks the truly better of two models
  first, and how many items it takes to do so 95 times in 100.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for the proportion ``successes`` / ``n``, at z standard errors (1.96: 95 %):
    (low, high). It treats the n trials as independent draws with one probability; trials that come in runs carry
    less information than that, so their true interval is wider."""
    if not 0 <= successes <= n or n == 0:
        raise ValueError(f"need 0 <= successes <= n and n > 0: got successes={successes}, n={n}")
    rate, z2 = successes / n, z * z
    centre = (rate + z2 / (2 * n)) / (1 + z2 / n)
    half = z * (rate * (1 - rate) / n + z2 / (4 * n**2)) ** 0.5 / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)  # exact at 0 and 1, where float rounding strays


def bootstrap_interval(values, statistic: Callable = np.mean, confidence: float = 0.95, resamples: int = 10_000,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic`` over ``values`` (one number per item): (low, high).

    ``statistic(array, axis=-1)`` must reduce the last axis, as NumPy's ``mean`` does. The resamples are drawn with
    ``numpy.random.default_rng(seed)``, as ``scipy.stats.bootstrap`` draws them from the same generator, so the two
    give the same interval."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"need a 1-D array of at least 2 items' values: got shape {values.shape}")
    picks = np.random.default_rng(seed).integers(0, len(values), (resamples, len(values)))  # (resamples, n)
    return _middle(statistic(values[picks], axis=-1), confidence)


def _middle(estimates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentiles that keep the middle ``confidence`` of the bootstrap ``estimates`` (resamples,)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must lie between 0 and 1, e.g. 0.95")
    tail = (1 - confidence) / 2
    return float(np.percentile(estimates, 100 * tail)), float(np.percentile(estimates, 100 * (1 - tail)))


def difference_interval(scores_a, scores_b, paired: bool = True, confidence: float = 0.95, resamples: int = 10_000,
                        seed: int = 0) -> tuple[float, float]:
    """A bootstrap interval for mean(scores_a) − mean(scores_b), each a score per item (1 right, 0 wrong).

    ``paired``: both models answered the same items, in the same order, and the items are resampled together.
    Otherwise each model's scores are resampled on their own, as for two unrelated samples."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"a paired comparison needs both models' scores on the same items: got {a.shape} "
                             f"and {b.shape}")
        return bootstrap_interval(a - b, confidence=confidence, resamples=resamples, seed=seed)
    generator = np.random.default_rng(seed)
    means = [sample[generator.integers(0, len(sample), (resamples, len(sample)))].mean(axis=-1) for sample in (a, b)]
    return _middle(means[0] - means[1], confidence)  # each (resamples,)


def mcnemar_test(right_a, right_b) -> tuple[int, int, float]:
    """McNemar's exact test for two models' right (True) and wrong answers on the same items: (only a right, only b
    right, two-sided p-value). The p-value is the chance, were each such item a fair coin's, of a split at least as
    uneven as the one seen."""
    a, b = np.asarray(right_a, dtype=bool), np.asarray(right_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need both models' answers on the same items, one flag per item: got {a.shape} and "
                         f"{b.shape}")
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n  # P(X <= the smaller count)
    return only_a, only_b, min(1.0, 2 * tail)


def _binomial_pmf(n: int, p: float) -> np.ndarray:
    """P(k successes of n), k = 0 … n: (n + 1,) float64."""
    if p in (0.0, 1.0):
        return np.eye(n + 1)[0 if p == 0.0 else n]
    k = torch.arange(n + 1, dtype=torch.float64)
    log_comb = (torch.lgamma(torch.tensor(n + 1.0, dtype=torch.float64)) - torch.lgamma(k + 1)
                - torch.lgamma(n - k + 1))  # ln C(n, k)
    return torch.exp(log_comb + k * math.log(p) + (n - k) * math.log1p(-p)).numpy()


def pick_rate(accuracy_a: float, accuracy_b: float, n: int) -> float:
    """The chance that model a scores more than model b on a test of ``n`` items, a tie counted as half: each model
    right on each item with its true accuracy, every item and model independent (two separate tests of n items)."""
    if n < 1 or not (0 <= accuracy_a <= 1 and 0 <= accuracy_b <= 1):
        raise ValueError(f"need n >= 1 and accuracies in [0, 1]: got n={n}, {accuracy_a}, {accuracy_b}")
    pmf_a, pmf_b = _binomial_pmf(n, accuracy_a), _binomial_pmf(n, accuracy_b)  # (n + 1,) each
    below_b = np.concatenate(([0.0], np.cumsum(pmf_b)[:-1]))  # P(b's count < k)
    return float(np.sum(pmf_a * below_b) + 0.5 * np.sum(pmf_a * pmf_b))


def items_to_separate(accuracy_a: float, accuracy_b: float, rate: float = 0.95, most: int = 100_000) -> int | None:
    """The fewest items (searched up to ``most``) at which :func:`pick_rate` of the better model reaches ``rate``,
    found by doubling n and then bisecting, as the rate grows with n; None where even ``most`` items do not."""
    better, worse = max(accuracy_a, accuracy_b), min(accuracy_a, accuracy_b)
    high = 1
    while pick_rate(better, worse, high) < rate:  # double n until the rate is reached
        if high >= most:
            return None
        high = min(2 * high, most)
    low = high // 2 + 1 if high > 1 else 1  # pick_rate grows with n: bisect between the last two tries
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if pick_rate(better, worse, middle) < rate else (low, middle)
    return low
