"""Copy weights between PyTorch's built-in modules and the course's, so both can be proven to compute the same."""

from __future__ import annotations

import torch
from torch import nn

from .multi_head import MultiHeadAttention


@torch.no_grad()
def copy_multihead_weights(source: nn.MultiheadAttention, target: MultiHeadAttention) -> None:
    """Copy ``source``'s weights into ``target`` in place.

    ``nn.MultiheadAttention`` stacks the query, key and value projections in ``in_proj_weight`` (3*d_model, d_model)
    and ``in_proj_bias``; they are split into ``q_proj``, ``k_proj`` and ``v_proj``. ``out_proj`` is copied as is.
    """
    if source.embed_dim != target.d_model or source.num_heads != target.num_heads:
        raise ValueError(
            f"cannot copy nn.MultiheadAttention(embed_dim={source.embed_dim}, num_heads={source.num_heads}) into "
            f"MultiHeadAttention(d_model={target.d_model}, num_heads={target.num_heads}): sizes must match"
        )
    if source.in_proj_weight is None:
        raise ValueError("source has separate q/k/v weights (kdim/vdim differ from embed_dim): not supported")
    if (source.in_proj_bias is None) != (target.q_proj.bias is None):
        raise ValueError("source and target disagree on bias: build both with the same bias setting")
    for projection, weight in zip(
        (target.q_proj, target.k_proj, target.v_proj), source.in_proj_weight.chunk(3), strict=True
    ):
        projection.weight.copy_(weight)
    if source.in_proj_bias is not None:
        for projection, bias in zip(
            (target.q_proj, target.k_proj, target.v_proj), source.in_proj_bias.chunk(3), strict=True
        ):
            projection.bias.copy_(bias)
    target.out_proj.weight.copy_(source.out_proj.weight)
    if source.out_proj.bias is not None:
        target.out_proj.bias.copy_(source.out_proj.bias)
