"""Softmax and scaled dot-product attention, written out step by step.

Shape legend: ``T_q`` queries, ``T_k`` keys (one value per key), ``d_k`` components of a query or key, ``d_v``
components of a value; ``…`` is any number of leading batch dimensions, e.g. ``(batch, heads)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .masks import validate_mask


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


def entropy_bits(weights: torch.Tensor) -> float:
    """Entropy ``-Σ w log₂ w`` of one weight distribution (n,), in bits.

    0 when all the weight is on one key, ``log2(n)`` when it is spread evenly over n keys; a weight of 0 (a masked
    key) adds nothing, as ``w log w → 0`` when ``w → 0``.
    """
    if weights.dim() != 1:
        raise ValueError(
            f"entropy_bits expects one distribution of shape (n,), got shape {tuple(weights.shape)}: "
            "pass one row, e.g. weights[i]"
        )
    positive = weights[weights > 0]  # (k,) the keys that get any weight
    return float(-(positive * positive.log2()).sum())


def unit_variance_scores(
    d_k: int, num_queries: int = 128, num_keys: int = 16, seed: int = 0, max_d_k: int = 512
) -> torch.Tensor:
    """Dot products ``q·k`` of random queries and keys whose components are independent, mean 0 and variance 1 (as
    at initialisation): a float64 tensor (num_queries, num_keys), one row of scores per query.

    The vectors are drawn once at width ``max_d_k`` from ``seed`` (on the CPU) and cut to their first ``d_k``
    components, so raising ``d_k`` adds components to the same vectors: each score is a sum of ``d_k`` products
    ``q_i k_i``, so its variance is ``d_k`` and its typical size ``√d_k``.
    """
    if not 1 <= d_k <= max_d_k:
        raise ValueError(f"d_k={d_k} must be in 1 … max_d_k={max_d_k}: raise max_d_k to draw wider vectors")
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(num_queries, max_d_k, generator=generator, dtype=torch.float64)[:, :d_k]  # (num_queries, d_k)
    k = torch.randn(num_keys, max_d_k, generator=generator, dtype=torch.float64)[:, :d_k]  # (num_keys, d_k)
    return q @ k.T  # (num_queries, num_keys)


def additive_attention_scores(
    query: torch.Tensor, keys: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """Additive scores of Bahdanau, Cho and Bengio (2015): ``e_j = tanh(q W + k_j U) · v`` for every key ``k_j``.

    The paper writes column vectors, ``e_ij = vᵀ tanh(W s_{i-1} + U h_j)`` with ``s_{i-1}`` the decoder's state and
    ``h_j`` the encoder's; here vectors are rows, so ``w_query`` (d_q, d_a) and ``w_key`` (d_k, d_a) are the
    transposes of its W and U. Shapes: ``query`` (…, T_q, d_q), ``keys`` (…, T_k, d_k), ``v`` (d_a,); returns
    scores (…, T_q, T_k), to be turned into weights by a softmax over the keys.
    """
    projected_query = query @ w_query  # (…, T_q, d_a)
    projected_keys = keys @ w_key  # (…, T_k, d_a)
    hidden = torch.tanh(projected_query[..., :, None, :] + projected_keys[..., None, :, :])  # (…, T_q, T_k, d_a)
    return hidden @ v  # (…, T_q, T_k)


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

    ``mask`` (boolean, broadcastable to (…, T_q, T_k)) is **True where attention is allowed** (as in
    ``torch.nn.functional.scaled_dot_product_attention``; ``nn.MultiheadAttention``'s ``attn_mask`` and
    ``key_padding_mask`` use the opposite polarity, True = blocked); see ``masks.validate_mask``. A query whose
    keys are *all* blocked gets weights 0 and an output of 0, never NaN.

    ``dropout_p`` zeroes each weight with that probability and rescales the rest by ``1 / (1 - dropout_p)``;
    the returned weights are the ones used. Pass ``dropout_p > 0`` only while training (e.g.
    ``dropout_p=self.p if self.training else 0.0``), as with PyTorch's function. ``scale`` (keyword only)
    replaces the default ``1/√d_k``.

    ``need_weights=False`` (keyword only) returns ``(output, None)`` and lets PyTorch's fused kernel
    ``F.scaled_dot_product_attention`` do the work, as ``nn.MultiheadAttention`` does. When a boolean mask leaves
    some query with no key, the readable path below is taken instead: torch 2.13's fused kernel also returns 0 for
    such a query (``tests/test_attention.py`` checks it), but PyTorch documents nothing for that case, while
    ``nn.MultiheadAttention`` returns NaN there when it also returns the weights (``need_weights=True``, its
    default) and 0 when it does not, in either mode. Ours keeps one documented answer, 0, on every path.

    Bad input (shapes that do not fit, an empty tensor, a broken mask, ``dropout_p`` outside [0, 1)) raises a
    ValueError naming the fix, on both paths.
    """
    scores_shape = check_attention_inputs(query, key, value)  # (…, T_q, T_k)
    check_dropout(dropout_p, "dropout_p")
    if mask is not None:
        validate_mask(mask, scores_shape)
    if not need_weights and _fused_kernel_gives_the_same(mask):
        output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        return output, None
    d_k = query.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    scores = (query * scale) @ key.transpose(-2, -1)  # (…, T_q, T_k); scaling q is cheaper than the scores
    if mask is None:
        weights = torch.softmax(scores, dim=-1)  # (…, T_q, T_k); the fused equal of softmax() above
    else:
        scores = scores.masked_fill(~mask, float("-inf"))  # blocked keys get weight exp(-inf) = 0
        blocked_rows = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (…, T_q, 1): no key allowed
        scores = scores.masked_fill(blocked_rows, 0.0)  # a finite row, so softmax gives no NaN
        weights = torch.softmax(scores, dim=-1).masked_fill(blocked_rows, 0.0)  # (…, T_q, T_k)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    output = weights @ value  # (…, T_q, d_v)
    return output, (weights if need_weights else None)


def _fused_kernel_gives_the_same(mask: torch.Tensor | None) -> bool:
    """True unless a (boolean) mask blocks every key of some query (see ``need_weights`` above)."""
    return mask is None or bool(mask.any(dim=-1).all())


def check_dropout(p: float, name: str = "dropout") -> None:
    """Raise a ValueError unless the dropout probability ``p`` lies in [0, 1) (1 would zero every value)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(
            f"{name}={p} is outside [0, 1): it is the probability of zeroing each value while training, "
            "so use e.g. 0.1, or 0.0 for no dropout"
        )


def check_attention_inputs(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[int, ...]:
    """Raise a ValueError naming the shapes and the fix when query, key and value do not fit together.

    Returns the shape of the scores, (…, T_q, T_k). Reads shapes only, never the values.
    """
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise ValueError(
            f"attention needs at least 2-D tensors (…, T, d); got {shapes}. "
            "Add a sequence dimension, e.g. query.unsqueeze(0) for a single query."
        )
    if 0 in (*query.shape, *key.shape, *value.shape):
        raise ValueError(
            f"attention got an empty tensor: {shapes}. Give it at least one query and one key, each with at least "
            "one component (with no key there is nothing to average, and the result would be a silent 0)."
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dimension d_k; got {shapes}. "
            "Project queries and keys to the same size (W^Q and W^K need the same number of output columns)."
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions T_k (dimension -2); got {shapes}. "
            "Every key needs exactly one value: build both from the same sequence."
        )
    try:
        leading = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, heads) dimensions do not broadcast; got {shapes}. "
            "Give query, key and value the same batch and head dimensions."
        ) from None
    return (*leading, query.shape[-2], key.shape[-2])
