"""Lesson 03's training experiment: the retrieval task is what it says, and the 1/√d_k scale makes one attention layer
learn it faster at d_k = 256 (not at a real head's d_k = 8), on seeds other than the 3 the lesson runs."""

import pytest
import torch

from bounds import bound, bound_seeds
from transformer_lib import RetrievalAttention, retrieval_batch, train_retrieval
from transformer_lib.retrieval import flush_denormal_is_on

LESSON_D_K = 256  # the width notebooks/03_queries_keys_values.ipynb trains at
REAL_HEAD_D_K = 8  # the lesson's control: a real head's d_model / h = 32 / 4
SEEDS = bound_seeds((3,))  # the lesson trains seeds 0-2; `course.py bounds` seeds 0-4


def early_loss(history) -> float:
    """The mean training loss over steps 41-60: the figure the lesson asserts on."""
    return sum(history.losses[40:60]) / 20


def test_a_batch_asks_for_the_value_stored_under_one_of_its_keys():
    keys, values, query, target = retrieval_batch(50, 8, 32, 8, torch.Generator().manual_seed(0))
    assert keys.shape == values.shape == (50, 8) and query.shape == target.shape == (50,)
    assert all(len(set(row)) == 8 for row in keys.tolist())  # distinct keys in every row
    where = (keys == query[:, None]).float().argmax(dim=-1)  # (50,) the position of the asked key
    assert torch.equal((keys == query[:, None]).sum(-1), torch.ones(50, dtype=torch.long))
    assert torch.equal(values[torch.arange(50), where], target)
    with pytest.raises(ValueError, match="num_pairs=9 keys cannot be distinct among num_symbols=8"):
        retrieval_batch(2, 9, 8, 4, torch.Generator())


def test_the_scaled_and_the_unscaled_model_differ_only_in_the_scale():
    keys, values, query, _ = retrieval_batch(4, 8, 32, 8, torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    scaled = RetrievalAttention(32, 8, d_model=16, d_k=64, scaled=True)
    torch.manual_seed(0)
    unscaled = RetrievalAttention(32, 8, d_model=16, d_k=64, scaled=False)
    for a, b in zip(scaled.parameters(), unscaled.parameters(), strict=True):
        assert torch.equal(a, b)
    assert scaled(keys, values, query).shape == (4, 8)
    with torch.no_grad():
        scaled.w_q.weight.mul_(8.0)  # multiplying W^Q by √64 = 8 undoes the scale exactly
    torch.testing.assert_close(scaled(keys, values, query), unscaled(keys, values, query))


@pytest.mark.trained
def test_with_the_scale_every_seed_learns_faster_than_without():
    for seed in SEEDS:
        scaled = train_retrieval(LESSON_D_K, scaled=True, seed=seed)
        unscaled = train_retrieval(LESSON_D_K, scaled=False, seed=seed)
        bound("scaled: early loss", early_loss(scaled), at_most=0.3, seed=seed)
        bound("unscaled: early loss", early_loss(unscaled), at_least=0.6, seed=seed)
        bound("scaled: accuracy", scaled.accuracy, at_least=0.95, seed=seed)
        bound("unscaled: accuracy", unscaled.accuracy, at_least=0.9, seed=seed)


@pytest.mark.trained
def test_at_step_0_the_unscaled_model_puts_most_of_its_weight_on_one_key():
    """The mechanism the lesson prints: before any training the unscaled scores are large and softmax saturated."""
    for seed in SEEDS:
        scaled = train_retrieval(LESSON_D_K, scaled=True, seed=seed, steps=1)
        unscaled = train_retrieval(LESSON_D_K, scaled=False, seed=seed, steps=1)
        bound("unscaled: largest initial weight", unscaled.initial_largest_weight, at_least=0.7, seed=seed)
        bound("scaled: largest initial weight", scaled.initial_largest_weight, at_most=0.35, seed=seed)


@pytest.mark.trained
@pytest.mark.parametrize("d_k", [LESSON_D_K, REAL_HEAD_D_K])
def test_divided_by_the_root_of_d_k_the_initial_scores_spread_alike_at_every_width(d_k):
    """The unscaled spread grows like √d_k (a fresh nn.Linear's outputs do not depend on d_k in size): the scaled
    scores' std stays between 0.25 and 0.75 at both widths the lesson trains."""
    for seed in SEEDS:
        scaled = train_retrieval(d_k, scaled=True, seed=seed, steps=1)
        bound(f"d_k={d_k} scaled: initial score std", scaled.initial_score_std, at_least=0.25, seed=seed)
        bound(f"d_k={d_k} scaled: initial score std", scaled.initial_score_std, at_most=0.75, seed=seed)


@pytest.mark.trained
def test_at_a_real_heads_width_the_unscaled_model_is_not_slower():
    """The lesson's control at d_k = 8: softmax is not saturated at step 0, and the scale gives no head start."""
    for seed in SEEDS:
        scaled = train_retrieval(REAL_HEAD_D_K, scaled=True, seed=seed)
        unscaled = train_retrieval(REAL_HEAD_D_K, scaled=False, seed=seed)
        bound("d_k=8 unscaled: largest initial weight", unscaled.initial_largest_weight, at_most=0.5, seed=seed)
        bound("d_k=8: scaled minus unscaled early loss", early_loss(scaled) - early_loss(unscaled), at_least=0.0,
              seed=seed)
        bound("d_k=8 scaled: accuracy", scaled.accuracy, at_least=0.95, seed=seed)
        bound("d_k=8 unscaled: accuracy", unscaled.accuracy, at_least=0.95, seed=seed)


@pytest.mark.parametrize("caller_setting", [True, False])
def test_training_restores_the_callers_flush_denormal_setting(caller_setting):
    if not torch.set_flush_denormal(caller_setting):
        pytest.skip("this CPU cannot flush subnormal numbers")
    try:
        assert flush_denormal_is_on() == caller_setting
        train_retrieval(8, scaled=True, seed=0, steps=2)
        assert flush_denormal_is_on() == caller_setting
    finally:
        torch.set_flush_denormal(False)
