"""Elo and Bradley-Terry (transformer_lib.ratings): the fit against SciPy's optimiser, and what the order changes."""

import math
import random

import numpy as np
import pytest
from scipy.optimize import minimize

from transformer_lib import bradley_terry, elo_ratings, expected_score, order_disagreements


def games_between(strengths: dict[str, float], rounds: int = 30, seed: int = 0) -> list[tuple[str, str, float]]:
    """Every pair plays ``rounds`` games; a beats b with Bradley-Terry's probability s_a / (s_a + s_b)."""
    generator = random.Random(seed)
    names = list(strengths)
    games = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for _ in range(rounds):
                a_wins = generator.random() < strengths[a] / (strengths[a] + strengths[b])
                games.append((a, b, 1.0 if a_wins else 0.0))
    generator.shuffle(games)
    return games


STRENGTHS = {"bigram": 1.0, "small": 2.0, "medium": 4.0, "large": 8.0}


def scipy_bradley_terry(games, players):
    """The maximum-likelihood fit by SciPy's BFGS on log-strengths (the first fixed at 0), on Elo's scale."""
    index = {p: i for i, p in enumerate(players)}

    def negative_log_likelihood(free):
        theta = np.concatenate(([0.0], free))
        total = 0.0
        for a, b, score in games:
            difference = theta[index[a]] - theta[index[b]]
            total -= score * difference - np.logaddexp(0.0, difference)  # log sigmoid of the winner's margin
        return total

    theta = np.concatenate(([0.0], minimize(negative_log_likelihood, np.zeros(len(players) - 1), method="BFGS",
                                            options={"gtol": 1e-10}).x))
    theta -= theta.mean()  # geometric mean strength 1
    return {p: 1000 + 400 * theta[index[p]] / math.log(10) for p in players}


def test_bradley_terry_equals_scipys_maximum_likelihood_fit():
    games = games_between(STRENGTHS)
    ours = bradley_terry(games)
    reference = scipy_bradley_terry(games, list(ours))
    for player in ours:
        assert ours[player] == pytest.approx(reference[player], abs=1e-3)  # points on Elo's scale
    assert sorted(ours, key=ours.get) == list(STRENGTHS)  # the true order, from 180 games
    assert math.exp(np.mean([math.log(10) * (r - 1000) / 400 for r in ours.values()])) == pytest.approx(1.0)


def test_bradley_terry_ignores_the_order_of_the_games_and_elo_does_not():
    games = games_between(STRENGTHS)
    shuffled = games[:]
    random.Random(1).shuffle(shuffled)
    bt, bt_shuffled = bradley_terry(games), bradley_terry(shuffled)
    elo, elo_shuffled = elo_ratings(games), elo_ratings(shuffled)
    assert max(abs(bt[p] - bt_shuffled[p]) for p in bt) < 1e-6
    assert max(abs(elo[p] - elo_shuffled[p]) for p in elo) > 5  # points: the same games, another order
    assert sum(elo.values()) == pytest.approx(1000 * len(elo))  # Elo moves points, never makes them


def test_elo_update_and_expected_score():
    assert expected_score(1400, 1000) == pytest.approx(10 / 11)  # 400 points: odds of 10 to 1
    ratings = elo_ratings([("a", "b", 1.0)], k=32)
    assert ratings == pytest.approx({"a": 1016.0, "b": 984.0})  # an even game: the winner takes k / 2
    tie = elo_ratings([("a", "b", 1.0), ("a", "b", 0.5)], k=32)
    assert tie["a"] < 1016.0  # a tie against a weaker rating costs the favourite


def test_bradley_terry_refuses_a_player_who_never_lost_and_bad_games():
    with pytest.raises(ValueError, match="'a' won 2 of its 2 games"):
        bradley_terry([("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 1.0), ("c", "b", 1.0)])
    for bad in [("a", "a", 1.0)], [("a", "b", 2.0)]:
        with pytest.raises(ValueError, match="a game is"):
            elo_ratings(bad)


def test_order_disagreements_name_the_pairs_two_scores_order_apart():
    ratings = {"a": 1200.0, "b": 1100.0, "c": 1000.0}
    assert order_disagreements(ratings, {"a": 0.9, "b": 0.8, "c": 0.7}) == []
    assert order_disagreements(ratings, {"a": 0.8, "b": 0.9, "c": 0.7}) == [("a", "b")]
    assert order_disagreements(ratings, {"a": 0.7, "b": 0.8, "c": 0.9}) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert order_disagreements(ratings, {"a": 0.8, "b": 0.8, "c": 0.7}) == []  # a tie is no disagreement
