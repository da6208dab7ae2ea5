"""A decoder-only Transformer (GPT), built from the course's layers.

A GPT block is the encoder layer's two sub-layers, self-attention and a feed-forward network, with a causal mask:
there is no encoder and no cross-attention; the model reads a prefix and predicts the next token at every position.
``Block`` keeps ``EncoderLayer``'s parameter names, so the weights of one load into the other (the tests prove both
compute the same). Its attention asks PyTorch's fused kernel for causality (``is_causal=True``) instead of building a
T × T mask, unless attention weights are requested, when the readable path of lesson 03 runs.

Generation with a KV cache: ``GPT.new_cache()`` gives an empty ``GPTCache``; ``model(tokens, cache=cache)`` then takes
only the new tokens, places them after the cached positions and appends their keys and values (as the
encoder-decoder's ``decode`` does). ``transformer_lib.decoding.generate`` runs the generation loop on it.

GPT-2's architecture is a configuration of this class: learned positions and pre-LN blocks always; ``activation=
"gelu_tanh"``, ``bias=True`` and ``tie_output=True`` give GPT-2's feed-forward, biases and tied output layer.
:meth:`GPT.from_hf_gpt2` copies the weights of a Hugging Face ``GPT2LMHeadModel`` (``tests/test_gpt2.py`` proves both
compute the same logits); this module imports nothing from ``transformers``: it reads the model it is given.

Shape legend: batch, T = new positions, T_past = cached positions (T_past + T <= ``block_size``), d_model = model
width, heads, d_head = d_model / heads, V = vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .attention import check_dropout, scaled_dot_product_attention
from .data import check_token_ids
from .layers import LayerNorm, residual_connection
from .masks import causal_mask
from .multi_head import KVCache, MultiHeadAttention, check_heads, merge_heads, split_heads

ACTIVATIONS = {
    "relu": F.relu,  # the paper's and the course's encoder layer
    "gelu": F.gelu,  # exact GELU, as nn.TransformerEncoderLayer(activation="gelu")
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's approximation
}


@dataclass
class GPTConfig:
    """Sizes of a small GPT (pre-LN blocks, learned positions). Impossible sizes raise a ValueError here.

    ``activation``: the feed-forward non-linearity, a key of ``ACTIVATIONS``; ``bias``: biases in the attention and
    feed-forward linear layers; ``tie_output``: the output layer reuses the token embedding matrix (as GPT-2);
    ``layer_norm_eps``: the ε every LayerNorm adds to the variance; ``feed_forward=False``: blocks without their
    feed-forward sub-layer, an attention-only model (lesson 13), so ``d_ff`` and ``activation`` go unused.
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
    layer_norm_eps: float = 1e-5
    feed_forward: bool = True

    def __post_init__(self) -> None:
        for name, fix in (("vocab_size", "len(tokenizer)"), ("block_size", "the context length, e.g. 64")):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1: pass {fix}")
        check_heads(self.d_model, self.num_heads)
        check_dropout(self.dropout)
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r} is unknown: choose one of {sorted(ACTIVATIONS)}")


