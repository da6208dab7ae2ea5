"""Induction heads: the repeated-token task, an attention-only GPT trained on it, and the two head scores.

The task: a sequence of random tokens whose second half repeats the first. The first half cannot be predicted
(every token is drawn uniformly from V, so the best loss there is ln V); from the second token of the repeat on,
each next token is the one that followed the current token's previous occurrence. A two-layer attention-only model
learns to copy it with an **induction head** (Elhage et al., 2021; Olsson et al., 2022): a head in layer 0 copies
each token's predecessor into its position (a **previous-token head**); a head in layer 1 then matches the current
token against that copied predecessor (its keys read what the layer-0 head wrote: K-composition) and attends to
the token after the previous occurrence.

The half-length varies from batch to batch, so the position of the repeat never gives the answer away: a head that
attended a fixed distance back would be right for one length only. The recipe starts the model's learned position
table at lesson 04's sinusoids (training then changes it like any weight): "one position back" is then the same
linear map at every position (lesson 04), which a previous-token head needs.

Shape legend: batch, T = positions (2 · half), heads, V = vocabulary size.
"""

from __future__ import annotations

import math
import string
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .device import set_seed, single_thread
from .gpt import GPT, GPTConfig
from .positions import sinusoidal_encoding


@dataclass
class InductionRecipe:
    """The task and the model of lesson 13: halves of ``min_half`` to ``max_half`` random tokens over
    ``vocab_size`` ids, an attention-only GPT of ``num_layers`` × ``num_heads`` heads, trained ``steps`` AdamW
    steps of ``batch_size`` fresh sequences at learning rate ``lr``; ``sinusoidal_start``: the learned position
    table starts at lesson 04's sinusoidal encoding instead of random numbers."""

    vocab_size: int = 64
    min_half: int = 4
    max_half: int = 16
    d_model: int = 64
    num_heads: int = 2
    num_layers: int = 2
    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    sinusoidal_start: bool = True

    def model_config(self) -> GPTConfig:
        """An attention-only GPT (``feed_forward=False``) whose context fits the longest sequence."""
        return GPTConfig(
            vocab_size=self.vocab_size, block_size=2 * self.max_half, d_model=self.d_model,
            num_heads=self.num_heads, num_layers=self.num_layers, feed_forward=False,
        )


SYMBOLS = string.ascii_lowercase + string.ascii_uppercase + string.digits + ".!"  # 64 printable names of ids


def encode_symbols(text: str, vocab_size: int) -> torch.Tensor:
    """A typed sequence -> (T,) token ids, one per character: ``a`` … ``z`` are ids 0 … 25, then ``A`` … ``Z``,
    ``0`` … ``9``, ``.`` and ``!`` (ids 0 … 63, the first ``vocab_size`` of :data:`SYMBOLS`)."""
    allowed = SYMBOLS[:vocab_size]
    unknown = sorted(set(text) - set(allowed))
    if unknown:
        raise ValueError(f"characters {unknown} are not tokens of this model: type only {allowed!r}")
    return torch.tensor([allowed.index(char) for char in text], dtype=torch.long)


