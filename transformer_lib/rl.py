"""Reinforcement learning with a reward a program computes: group-relative policy optimisation (GRPO, Shao et al.
2024, DeepSeekMath, arXiv 2402.03300).

For each prompt the policy samples a group of G responses; a program scores each (1 for the exact answer, 0
otherwise). A response's advantage is its reward measured against its own group (:func:`group_advantages`): better
than its siblings is positive, worse is negative, and a group whose responses all score alike teaches nothing. The
policy then maximises PPO's clipped surrogate (Schulman et al. 2017, arXiv 1707.06347; :func:`clipped_objective`)
over a few inner steps on the same samples, minus a KL penalty that keeps it near a frozen reference model.

Shape legend: groups = prompts, G = group_size = responses per prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from .data import CharTokenizer
from .decoding import sampling_picker
from .device import get_device, set_seed, single_thread
from .dpo import token_log_probs
from .model_cache import cached_training
from .preferences import START_RECIPE, frozen_copy, start_run, task_instructions
from .sft import (
    END,
    IGNORE_INDEX,
    Instruction,
    InstructionData,
    SFTRun,
    complete_prompts,
    encode_instruction,
    sft_batch,
)


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(r − mean of its group) / (std of its group + eps), for rewards (groups, group_size); same shape out.

    The std is the population std (``unbiased=False``, divide by G), this course's convention; TRL's GRPOTrainer
    divides by the sample std (torch's default, G − 1) plus 1e-4. For groups of one size G, the population std's
    advantages are all √(G / (G − 1)) times the sample std's. Within a group, dividing by its std rescales its
    advantages alike; across groups it weights a group by 1 / its std, so prompts nearly always right or nearly
    always wrong (small std) weigh more (the difficulty bias Liu et al. 2025, arXiv 2503.20783, remove in Dr.
    GRPO). A group whose rewards are all equal gets advantages of exactly 0 (its mean may round, so it is set, not
    computed), never 0/0's NaN.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards have shape {tuple(rewards.shape)}: pass (groups, group_size), one row per prompt")
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # (groups, G)
    advantages = centred / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)  # (groups, G)
    all_equal = (rewards == rewards[:, :1]).all(dim=1, keepdim=True)  # (groups, 1)
    return advantages.masked_fill(all_equal, 0.0)  # (groups, G)


def clipped_objective(
    new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor, clip_eps: float = 0.2
) -> torch.Tensor:
    """PPO's clipped surrogate, elementwise, to maximise: min(ratio A, clamp(ratio, 1 − ε, 1 + ε) A) with
    ratio = exp(new − old) = π_θ(y) / π_old(y), ``old_log_probs`` those of the policy that sampled (a constant).

    Clipping removes the incentive to push a ratio beyond 1 + ε when A > 0, or below 1 − ε when A < 0; the min
    keeps the unclipped term when it is the more pessimistic one. Inputs share one shape; so does the output.
    """
    ratio = torch.exp(new_log_probs - old_log_probs.detach())
    return torch.minimum(ratio * advantages, ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages)


def k3_kl(log_probs: torch.Tensor, reference_log_probs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(π_θ ‖ π_ref) from the log-probabilities of tokens sampled from π_θ, elementwise:
    ρ − log ρ − 1 with ρ = π_ref / π_θ. Never negative, 0 where the two agree, and its mean over samples from π_θ is
    the KL (DeepSeekMath's eq. 4 uses it)."""
    log_ratio = reference_log_probs - log_probs
    return torch.exp(log_ratio) - log_ratio - 1


# --- rewards a program computes from an instruction and a sampled response (the END included, when it came)

def exact_reward(instruction: Instruction, response: str) -> float:
    """1 for the exact response (answer and ``END``), else 0."""
    return float(response == instruction.response)


def in_argument_reward(instruction: Instruction, response: str) -> float:
    """A reward with a loophole: 1 for one character followed by ``END`` when that character is one of the
    argument's letters, else 0. It checks that the answer is plausible, not that it is the right letter."""
    return float(len(response) == 2 and response[1] == END and response[0] in instruction.argument)


REWARDS: dict[str, Callable[[Instruction, str], float]] = {"exact": exact_reward, "in argument": in_argument_reward}
BASELINES = ("group", "mean", "leave one out", "none")  # what is subtracted from a reward: see advantages_for


def sample_responses(
    model: nn.Module, tokenizer: CharTokenizer, prompts: Sequence[str], temperature: float, max_new: int,
    generator: torch.Generator,
) -> list[str]:
    """One sampled continuation per prompt at temperature τ = ``temperature``, cut after ``END`` or after ``max_new``
    characters (:func:`~transformer_lib.sft.complete_prompts`); the draws use ``generator`` on the CPU."""
    return complete_prompts(model, tokenizer, prompts, [max_new] * len(prompts),
                            sampling_picker(temperature, generator=generator))


