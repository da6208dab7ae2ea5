"""A decoder-only Transformer (GPT), built from the course's layers.

A GPT block is the encoder layer's two sub-layers, self-attention and a feed-forward network, with a causal mask:
there is no encoder and no cross-attention; the model reads a prefix and predicts the next token at every position.
``Block`` keeps ``EncoderLayer``'s parameter names, so the weights of one load into the other (the tests prove both
compute the same). Its attention asks PyTorch's fused kernel for causality (``is_causal=True``) instead of building a
T × T mask, unless attention weights are requested, when the readable path of lesson 02 runs.

Generation with a KV cache: ``GPT.new_cache()`` gives an empty ``GPTCache``; ``model(tokens, cache=cache)`` then takes
only the new tokens, places them after the cached positions and appends their keys and values (as the
encoder-decoder's ``decode`` does). ``transformer_lib.decoding.generate`` runs the generation loop on it.

GPT-2's architecture is a configuration of this class: learned positions and pre-LN blocks always; ``activation=
"gelu_tanh"``, ``bias=True`` and ``tie_output=True`` give GPT-2's feed-forward, biases and tied output layer.

Shape legend: batch, T = new positions, T_past = cached positions (T_past + T <= ``block_size``), d_model = model
width, heads, d_head = d_model / heads, V = vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import check_dropout, scaled_dot_product_attention
from .data import check_token_ids
from .layers import LayerNorm, residual_connection
from .masks import causal_mask
from .multi_head import KVCache, check_heads, merge_heads, split_heads

ACTIVATIONS = {
    "relu": F.relu,  # the paper's and the course's encoder layer
    "gelu": F.gelu,  # exact GELU, as nn.TransformerEncoderLayer(activation="gelu")
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's approximation
}


@dataclass
class GPTConfig:
    """Sizes of a small GPT (pre-LN blocks, learned positions). Impossible sizes raise a ValueError here.

    ``activation``: the feed-forward non-linearity, a key of ``ACTIVATIONS``; ``bias``: biases in the attention and
    feed-forward linear layers; ``tie_output``: the output layer reuses the token embedding matrix (as GPT-2).
    """

    vocab_size: int
    block_size: int = 64
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0
    activation: str = "relu"
    bias: bool = True
    tie_output: bool = False

    def __post_init__(self) -> None:
        for name, fix in (("vocab_size", "len(tokenizer)"), ("block_size", "the context length, e.g. 64")):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1: pass {fix}")
        check_heads(self.d_model, self.num_heads)
        check_dropout(self.dropout)
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r} is unknown: choose one of {sorted(ACTIVATIONS)}")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees positions 0..t only; with a ``KVCache``, the new positions
    also see every cached one. Projection names as in ``MultiHeadAttention`` (``q_proj`` … ``out_proj``)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_heads(d_model, num_heads)
        self.num_heads = num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x``: (batch, T, d_model) -> output (batch, T, d_model) and weights (batch, heads, T, T_past + T) or None.

        Without weights, PyTorch's fused kernel runs: ``is_causal=True`` when nothing is cached, else the new rows of
        the causal mask. With ``need_weights=True``, the readable ``scaled_dot_product_attention`` and an explicit
        ``causal_mask``; both give the same output.
        """
        q = split_heads(self.q_proj(x), self.num_heads)  # (batch, heads, T, d_head)
        k = split_heads(self.k_proj(x), self.num_heads)  # (batch, heads, T, d_head)
        v = split_heads(self.v_proj(x), self.num_heads)  # (batch, heads, T, d_head)
        past = 0 if cache is None else len(cache)
        if cache is not None:
            if past:
                k = torch.cat((cache.key, k), dim=2)  # (batch, heads, T_past + T, d_head)
                v = torch.cat((cache.value, v), dim=2)
            cache.key, cache.value = k, v
        dropout_p = self.dropout if self.training else 0.0
        length = x.shape[1]
        weights = None
        if need_weights or past:
            mask = causal_mask(past + length, device=x.device)[past:]  # (T, T_past + T): the new rows
            attended, weights = scaled_dot_product_attention(  # (batch, heads, T, d_head)
                q, k, v, mask=mask, dropout_p=dropout_p, need_weights=need_weights
            )
        else:
            attended = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        return self.out_proj(merge_heads(attended)), weights  # (batch, T, d_model)


class Block(nn.Module):
    """One GPT block, pre-LN: ``x + attention(norm1(x))``, then ``x + feed_forward(norm2(x))``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = config
        self.self_attn = CausalSelfAttention(c.d_model, c.num_heads, c.dropout, c.bias)
        self.linear1 = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
        self.linear2 = nn.Linear(c.d_ff, c.d_model, bias=c.bias)
        self.activation = ACTIVATIONS[c.activation]
        self.dropout = nn.Dropout(c.dropout)  # on the feed-forward hidden layer, as in EncoderLayer
        self.norm1 = LayerNorm(c.d_model)
        self.norm2 = LayerNorm(c.d_model)
        self.dropout1 = nn.Dropout(c.dropout)  # on each sub-layer's output
        self.dropout2 = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """(batch, T, d_model) -> (batch, T, d_model); ``cache``: this block's keys and values of earlier positions."""

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            return self.self_attn(h, cache)[0]

        def feed_forward(h: torch.Tensor) -> torch.Tensor:
            return self.linear2(self.dropout(self.activation(self.linear1(h))))  # hidden (batch, T, d_ff)

        x = residual_connection(x, self_attention, self.norm1, self.dropout1, norm_first=True)
        return residual_connection(x, feed_forward, self.norm2, self.dropout2, norm_first=True)


@dataclass
class GPTCache:
    """One self-attention :class:`KVCache` per block; ``len(cache)`` = number of positions already processed."""

    layers: list[KVCache]

    def __len__(self) -> int:
        return len(self.layers[0])


class GPT(nn.Module):
    """Token and learned position embeddings, ``num_layers`` causal blocks, a final LayerNorm and a linear head
    giving next-token logits at every position."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = config
        self.config = config
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = nn.Embedding(c.block_size, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.num_layers))
        self.final_norm = LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_output:
            self.head.weight = self.token_embedding.weight  # (V, d_model), one shared tensor

    def forward(self, tokens: torch.Tensor, cache: GPTCache | None = None) -> torch.Tensor:
        """``tokens``: (batch, T) ids -> logits (batch, T, V); position t sees tokens 0..t.

        With a ``cache`` (from :meth:`new_cache`), ``tokens`` are only the new ones: they take positions T_past …
        T_past + T - 1 and the cache grows by T. T_past + T must not exceed ``block_size``.
        """
        check_token_ids(tokens, self.config.vocab_size)
        past = 0 if cache is None else len(cache)
        length, block_size = tokens.shape[1], self.config.block_size
        if past + length > block_size:
            raise ValueError(
                f"a context of {past + length} tokens ({past} cached) exceeds block_size={block_size}: "
                f"pass the last {block_size} tokens, e.g. tokens[:, -block_size:], without a cache"
            )
        positions = torch.arange(past, past + length, device=tokens.device)  # (T,)
        x = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))  # (batch, T, d_model)
        layer_caches = cache.layers if cache is not None else [None] * len(self.blocks)
        for block, layer_cache in zip(self.blocks, layer_caches, strict=True):
            x = block(x, layer_cache)
        return self.head(self.final_norm(x))  # (batch, T, V)

    def new_cache(self) -> GPTCache:
        """An empty cache for incremental generation with ``forward(tokens, cache=...)``."""
        return GPTCache([KVCache() for _ in self.blocks])
