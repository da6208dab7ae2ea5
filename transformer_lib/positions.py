"""Position information for attention: sinusoidal encodings, learned embeddings and rotary embeddings (RoPE).

Shape legend: T = number of positions, d_model = model width, d_head = width of one attention head.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import check_dropout


def _check_even(d: int, name: str) -> None:
    if d <= 0 or d % 2:
        raise ValueError(
            f"{name}={d} must be a positive even number: sin and cos come in pairs that share one frequency"
        )


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The encoding of "Attention Is All You Need", angles in radians.

    ``PE[p, 2m] = sin(p / base**(2m/d_model))`` and ``PE[p, 2m+1] = cos(p / base**(2m/d_model))``: each sin/cos
    pair m shares one frequency. Returns ``(num_positions, d_model)`` float32. An odd ``d_model`` is rejected with a
    ValueError (the last sine would have no cosine partner).
    """
    _check_even(d_model, "d_model")
    if num_positions < 1:
        raise ValueError(f"num_positions={num_positions} must be at least 1: pass the number of positions to encode")
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (T, 1)
    frequencies = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    angles = positions * frequencies  # (T, d_model/2), radians
    encoding = torch.empty(num_positions, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles)
    return encoding.float()  # (T, d_model)


def shift_rotation(offset: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The matrix M_k with ``PE(p + k) = PE(p) @ M_k`` for every position p (k = ``offset``; rows, as everywhere).

    Block diagonal, one 2x2 block ``[[cos(k w_m), -sin(k w_m)], [sin(k w_m), cos(k w_m)]]`` per sin/cos pair m,
    with ``w_m = base**(-2m/d_model)``. Returns (d_model, d_model) float32; it does not depend on p.
    """
    _check_even(d_model, "d_model")
    frequencies = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    cos, sin = torch.cos(offset * frequencies), torch.sin(offset * frequencies)
    blocks = torch.stack((torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2)  # (d_model/2, 2, 2)
    return torch.block_diag(*blocks).float()  # (d_model, d_model)


class PositionalEncoding(nn.Module):
    """Add the sinusoidal encoding to token embeddings, then apply dropout (as in the paper)."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0, base: float = 10000.0):
        super().__init__()
        check_dropout(dropout)
        self.dropout = nn.Dropout(dropout)
        # a buffer: saved with the model and moved by .to(device), but not trained
        self.register_buffer("encoding", sinusoidal_encoding(max_len, d_model, base), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (batch, T, d_model) embeddings -> (batch, T, d_model) with positions added."""
        length = x.shape[1]
        if length > self.encoding.shape[0] or x.shape[-1] != self.encoding.shape[1]:
            raise ValueError(
                f"PositionalEncoding was built for up to {self.encoding.shape[0]} positions of width "
                f"{self.encoding.shape[1]}, got input of shape {tuple(x.shape)}: build it with a larger max_len "
                "or the right d_model"
            )
        return self.dropout(x + self.encoding[:length].to(x.dtype))  # (batch, T, d_model)


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position (BERT, GPT-2), added to the token embeddings."""

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0):
        super().__init__()
        check_dropout(dropout)
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (batch, T, d_model) -> (batch, T, d_model). Positions beyond ``max_len`` have no vector."""
        length = x.shape[1]
        if length > self.embedding.num_embeddings:
            raise ValueError(
                f"LearnedPositionalEmbedding has vectors for {self.embedding.num_embeddings} positions, got a "
                f"sequence of length {length}: learned positions cannot extrapolate, build it with a larger max_len"
            )
        if x.shape[-1] != self.embedding.embedding_dim:
            raise ValueError(
                f"LearnedPositionalEmbedding has vectors of width {self.embedding.embedding_dim}, got input of shape "
                f"{tuple(x.shape)}: build it with d_model={x.shape[-1]}"
            )
        positions = torch.arange(length, device=x.device)  # (T,)
        return self.dropout(x + self.embedding(positions))  # (batch, T, d_model)


def rope_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE's rotation speeds ``base**(-2m/d_head)``, in radians per position, one per feature pair m: (d_head/2,)
    float64."""
    _check_even(d_head, "d_head")
    return base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d_head/2,)


def apply_rope(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0,
    frequencies: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rotary position embedding: rotate each pair of features (2m, 2m+1) of ``x`` by angle ``p * base**(-2m/d)``.

    ``x``: (..., T, d_head) queries or keys, ``d_head`` even; ``positions``: (T,) integers, default 0..T-1;
    ``frequencies``: (d_head/2,) radians per position, default ``rope_frequencies(d_head, base)`` (Llama 3 passes
    rescaled ones). Returns a tensor shaped like ``x``. Applied to both queries and keys, the score of a query at
    position i and a key at position j then depends on the positions only through j - i. With rows, pair m of the
    result is ``[x_2m, x_2m+1] @ [[cos, sin], [-sin, cos]]``: it turns from feature 2m towards feature 2m+1, the
    opposite way from ``shift_rotation``, which moves a (sin, cos) pair forward (``apply_rope`` at position -k of a
    row of ``PE`` gives the row k positions later).
    """
    length, d_head = x.shape[-2], x.shape[-1]
    _check_even(d_head, "d_head")
    if positions is None:
        positions = torch.arange(length, device=x.device)
    if positions.shape != (length,):
        raise ValueError(f"positions must be shaped ({length},) to match x of shape {tuple(x.shape)}, "
                         f"got {tuple(positions.shape)}")
    if frequencies is None:
        frequencies = rope_frequencies(d_head, base)
    if frequencies.shape != (d_head // 2,):
        raise ValueError(f"frequencies must be shaped ({d_head // 2},), one per feature pair of x of shape "
                         f"{tuple(x.shape)}, got {tuple(frequencies.shape)}")
    frequencies = frequencies.to(device=x.device, dtype=torch.float64)  # (d_head/2,)
    angles = positions.to(torch.float64)[:, None] * frequencies  # (T, d_head/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d_head/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)
