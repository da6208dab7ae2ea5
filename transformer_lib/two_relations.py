"""Why several heads: a task that needs two relations at once, learned by one attention layer with one head of width
d_model or with two heads of width d_model/2 (the same parameters). Lesson 06 trains both.

Each position i of a sequence carries three symbols: its key k_i, its value v_i and a query q_i, which equals the key
of one other position j (never i or i - 1). Position i must output two things: the value of the previous position,
v_{i-1} (a relation by position), and the value of the position whose key matches its query, v_j (a relation by
content). The model is an embedding, one attention layer with a residual connection and two linear read-outs, with
no feed-forward network, so whatever reaches a read-out is one attention output per position.

Shape legend: batch, T = sequence length, V = number of values, d_model = model width.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .device import set_seed, single_thread
from .multi_head import MultiHeadAttention, record_attention

RELATIONS = ("previous", "match")  # the previous position's value; the value under the key the query names


@dataclass(frozen=True)
class TwoRelationsTask:
    """Sizes of the task: ``length`` positions, keys drawn without repetition from ``num_keys``, values from
    ``num_values``."""

    length: int = 8
    num_keys: int = 8
    num_values: int = 8

    def __post_init__(self) -> None:
        if self.length < 3 or self.num_keys < self.length or self.num_values < 2:
            raise ValueError(
                f"length={self.length}, num_keys={self.num_keys}, num_values={self.num_values}: a query needs a "
                "position other than itself and the previous one (length >= 3), every position its own key "
                "(num_keys >= length), and there must be at least 2 values, e.g. TwoRelationsTask(8, 8, 8)"
            )


@dataclass
class TwoRelationsBatch:
    """Inputs, both targets and the named positions, each (batch, T); ``previous`` at position 0 is -1 (no previous
    position)."""

    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    previous: torch.Tensor
    match: torch.Tensor
    partner: torch.Tensor  # the position j whose key each query names


def two_relations_batch(task: TwoRelationsTask, batch_size: int, generator: torch.Generator) -> TwoRelationsBatch:
    """Draw ``batch_size`` sequences: distinct keys, random values, and for each position a query that names the key
    of another position j, drawn among all positions but i and i - 1."""
    T = task.length
    keys = torch.rand(batch_size, task.num_keys, generator=generator).argsort(-1)[:, :T]  # (batch, T), distinct
    values = torch.randint(task.num_values, (batch_size, T), generator=generator)  # (batch, T)
    offsets = torch.randint(1, T - 1, (batch_size, T), generator=generator)  # 1 … T-2: never 0 (i) nor T-1 (i-1)
    partner = (torch.arange(T) + offsets) % T  # (batch, T): the position j whose key each query names
    queries = keys.gather(1, partner)  # (batch, T)
    previous = torch.cat([torch.full((batch_size, 1), -1), values[:, :-1]], dim=1)  # (batch, T)
    return TwoRelationsBatch(keys, values, queries, previous, values.gather(1, partner), partner)


class TwoRelationsModel(nn.Module):
    """Embeddings of key, value, query and position, summed; one ``MultiHeadAttention`` with a residual connection;
    one linear read-out per relation. With ``num_heads`` 1 or 2 at the same ``d_model`` the parameters are the same."""

    def __init__(self, task: TwoRelationsTask, d_model: int, num_heads: int):
        super().__init__()
        self.key_embedding = nn.Embedding(task.num_keys, d_model)
        self.value_embedding = nn.Embedding(task.num_values, d_model)
        self.query_embedding = nn.Embedding(task.num_keys, d_model)
        self.position_embedding = nn.Embedding(task.length, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.previous_readout = nn.Linear(d_model, task.num_values)
        self.match_readout = nn.Linear(d_model, task.num_values)

    def forward(self, batch: TwoRelationsBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (batch, T, V) for the previous position's value and for the matching key's value."""
        positions = torch.arange(batch.keys.shape[1], device=batch.keys.device)  # (T,)
        x = (self.key_embedding(batch.keys) + self.value_embedding(batch.values) + self.query_embedding(batch.queries)
             + self.position_embedding(positions))  # (batch, T, d_model)
        h = x + self.attention(x, x, x, need_weights=False)[0]  # (batch, T, d_model)
        return self.previous_readout(h), self.match_readout(h)  # (batch, T, V) each


