"""A Llama-style decoder: the GPT of lesson 11 with the four changes today's open LLMs share.

- **RMSNorm** instead of LayerNorm: divide by the root mean square of the features, no mean subtracted, no bias.
- **SwiGLU** feed-forward: ``down(silu(gate(x)) * up(x))``, a gated hidden layer, no biases.
- **RoPE** (lesson 04) on queries and keys instead of learned positions; Llama pairs feature m with feature
  m + d_head/2 (the two halves), where ``positions.apply_rope`` pairs neighbours (2m, 2m+1).
- **Grouped-query attention** (GQA): ``num_heads`` query heads share ``num_kv_heads`` key/value heads, so the KV cache
  holds ``num_kv_heads`` heads only.

Llama 3.1 and later also slow down RoPE's slowest rotations (:func:`llama3_rope_frequencies`) to read contexts longer
than those they were pre-trained on.

:meth:`Llama.from_hf_llama` copies the weights of a Hugging Face ``LlamaForCausalLM``; ``tests/test_llama.py`` proves
both compute the same logits. This module imports nothing from ``transformers``: it reads the model it is given.

Shape legend: batch, T = new positions, T_past = cached positions, d_model, heads (query heads), kv_heads,
d_head = d_model / heads, d_ff = hidden width of the feed-forward, V = vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .attention import scaled_dot_product_attention
from .data import check_token_ids
from .masks import causal_mask
from .multi_head import KVCache, check_heads, merge_heads, split_heads
from .positions import apply_rope, rope_frequencies


@dataclass(frozen=True)
class Llama3RopeScaling:
    """Llama 3.1's RoPE scaling (:func:`llama3_rope_frequencies`); the defaults are Llama 3.1's own values.

    Hugging Face's ``rope_parameters`` with ``rope_type: llama3`` hold the same numbers; its name for
    ``original_context`` is ``original_max_position_embeddings``.
    """

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context: int = 8192

    def __post_init__(self) -> None:
        if self.factor < 1 or self.original_context < 1:
            raise ValueError(f"factor={self.factor} and original_context={self.original_context} must be at least 1: "
                             "the scaled model reads factor times the original context, e.g. factor=8.0")
        if not 0 < self.low_freq_factor < self.high_freq_factor:
            raise ValueError(
                f"low_freq_factor={self.low_freq_factor} and high_freq_factor={self.high_freq_factor} must satisfy "
                "0 < low_freq_factor < high_freq_factor: they bound the band of smoothly scaled frequencies, "
                "e.g. 1.0 and 4.0"
            )


@dataclass
class LlamaConfig:
    """Sizes of a Llama-style model. Impossible sizes raise a ValueError here.

    ``num_kv_heads``: key/value heads, a divisor of ``num_heads`` (``num_heads``: multi-head attention; 1:
    multi-query attention); ``tie_output``: the output layer reuses the token embedding matrix; ``rope_scaling``:
    Llama 3.1's rescaled RoPE frequencies, or None for plain RoPE.
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
    rope_scaling: Llama3RopeScaling | None = None

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
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, Llama3RopeScaling):
            raise ValueError(f"rope_scaling={self.rope_scaling!r} must be None or a Llama3RopeScaling, e.g. "
                             "Llama3RopeScaling(factor=8.0, original_context=8192)")


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


