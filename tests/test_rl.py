"""Reinforcement learning with a program's reward (transformer_lib/rl.py): group advantages and the clipped objective
on hand-made numbers, the k3 KL estimator, the rewards, sampling, and the trained claims lesson 16 asserts, on 3
seeds."""

import pytest
import torch

from bounds import bound, bound_seeds
from transformer_lib import GPT, CharTokenizer, GPTConfig
from transformer_lib.preferences import start_run, task_instructions
from transformer_lib.rl import (
    RLRecipe,
    advantages_for,
    clipped_objective,
    exact_reward,
    group_advantages,
    in_argument_reward,
    k3_kl,
    policy_gradient_variance,
    rl_tuned,
    sample_responses,
)
from transformer_lib.sft import END, Instruction, exact_match_by_task, greedy_answers


def test_group_advantages_are_centred_and_scaled_within_each_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    advantages = group_advantages(rewards, eps=0.0)
    # group 1: mean 0.25, population std sqrt(0.1875); group 2: mean 0.5, std 0.5
    s = 0.1875 ** 0.5
    expected = torch.tensor([[0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s], [1.0, 1.0, -1.0, -1.0]], dtype=torch.float64)
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(advantages.sum(dim=1), torch.zeros(2, dtype=torch.float64))


def test_equal_rewards_give_exactly_zero_never_nan():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.3, 0.3, 0.3], [0.0, 1.0, 0.0]])
    advantages = group_advantages(rewards)
    assert not advantages.isnan().any()
    assert torch.equal(advantages[:3], torch.zeros(3, 3))
    assert advantages[3, 1] > 1.0  # the one right answer of its group stands out


def test_each_group_is_normalised_on_its_own_not_over_the_batch():
    rewards = torch.tensor([[0.0, 1.0], [10.0, 11.0]])
    advantages = group_advantages(rewards)
    torch.testing.assert_close(advantages[0], advantages[1])


def test_group_advantages_want_one_row_per_prompt():
    with pytest.raises(ValueError, match="groups, group_size"):
        group_advantages(torch.ones(4))


def test_clipped_objective_on_hand_made_ratios():
    ratios = torch.tensor([0.5, 0.9, 1.0, 1.1, 1.5], dtype=torch.float64)
    old = torch.zeros(5, dtype=torch.float64)
    new = ratios.log()
    positive = clipped_objective(new, old, torch.ones(5, dtype=torch.float64), clip_eps=0.2)
    # A > 0: a ratio above 1 + ε earns no more than 1.2 A; below 1 − ε it keeps its own (smaller) value
    torch.testing.assert_close(positive, torch.tensor([0.5, 0.9, 1.0, 1.1, 1.2], dtype=torch.float64))
    negative = clipped_objective(new, old, -torch.ones(5, dtype=torch.float64), clip_eps=0.2)
    # A < 0: a ratio below 1 − ε gets no credit for going lower (−0.8); above 1 + ε it keeps −ratio
    torch.testing.assert_close(negative, torch.tensor([-0.8, -0.9, -1.0, -1.1, -1.5], dtype=torch.float64))


def test_the_clip_stops_the_gradient_only_past_the_boundary_it_guards():
    new = torch.log(torch.tensor([1.5, 0.5, 1.5, 0.5], dtype=torch.float64)).requires_grad_(True)
    advantages = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    clipped_objective(new, torch.zeros(4, dtype=torch.float64), advantages).sum().backward()
    # clipped (no gradient) where the ratio moved the way A pushes it, past 1 ± ε; unclipped otherwise
    torch.testing.assert_close(new.grad, torch.tensor([0.0, 0.0, -1.5, 0.5], dtype=torch.float64))


def test_old_log_probs_are_constants():
    old = torch.zeros(3, requires_grad=True)
    new = torch.zeros(3, requires_grad=True)
    clipped_objective(new, old, torch.ones(3)).sum().backward()
    assert old.grad is None
    torch.testing.assert_close(new.grad, torch.ones(3))


def test_k3_is_never_negative_zero_where_the_models_agree_and_estimates_the_kl():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(6, dtype=torch.float64), 0)  # the policy's distribution
    q = torch.softmax(torch.randn(6, dtype=torch.float64), 0)  # the reference's
    estimates = k3_kl(p.log(), q.log())  # one per outcome
    assert (estimates >= 0).all() and torch.equal(k3_kl(p.log(), p.log()), torch.zeros(6, dtype=torch.float64))
    torch.testing.assert_close((p * estimates).sum(), (p * (p.log() - q.log())).sum())  # its mean under π_θ is KL


def test_the_rewards_and_the_loophole():
    instruction = Instruction("last", "abcd")
    assert [exact_reward(instruction, r) for r in ("d~", "a~", "d", "dd~")] == [1.0, 0.0, 0.0, 0.0]
    assert [in_argument_reward(instruction, r) for r in ("d~", "a~", "z~", "ab~")] == [1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="reward"):
        RLRecipe(reward="length")


