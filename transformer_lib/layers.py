"""The Transformer's building blocks: layer normalisation, the position-wise feed-forward network, the residual
connection around each sub-layer (``residual_connection``, post-LN as in the paper or pre-LN with ``norm_first=True``),
and the encoder and decoder layers built from them.

Submodule names follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` (``self_attn``,
``multihead_attn``, ``linear1``, ``linear2``, ``norm1`` …), so weights can be copied both ways.

Shape legend: batch, T = target (or source) length, S = source length, d_model = model width, d_ff = hidden width of
the feed-forward network. Masks are boolean, True where attention is allowed (``nn.Transformer*Layer`` use the
opposite polarity).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .multi_head import KVCache, MultiHeadAttention


class LayerNorm(nn.Module):
    """Normalise each position's feature vector to mean 0 and variance 1, then scale and shift (learned):
    ``(x - mean) / sqrt(variance + eps) * weight + bias``, with the mean and the (biased) variance of the last
    dimension only (the features of one token), never over the batch.

    Lesson 07 writes that formula out and shows it equal to this module and to ``nn.LayerNorm``; here PyTorch's fused
    ``F.layer_norm`` computes it in one kernel instead of five, which makes a small GPT's training step about a fifth
    faster (``benchmarks/train_gpt.py``). ``tests/test_layers.py`` checks it against the formula.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(…, d_model) -> (…, d_model)."""
        if x.dim() == 0 or x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"LayerNorm was built for vectors of {self.weight.shape[0]} features, got input of shape "
                f"{tuple(x.shape)}: its last dimension must be d_model, or build LayerNorm(x.shape[-1])"
            )
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)  # (…, d_model)


def position_wise_feed_forward(
    x: torch.Tensor, linear1: nn.Linear, linear2: nn.Linear, dropout: nn.Dropout
) -> torch.Tensor:
    """FFN(x) = max(0, x W1 + b1) W2 + b2, the same weights at every position.

    ``x``: (batch, T, d_model) -> (batch, T, d_model); hidden (batch, T, d_ff). b1 has d_ff entries and b2 has d_model:
    they broadcast over positions.
    """
    return linear2(dropout(F.relu(linear1(x))))  # (batch, T, d_model)


def residual_connection(
    x: torch.Tensor,
    sublayer: Callable[[torch.Tensor], torch.Tensor],
    norm: nn.Module,
    dropout: nn.Module,
    norm_first: bool = False,
) -> torch.Tensor:
    """Wrap one sub-layer in its residual connection and LayerNorm; ``dropout`` acts on the sub-layer's output.

    Post-LN (the paper): ``norm(x + dropout(sublayer(x)))``; pre-LN (``norm_first=True``):
    ``x + dropout(sublayer(norm(x)))``. ``x``: (batch, T, d_model); ``sublayer`` maps it to the same shape.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))  # (batch, T, d_model): the residual stream itself is never normalised
    return norm(x + dropout(sublayer(x)))  # (batch, T, d_model)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)  # on the FFN's hidden layer, as in PyTorch (not in the paper)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)  # on each sub-layer's output (the paper's residual dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: (batch, S, d_model); ``mask``: True = allowed, e.g. a padding mask (batch, 1, 1, S)."""

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            return self.self_attn(h, h, h, mask=mask, need_weights=False)[0]

        x = residual_connection(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        return residual_connection(x, self._feed_forward, self.norm2, self.dropout2, self.norm_first)  # (batch, S, …)

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return position_wise_feed_forward(x, self.linear1, self.linear2, self.dropout)


@dataclass
class DecoderLayerCache:
    """What one decoder layer keeps while decoding token by token: its self-attention keys/values (growing) and its
    cross-attention keys/values (projected from the encoder output once)."""

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=lambda: KVCache(static=True))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, feed-forward; each with residual and norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.multihead_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)  # cross-attention
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)  # on the FFN's hidden layer, as in PyTorch (not in the paper)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)  # on each sub-layer's output (the paper's residual dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: DecoderLayerCache | None = None,
    ) -> torch.Tensor:
        """``x``: (batch, T, d_model) target positions; ``memory``: (batch, S, d_model) encoder output.

        ``tgt_mask``: True = allowed, broadcastable to (batch, heads, T, T_total), usually ``causal_mask(T)``;
        ``memory_mask``: e.g. the source padding mask (batch, 1, 1, S). With a ``cache``, ``x`` holds only the new
        positions and T_total counts the cached ones too. Returns (batch, T, d_model).
        """
        self_cache, cross_cache = (cache.self_attn, cache.cross_attn) if cache is not None else (None, None)

        def self_attention(h: torch.Tensor) -> torch.Tensor:  # masked: each position sees itself and the past
            return self.self_attn(h, h, h, mask=tgt_mask, need_weights=False, cache=self_cache)[0]

        def cross_attention(h: torch.Tensor) -> torch.Tensor:  # queries from the decoder, keys/values from memory
            return self.multihead_attn(h, memory, memory, mask=memory_mask, need_weights=False, cache=cross_cache)[0]

        x = residual_connection(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        x = residual_connection(x, cross_attention, self.norm2, self.dropout2, self.norm_first)
        return residual_connection(x, self._feed_forward, self.norm3, self.dropout3, self.norm_first)  # (batch, T, …)

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return position_wise_feed_forward(x, self.linear1, self.linear2, self.dropout)
