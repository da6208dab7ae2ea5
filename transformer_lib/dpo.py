"""Direct preference optimisation (DPO, Rafailov et al. 2023, arXiv 2305.18290): learning from pairs of a chosen and
a rejected response to the same prompt, without a reward model.

For a prompt x, a chosen response y_w and a rejected one y_l, the policy π (the model being trained) and a frozen
reference π_ref (its copy before training) give each response a sequence log-probability: the sum of the
log-probabilities of the response's tokens, the prompt's tokens left out (:func:`response_log_probs`, on the labels
of :func:`~transformer_lib.sft.sft_batch`). The implicit reward of a response is r̂ = β (log π(y) − log π_ref(y)),
and the loss (the paper's eq. 7) is

    L = −log σ(r̂_w − r̂_l)

(:func:`dpo_loss`). Its gradient, −β σ(r̂_l − r̂_w) [∇log π(y_w) − ∇log π(y_l)], raises the chosen response and lowers
the rejected one, weighted by how wrongly the pair is ranked; β sets how far the policy may move from the reference.

Shape legend: batch = pairs, T = positions, V = vocabulary size.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .data import CharTokenizer
from .device import get_device, set_seed, single_thread
from .model_cache import cached_training
from .preferences import START_RECIPE, frozen_copy, start_run, task_instructions
from .sft import END, IGNORE_INDEX, Instruction, InstructionData, SFTRun, encode_instruction, greedy_answers, sft_batch


def response_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each row's sum of log softmax(logits)[label] over the positions whose label is not ``IGNORE_INDEX``.

    logits (batch, T, V), labels (batch, T) as :func:`~transformer_lib.sft.sft_batch` makes them (prompt and padding
    labels are ``IGNORE_INDEX``), so only the response's tokens count. Returns (batch,).
    """
    return token_log_probs(logits, labels).sum(dim=-1)  # (batch,)


def dpo_loss(
    policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
    reference_rejected: torch.Tensor, beta: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DPO's loss per pair and the implicit rewards, from sequence log-probabilities of the response tokens.

    Each input is (batch,). Returns ``(losses, chosen_rewards, rejected_rewards)``, each (batch,):
    chosen_rewards = β (log π(y_w) − log π_ref(y_w)), rejected_rewards likewise for y_l, and
    losses = −log σ(chosen_rewards − rejected_rewards). The reference's log-probabilities are constants (detached):
    only the policy learns. The reward margin is ``chosen_rewards - rejected_rewards``.
    """
    chosen_rewards = beta * (policy_chosen - reference_chosen.detach())  # (batch,)
    rejected_rewards = beta * (policy_rejected - reference_rejected.detach())  # (batch,)
    losses = -F.logsigmoid(chosen_rewards - rejected_rewards)  # (batch,)
    return losses, chosen_rewards, rejected_rewards


def token_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] at every position, 0 where the label is ``IGNORE_INDEX``: logits (batch, T, V),
    labels (batch, T) -> (batch, T). :func:`response_log_probs` is its sum over positions."""
    if logits.shape[:2] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} disagree: logits must be "
                         "(batch, T, V) for labels (batch, T)")
    kept = labels != IGNORE_INDEX  # (batch, T)
    picked = logits.log_softmax(dim=-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]  # (batch, T); ignored: id 0
    return picked * kept  # (batch, T)


# --- preference pairs and training


@dataclass(frozen=True)
class PreferencePair:
    """A prompt's chosen response (the exact answer) and its rejected one (the start model's own wrong answer)."""

    prompt: str
    chosen: str
    rejected: str


def preference_pairs(model: nn.Module, tokenizer: CharTokenizer, instructions: Sequence[Instruction]) -> list[
        PreferencePair]:
    """A pair for every instruction the model answers wrongly (greedy): chosen the right response, rejected the
    model's answer. A program states the preference: correct over incorrect."""
    answers = greedy_answers(model, tokenizer, instructions)
    return [PreferencePair(i.prompt, i.response, answer) for i, answer in zip(instructions, answers, strict=True)
            if answer != i.response]


