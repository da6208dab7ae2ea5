"""Softmax and scaled dot-product attention, written out step by step.

Shape legend: ``T_q`` queries, ``T_k`` keys (one value per key), ``d_k`` components of a query or key, ``d_v``
components of a value; ``…`` is any number of leading batch dimensions, e.g. ``(batch, heads)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Turn scores into weights that are positive and sum to 1 along ``dim``: ``exp(x_i) / Σ_j exp(x_j)``.

    Subtracting the largest score first changes nothing mathematically (the factor ``exp(-max)`` cancels) but
    keeps every ``exp`` at most 1, so huge scores cannot overflow to ``inf``. Equals
    ``torch.softmax(x, dim)``, including ``-inf`` scores (weight 0) and rows that are entirely ``-inf``
    (NaN, as in PyTorch).
    """
    shifted = x - x.amax(dim=dim, keepdim=True)  # largest entry is now 0
    exps = shifted.exp()  # each in [0, 1]
    return exps / exps.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    *,
    scale: float | None = None,
    need_weights: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``softmax(query @ keyᵀ / √d_k) @ value``: every query takes a weighted average of the values.

    Shapes: ``query`` (…, T_q, d_k), ``key`` (…, T_k, d_k), ``value`` (…, T_k, d_v); the leading dimensions
    must broadcast. Returns ``(output, weights)``: ``output`` (…, T_q, d_v) and ``weights`` (…, T_q, T_k),
    each row of ``weights`` summing to 1.

    ``mask`` (broadcastable to (…, T_q, T_k)) is either boolean, **True where attention is allowed** (as in
    ``torch.nn.functional.scaled_dot_product_attention``; ``nn.MultiheadAttention``'s ``attn_mask`` and
    ``key_padding_mask`` use the opposite polarity, True = blocked), or floating point, added to the scores
    (0 = allowed, ``-inf`` = blocked). A query whose keys are *all* blocked gets weights 0 and an output of 0,
    never NaN.

    ``dropout_p`` zeroes each weight with that probability and rescales the rest by ``1 / (1 - dropout_p)``;
    the returned weights are the ones used. Pass ``dropout_p > 0`` only while training (e.g.
    ``dropout_p=self.p if self.training else 0.0``), as with PyTorch's function. ``scale`` (keyword only)
    replaces the default ``1/√d_k``.

    ``need_weights=False`` (keyword only) returns ``(output, None)`` and lets PyTorch's fused kernel
    ``F.scaled_dot_product_attention`` do the work, as ``nn.MultiheadAttention`` does. When a boolean mask leaves
    some query with no key, the readable path below is taken instead: torch 2.13's fused kernel also returns 0 for
    such a query (``tests/test_attention.py`` checks it), but PyTorch documents nothing for that case, while
    ``nn.MultiheadAttention`` returns NaN there in its default path (training mode, or with weights) and 0 in its
    fast inference path. Ours keeps one documented answer, 0, on every path.
    """
    _check_shapes(query, key, value)
    if not need_weights and _fused_kernel_gives_the_same(mask):
        output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        return output, None
    d_k = query.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    scores = (query * scale) @ key.transpose(-2, -1)  # (…, T_q, T_k); scaling q is cheaper than the scores
    if mask is None:
        weights = torch.softmax(scores, dim=-1)  # (…, T_q, T_k); the fused equal of softmax() above
    else:
        scores = _apply_mask(scores, mask)
        blocked_rows = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (…, T_q, 1): no key allowed
        scores = scores.masked_fill(blocked_rows, 0.0)  # a finite row, so softmax gives no NaN
        weights = torch.softmax(scores, dim=-1).masked_fill(blocked_rows, 0.0)  # (…, T_q, T_k)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    output = weights @ value  # (…, T_q, d_v)
    return output, (weights if need_weights else None)


def _fused_kernel_gives_the_same(mask: torch.Tensor | None) -> bool:
    """True unless a mask is floating point or blocks every key of some query (see ``need_weights`` above)."""
    if mask is None:
        return True
    if mask.dtype != torch.bool:
        return False  # float masks keep the readable path, which validates them
    return bool(mask.any(dim=-1).all())


def _check_shapes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    """Raise a ValueError naming the shapes and the fix when query, key and value do not fit together."""
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise ValueError(
            f"attention needs at least 2-D tensors (…, T, d); got {shapes}. "
            "Add a sequence dimension, e.g. query.unsqueeze(0) for a single query."
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dimension d_k; got {shapes}. "
            "Project queries and keys to the same size (W_Q and W_K need the same number of output columns)."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions T_k (dimension -2); got {shapes}. "
            "Every key needs exactly one value: build both from the same sequence."
        )
    try:
        torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, heads) dimensions do not broadcast; got {shapes}. "
            "Give query, key and value the same batch and head dimensions."
        ) from None


def _apply_mask(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Block the scores where a boolean mask is False, or add a float mask; validate the mask first."""
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(
            f"mask must be boolean (True = attention allowed) or floating point (added to the scores); "
            f"got dtype {mask.dtype}. Convert a 0/1 mask with mask.bool()."
        )
    try:
        fits = torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores.shape)} (…, T_q, T_k). Give it shape (T_q, T_k), "
            "or (batch, 1, 1, T_k) for a padding mask."
        )
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask
