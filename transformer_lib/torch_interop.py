"""Copy weights between PyTorch's built-in modules and the course's, so both can be proven to compute the same."""

from __future__ import annotations

import torch
from torch import nn

from .layers import DecoderLayer, EncoderLayer
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


def _copy_submodules(source: nn.Module, target: nn.Module, attention_names: tuple[str, ...], names: tuple[str, ...]):
    """Copy attention blocks with ``copy_multihead_weights`` and the same-named Linear/LayerNorm modules as they are."""
    for name in attention_names:
        copy_multihead_weights(getattr(source, name), getattr(target, name))
    for name in names:
        getattr(target, name).load_state_dict(getattr(source, name).state_dict())


@torch.no_grad()
def copy_encoder_layer_weights(source: nn.TransformerEncoderLayer, target: EncoderLayer) -> None:
    """Copy an ``nn.TransformerEncoderLayer``'s weights into the course's ``EncoderLayer`` (same sizes) in place."""
    if source.norm_first != target.norm_first:
        raise ValueError(f"source has norm_first={source.norm_first}, target norm_first={target.norm_first}: "
                         "build both with the same setting")
    _copy_submodules(source, target, ("self_attn",), ("linear1", "linear2", "norm1", "norm2"))


@torch.no_grad()
def copy_decoder_layer_weights(source: nn.TransformerDecoderLayer, target: DecoderLayer) -> None:
    """Copy an ``nn.TransformerDecoderLayer``'s weights into the course's ``DecoderLayer`` (same sizes) in place."""
    if source.norm_first != target.norm_first:
        raise ValueError(f"source has norm_first={source.norm_first}, target norm_first={target.norm_first}: "
                         "build both with the same setting")
    _copy_submodules(
        source, target, ("self_attn", "multihead_attn"), ("linear1", "linear2", "norm1", "norm2", "norm3")
    )
