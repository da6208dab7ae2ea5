"""Attention computed over key/value chunks with an online softmax: the idea behind FlashAttention.

Naive attention builds the whole ``(T_q, T_k)`` score matrix, so its memory grows with ``T²``. Here keys and
values are read ``chunk_size`` at a time; three running quantities per query row are enough to get the exact
softmax-weighted sum at the end:

- ``running_max``: the largest score seen so far (subtracted before ``exp`` so nothing overflows),
- ``running_sum``: the sum of ``exp(score - running_max)`` over the keys seen so far,
- ``accumulator``: the sum of ``exp(score - running_max) * value`` over the keys seen so far.

When a new chunk raises the maximum, the old sum and accumulator are rescaled by ``exp(old_max - new_max)``.
The time is still quadratic in ``T``; only the memory for scores drops from ``T_q × T_k`` to
``T_q × chunk_size``.

Shapes: ``(..., T_q, d_k)`` queries, ``(..., T_k, d_k)`` keys, ``(..., T_k, d_v)`` values; ``...`` is any
batch and head dimensions. A boolean mask is True where attention is allowed (as in
``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .attention import check_attention_inputs
from .masks import validate_mask


def online_softmax_update(
    running_max: Tensor,
    running_sum: Tensor,
    accumulator: Tensor,
    scores: Tensor,
    values: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Fold one chunk of scores and values into the running softmax statistics.

    Args:
        running_max: ``(..., T_q, 1)`` largest score so far (``-inf`` before the first chunk).
        running_sum: ``(..., T_q, 1)`` sum of ``exp(score - running_max)`` so far.
        accumulator: ``(..., T_q, d_v)`` sum of ``exp(score - running_max) * value`` so far.
        scores: ``(..., T_q, C)`` this chunk's scaled scores, ``-inf`` where masked.
        values: ``(..., C, d_v)`` this chunk's values.

    Returns:
        The updated ``(running_max, running_sum, accumulator)``. After the last chunk,
        ``accumulator / running_sum`` is the attention output.
    """
    chunk_max = scores.amax(dim=-1, keepdim=True)  # (..., T_q, 1)
    new_max = torch.maximum(running_max, chunk_max)  # (..., T_q, 1)
    # A row that has seen only masked keys keeps a max of -inf; subtract 0 there so exp gives 0, not NaN.
    safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    rescale = torch.exp(running_max - safe_max)  # (..., T_q, 1): shrinks the old statistics to the new max
    weights = torch.exp(scores - safe_max)  # (..., T_q, C): unnormalised softmax weights of this chunk
    new_sum = running_sum * rescale + weights.sum(dim=-1, keepdim=True)  # (..., T_q, 1)
    new_accumulator = accumulator * rescale + weights @ values  # (..., T_q, d_v)
    return new_max, new_sum, new_accumulator


def chunked_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    chunk_size: int = 256,
) -> Tensor:
    """Scaled dot-product attention over key/value chunks of ``chunk_size``, without the full score matrix.

    Equal to ``softmax(q kᵀ / √d_k) v`` (within float rounding); rows whose keys are all masked give 0.

    Args:
        query: ``(..., T_q, d_k)``.
        key: ``(..., T_k, d_k)``.
        value: ``(..., T_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., T_q, T_k)``, True where attention is allowed.
        chunk_size: how many keys to score at once.

    Returns:
        ``(..., T_q, d_v)`` attention output (no weights: they are never stored).

    Inputs and mask are checked by the same rules as ``scaled_dot_product_attention``'s.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be a positive number of keys, e.g. 256")
    scores_shape = check_attention_inputs(query, key, value)  # (..., T_q, T_k)
    *batch_shape, t_q, t_k = scores_shape
    if mask is not None:
        validate_mask(mask, scores_shape)
        mask = mask.expand(scores_shape)  # a view, no copy

    scale = 1.0 / math.sqrt(query.shape[-1])
    running_max = query.new_full((*batch_shape, t_q, 1), float("-inf"))  # (..., T_q, 1)
    running_sum = query.new_zeros((*batch_shape, t_q, 1))  # (..., T_q, 1)
    accumulator = query.new_zeros((*batch_shape, t_q, value.shape[-1]))  # (..., T_q, d_v)
    for start in range(0, t_k, chunk_size):
        stop = min(start + chunk_size, t_k)
        scores = (query @ key[..., start:stop, :].transpose(-2, -1)) * scale  # (..., T_q, C)
        if mask is not None:
            scores = scores.masked_fill(~mask[..., start:stop], float("-inf"))
        running_max, running_sum, accumulator = online_softmax_update(
            running_max, running_sum, accumulator, scores, value[..., start:stop, :]
        )
    # Fully masked rows have running_sum 0 and accumulator 0: divide by 1 there so they stay 0.
    return accumulator / torch.where(running_sum == 0, torch.ones_like(running_sum), running_sum)
