"""The encoder-decoder Transformer of "Attention Is All You Need", assembled from the course's layers.

Shape legend: batch, S = source length, T = target length, d_model = model width, V_tgt = target vocabulary size.
Masks are boolean, True where attention is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .attention import check_dropout
from .data import check_token_ids
from .layers import DecoderLayer, DecoderLayerCache, EncoderLayer, LayerNorm
from .masks import causal_mask, padding_mask, validate_mask
from .multi_head import check_heads, record_attention
from .positions import sinusoidal_encoding


@dataclass
class TransformerConfig:
    """Sizes of an encoder-decoder Transformer; the defaults are the paper's base model.

    ``share_embeddings``: one embedding table for source and target (the paper's shared vocabulary; needs
    ``src_vocab_size == tgt_vocab_size``). ``tie_output``: the output projection reuses the target embedding matrix.
    Impossible sizes (an empty vocabulary, heads that do not divide d_model, dropout outside [0, 1)) raise a ValueError
    here, before any weight is built.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 512
    norm_first: bool = False
    share_embeddings: bool = True
    tie_output: bool = True

    def __post_init__(self) -> None:
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings=True needs one vocabulary, but src_vocab_size={self.src_vocab_size} != "
                f"tgt_vocab_size={self.tgt_vocab_size}: pass share_embeddings=False to give each language its own "
                "embedding table"
            )
        for name, fix in (("src_vocab_size", "len(src_vocab)"), ("tgt_vocab_size", "len(tgt_vocab)"),
                          ("max_len", "the length of the longest sequence, in tokens")):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1: pass {fix}")
        check_heads(self.d_model, self.num_heads)
        check_dropout(self.dropout)


@dataclass
class DecoderCache:
    """One :class:`DecoderLayerCache` per decoder layer; ``len(cache)`` = number of target positions decoded."""

    layers: list[DecoderLayerCache]

    def __len__(self) -> int:
        return len(self.layers[0].self_attn)


class Transformer(nn.Module):
    """Embeddings (scaled by sqrt(d_model)) + sinusoidal positions, an encoder and a decoder stack, and an output
    projection applied to every target position: (batch, T, d_model) -> (batch, T, V_tgt)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        c = config
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = self.src_embedding if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.register_buffer("positions", sinusoidal_encoding(c.max_len, c.d_model), persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        layer_args = (c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(c.num_decoder_layers))
        # pre-LN leaves the residual stream un-normalised, so it ends each stack with one more LayerNorm
        self.encoder_norm = LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=not c.tie_output)
        self._reset_parameters()
        if c.tie_output:
            self.output_projection.weight = self.tgt_embedding.weight  # (V_tgt, d_model), one shared tensor

    def _reset_parameters(self) -> None:
        for name, parameter in self.named_parameters():
            if "embedding" in name:
                nn.init.normal_(parameter, std=self.config.d_model**-0.5)  # x sqrt(d_model) gives unit scale
            elif parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)

    def _embed(self, embedding: nn.Embedding, tokens: torch.Tensor, name: str, start: int = 0) -> torch.Tensor:
        check_token_ids(tokens, embedding.num_embeddings, name)
        length, max_len = tokens.shape[1], self.config.max_len
        if start + length > max_len:
            raise ValueError(
                f"positions {start}..{start + length - 1} of {name} exceed max_len={max_len}: pass at most {max_len} "
                f"tokens (when decoding, max_len <= {max_len}), or build the model with a larger "
                "TransformerConfig.max_len"
            )
        x = embedding(tokens) * math.sqrt(self.config.d_model)  # (batch, T, d_model)
        return self.dropout(x + self.positions[start : start + length])  # (batch, T, d_model)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``src``: (batch, S) token ids; ``src_mask``: e.g. ``padding_mask(src, pad_id)`` (batch, 1, 1, S).

        Returns the memory (batch, S, d_model).
        """
        x = self._embed(self.src_embedding, src, "src")
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)  # (batch, S, d_model)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """``tgt``: (batch, T) token ids (with a ``cache``: only the new tokens); returns logits (batch, T, V_tgt).

        The decoder is always causal; ``tgt_mask`` (True = allowed) can hide more, e.g. target padding.
        ``memory_mask`` hides source padding, (batch, 1, 1, S). With a ``cache`` (from :meth:`new_cache`), positions
        continue after the cached ones and the cache grows by T.
        """
        start = len(cache) if cache is not None else 0
        x = self._embed(self.tgt_embedding, tgt, "tgt", start)  # (batch, T, d_model); checks tgt first
        batch, length = tgt.shape
        if memory.shape[0] != batch:
            raise ValueError(
                f"tgt has {batch} sequences but memory (the encoded src) has {memory.shape[0]}: give src and tgt "
                "the same batch size, one target row per source sentence"
            )
        mask = causal_mask(start + length, device=tgt.device)[start:]  # (T, start + T): the new rows
        if tgt_mask is not None:
            validate_mask(tgt_mask, (batch, self.config.num_heads, length, start + length))
            mask = mask & tgt_mask
        layer_caches = cache.layers if cache is not None else [None] * len(self.decoder_layers)
        for layer, layer_cache in zip(self.decoder_layers, layer_caches, strict=True):
            x = layer(x, memory, tgt_mask=mask, memory_mask=memory_mask, cache=layer_cache)
        return self.output_projection(self.decoder_norm(x))  # (batch, T, V_tgt): one projection per position

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Teacher forcing: ``src`` (batch, S), ``tgt`` (batch, T) the target shifted right -> (batch, T, V_tgt)."""
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, tgt_mask=tgt_mask, memory_mask=src_mask)

    def new_cache(self) -> DecoderCache:
        """An empty cache for incremental decoding with :meth:`decode`."""
        return DecoderCache([DecoderLayerCache() for _ in self.decoder_layers])