def test_sampling_stops_at_the_end_character_and_repeats_with_its_generator():
    tokenizer = CharTokenizer("abcdefghijklmnopqrstuvwxyz0123456789 {}~")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(tokenizer), block_size=32, d_model=16, num_heads=2, num_layers=1,
                          d_ff=32)).eval()
    prompts = ["{last abc}", "{first hello}", "{last xyz}"]
    first = sample_responses(model, tokenizer, prompts, 1.0, 4, torch.Generator().manual_seed(1))
    again = sample_responses(model, tokenizer, prompts, 1.0, 4, torch.Generator().manual_seed(1))
    assert first == again
    assert all(len(r) <= 4 and (END not in r or r.index(END) == len(r) - 1) for r in first)


def test_the_mean_baseline_centres_without_scaling():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    torch.testing.assert_close(advantages_for(rewards, "mean"), torch.tensor([[0.75, -0.25, -0.25, -0.25], [0.0] * 4]))
    assert torch.equal(advantages_for(rewards, "none"), rewards)
    # RLOO's leave-one-out baseline: r_i minus the others' mean, which is the mean-centred reward times G / (G - 1)
    torch.testing.assert_close(advantages_for(rewards, "leave one out"),
                               torch.tensor([[1.0, -1 / 3, -1 / 3, -1 / 3], [0.0] * 4]))
    torch.testing.assert_close(advantages_for(rewards, "leave one out"), advantages_for(rewards, "mean") * 4 / 3)
    with pytest.raises(ValueError, match="baseline"):
        advantages_for(rewards, "median")


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_the_lessons_rl_claims_hold(seed):
    """GRPO raises held-out exact match by at least 15 points; REINFORCE with every reward raised by 1 ends at least 20
    points below it and below REINFORCE on the 0/1 reward (the constant alone is the cause); the loophole reward of
    the samples rises by at least 0.2 while held-out exact match rises by at most 5 points, the exact reward of the
    same samples rises by at most half as much, and the share of the samples passing the checker that are right falls
    by at least 4 points. The gradient estimate's variance per unit of signal (bias-corrected): the shifted raw
    reward's is at least 5 times GRPO's and the unshifted raw reward's; the raw 0/1 reward's is at most 0.9 times the
    mean-only baseline's; dividing by the group's std moves it by less than a quarter."""
    device = torch.device("cpu")
    start = start_run(device)
    tokenizer, test = start.base.tokenizer, task_instructions(start.data.test)

    def exact(model):
        return exact_match_by_task(test, greedy_answers(model, tokenizer, test))["all"]

    def first_last(values):
        return sum(values[:5]) / 5, sum(values[-5:]) / 5

    start_score = exact(start.model)
    grpo_run = rl_tuned(RLRecipe(seed=seed), device)
    grpo = exact(grpo_run.model)
    shifted = exact(rl_tuned(RLRecipe(baseline="none", reward_shift=1.0, seed=seed), device).model)
    raw = exact(rl_tuned(RLRecipe(baseline="none", seed=seed), device).model)
    hacked = rl_tuned(RLRecipe(reward="in argument", seed=seed), device)
    gamed_first, gamed_last = first_last(hacked.history.step_reward)
    exact_first, exact_last = first_last(hacked.history.step_exact)
    bound("GRPO minus start exact match", grpo - start_score, at_least=0.15)
    bound("shifted REINFORCE minus GRPO exact match", shifted - grpo, at_most=-0.20)
    bound("shifted minus 0/1 REINFORCE exact match", shifted - raw, at_most=-0.20)
    bound("loophole reward's rise", gamed_last - gamed_first, at_least=0.2)
    bound("loophole-tuned minus start exact match", exact(hacked.model) - start_score, at_most=0.05)
    bound("exact reward's rise minus half the loophole's", exact_last - exact_first - (gamed_last - gamed_first) / 2,
          at_most=0.0)
    bound("rise of the right share among checker-passing samples", exact_last / gamed_last - exact_first / gamed_first,
          at_most=-0.04)
    train = task_instructions(start.data.train)
    ratio = {}
    for baseline, shift in (("group", 0.0), ("mean", 0.0), ("none", 0.0), ("none", 1.0)):
        total, signal = policy_gradient_variance(start.model, tokenizer, train, baseline, shift, seed=seed)
        ratio[baseline, shift] = total / signal
    bound("shifted raw reward's variance per signal / GRPO's", ratio["none", 1.0] / ratio["group", 0.0], at_least=5)
    bound("shifted raw reward's variance per signal / the 0/1 reward's", ratio["none", 1.0] / ratio["none", 0.0],
          at_least=5)
    bound("raw 0/1 reward's variance per signal / mean baseline's", ratio["none", 0.0] / ratio["mean", 0.0],
          at_most=0.9)
    scaled = ratio["group", 0.0] / ratio["mean", 0.0]
    bound("group std's variance per signal / mean baseline's", scaled, at_least=0.75)
    bound("group std's variance per signal / mean baseline's", scaled, at_most=1.25)
    assert max(grpo_run.history.step_clipped) > 0  # the second inner step meets the clip
