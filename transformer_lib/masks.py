"""Boolean attention masks: True where attention is allowed.

This is the convention of ``torch.nn.functional.scaled_dot_product_attention`` and of this course.
``torch.nn.MultiheadAttention`` uses the opposite polarity (True = *not* allowed): pass ``~mask`` to it.

Shape legend: T = sequence length, batch = number of sequences.
"""

from __future__ import annotations

import torch


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The look-ahead mask: query i may attend to keys 0..i.

    Returns a ``(size, size)`` bool tensor, rows = queries, columns = keys, True on and below the diagonal.
    The future (not allowed) lies above the diagonal. ``nn.MultiheadAttention`` wants ``~causal_mask(size)``.
    """
    if size < 1:
        raise ValueError(f"causal_mask needs size >= 1, got size={size}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()  # (T, T)


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """A key mask hiding padding: True where the key is a real token.

    ``tokens`` is ``(batch, T)`` of token ids; returns ``(batch, 1, 1, T)`` bool, which broadcasts against
    attention scores ``(batch, heads, T_q, T_k)``. ``nn.MultiheadAttention``'s ``key_padding_mask`` is the
    opposite: ``~padding_mask(tokens, pad_id)[:, 0, 0]``, shaped ``(batch, T)``.
    """
    if tokens.dim() != 2:
        raise ValueError(
            f"padding_mask expects token ids shaped (batch, T), got shape {tuple(tokens.shape)}: "
            "add a batch dimension with tokens.unsqueeze(0)"
        )
    return (tokens != pad_id)[:, None, None, :]  # (batch, 1, 1, T)