def _check_relations(relations: tuple[str, ...]) -> None:
    """Raise a ValueError unless ``relations`` names one or both of :data:`RELATIONS`, each once."""
    if not relations or len(set(relations)) != len(relations) or not set(relations) <= set(RELATIONS):
        raise ValueError(f"relations={relations!r}: name one or both of {RELATIONS}, each once, "
                         "e.g. ('match',) to train on the value under the named key alone")


def two_relations_loss(model: TwoRelationsModel, batch: TwoRelationsBatch,
                       relations: tuple[str, ...] = RELATIONS) -> torch.Tensor:
    """The sum of the cross-entropies of ``relations`` (both by default; position 0 has no previous value and is
    left out of "previous")."""
    _check_relations(relations)
    previous_logits, match_logits = model(batch)  # (batch, T, V) each
    losses = {
        "previous": F.cross_entropy(previous_logits.flatten(0, 1), batch.previous.flatten(), ignore_index=-1),
        "match": F.cross_entropy(match_logits.flatten(0, 1), batch.match.flatten()),
    }
    return sum(losses[name] for name in relations)


@torch.no_grad()
def two_relations_accuracy(model: TwoRelationsModel, batch: TwoRelationsBatch) -> dict[str, float]:
    """Share of positions 1 … T-1 whose previous value, matching value, and both, the model's argmax gets right."""
    previous_logits, match_logits = model(batch)  # (batch, T, V) each
    previous_right = (previous_logits.argmax(-1) == batch.previous)[:, 1:]  # (batch, T-1)
    match_right = (match_logits.argmax(-1) == batch.match)[:, 1:]  # (batch, T-1)
    return {"previous": previous_right.float().mean().item(), "match": match_right.float().mean().item(),
            "both": (previous_right & match_right).float().mean().item()}



@torch.no_grad()
def head_roles(model: TwoRelationsModel, batch: TwoRelationsBatch) -> dict[str, list[float]]:
    """Which relation each head follows: per head, the share of positions 1 … T-1 whose largest attention weight
    falls on the previous position ("previous") and on the position whose key the query names ("match")."""
    weights = record_attention(model, batch)["attention"]  # (batch, heads, T, T)
    picked = weights.argmax(-1)[:, :, 1:]  # (batch, heads, T-1): the position each query position weights most
    previous = torch.arange(batch.keys.shape[1] - 1, device=picked.device)  # (T-1,): position i - 1 for i = 1 … T-1
    return {"previous": (picked == previous).float().mean(dim=(0, 2)).tolist(),
            "match": (picked == batch.partner[:, None, 1:]).float().mean(dim=(0, 2)).tolist()}

@dataclass
class TwoRelationsHistory:
    """Per evaluation: the step and the held-out accuracies of :func:`two_relations_accuracy`; the training time."""

    steps: list[int] = field(default_factory=list)
    previous: list[float] = field(default_factory=list)
    match: list[float] = field(default_factory=list)
    both: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_two_relations(
    num_heads: int, seed: int = 0, task: TwoRelationsTask | None = None, d_model: int = 64, steps: int = 150,
    batch_size: int = 64, lr: float = 1e-2, eval_every: int = 25, eval_size: int = 1000,
    relations: tuple[str, ...] = RELATIONS,
) -> tuple[TwoRelationsModel, TwoRelationsHistory]:
    """Train a :class:`TwoRelationsModel` with ``num_heads`` heads (Adam at a constant ``lr``, fresh batches from a
    generator seeded with ``seed``) on the loss of ``relations`` (both by default; ``("match",)`` is the control
    with the relation by content alone) and measure it on ``eval_size`` held-out sequences before the first step,
    every ``eval_every`` steps and after the last. On the CPU, one thread: the matrices are tiny."""
    _check_relations(relations)
    task = task or TwoRelationsTask()
    set_seed(seed)
    model = TwoRelationsModel(task, d_model, num_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    generator = torch.Generator().manual_seed(seed)
    held_out = two_relations_batch(task, eval_size, torch.Generator().manual_seed(10_000 + seed))
    history = TwoRelationsHistory()

    def evaluate(step: int) -> None:
        history.steps.append(step)
        for name, accuracy in two_relations_accuracy(model, held_out).items():
            getattr(history, name).append(accuracy)

    started = time.perf_counter()
    with single_thread():
        evaluate(0)
        for step in range(1, steps + 1):
            loss = two_relations_loss(model, two_relations_batch(task, batch_size, generator), relations)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step % eval_every == 0 or step == steps:
                evaluate(step)
    history.seconds = time.perf_counter() - started
    return model, history
