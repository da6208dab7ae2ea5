"""A Llama-style decoder: the GPT of lesson 11 with the four changes today's open LLMs share.

- **RMSNorm** instead of LayerNorm: divide by the root mean square of the features, no mean subtracted, no bias.
- **SwiGLU** feed-forward: ``down(silu(gate(x)) * up(x))``, a gated hidden layer, no biases.
- **RoPE** (lesson 04) on queries and keys instead of learned positions; Llama pairs feature j with feature
  j + d_head/2 (the two halves), where ``positions.apply_rope`` pairs neighbours (2j, 2j+1).
- **Grouped-query attention** (GQA): ``num_heads`` query heads share ``num_kv_heads`` key/value heads, so the KV cache
  holds ``num_kv_heads`` heads only.

:meth:`Llama.from_hf_llama` copies the weights of a Hugging Face ``LlamaForCausalLM``; ``tests/test_llama.py`` proves
both compute the same logits. This module imports nothing from ``transformers``: it reads the model it is given.

Shape legend: batch, T = new positions, T_past = cached positions, d_model, heads (query heads), kv_heads,
d_head = d_model / heads, d_ff = hidden width of the feed-forward, V = vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .attention import scaled_dot_product_attention
from .data import check_token_ids
from .masks import causal_mask
from .multi_head import KVCache, check_heads, merge_heads, split_heads
from .positions import apply_rope


@dataclass
class LlamaConfig:
    """Sizes of a Llama-style model. Impossible sizes raise a ValueError here.

    ``num_kv_heads``: key/value heads, a divisor of ``num_heads`` (``num_heads``: multi-head attention; 1:
    multi-query attention); ``tie_output``: the output layer reuses the token embedding matrix.
    """

    vocab_size: int
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    d_ff: int = 172
    rms_norm_eps: float = 1e-6
    rope_base: float = 10000.0
    tie_output: bool = False

    def __post_init__(self) -> None:
        if self.vocab_size < 1 or self.d_ff < 1:
            raise ValueError(f"vocab_size={self.vocab_size} and d_ff={self.d_ff} must be at least 1")
        check_heads(self.d_model, self.num_heads)
        if self.num_kv_heads < 1 or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}: each key/value head "
                f"serves a group of num_heads / num_kv_heads query heads, e.g. num_kv_heads=1 or {self.num_heads}"
            )
        if (self.d_model // self.num_heads) % 2:
            raise ValueError(
                f"d_head = d_model / num_heads = {self.d_model // self.num_heads} must be even: RoPE rotates pairs "
                "of features"
            )


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x²) + eps) * weight`` over the last dimension: (..., d) -> (..., d). No mean is subtracted."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight  # (..., d)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned gain (``weight``, starts at 1), as ``torch.nn.RMSNorm``."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_model) -> (..., d_model)."""
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(nn.Module):
    """The gated feed-forward: ``down(silu(gate(x)) * up(x))``, three bias-free linear layers."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, T, d_model) -> (batch, T, d_model); the hidden layer is (batch, T, d_ff)."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def apply_rope_halves(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """RoPE as Llama lays it out: feature j is rotated together with feature j + d_head/2 (same angles as
    ``positions.apply_rope``, which pairs features 2j and 2j + 1).

    ``x``: (..., T, d_head); ``positions``: (T,), default 0..T-1. Computed as ``apply_rope`` on the features
    reordered so that each pair sits side by side, then put back in place.
    """
    half = x.shape[-1] // 2
    side_by_side = torch.stack((x[..., :half], x[..., half:]), dim=-1).flatten(-2)  # (..., T, d_head): j, j+half, …
    rotated = apply_rope(side_by_side, positions, base)  # (..., T, d_head)
    return torch.cat((rotated[..., 0::2], rotated[..., 1::2]), dim=-1)  # back to (first halves, second halves)


def expand_kv_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, kv_heads, T, d_head) -> (batch, num_heads, T, d_head): query head h reads key/value head
    ``h // (num_heads / kv_heads)``, so each key/value head is repeated for its group of neighbouring query heads."""
    kv_heads = x.shape[1]
    if num_heads % kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of the {kv_heads} key/value heads of x")
    return x.repeat_interleave(num_heads // kv_heads, dim=1)  # (batch, heads, T, d_head)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with RoPE, ``num_heads`` query heads and ``num_kv_heads`` shared key/value heads."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        c = config
        self.num_heads, self.num_kv_heads, self.rope_base = c.num_heads, c.num_kv_heads, c.rope_base
        d_head = c.d_model // c.num_heads
        self.q_proj = nn.Linear(c.d_model, c.num_heads * d_head, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.num_kv_heads * d_head, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.num_kv_heads * d_head, bias=False)
        self.o_proj = nn.Linear(c.num_heads * d_head, c.d_model, bias=False)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """``x``: (batch, T, d_model) -> (batch, T, d_model). With a ``cache``, the new positions follow the cached
        ones, see them all, and their keys and values (``num_kv_heads`` heads) are appended to it."""
        past = 0 if cache is None else len(cache)
        positions = torch.arange(past, past + x.shape[1], device=x.device)  # (T,)
        q = apply_rope_halves(split_heads(self.q_proj(x), self.num_heads), positions, self.rope_base)
        k = apply_rope_halves(split_heads(self.k_proj(x), self.num_kv_heads), positions, self.rope_base)
        v = split_heads(self.v_proj(x), self.num_kv_heads)  # (batch, kv_heads, T, d_head)
        if cache is not None:
            if past:
                k = torch.cat((cache.key, k), dim=2)  # (batch, kv_heads, T_past + T, d_head)
                v = torch.cat((cache.value, v), dim=2)
            cache.key, cache.value = k, v
        mask = causal_mask(k.shape[2], device=x.device)[past:]  # (T, T_past + T): the new rows
        attended, _ = scaled_dot_product_attention(  # (batch, heads, T, d_head)
            q, expand_kv_heads(k, self.num_heads), expand_kv_heads(v, self.num_heads), mask, need_weights=False
        )
        return self.o_proj(merge_heads(attended))  # (batch, T, d_model)


class LlamaBlock(nn.Module):
    """Pre-norm block: ``x + attention(norm(x))``, then ``x + feed_forward(norm(x))``; no dropout."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(config.d_model, config.rms_norm_eps)
        self.attention = GroupedQueryAttention(config)
        self.feed_forward_norm = RMSNorm(config.d_model, config.rms_norm_eps)
        self.feed_forward = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """(batch, T, d_model) -> (batch, T, d_model)."""
        x = x + self.attention(self.attention_norm(x), cache)
        return x + self.feed_forward(self.feed_forward_norm(x))


class Llama(nn.Module):
    """Token embeddings (no position embeddings: RoPE acts inside attention), Llama blocks, a final RMSNorm and a
    linear head giving next-token logits at every position."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(LlamaBlock(config) for _ in range(config.num_layers))
        self.final_norm = RMSNorm(config.d_model, config.rms_norm_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_output:
            self.head.weight = self.token_embedding.weight  # (V, d_model), one shared tensor

    def forward(self, tokens: torch.Tensor, cache: list[KVCache] | None = None) -> torch.Tensor:
        """``tokens``: (batch, T) ids -> logits (batch, T, V). With a ``cache`` (from :meth:`new_cache`), pass only
        the new tokens: they take the positions after the cached ones."""
        check_token_ids(tokens, self.config.vocab_size)
        x = self.token_embedding(tokens)  # (batch, T, d_model)
        for block, layer_cache in zip(self.blocks, cache or [None] * len(self.blocks), strict=True):
            x = block(x, layer_cache)
        return self.head(self.final_norm(x))  # (batch, T, V)

    def new_cache(self) -> list[KVCache]:
        """An empty cache, one ``KVCache`` per block, for generation one token at a time."""
        return [KVCache() for _ in self.blocks]

    @classmethod
    def from_hf_llama(cls, hf_model: Any) -> Llama:
        """A course ``Llama`` with the configuration and weights of a Hugging Face ``LlamaForCausalLM``, in its dtype.

        Raises a ValueError for what this model does not implement (biases, scaled RoPE, another head width).
        """
        c = hf_model.config
        rope = c.rope_parameters
        unsupported = {
            "attention_bias": c.attention_bias,
            "mlp_bias": c.mlp_bias,
            "hidden_act != 'silu'": c.hidden_act != "silu",
            "rope_type != 'default'": rope.get("rope_type", "default") != "default",
            "head_dim != hidden_size / num_attention_heads": c.head_dim * c.num_attention_heads != c.hidden_size,
        }
        if any(unsupported.values()):
            raise ValueError(
                f"this LlamaConfig uses {[name for name, used in unsupported.items() if used]}, which the course's "
                "Llama does not implement: build the Hugging Face model without them"
            )
        config = LlamaConfig(
            vocab_size=c.vocab_size, d_model=c.hidden_size, num_layers=c.num_hidden_layers,
            num_heads=c.num_attention_heads, num_kv_heads=c.num_key_value_heads, d_ff=c.intermediate_size,
            rms_norm_eps=c.rms_norm_eps, rope_base=rope["rope_theta"], tie_output=c.tie_word_embeddings,
        )
        model = cls(config).to(hf_model.dtype)
        hf_weights = hf_model.state_dict()
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                source = hf_weights[hf_llama_name(name)]
                if source.shape != parameter.shape:
                    raise ValueError(f"{hf_llama_name(name)} has shape {tuple(source.shape)}, but {name} needs "
                                     f"{tuple(parameter.shape)}: the two models' configurations differ")
                parameter.copy_(source)
        return model


HF_LLAMA_NAMES = {  # the course's names -> Hugging Face's, within one block
    "attention_norm": "input_layernorm",
    "attention": "self_attn",
    "feed_forward_norm": "post_attention_layernorm",
    "feed_forward": "mlp",
}


def hf_llama_name(name: str) -> str:
    """The name in ``LlamaForCausalLM.state_dict()`` of the course ``Llama``'s parameter ``name``, e.g.
    ``blocks.0.attention.q_proj.weight`` -> ``model.layers.0.self_attn.q_proj.weight``."""
    top = {"token_embedding.weight": "model.embed_tokens.weight", "final_norm.weight": "model.norm.weight",
           "head.weight": "lm_head.weight"}
    if name in top:
        return top[name]
    _, layer, part, rest = name.split(".", 3)  # blocks, 0, attention, q_proj.weight
    return f"model.layers.{layer}.{HF_LLAMA_NAMES[part]}.{rest}"
