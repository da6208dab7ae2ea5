"""Induction heads: the repeated-token task, an attention-only GPT trained on it, and the heads' scores.

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
from .interpret import attention_patterns
from .masks import causal_mask
from .model_cache import cached_training
from .positions import sinusoidal_encoding


@dataclass
class InductionRecipe:
    """The task and the model of lesson 13: halves of ``min_half`` to ``max_half`` random tokens over
    ``vocab_size`` ids, an attention-only GPT of ``num_layers`` × ``num_heads`` heads, trained ``steps`` AdamW
    steps of ``batch_size`` fresh sequences at learning rate ``lr``; ``sinusoidal_start``: the learned position
    table starts at lesson 04's sinusoidal encoding instead of random numbers; ``score_every``: how many steps apart
    the heads' scores are measured during training."""

    vocab_size: int = 64
    min_half: int = 4
    max_half: int = 16
    d_model: int = 64
    num_heads: int = 2
    num_layers: int = 2
    steps: int = 900  # the phase change ends between steps 490 and 630 on seeds 0-7
    batch_size: int = 32
    lr: float = 2e-3  # at 3e-3 seed 3 ended it after step 600, its induction score's largest rise after the drop
    sinusoidal_start: bool = True
    score_every: int = 25

    @property
    def probe_half(self) -> int:
        """The half-length of the probe batch: the middle of the trained range."""
        return (self.min_half + self.max_half) // 2

    def model_config(self) -> GPTConfig:
        """An attention-only GPT (``feed_forward=False``) whose context fits the longest sequence."""
        return GPTConfig(
            vocab_size=self.vocab_size, block_size=2 * self.max_half, d_model=self.d_model,
            num_heads=self.num_heads, num_layers=self.num_layers, feed_forward=False,
        )


PROBE_SIZE = 64  # repeated sequences in the fixed batch on which training measures the heads' scores
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
    """What :func:`train_induction_model` records. At every step, on that step's fresh batch: the loss on each half
    (every batch is new random data, so these are held-out losses too). Before the first step and after every
    ``score_every`` steps (the steps in ``score_steps``), on one fixed probe batch of repeated sequences
    (:func:`head_scores`): the highest induction score among the last layer's heads (layer 1 in a two-layer model,
    where an induction head can form) and the highest previous-token score among layer 0's heads."""

    first_half: list[float] = field(default_factory=list)
    repeated_half: list[float] = field(default_factory=list)
    score_steps: list[int] = field(default_factory=list)
    last_layer_induction: list[float] = field(default_factory=list)
    layer_0_previous: list[float] = field(default_factory=list)
    seconds: float = 0.0


def probe_batch(recipe: InductionRecipe, seed: int) -> torch.Tensor:
    """The fixed batch on which :func:`train_induction_model` scores the heads during training: ``PROBE_SIZE``
    repeated sequences of half ``recipe.probe_half``, (64, 2 · probe_half), drawn apart from the training data."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    return repeated_tokens(PROBE_SIZE, recipe.probe_half, recipe.vocab_size, generator)  # (64, 2 · probe_half)


def train_induction_model(recipe: InductionRecipe | None = None, seed: int = 0) -> tuple[GPT, InductionHistory]:
    """Build and train the recipe's model on the CPU with one thread (tiny matrices gain nothing from more); the
    seed fixes the weights and the data, so a run is repeatable on one machine. Returns the model in eval mode.
    A run already in the model cache is loaded instead (:mod:`~transformer_lib.model_cache`)."""
    recipe = recipe or InductionRecipe()

    def build() -> GPT:
        set_seed(seed)
        model = GPT(recipe.model_config())
        if recipe.sinusoidal_start:
            with torch.no_grad():
                model.position_embedding.weight.copy_(sinusoidal_encoding(2 * recipe.max_half, recipe.d_model))
        return model

    def train(model: GPT) -> InductionHistory:
        optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, foreach=True)
        generator = torch.Generator().manual_seed(seed)
        probe = probe_batch(recipe, seed)  # (64, 2 · probe_half)
        history = InductionHistory()

        def record_scores(step: int) -> None:
            induction, previous = head_scores(model, probe)  # (layers, heads) each
            history.score_steps.append(step)
            history.last_layer_induction.append(induction[-1].max().item())
            history.layer_0_previous.append(previous[0].max().item())

        started = time.perf_counter()
        with single_thread():
            record_scores(0)
            for step in range(1, recipe.steps + 1):
                model.train()
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
                if step % recipe.score_every == 0:
                    record_scores(step)  # puts the model in eval mode, without gradients
        history.seconds = time.perf_counter() - started
        model.eval()
        return history

    model, history = cached_training("induction", {"recipe": recipe, "seed": seed}, build, train, InductionHistory,
                                     torch.device("cpu"))
    return model, history


def phase_change_step(losses: list[float], level: float, window: int = 25) -> int | None:
    """The first step at which the mean of the last ``window`` losses falls below ``level``; None if it never does.
    A moving mean, because single batches are noisy."""
    for step in range(window, len(losses) + 1):
        if sum(losses[step - window : step]) / window < level:
            return step
    return None


def fall_per_step(losses: list[float], high: float, low: float, window: int = 25) -> tuple[float, float] | None:
    """How fast the moving mean of ``losses`` (over ``window`` steps) falls, in nats per step, before and during the
    window in which it goes from ``high`` to ``low`` (:func:`phase_change_step`): ``(before, during)``, where
    ``before`` runs from the first mean (at step ``window``) down to ``high``. None if either level is never reached.
    A straight line falls as fast in both; a plateau followed by a drop has ``during`` several times ``before``."""
    start, end = phase_change_step(losses, high, window), phase_change_step(losses, low, window)
    if start is None or end is None:
        return None
    first_mean = sum(losses[:window]) / window
    return (first_mean - high) / (start - window), (high - low) / (end - start)


def uniform_loss(vocab_size: int) -> float:
    """ln V: the loss of a predictor that spreads its probability evenly over V tokens."""
    return math.log(vocab_size)


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the token just before: the weight from query i to key i − 1, averaged over
    the queries 1 … T − 1 and the batch. ``weights`` (batch, heads, T, T) -> (heads,)."""
    length = weights.shape[-1]
    query = torch.arange(1, length)  # (T - 1,)
    return weights[..., query, query - 1].mean(dim=(0, -1))  # (heads,)