def llama3_rope_frequencies(frequencies: torch.Tensor, scaling: Llama3RopeScaling) -> torch.Tensor:
    """Llama 3.1's RoPE frequencies: the slowest rotations slowed down ``factor`` times, the fast ones kept, so that
    a model pre-trained on ``original_context`` positions reads contexts ``factor`` times longer.

    As in Meta's reference implementation (``apply_scaling`` in github.com/meta-llama/llama-models, ``models/llama3``)
    and Hugging Face's ``rope_type: llama3``. Each feature pair's wavelength ``2π / frequency`` (positions per turn)
    falls into one of three bands:

    - longer than ``original_context / low_freq_factor``: the pair turned less than ``low_freq_factor`` times over
      the pre-training context; its frequency is divided by ``factor``, so a ``factor`` times longer context turns it
      through the angles seen in pre-training (position interpolation);
    - shorter than ``original_context / high_freq_factor``: the pair turned more than ``high_freq_factor`` times, so
      every angle was seen and it tells nearby positions apart: kept;
    - in between: ``frequency * (s + (1 - s) / factor)``, with ``s`` rising linearly in the number of turns
      ``original_context / wavelength`` from 0 (divided by ``factor``) to 1 (kept) across the band.

    ``frequencies``: (d_head/2,) radians per position -> (d_head/2,) scaled, same dtype. Only the frequencies change:
    Hugging Face's attention scaling for ``llama3`` is 1, the cosines and sines are not rescaled.
    """
    c = scaling
    turns = c.original_context * frequencies / (2 * math.pi)  # (d_head/2,) turns over the pre-training context
    s = ((turns - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor)).clamp(0.0, 1.0)  # (d_head/2,)
    return frequencies * (s + (1 - s) / c.factor)  # (d_head/2,): s = 0 slowest band, s = 1 fastest band


def apply_rope_halves(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0,
    frequencies: torch.Tensor | None = None,
) -> torch.Tensor:
    """RoPE as Llama lays it out: feature m is rotated together with feature m + d_head/2 (same angles as
    ``positions.apply_rope``, which pairs features 2m and 2m + 1).

    ``x``: (..., T, d_head); ``positions``: (T,), default 0..T-1; ``frequencies``: (d_head/2,) radians per position,
    default ``base**(-2m/d_head)``. Computed as ``apply_rope`` on the features reordered so that each pair sits side by
    side, then put back in place.
    """
    half = x.shape[-1] // 2
    side_by_side = torch.stack((x[..., :half], x[..., half:]), dim=-1).flatten(-2)  # (..., T, d_head): j, j+half, …
    rotated = apply_rope(side_by_side, positions, base, frequencies)  # (..., T, d_head)
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
        self.num_heads, self.num_kv_heads = c.num_heads, c.num_kv_heads
        d_head = c.d_model // c.num_heads
        frequencies = rope_frequencies(d_head, c.rope_base)  # (d_head/2,) float64
        if c.rope_scaling is not None:
            frequencies = llama3_rope_frequencies(frequencies, c.rope_scaling)
        self.rope_frequencies = frequencies  # a plain tensor, not a buffer: casting the model leaves it float64
        self.q_proj = nn.Linear(c.d_model, c.num_heads * d_head, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.num_kv_heads * d_head, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.num_kv_heads * d_head, bias=False)
        self.o_proj = nn.Linear(c.num_heads * d_head, c.d_model, bias=False)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """``x``: (batch, T, d_model) -> (batch, T, d_model). With a ``cache``, the new positions follow the cached
        ones, see them all, and their keys and values (``num_kv_heads`` heads) are appended to it."""
        past = 0 if cache is None else len(cache)
        positions = torch.arange(past, past + x.shape[1], device=x.device)  # (T,)
        frequencies = self.rope_frequencies  # (d_head/2,)
        q = apply_rope_halves(split_heads(self.q_proj(x), self.num_heads), positions, frequencies=frequencies)
        k = apply_rope_halves(split_heads(self.k_proj(x), self.num_kv_heads), positions, frequencies=frequencies)
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

        Llama 3's ``rope_type: llama3`` becomes ``rope_scaling``. Raises a ValueError for what this model does not
        implement (biases, other RoPE types such as linear, dynamic or yarn, another head width).
        """
        c = hf_model.config
        rope = c.rope_parameters
        rope_type = rope.get("rope_type", "default")
        unsupported = {
            "attention_bias": c.attention_bias,
            "mlp_bias": c.mlp_bias,
            "hidden_act != 'silu'": c.hidden_act != "silu",
            f"rope_type={rope_type!r} (implemented: 'default', 'llama3')": rope_type not in ("default", "llama3"),
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
            rope_scaling=None if rope_type == "default" else Llama3RopeScaling(
                factor=rope["factor"], low_freq_factor=rope["low_freq_factor"],
                high_freq_factor=rope["high_freq_factor"], original_context=rope["original_max_position_embeddings"],
            ),
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