class CausalSelfAttention(MultiHeadAttention):
    """Multi-head self-attention in which position t sees positions 0..t only; with a ``KVCache``, the new positions
    also see every cached one. ``MultiHeadAttention``'s projections (``q_proj`` … ``out_proj``), its own forward."""

    def forward(  # type: ignore[override]
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
    """One GPT block, pre-LN: ``x + attention(norm1(x))``, then ``x + feed_forward(norm2(x))``; with
    ``config.feed_forward=False`` the attention sub-layer alone (no ``linear1``, ``linear2``, ``norm2``)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        c = config
        self.self_attn = CausalSelfAttention(c.d_model, c.num_heads, c.dropout, c.bias)
        self.has_feed_forward = c.feed_forward
        if c.feed_forward:
            self.linear1 = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
            self.linear2 = nn.Linear(c.d_ff, c.d_model, bias=c.bias)
            self.activation = ACTIVATIONS[c.activation]
            self.dropout = nn.Dropout(c.dropout)  # on the feed-forward hidden layer, as in EncoderLayer
        self.norm1 = LayerNorm(c.d_model, c.layer_norm_eps)
        self.norm2 = LayerNorm(c.d_model, c.layer_norm_eps) if c.feed_forward else None
        self.dropout1 = nn.Dropout(c.dropout)  # on each sub-layer's output
        self.dropout2 = nn.Dropout(c.dropout) if c.feed_forward else None

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """(batch, T, d_model) -> (batch, T, d_model); ``cache``: this block's keys and values of earlier positions."""

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            return self.self_attn(h, cache)[0]

        def feed_forward(h: torch.Tensor) -> torch.Tensor:
            return self.linear2(self.dropout(self.activation(self.linear1(h))))  # hidden (batch, T, d_ff)

        x = residual_connection(x, self_attention, self.norm1, self.dropout1, norm_first=True)
        if not self.has_feed_forward:
            return x  # an attention-only block
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
        self.final_norm = LayerNorm(c.d_model, c.layer_norm_eps)
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

    @classmethod
    def from_hf_gpt2(cls, hf_model: Any) -> GPT:
        """A course ``GPT`` with the configuration and weights of a Hugging Face ``GPT2LMHeadModel``, in its dtype
        and its training mode. One dropout rate, GPT-2's ``resid_pdrop``, stands for its three.

        Raises a ValueError for what this model does not implement (another activation, unscaled attention, …).
        """
        c = hf_model.config
        unsupported = {
            f"activation_function={c.activation_function!r}": c.activation_function not in HF_GPT2_ACTIVATIONS,
            "scale_attn_weights=False": not c.scale_attn_weights,
            "scale_attn_by_inverse_layer_idx": c.scale_attn_by_inverse_layer_idx,
            "add_cross_attention": c.add_cross_attention,
        }
        if any(unsupported.values()):
            raise ValueError(
                f"this GPT2Config uses {[name for name, used in unsupported.items() if used]}, which the course's "
                "GPT does not implement: build the Hugging Face model without them"
            )
        config = GPTConfig(
            vocab_size=c.vocab_size, block_size=c.n_positions, d_model=c.n_embd, num_heads=c.n_head,
            num_layers=c.n_layer, d_ff=c.n_inner or 4 * c.n_embd, dropout=float(c.resid_pdrop),
            activation=HF_GPT2_ACTIVATIONS[c.activation_function], bias=True, tie_output=c.tie_word_embeddings,
            layer_norm_eps=c.layer_norm_epsilon,
        )
        model = cls(config).to(hf_model.dtype).train(hf_model.training)
        weights = hf_gpt2_weights(hf_model.state_dict(), config.num_layers)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if weights[name].shape != parameter.shape:
                    raise ValueError(f"the weight mapped to {name} has shape {tuple(weights[name].shape)}, but "
                                     f"{name} needs {tuple(parameter.shape)}: check the mapping (Conv1D weights are "
                                     "stored (in, out): transpose them)")
                parameter.copy_(weights[name])
        return model


HF_GPT2_ACTIVATIONS = {  # Hugging Face's activation_function -> the course's activation
    "gelu_new": "gelu_tanh",  # GPT-2's
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}


def hf_gpt2_weights(hf_weights: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """The course ``GPT``'s parameters, by name, from a ``GPT2LMHeadModel.state_dict()``.

    GPT-2's ``Conv1D`` layers store a weight as (in, out), the transpose of ``nn.Linear``'s (out, in); its ``c_attn``
    holds the query, key and value projections side by side, a (d_model, 3 · d_model) weight split here into three.
    """
    w = hf_weights
    weights = {
        "token_embedding.weight": w["transformer.wte.weight"],  # (V, d_model)
        "position_embedding.weight": w["transformer.wpe.weight"],  # (block_size, d_model)
        "final_norm.weight": w["transformer.ln_f.weight"],
        "final_norm.bias": w["transformer.ln_f.bias"],
        "head.weight": w["lm_head.weight"],  # (V, d_model), an nn.Linear
    }
    for i in range(num_layers):
        hf, ours = f"transformer.h.{i}.", f"blocks.{i}."
        q, k, v = w[hf + "attn.c_attn.weight"].chunk(3, dim=1)  # each (d_model, d_model), (in, out)
        q_bias, k_bias, v_bias = w[hf + "attn.c_attn.bias"].chunk(3)  # each (d_model,)
        for proj, weight, bias in (("q_proj", q, q_bias), ("k_proj", k, k_bias), ("v_proj", v, v_bias)):
            weights[f"{ours}self_attn.{proj}.weight"] = weight.T  # (out, in)
            weights[f"{ours}self_attn.{proj}.bias"] = bias
        for course, conv in (("self_attn.out_proj", "attn.c_proj"), ("linear1", "mlp.c_fc"), ("linear2", "mlp.c_proj")):
            weights[f"{ours}{course}.weight"] = w[f"{hf}{conv}.weight"].T  # Conv1D (in, out) -> nn.Linear (out, in)
            weights[f"{ours}{course}.bias"] = w[f"{hf}{conv}.bias"]
        for course, norm in (("norm1", "ln_1"), ("norm2", "ln_2")):
            weights[f"{ours}{course}.weight"] = w[f"{hf}{norm}.weight"]
            weights[f"{ours}{course}.bias"] = w[f"{hf}{norm}.bias"]
    return weights
