"""A decoder-only Transformer (GPT) for characters, built from the course's layers.

A GPT block is self-attention plus a feed-forward network: the encoder layer, given a causal mask. There is no
encoder and no cross-attention; the model reads a prefix and predicts the next character at every position.

Shape legend: batch, T = context length (at most ``block_size``), d_model = model width, V = vocabulary size.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import check_dropout
from .data import check_token_ids
from .decoding import generate_tokens, greedy_pick, sampling_picker
from .layers import EncoderLayer, LayerNorm
from .masks import causal_mask
from .multi_head import check_heads


def zen_of_python() -> str:
    """The text of ``import this``, which every Python installation ships (stored ROT13-encoded in ``this.s``)."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing ``this`` prints the poem
        this = importlib.import_module("this")
    return codecs.decode(this.s, "rot13")


class CharTokenizer:
    """One token per distinct character of a text, numbered in sorted order."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.ids = {char: index for index, char in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """``text`` -> (len(text),) long tensor of ids; a character the tokenizer has not seen raises."""
        unknown = sorted(set(text) - set(self.ids))
        if unknown:
            raise ValueError(f"characters not in the vocabulary: {unknown}")
        return torch.tensor([self.ids[char] for char in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """(T,) ids -> text."""
        return "".join(self.chars[i] for i in ids.tolist())


@dataclass
class GPTConfig:
    """Sizes of a small GPT; pre-LN blocks (``norm_first``) as in GPT-2. Impossible sizes raise a ValueError here."""

    vocab_size: int
    block_size: int = 64
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name, fix in (("vocab_size", "len(tokenizer)"), ("block_size", "the context length, e.g. 64")):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1: pass {fix}")
        check_heads(self.d_model, self.num_heads)
        check_dropout(self.dropout)


class GPT(nn.Module):
    """Token and learned position embeddings, ``num_layers`` causal self-attention blocks, a final LayerNorm and a
    linear head giving next-token logits at every position."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = config
        self.config = config
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = nn.Embedding(c.block_size, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, norm_first=True) for _ in range(c.num_layers)
        )
        self.final_norm = LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens``: (batch, T) ids with T <= block_size -> logits (batch, T, V); position t sees tokens 0..t."""
        check_token_ids(tokens, self.config.vocab_size)
        length = tokens.shape[1]
        if length > self.config.block_size:
            raise ValueError(
                f"a context of {length} tokens exceeds block_size={self.config.block_size}: "
                f"pass the last {self.config.block_size} tokens, e.g. tokens[:, -block_size:]"
            )
        positions = torch.arange(length, device=tokens.device)  # (T,)
        x = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))  # (batch, T, d_model)
        mask = causal_mask(length, device=tokens.device)  # (T, T): the encoder layer becomes a decoder-only block
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))  # (batch, T, V)


def random_windows(
    data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut ``batch_size`` random windows from ``data`` (N,): inputs (batch, block_size) and the same windows shifted
    by one character as targets (batch, block_size)."""
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (batch,)
    offsets = torch.arange(block_size)  # (block_size,)
    inputs = data[starts[:, None] + offsets]  # (batch, block_size)
    targets = data[starts[:, None] + offsets + 1]  # (batch, block_size)
    return inputs, targets


def train_gpt(
    model: GPT,
    data: torch.Tensor,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train on next-character prediction for a fixed number of ``steps`` (AdamW); returns the loss of each step.

    ``data``: (N,) token ids on the CPU, N > block_size. Batches are drawn from a generator seeded with ``seed``,
    so a run is repeatable.
    """
    if data.dim() != 1 or len(data) <= model.config.block_size:
        raise ValueError(
            f"train_gpt needs data shaped (N,) with N > block_size={model.config.block_size} (one window plus its "
            f"next character), got shape {tuple(data.shape)}: pass a longer text, encoded, e.g. tokenizer.encode(text)"
        )
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        inputs, targets = random_windows(data, model.config.block_size, batch_size, generator)
        logits = model(inputs.to(device))  # (batch, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def generate(
    model: GPT,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> torch.Tensor:
    """Continue ``prompt`` (batch, T0) by ``max_new_tokens`` tokens -> (batch, T0 + max_new_tokens).

    The loop is lesson 10's :func:`~transformer_lib.decoding.generate_tokens`: each step feeds the last
    ``block_size`` tokens and picks the next one with :func:`~transformer_lib.decoding.greedy_pick` or
    :func:`~transformer_lib.decoding.sampling_picker`.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be >= 0: it counts the tokens to add to the prompt")
    check_token_ids(prompt, model.config.vocab_size, "prompt")  # also when max_new_tokens is 0
    model.eval()
    block_size = model.config.block_size
    pick = greedy_pick if greedy else sampling_picker(temperature, top_k, top_p, generator)

    def next_logits(tokens: torch.Tensor) -> torch.Tensor:  # (batch, t) -> (batch, V): the last position's
        return model(tokens[:, -block_size:])[:, -1]

    return generate_tokens(next_logits, prompt, max_new_tokens, pick)
