"""Lesson 13's task, scores and recipe: the scores measure what they say, and the recipe grows an induction head
in layer 1 on every seed tried."""

import math

import pytest
import torch

from transformer_lib import GPT, GPTConfig, set_seed
from transformer_lib.induction import (
    InductionRecipe,
    half_losses,
    induction_score,
    induction_targets,
    phase_change_step,
    previous_token_score,
    repeated_tokens,
    train_induction_model,
    uniform_loss,
)
from transformer_lib.interpret import attention_patterns


def one_hot_pattern(length, key_of_query):
    """(1, 1, T, T) weights putting all of query i's weight on key key_of_query(i)."""
    weights = torch.zeros(1, 1, length, length)
    for i in range(length):
        weights[0, 0, i, key_of_query(i)] = 1.0
    return weights


def test_repeated_tokens_repeat_their_first_half():
    tokens = repeated_tokens(5, 7, 20, torch.Generator().manual_seed(0))
    assert tokens.shape == (5, 14) and tokens.dtype == torch.long
    assert torch.equal(tokens[:, :7], tokens[:, 7:])
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 20
    with pytest.raises(ValueError, match="half=1 is too short"):
        repeated_tokens(5, 1, 20, torch.Generator())


def test_half_losses_of_a_uniform_and_a_perfect_predictor():
    tokens = repeated_tokens(3, 6, 10, torch.Generator().manual_seed(1))
    first, repeated = half_losses(torch.zeros(3, 12, 10), tokens)
    assert abs(first.item() - math.log(10)) < 1e-6 and abs(repeated.item() - math.log(10)) < 1e-6
    perfect = torch.full((3, 12, 10), -30.0)
    perfect[:, :-1].scatter_(-1, tokens[:, 1:, None], 30.0)  # position t puts all its mass on token t + 1
    first, repeated = half_losses(perfect, tokens)
    assert first.item() < 1e-6 and repeated.item() < 1e-6
    assert uniform_loss(10) == math.log(10)


def test_the_scores_of_ideal_heads():
    tokens = torch.tensor([[3, 1, 4, 5, 9, 2, 3, 1, 4, 5, 9, 2]])  # half = 6, no repeat inside the first half
    half, length = 6, 12
    previous = one_hot_pattern(length, lambda i: max(i - 1, 0))
    induction = one_hot_pattern(length, lambda i: i - half + 1 if i >= half else i)
    duplicate = one_hot_pattern(length, lambda i: i - half if i >= half else i)  # the off-by-one mistake
    assert previous_token_score(previous).item() == 1.0
    assert induction_score(induction, tokens).item() == 1.0
    assert induction_score(duplicate, tokens).item() == 0.0
    assert previous_token_score(induction).item() == 0.0


def test_induction_targets_follow_every_earlier_occurrence():
    tokens = torch.tensor([[7, 8, 7, 9, 7]])
    targets = induction_targets(tokens)[0]
    assert targets[2].nonzero().flatten().tolist() == [1]  # 7 at 0 is followed by 8
    assert targets[4].nonzero().flatten().tolist() == [1, 3]  # 7 at 0 and at 2
    assert not targets[:2].any() and not targets[3].any()
    with pytest.raises(ValueError, match="no token occurs twice"):
        induction_score(torch.ones(1, 1, 3, 3) / 3, torch.tensor([[1, 2, 3]]))


def test_phase_change_step_uses_a_moving_mean():
    losses = [4.0] * 50 + [0.5] * 50
    assert phase_change_step(losses, level=2.0, window=10) == 56  # the mean of steps 46..55 is 2.25 + …
    assert phase_change_step(losses, level=0.1, window=10) is None


def test_attention_only_blocks_have_no_feed_forward():
    set_seed(0)
    model = GPT(GPTConfig(vocab_size=5, block_size=8, d_model=8, num_heads=2, feed_forward=False)).double()
    names = {name for name, _ in model.named_parameters()}
    assert not any("linear" in name or "norm2" in name for name in names)
    block, x = model.blocks[0], torch.randn(1, 4, 8, dtype=torch.float64)
    torch.testing.assert_close(block(x), x + block.self_attn(block.norm1(x))[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_recipe_grows_an_induction_head_in_layer_1(seed):
    """The lesson's claims on three seeds: the repeated half is learned, the first half is not, the head with the top
    induction score sits in layer 1 and the top previous-token head in layer 0, and the loss drops suddenly (about
    11 s a seed on one idle core)."""
    recipe = InductionRecipe()
    model, history = train_induction_model(recipe, seed=seed)
    tokens = repeated_tokens(200, 10, recipe.vocab_size, torch.Generator().manual_seed(100 + seed))
    with torch.no_grad():
        first, repeated = half_losses(model(tokens), tokens)
    assert repeated.item() < 0.5
    assert first.item() > uniform_loss(recipe.vocab_size) - 0.1
    weights = attention_patterns(model, tokens)  # (layers, batch, heads, T, T)
    induction = torch.stack([induction_score(w, tokens) for w in weights])  # (layers, heads)
    previous = torch.stack([previous_token_score(w) for w in weights])
    assert divmod(int(induction.argmax()), recipe.num_heads)[0] == 1
    assert divmod(int(previous.argmax()), recipe.num_heads)[0] == 0
    assert induction.max().item() > 0.6 and previous.max().item() > 0.3
    plateau_end = phase_change_step(history.repeated_half, 2.0)  # the lesson's phase-change bounds
    drop_end = phase_change_step(history.repeated_half, 0.7)
    assert plateau_end >= 150 and drop_end - plateau_end <= 250 and drop_end - plateau_end < plateau_end / 2