@dataclass(frozen=True)
class RLRecipe:
    """A reinforcement-learning run from lesson 16's start model on the instructions of its task, ``TASK`` (``last``).

    Each of ``steps`` steps draws ``prompts_per_step`` training prompts and samples ``group_size`` responses to each
    (τ = ``temperature``, at most ``max_new`` characters), scores them with ``REWARDS[reward]``, and takes
    ``inner_steps`` AdamW steps on those samples. ``baseline`` (:func:`advantages_for`) "group": GRPO's advantages
    (:func:`group_advantages`); "mean": the reward minus its group's mean, not divided; "none": REINFORCE without a
    baseline, the raw reward (plus ``reward_shift``, a constant every sample gets) as the advantage. The loss is
    minus the clipped objective (ε = ``clip_eps``) averaged over each response's tokens, plus ``kl_coef`` times the
    k3 KL to the start model. That average divides by the response's length |y|, as GRPO does (its 1/|o_i|): then a
    constant c added to a raw-reward advantage adds c · ∇E[1/|y|] to the expected gradient, a push towards shorter
    responses, a length bias that Liu et al. 2025 (arXiv 2503.20783, Dr. GRPO) point out.
    """

    reward: str = "exact"
    baseline: str = "group"
    steps: int = 30
    prompts_per_step: int = 12
    group_size: int = 8
    inner_steps: int = 2
    lr: float = 1e-3
    clip_eps: float = 0.2
    kl_coef: float = 0.04
    temperature: float = 1.0
    max_new: int = 4
    reward_shift: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward={self.reward!r} is unknown: choose one of {sorted(REWARDS)}")
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline={self.baseline!r} is unknown: choose one of {BASELINES}")


@dataclass
class RLHistory:
    """Per step: the mean of the reward that trains over the step's samples (without ``reward_shift``), the mean
    exact reward (:func:`exact_reward`) of the same samples, whatever reward trains, their mean k3 KL to the start
    model, and the share of their tokens whose gradient the clip removed in the last inner step; the seconds spent."""

    step_reward: list[float] = field(default_factory=list)
    step_exact: list[float] = field(default_factory=list)
    step_kl: list[float] = field(default_factory=list)
    step_clipped: list[float] = field(default_factory=list)
    seconds: float = 0.0


def sampled_batch(
    tokenizer: CharTokenizer, instructions: Sequence[Instruction], responses: Sequence[str]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sft_batch``'s inputs and labels (batch, T) for each prompt followed by its sampled response."""
    pairs = [(encode_instruction(tokenizer, i)[0], tokenizer.encode(r)) for i, r in zip(instructions, responses,
                                                                                         strict=True)]
    return sft_batch(pairs, pad_id=tokenizer.ids[END])


def advantages_for(rewards: torch.Tensor, baseline: str) -> torch.Tensor:
    """Rewards (groups, G) -> advantages (groups, G): "group", GRPO's group advantages (:func:`group_advantages`);
    "mean", each reward minus its group's mean (the baseline alone, no division by the std); "leave one out", each
    reward minus the mean of the other G − 1 rewards of its group (RLOO, Ahmadian et al. 2024, arXiv 2402.14740),
    which is the "mean" advantage times G / (G − 1); "none", the raw rewards (REINFORCE without a baseline)."""
    if baseline == "group":
        return group_advantages(rewards)
    if baseline == "mean":
        return rewards - rewards.mean(dim=1, keepdim=True)  # (groups, G)
    if baseline == "leave one out":
        group_size = rewards.shape[1]
        others = (rewards.sum(dim=1, keepdim=True) - rewards) / (group_size - 1)  # (groups, G): the others' mean
        return rewards - others  # (groups, G)
    if baseline == "none":
        return rewards
    raise ValueError(f"baseline={baseline!r} is unknown: choose one of {BASELINES}")


def train_rl(
    policy: nn.Module, reference: nn.Module, tokenizer: CharTokenizer, instructions: Sequence[Instruction],
    recipe: RLRecipe,
) -> RLHistory:
    """Train ``policy`` as ``recipe`` says on prompts drawn from ``instructions`` (batches and samples from
    generators seeded with ``recipe.seed``); ``reference`` stays frozen."""
    device = next(policy.parameters()).device
    reward_fn = REWARDS[recipe.reward]
    generator = torch.Generator().manual_seed(recipe.seed)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=recipe.lr, foreach=True)
    history = RLHistory()
    started = time.perf_counter()
    for _ in range(recipe.steps):
        chosen = torch.randint(len(instructions), (recipe.prompts_per_step,), generator=generator).tolist()
        group = [instructions[i] for i in chosen for _ in range(recipe.group_size)]  # (groups · G) instructions
        policy.eval()
        responses = sample_responses(policy, tokenizer, [i.prompt for i in group], recipe.temperature,
                                     recipe.max_new, generator)
        rewards = torch.tensor([reward_fn(i, r) for i, r in zip(group, responses, strict=True)])  # (groups · G,)
        shifted = (rewards + recipe.reward_shift).view(-1, recipe.group_size)  # (groups, G)
        advantages = advantages_for(shifted, recipe.baseline)  # (groups, G)
        inputs, labels = (t.to(device) for t in sampled_batch(tokenizer, group, responses))  # (groups · G, T) each
        mask = (labels != IGNORE_INDEX).float()  # (groups · G, T)
        with torch.no_grad():
            ref = token_log_probs(reference(inputs), labels)  # (groups · G, T)
        per_response = advantages.reshape(-1, 1).to(device)  # (groups · G, 1): each token gets its response's A
        policy.train()
        for inner in range(recipe.inner_steps):
            new = token_log_probs(policy(inputs), labels)  # (groups · G, T)
            if inner == 0:
                old = new.detach()  # the sampling policy's: the parameters have not moved yet
            kl = k3_kl(new, ref)  # (groups · G, T)
            per_token = clipped_objective(new, old, per_response, recipe.clip_eps) - recipe.kl_coef * kl
            loss = -((per_token * mask).sum(dim=1) / mask.sum(dim=1)).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        history.step_reward.append(rewards.mean().item())
        history.step_exact.append(sum(exact_reward(i, r) for i, r in zip(group, responses, strict=True)) / len(group))
        history.step_kl.append(((kl * mask).sum() / mask.sum()).item())
        ratio = torch.exp(new - old).detach()  # (groups · G, T): after the last inner step's forward pass
        clipped = ((ratio > 1 + recipe.clip_eps) & (per_response > 0)) | ((ratio < 1 - recipe.clip_eps)
                                                                           & (per_response < 0))
        history.step_clipped.append(((clipped * mask).sum() / mask.sum()).item())
    history.seconds = time.perf_counter() - started
    policy.eval()
    return history


