"""Ratings from comparisons: which of several models is better, from games between pairs of them.

A game is ``(a, b, score)``: players a and b (any hashable names) and a's score, 1 (a won), 0 (b won) or 0.5 (a tie).

- :func:`elo_ratings`: Elo's update, game by game: the winner takes ``k`` times its surprise (its score minus the
  score the ratings expected) from the loser. The result depends on the order of the games.
- :func:`order_disagreements`: the pairs of players two scores (ratings, accuracies, …) put in opposite orders.
- :func:`bradley_terry`: the Bradley–Terry model, P(a beats b) = s_a / (s_a + s_b), fitted by maximum likelihood to
  all games at once (Hunter's minorise-maximise iteration), so any order of the same games gives the same ratings.
  Stated on Elo's scale: 400·log10(s) + 1000, so a gap of 400 points means odds of 10 to 1.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

Game = tuple[Hashable, Hashable, float]


def expected_score(rating_a: float, rating_b: float) -> float:
    """The score a expects against b on Elo's scale: 1 / (1 + 10^((r_b − r_a)/400))."""
    return 1 / (1 + 10 ** ((rating_b - rating_a) / 400))


def _players(games: Sequence[Game]) -> list[Hashable]:
    """Every player, in the order of first appearance; the scores checked."""
    players: dict[Hashable, None] = {}
    for a, b, score in games:
        if a == b or score not in (0, 0.5, 1):
            raise ValueError(f"a game is (a, b, a's score) with a != b and a score of 1, 0.5 or 0: got {(a, b, score)}")
        players.setdefault(a)
        players.setdefault(b)
    return list(players)


def elo_ratings(games: Iterable[Game], k: float = 32.0, start: float = 1000.0) -> dict[Hashable, float]:
    """Every player's Elo rating after ``games`` in the order given, each player starting at ``start``."""
    games = list(games)
    ratings = dict.fromkeys(_players(games), start)
    for a, b, score in games:
        surprise = score - expected_score(ratings[a], ratings[b])
        ratings[a] += k * surprise
        ratings[b] -= k * surprise
    return ratings


def bradley_terry(games: Iterable[Game], tolerance: float = 1e-10, max_iterations: int = 10_000
                  ) -> dict[Hashable, float]:
    """Bradley–Terry maximum-likelihood ratings on Elo's scale, their geometric mean strength at 1000 points.

    A tie counts as half a win for each player. Every player needs at least one win and one loss (half of a tie
    counts): a player who never lost would have an infinitely large strength."""
    games = list(games)
    players = _players(games)
    wins = dict.fromkeys(players, 0.0)
    meetings: dict[tuple[Hashable, Hashable], int] = {}  # (a, b) with a listed before b -> games between them
    for a, b, score in games:
        wins[a] += score
        wins[b] += 1 - score
        pair = (a, b) if players.index(a) < players.index(b) else (b, a)
        meetings[pair] = meetings.get(pair, 0) + 1
    for player in players:
        played = sum(n for pair, n in meetings.items() if player in pair)
        if not 0 < wins[player] < played:
            raise ValueError(f"{player!r} won {wins[player]:g} of its {played} games: Bradley-Terry needs every "
                             "player to win some and lose some (its strength would be 0 or infinite)")
    strength = dict.fromkeys(players, 1.0)
    for _ in range(max_iterations):
        new = {}
        for player in players:  # Hunter's MM step: wins over Σ_j n_ij / (s_i + s_j)
            denominator = sum(n / (strength[a] + strength[b]) for (a, b), n in meetings.items() if player in (a, b))
            new[player] = wins[player] / denominator
        scale = math.exp(sum(math.log(s) for s in new.values()) / len(new))  # geometric mean 1: the scale is free
        new = {player: s / scale for player, s in new.items()}
        change = max(abs(math.log(new[p] / strength[p])) for p in players)
        strength = new
        if change < tolerance:
            return {player: 1000 + 400 * math.log10(s) for player, s in strength.items()}
    raise RuntimeError(f"Bradley-Terry did not converge in {max_iterations} iterations (last change {change:.2g})")


def order_disagreements(first: dict[Hashable, float], second: dict[Hashable, float]) -> list[tuple[Hashable, Hashable]]:
    """The pairs (a, b) that ``first`` puts in one order and ``second`` in the other, higher meaning better in both
    (a tie in either counts as no disagreement)."""
    players = list(first)
    return [(a, b) for i, a in enumerate(players) for b in players[i + 1 :]
            if (first[a] - first[b]) * (second[a] - second[b]) < 0]
