"""Lesson 03's training experiment: one attention layer learns to retrieve the value stored under a key, with and
without the 1/√d_k scale on its scores.

The task: a row holds ``num_pairs`` (key, value) pairs, distinct key symbols out of ``num_symbols``, values out of
``num_values``, and one query symbol equal to one of the keys; the answer is that key's value. The model is one
attention head: each pair becomes one token (its key's embedding plus its value's embedding), the query symbol's
embedding is the only query, and a linear read-out turns the attention output into one logit per value.

Shape legend: B = batch, P = pairs per row, d_model = embedding width, d_k = query/key width, C = number of values.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from .attention import scaled_dot_product_attention
from .device import single_thread


def retrieval_batch(
    batch_size: int, num_pairs: int, num_symbols: int, num_values: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random rows of the task: ``keys`` (B, P) distinct symbols per row, ``values`` (B, P), ``query`` (B,) one of
    the row's keys, ``target`` (B,) the value stored under it. Drawn on the CPU from ``generator``."""
    if num_pairs > num_symbols:
        raise ValueError(f"num_pairs={num_pairs} keys cannot be distinct among num_symbols={num_symbols} symbols: "
                         "use at most as many pairs as symbols")
    keys = torch.rand(batch_size, num_symbols, generator=generator).argsort(dim=-1)[:, :num_pairs]  # (B, P)
    values = torch.randint(num_values, (batch_size, num_pairs), generator=generator)  # (B, P)
    picked = torch.randint(num_pairs, (batch_size,), generator=generator)  # (B,) which pair is asked for
    rows = torch.arange(batch_size)
    return keys, values, keys[rows, picked], values[rows, picked]


class RetrievalAttention(nn.Module):
    """One attention head with learned W^Q, W^K, W^V, embeddings and read-out; ``scaled`` chooses 1/√d_k or 1."""

    def __init__(self, num_symbols: int, num_values: int, d_model: int, d_k: int, scaled: bool):
        super().__init__()
        self.scaled = scaled
        self.symbol_embedding = nn.Embedding(num_symbols, d_model)
        self.value_embedding = nn.Embedding(num_values, d_model)
        self.w_q = nn.Linear(d_model, d_k, bias=False)  # weight.T is W^Q, (d_model, d_k)
        self.w_k = nn.Linear(d_model, d_k, bias=False)  # weight.T is W^K, (d_model, d_k)
        self.w_v = nn.Linear(d_model, d_model, bias=False)  # weight.T is W^V, (d_model, d_v = d_model)
        self.readout = nn.Linear(d_model, num_values)

    def attend(self, keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``keys``, ``values`` (B, P) and ``query`` (B,) -> the attention output (B, d_model), the weights (B, P)
        and the scores softmax turns into them (B, P): q·k/√d_k when ``scaled``, q·k otherwise."""
        pairs = self.symbol_embedding(keys) + self.value_embedding(values)  # (B, P, d_model): one token per pair
        q = self.w_q(self.symbol_embedding(query))[:, None]  # (B, 1, d_k)
        k, v = self.w_k(pairs), self.w_v(pairs)  # (B, P, d_k), (B, P, d_model)
        scale = 1 / math.sqrt(q.shape[-1]) if self.scaled else 1.0
        output, weights = scaled_dot_product_attention(q, k, v, scale=scale)  # (B, 1, d_model), (B, 1, P)
        scores = ((q * scale) @ k.transpose(-2, -1))[:, 0]  # (B, P), computed as the attention function does
        return output[:, 0], weights[:, 0], scores

    def forward(self, keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """``keys``, ``values`` (B, P) and ``query`` (B,) -> logits (B, C) over the values."""
        output, _, _ = self.attend(keys, values, query)  # (B, d_model)
        return self.readout(output)  # (B, C)


@dataclass
class RetrievalHistory:
    """What ``train_retrieval`` records: the training loss of every step (nats), the accuracy on 1000 fresh rows
    after training, beside chance (1 / num_values), and, before the first step, on the first batch, the mean
    largest attention weight of a query and the standard deviation of the scores softmax receives."""

    d_k: int
    scaled: bool
    seed: int
    losses: list[float] = field(default_factory=list)
    accuracy: float = 0.0
    chance: float = 0.0
    seconds: float = 0.0
    initial_largest_weight: float = 0.0
    initial_score_std: float = 0.0


def train_retrieval(
    d_k: int, scaled: bool, seed: int, *, steps: int = 300, batch_size: int = 64, num_pairs: int = 8,
    num_symbols: int = 32, num_values: int = 8, d_model: int = 32, lr: float = 3e-3,
) -> RetrievalHistory:
    """Train a :class:`RetrievalAttention` with Adam on fresh batches for ``steps`` steps, on the CPU.

    The weights are initialised from ``seed`` and the batches drawn from ``seed``, so the scaled and the unscaled
    model of one seed start from the same weights and see the same rows. It runs on one thread: a model this small
    gains nothing from more, and loses much on a busy machine. Subnormal numbers (below float32's smallest normal
    1.2e-38: the unscaled model's tiny gradients, squared in Adam's running averages) are flushed to zero meanwhile;
    on x86 CPUs they made the unscaled runs about 3 times slower, and at that size they change no printed figure.
    The caller's setting is restored afterwards (PyTorch has no getter for it: :func:`flush_denormal_is_on` reads
    it by computing with a subnormal number).
    """
    was_on = flush_denormal_is_on()
    torch.set_flush_denormal(True)
    try:
        with single_thread():
            return _train(d_k, scaled, seed, steps, batch_size, num_pairs, num_symbols, num_values, d_model, lr)
    finally:
        torch.set_flush_denormal(was_on)


def flush_denormal_is_on() -> bool:
    """Whether this thread flushes subnormal floats to zero (``torch.set_flush_denormal``), read from its effect:
    2^-130, a float32 subnormal, times 1 stays 2^-130 when flushing is off and becomes 0 when it is on (also where
    the CPU cannot flush, which makes this False)."""
    subnormal = torch.full((1,), 2.0**-130, dtype=torch.float32)  # (1,) below float32's smallest normal 2^-126
    return (subnormal * 1.0).item() == 0.0


def _train(d_k: int, scaled: bool, seed: int, steps: int, batch_size: int, num_pairs: int, num_symbols: int,
           num_values: int, d_model: int, lr: float) -> RetrievalHistory:
    torch.manual_seed(seed)
    model = RetrievalAttention(num_symbols, num_values, d_model, d_k, scaled)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    data = torch.Generator().manual_seed(seed)
    history = RetrievalHistory(d_k=d_k, scaled=scaled, seed=seed, chance=1 / num_values)
    start = time.perf_counter()
    for step in range(steps):
        keys, values, query, target = retrieval_batch(batch_size, num_pairs, num_symbols, num_values, data)
        if step == 0:
            with torch.no_grad():
                _, weights, scores = model.attend(keys, values, query)  # (B, P), (B, P)
            history.initial_largest_weight = weights.max(dim=-1).values.mean().item()
            history.initial_score_std = scores.std().item()
        loss = F.cross_entropy(model(keys, values, query), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.losses.append(loss.item())
    with torch.no_grad():
        keys, values, query, target = retrieval_batch(1000, num_pairs, num_symbols, num_values, data)
        history.accuracy = (model(keys, values, query).argmax(-1) == target).double().mean().item()
    history.seconds = time.perf_counter() - start
    return history