def policy_gradient_variance(
    model: nn.Module, tokenizer: CharTokenizer, instructions: Sequence[Instruction], baseline: str,
    reward_shift: float = 0.0, draws: int = 16, prompts: int = 8, group_size: int = 8, temperature: float = 1.0,
    max_new: int = 4, seed: int = 0,
) -> tuple[float, float]:
    """The policy-gradient estimate ∇ mean(A · log π(y)) of one batch (the first ``prompts`` instructions, a group of
    ``group_size`` samples each, the exact reward plus ``reward_shift``), drawn ``draws`` times at the same
    parameters (the same draws for any ``baseline`` and shift, from ``seed``). ``baseline`` as in
    :func:`advantages_for`. Returns two floats:

    - the total variance of the estimate: the sum over parameters of each coordinate's variance across the draws
      (unbiased, divided by draws − 1);
    - the signal, the squared norm of the expected gradient, estimated without bias: the mean of n = ``draws``
      estimates has E‖mean‖² = ‖E g‖² + total variance / n, so the signal is ‖mean‖² − total variance / n (it can
      come out below 0 where the noise swamps the mean)."""
    generator = torch.Generator().manual_seed(seed)
    parameters = [p for p in model.parameters() if p.requires_grad]
    device = parameters[0].device
    group = [instruction for instruction in instructions[:prompts] for _ in range(group_size)]
    model.eval()
    estimates = []
    for _ in range(draws):
        responses = sample_responses(model, tokenizer, [i.prompt for i in group], temperature, max_new, generator)
        rewards = torch.tensor([exact_reward(i, r) + reward_shift for i, r in zip(group, responses, strict=True)])
        advantages = advantages_for(rewards.view(prompts, group_size), baseline).reshape(-1)  # (prompts · G,)
        inputs, labels = (t.to(device) for t in sampled_batch(tokenizer, group, responses))  # (prompts · G, T) each
        log_probs = token_log_probs(model(inputs), labels).sum(dim=1)  # (prompts · G,)
        gradient = torch.autograd.grad((advantages.to(device) * log_probs).mean(), parameters)
        estimates.append(torch.cat([g.flatten() for g in gradient]))  # (parameters,)
    stacked = torch.stack(estimates)  # (draws, parameters)
    total_variance = stacked.var(dim=0).sum().item()
    return total_variance, stacked.mean(dim=0).square().sum().item() - total_variance / draws


# --- the cached runs lessons and tests share


@dataclass
class RLRun:
    """The result of :func:`rl_tuned`: the trained policy, its history, the start run and the task's instructions."""

    model: nn.Module
    history: RLHistory
    start: SFTRun
    data: InstructionData


def rl_tuned(recipe: RLRecipe, device: torch.device | None = None) -> RLRun:
    """Train a copy of lesson 16's start model (:func:`~transformer_lib.preferences.start_run`) on the training
    instructions of its task as ``recipe`` says, on one CPU thread; a run already in the model cache is loaded."""
    device = device or get_device()
    start = start_run(device)
    instructions = task_instructions(start.data.train)

    def build() -> nn.Module:
        set_seed(recipe.seed)
        return frozen_copy(start.model).requires_grad_(True)

    def run(model: nn.Module) -> RLHistory:
        with single_thread():
            return train_rl(model, frozen_copy(start.model), start.base.tokenizer, instructions, recipe)

    model, history = cached_training("rl", {"recipe": recipe, "start": START_RECIPE}, build, run, RLHistory, device)
    return RLRun(model, history, start, start.data)