def repeated_tokens(batch_size: int, half: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    """(batch, 2 · half) random token ids, each row's second half a copy of its first."""
    if half < 2:
        raise ValueError(f"half={half} is too short: a repeat needs at least 2 tokens per half")
    first = torch.randint(vocab_size, (batch_size, half), generator=generator)  # (batch, half)
    return torch.cat((first, first), dim=1)  # (batch, 2 · half)


def half_losses(logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean next-token loss (nats) on each half of repeated sequences: logits (batch, T, V), tokens (batch, T).

    First half: the predictions of tokens 1 … half − 1 (token 0 has no prediction). Repeated half: tokens half + 1
    … T − 1; token ``half``, the first of the repeat, is left out: nothing before it announces that the repeat
    starts there.
    """
    half = tokens.shape[1] // 2
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")  # (batch, T - 1)
    return losses[:, : half - 1].mean(), losses[:, half:].mean()  # target i sits at column i - 1


@dataclass
class InductionHistory:
    """What :func:`train_induction_model` records at every step, on that step's fresh batch: the loss on each half
    (every batch is new random data, so these are held-out losses too)."""

    first_half: list[float] = field(default_factory=list)
    repeated_half: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_induction_model(recipe: InductionRecipe | None = None, seed: int = 0) -> tuple[GPT, InductionHistory]:
    """Build and train the recipe's model on the CPU with one thread (tiny matrices gain nothing from more); the
    seed fixes the weights and the data, so a run is repeatable on one machine. Returns the model in eval mode."""
    recipe = recipe or InductionRecipe()
    set_seed(seed)
    model = GPT(recipe.model_config())
    if recipe.sinusoidal_start:
        with torch.no_grad():
            model.position_embedding.weight.copy_(sinusoidal_encoding(2 * recipe.max_half, recipe.d_model))
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr)
    generator = torch.Generator().manual_seed(seed)
    history = InductionHistory()
    started = time.perf_counter()
    with single_thread():
        model.train()
        for _ in range(recipe.steps):
            half = int(torch.randint(recipe.min_half, recipe.max_half + 1, (1,), generator=generator))
            tokens = repeated_tokens(recipe.batch_size, half, recipe.vocab_size, generator)  # (batch, 2 · half)
            logits = model(tokens)  # (batch, T, V)
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            first, repeated = half_losses(logits.detach(), tokens)
            history.first_half.append(first.item())
            history.repeated_half.append(repeated.item())
    history.seconds = time.perf_counter() - started
    return model.eval(), history


def phase_change_step(losses: list[float], level: float, window: int = 25) -> int | None:
    """The first step at which the mean of the last ``window`` losses falls below ``level``; None if it never does.
    A moving mean, because single batches are noisy."""
    for step in range(window, len(losses) + 1):
        if sum(losses[step - window : step]) / window < level:
            return step
    return None


def uniform_loss(vocab_size: int) -> float:
    """ln V: the loss of a predictor that spreads its probability evenly over V tokens."""
    return math.log(vocab_size)


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the token just before: the weight from query i to key i − 1, averaged over
    the queries 1 … T − 1 and the batch. ``weights`` (batch, heads, T, T) -> (heads,)."""
    length = weights.shape[-1]
    query = torch.arange(1, length)  # (T - 1,)
    return weights[..., query, query - 1].mean(dim=(0, -1))  # (heads,)


def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    """Where an induction head should look: True at (query i, key j + 1) for every earlier occurrence j < i of the
    query's token (the token *after* it, not the occurrence itself). ``tokens`` (batch, T) -> (batch, T, T) bool;
    keys j + 1 ≤ i only, so the pattern stays causal."""
    length = tokens.shape[-1]
    same = tokens[..., :, None] == tokens[..., None, :]  # (batch, T_q, T_k): query token == key token
    earlier = same & torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril(-1)  # keys j < i
    targets = torch.zeros_like(earlier)
    targets[..., :, 1:] = earlier[..., :, :-1]  # shift each occurrence j to the key after it, j + 1
    return targets  # (batch, T, T)


def induction_score(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the token after an earlier occurrence of the current token: the summed
    weight on :func:`induction_targets`, averaged over the queries that have an earlier occurrence and the batch.

    ``weights`` (batch, heads, T, T), ``tokens`` (batch, T) -> (heads,). A sequence without a repeated token has
    no such query and raises a ValueError.
    """
    targets = induction_targets(tokens)  # (batch, T, T)
    has_earlier = targets.any(dim=-1)  # (batch, T): queries whose token occurred before
    if not has_earlier.any():
        raise ValueError("no token occurs twice in these sequences: an induction score needs a repeat, e.g. "
                         "repeated_tokens(...) or a text with a repeated word")
    on_targets = (weights * targets[:, None]).sum(dim=-1)  # (batch, heads, T)
    chosen = has_earlier[:, None].expand_as(on_targets)  # (batch, heads, T)
    return (on_targets * chosen).sum(dim=(0, 2)) / has_earlier.sum()  # (heads,)