def pair_batch(
    tokenizer: CharTokenizer, pairs: Sequence[PreferencePair]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs and labels (batch, T) of the chosen responses, then of the rejected ones, all padded to one length T
    (``sft_batch``: the labels keep the response tokens only)."""
    pad_id = tokenizer.ids[END]
    chosen = [(tokenizer.encode(p.prompt), tokenizer.encode(p.chosen)) for p in pairs]
    rejected = [(tokenizer.encode(p.prompt), tokenizer.encode(p.rejected)) for p in pairs]
    inputs, labels = sft_batch(chosen + rejected, pad_id)  # (2 · batch, T) each
    n = len(pairs)
    return inputs[:n], labels[:n], inputs[n:], labels[n:]


@dataclass
class DPOHistory:
    """Per step: the mean DPO loss, the mean implicit reward margin r̂_w − r̂_l and the share of pairs ranked right
    (margin > 0); the seconds spent."""

    step_loss: list[float] = field(default_factory=list)
    step_margin: list[float] = field(default_factory=list)
    step_ranked_right: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_dpo(
    policy: nn.Module, reference: nn.Module, tokenizer: CharTokenizer, pairs: Sequence[PreferencePair], steps: int,
    beta: float, batch_size: int = 32, lr: float = 1e-3, seed: int = 0,
) -> DPOHistory:
    """``steps`` AdamW steps of :func:`dpo_loss` on batches of ``batch_size`` pairs drawn with a generator seeded
    with ``seed``. ``reference`` is frozen, so its log-probabilities of every pair are computed once, up front."""
    device = next(policy.parameters()).device
    w_inputs, w_labels, l_inputs, l_labels = (t.to(device) for t in pair_batch(tokenizer, pairs))  # (pairs, T) each
    with torch.no_grad():
        reference_w = response_log_probs(reference(w_inputs), w_labels)  # (pairs,)
        reference_l = response_log_probs(reference(l_inputs), l_labels)  # (pairs,)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=lr, foreach=True)
    history = DPOHistory()
    policy.train()
    started = time.perf_counter()
    for _ in range(steps):
        rows = torch.randint(len(pairs), (batch_size,), generator=generator).to(device)  # (batch,)
        inputs = torch.cat((w_inputs[rows], l_inputs[rows]))  # (2 · batch, T): chosen rows, then rejected
        log_probs = response_log_probs(policy(inputs), torch.cat((w_labels[rows], l_labels[rows])))  # (2 · batch,)
        losses, reward_w, reward_l = dpo_loss(log_probs[:batch_size], log_probs[batch_size:], reference_w[rows],
                                              reference_l[rows], beta)
        optimizer.zero_grad(set_to_none=True)
        losses.mean().backward()
        optimizer.step()
        margin = (reward_w - reward_l).detach()  # (batch,)
        history.step_loss.append(losses.mean().item())
        history.step_margin.append(margin.mean().item())
        history.step_ranked_right.append((margin > 0).float().mean().item())
    history.seconds = time.perf_counter() - started
    policy.eval()
    return history


@torch.no_grad()
def answer_kl(policy: nn.Module, reference: nn.Module, tokenizer: CharTokenizer,
              instructions: Sequence[Instruction]) -> float:
    """Mean over the instructions of KL(π ‖ π_ref) between the two models' distributions of the answer's first
    character (the next token after the prompt), in nats: how far the policy moved from the reference."""
    device = next(policy.parameters()).device
    total = 0.0
    for instruction in instructions:
        prompt = encode_instruction(tokenizer, instruction)[0][None].to(device)  # (1, T_p)
        log_p = policy(prompt)[0, -1].log_softmax(dim=-1)  # (V,)
        log_q = reference(prompt)[0, -1].log_softmax(dim=-1)  # (V,)
        total += (log_p.exp() * (log_p - log_q)).sum().item()
    return total / len(instructions)


# --- the cached runs lessons and tests share


@dataclass(frozen=True)
class DPORecipe:
    """A DPO run from lesson 16's start model on the preference pairs of its task's training instructions."""

    beta: float = 1.0
    steps: int = 150
    batch_size: int = 32
    lr: float = 5e-4
    seed: int = 0


@dataclass
class DPORun:
    """The result of :func:`dpo_tuned`: the trained policy, its history, the start run, the pairs and the data."""

    model: nn.Module
    history: DPOHistory
    start: SFTRun
    pairs: list[PreferencePair]
    data: InstructionData


def dpo_tuned(recipe: DPORecipe, device: torch.device | None = None) -> DPORun:
    """Train a copy of the start model (:func:`~transformer_lib.preferences.start_run`) with DPO on
    :func:`preference_pairs` of its task's training instructions, the start model frozen as the reference, on one
    CPU thread; a run already in the model cache is loaded."""
    device = device or get_device()
    start = start_run(device)
    pairs = preference_pairs(start.model, start.base.tokenizer, task_instructions(start.data.train))

    def build() -> nn.Module:
        set_seed(recipe.seed)
        return frozen_copy(start.model).requires_grad_(True)

    def run(model: nn.Module) -> DPOHistory:
        with single_thread():
            return train_dpo(model, frozen_copy(start.model), start.base.tokenizer, pairs, recipe.steps, recipe.beta,
                             recipe.batch_size, recipe.lr, recipe.seed)

    model, history = cached_training("dpo", {"recipe": recipe, "start": START_RECIPE}, build, run, DPOHistory, device)
    return DPORun(model, history, start, pairs, start.data)