def count_parameters(model: nn.Module) -> int:
    """Number of trainable numbers in ``model``; a tensor shared by two modules (tied weights) counts once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_breakdown(model: Transformer) -> dict[str, int]:
    """Parameters per component: embeddings and output projection, then encoder and decoder attention, feed-forward
    and layer norms. Tied tensors count once (``named_parameters`` lists a shared tensor only once), so the values add
    up to the total number of parameters."""
    groups: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if "embedding" in name or "output_projection" in name:
            group = "embeddings + output"
        else:
            stack = "encoder" if name.startswith("encoder") else "decoder"
            kind = "attention" if "attn" in name else "feed-forward" if "linear" in name else "layer norms"
            group = f"{stack} {kind}"
        groups[group] = groups.get(group, 0) + parameter.numel()
    return groups


@torch.no_grad()
def cross_attention_weights(
    model: Transformer, src: torch.Tensor, decoder_input: torch.Tensor, src_mask: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """Cross-attention weights of every decoder layer, each (batch, heads, T, S), for one teacher-forced pass.

    ``src``: (batch, S) and ``decoder_input``: (batch, T) token ids. ``record_attention`` asks each attention for its
    weights with forward hooks (the layers ask for none, so the fused kernel can run) and removes them afterwards.
    Puts the model in eval mode (no dropout).
    """
    recorded = record_attention(model, src, decoder_input, src_mask=src_mask)
    return [recorded[f"decoder_layers.{i}.multihead_attn"] for i in range(len(model.decoder_layers))]


def encoder_decoder_masks(src: torch.Tensor, tgt: torch.Tensor, pad_id: int) -> dict[str, torch.Tensor]:
    """The three attention masks of one teacher-forced pass, each expanded to (batch, T_q, T_k), True = allowed.

    ``src``: (batch, S) and ``tgt``: (batch, T) token ids, padded with ``pad_id`` at the end. Returns
    ``"encoder self-attention"`` (batch, S, S): every source query sees the real source tokens (``padding_mask(src)``);
    ``"decoder self-attention"`` (batch, T, T): the causal mask and the target padding mask together;
    ``"cross-attention"`` (batch, T, S): every target query sees the real source tokens (the same source mask).
    ``Transformer.forward`` takes the source padding mask as ``src_mask`` for the first and the third and builds the
    causal mask itself; a target padding mask would only change the rows of ``<pad>`` queries, whose outputs the loss
    ignores (compare ``"causal mask alone"``, (batch, T, T), also returned).
    """
    batch, source_length = src.shape
    target_length = tgt.shape[1]
    source_keys = padding_mask(src, pad_id)[:, 0]  # (batch, 1, S)
    causal = causal_mask(target_length, device=tgt.device)  # (T, T)
    return {
        "encoder self-attention": source_keys.expand(batch, source_length, source_length),  # (batch, S, S)
        "decoder self-attention": causal & padding_mask(tgt, pad_id)[:, 0],  # (batch, T, T)
        "cross-attention": source_keys.expand(batch, target_length, source_length),  # (batch, T, S)
        "causal mask alone": causal.expand(batch, target_length, target_length),  # (batch, T, T)
    }
