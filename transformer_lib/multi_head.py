"""Multi-head attention: h heads of width d_model/h run side by side, then mixed by one output projection.

Shape legend: batch, T_q = number of queries, T_k = number of keys/values, d_model = model width,
heads = number of heads, d_head = d_model / heads.

Masks are boolean and True where attention is allowed (``transformer_lib.masks``); ``nn.MultiheadAttention`` uses
the opposite polarity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .attention import check_dropout, scaled_dot_product_attention


def check_heads(d_model: int, num_heads: int) -> None:
    """Raise a ValueError unless ``num_heads`` >= 1 divides ``d_model``: each head gets d_model / num_heads features.

    The one check behind ``split_heads``, ``MultiHeadAttention``, ``TransformerConfig`` and ``GPTConfig``.
    """
    if num_heads < 1 or d_model < 1:
        raise ValueError(
            f"d_model={d_model} and num_heads={num_heads} must both be at least 1: every head needs at least one "
            "feature, e.g. d_model=512 with num_heads=8 as in the paper"
        )
    if d_model % num_heads:
        divisors = [h for h in range(2, d_model) if d_model % h == 0][:3] or [1]
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: choose num_heads that divides "
            f"d_model, e.g. {' or '.join(map(str, divisors))}"
        )


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, T, d_model) -> (batch, heads, T, d_head): head h gets features h*d_head ... (h+1)*d_head - 1."""
    if x.dim() != 3:
        raise ValueError(
            f"split_heads expects x shaped (batch, T, d_model), got {tuple(x.shape)}: "
            "add a batch dimension with x.unsqueeze(0)"
        )
    batch, length, d_model = x.shape
    check_heads(d_model, num_heads)
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)  # (batch, heads, T, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, T, d_head) -> (batch, T, heads * d_head): the inverse of ``split_heads``."""
    if x.dim() != 4:
        raise ValueError(
            f"merge_heads expects x shaped (batch, heads, T, d_head), as split_heads returns, got {tuple(x.shape)}"
        )
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)  # (batch, T, d_model)


@dataclass
class KVCache:
    """Projected keys and values kept between calls, for incremental (token by token) decoding.

    ``key``/``value``: (batch, heads, T_cached, d_head), None until the first call.
    Self-attention (``static=False``): each call appends the new positions' keys and values.
    Cross-attention (``static=True``): keys and values are projected from the encoder output on the first call and
    reused afterwards, since the encoder output does not change while decoding.
    """

    key: torch.Tensor | None = None
    value: torch.Tensor | None = None
    static: bool = False

    def __len__(self) -> int:
        return 0 if self.key is None else self.key.shape[2]


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate query, key, value and output projections (nn.Linear each)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_heads(d_model, num_heads)
        check_dropout(dropout)
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` (batch, T_q, d_model) to ``key``/``value`` (batch, T_k, d_model).

        ``mask``: bool, True = allowed, broadcastable to (batch, heads, T_q, T_k), e.g. ``causal_mask(T)`` (T, T)
        or ``padding_mask(tokens, pad_id)`` (batch, 1, 1, T_k). With a ``cache``, T_k counts the cached positions
        too; ``masks.validate_mask`` checks the mask. Returns ``(output, weights)``: output (batch, T_q, d_model);
        weights (batch, heads, T_q, T_k), or None when ``need_weights=False`` (then PyTorch's fused kernel may run).
        A query whose keys are all masked gets all-zero weights and a zero attention result, never NaN.
        """
        self._check_inputs(query, key, value)
        q = split_heads(self.q_proj(query), self.num_heads)  # (batch, heads, T_q, d_head)
        if cache is not None and cache.static and cache.key is not None:
            k, v = cache.key, cache.value  # cross-attention: the encoder output was projected on the first call
        else:
            k = split_heads(self.k_proj(key), self.num_heads)  # (batch, heads, T_new, d_head)
            v = split_heads(self.v_proj(value), self.num_heads)  # (batch, heads, T_new, d_head)
            if cache is not None:
                if not cache.static and cache.key is not None:
                    k = torch.cat((cache.key, k), dim=2)  # (batch, heads, T_cached + T_new, d_head)
                    v = torch.cat((cache.value, v), dim=2)
                cache.key, cache.value = k, v
        dropout_p = self.dropout if self.training else 0.0
        attended, weights = scaled_dot_product_attention(  # (batch, heads, T_q, d_head), weights or None
            q, k, v, mask=mask, dropout_p=dropout_p, need_weights=need_weights
        )
        output = self.out_proj(merge_heads(attended))  # (batch, T_q, d_model)
        return output, weights

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError(
                f"expected query, key and value shaped (batch, T, d_model), got {shapes}: "
                "add a batch dimension with x.unsqueeze(0)"
            )
        if not (query.shape[-1] == key.shape[-1] == value.shape[-1] == self.d_model):
            raise ValueError(
                f"expected last dimension d_model={self.d_model} everywhere, got {shapes}: pass vectors of the "
                "width this module was built with, or build it with that d_model"
            )
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(
                f"query, key and value must have the same batch size, got {shapes}: take them from the same batch "
                "of sequences (one key/value sequence per query sequence)"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value must have the same length T_k (one value per key), got {shapes}")


@torch.no_grad()
def record_attention(model: nn.Module, *inputs: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
    """Run ``model(*inputs, **kwargs)`` once and return the attention weights of every ``MultiHeadAttention``
    inside it, by module name (e.g. ``"decoder_layers.1.multihead_attn"``), each (batch, heads, T_q, T_k).

    The layers may ask their attention for no weights (so the fused kernel can run); forward hooks ask for them here
    and are removed afterwards. Puts the model in eval mode (no dropout), without gradients.
    """
    recorded: dict[str, torch.Tensor] = {}

    def want_weights(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return args, {**kwargs, "need_weights": True}

    def keeper(name: str) -> Callable[..., None]:
        def keep_weights(module: nn.Module, args: tuple, kwargs: dict, output: tuple) -> None:
            recorded[name] = output[1]  # (batch, heads, T_q, T_k)

        return keep_weights

    handles = []
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            handles.append(module.register_forward_pre_hook(want_weights, with_kwargs=True))
            handles.append(module.register_forward_hook(keeper(name), with_kwargs=True))
    try:
        model.eval()
        model(*inputs, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return recorded