def earlier_occurrences(tokens: torch.Tensor) -> torch.Tensor:
    """True at (query i, key j) for every earlier occurrence j < i of the query's token: ``tokens`` (batch, T) ->
    (batch, T, T) bool. Where a duplicate-token head looks."""
    length = tokens.shape[-1]
    same = tokens[..., :, None] == tokens[..., None, :]  # (batch, T_q, T_k): query token == key token
    return same & torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril(-1)  # keys j < i


def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    """Where an induction head should look: True at (query i, key j + 1) for every earlier occurrence j < i of the
    query's token (the token *after* it, not the occurrence itself). ``tokens`` (batch, T) -> (batch, T, T) bool;
    keys j + 1 ≤ i only, so the pattern stays causal."""
    earlier = earlier_occurrences(tokens)  # (batch, T, T)
    targets = torch.zeros_like(earlier)
    targets[..., :, 1:] = earlier[..., :, :-1]  # shift each occurrence j to the key after it, j + 1
    return targets  # (batch, T, T)


def _weight_on(weights: torch.Tensor, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The summed weight on ``targets`` (batch, T, T), averaged over the queries whose token occurred before and
    the batch: ``weights`` (batch, heads, T, T) -> (heads,)."""
    has_earlier = earlier_occurrences(tokens).any(dim=-1)  # (batch, T): queries whose token occurred before
    if not has_earlier.any():
        raise ValueError("no token occurs twice in these sequences: these scores need a repeat, e.g. "
                         "repeated_tokens(...) or a text with a repeated word")
    on_targets = (weights * targets[:, None]).sum(dim=-1)  # (batch, heads, T)
    chosen = has_earlier[:, None].expand_as(on_targets)  # (batch, heads, T)
    return (on_targets * chosen).sum(dim=(0, 2)) / has_earlier.sum()  # (heads,)


def induction_score(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the token after an earlier occurrence of the current token: the summed
    weight on :func:`induction_targets`, averaged over the queries that have an earlier occurrence and the batch.

    ``weights`` (batch, heads, T, T), ``tokens`` (batch, T) -> (heads,). A sequence without a repeated token has
    no such query and raises a ValueError.
    """
    return _weight_on(weights, tokens, induction_targets(tokens))  # (heads,)


def duplicate_token_score(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the earlier occurrences of the current token themselves (keys j, not j + 1),
    averaged like :func:`induction_score`: ``weights`` (batch, heads, T, T), ``tokens`` (batch, T) -> (heads,)."""
    return _weight_on(weights, tokens, earlier_occurrences(tokens))  # (heads,)


def head_scores(model: GPT, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every head's induction and previous-token score on ``tokens`` (batch, T): two (layers, heads) tensors.
    Puts the model in eval mode (``record_attention``)."""
    weights = attention_patterns(model, tokens)  # (layers, batch, heads, T, T)
    induction = torch.stack([induction_score(w, tokens) for w in weights])  # (layers, heads)
    previous = torch.stack([previous_token_score(w) for w in weights])  # (layers, heads)
    return induction, previous


def uniform_attention(length: int) -> torch.Tensor:
    """(T, T) causal weights that spread each query's attention evenly over its prefix: 1 / (i + 1) on keys
    0 … i. A head that reads nothing scores, on average, what these weights score: the chance level of a score."""
    allowed = causal_mask(length).double()  # (T, T): 1 on keys j <= i
    return allowed / allowed.sum(dim=-1, keepdim=True)  # (T, T)
