"""additive_attention_scores (Bahdanau et al., 2015) against a computation done by hand."""

import math

import torch

from transformer_lib import additive_attention_scores


def test_additive_scores_equal_a_hand_computation():
    # One query s = [1, 0], two keys h_1 = [0, 1] and h_2 = [1, 1]; W = identity, U = 2 · identity, v = [1, -1].
    s = torch.tensor([[1.0, 0.0]], dtype=torch.float64)  # (T_q=1, 2)
    h = torch.tensor([[0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # (T_k=2, 2)
    w_query = torch.eye(2, dtype=torch.float64)
    w_key = 2 * torch.eye(2, dtype=torch.float64)
    v = torch.tensor([1.0, -1.0], dtype=torch.float64)
    # e_1 = v · tanh(s + 2 h_1) = tanh(1) - tanh(2); e_2 = v · tanh(s + 2 h_2) = tanh(3) - tanh(2)
    by_hand = torch.tensor([[math.tanh(1) - math.tanh(2), math.tanh(3) - math.tanh(2)]], dtype=torch.float64)
    torch.testing.assert_close(additive_attention_scores(s, h, w_query, w_key, v), by_hand)


def test_additive_scores_batch_every_query_against_every_key():
    generator = torch.Generator().manual_seed(0)
    draw = lambda *shape: torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    query, keys, w_query, w_key, v = draw(2, 3, 4), draw(2, 5, 6), draw(4, 7), draw(6, 7), draw(7)
    scores = additive_attention_scores(query, keys, w_query, w_key, v)
    assert scores.shape == (2, 3, 5)
    for b in range(2):
        for i in range(3):
            for j in range(5):
                one = torch.tanh(query[b, i] @ w_query + keys[b, j] @ w_key) @ v
                torch.testing.assert_close(scores[b, i, j], one)
