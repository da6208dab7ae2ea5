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
        raise ValueError(
            f"causal_mask needs size >= 1, got size={size}: pass the sequence length, e.g. causal_mask(x.shape[1])"
        )
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


MASK_KINDS = ("none", "causal", "padding", "both")


def build_mask(kind: str, tokens: torch.Tensor, pad_id: int) -> torch.Tensor | None:
    """The attention mask of one of :data:`MASK_KINDS` for token ids ``tokens`` (batch, T).

    ``"none"`` -> None (every key allowed), ``"causal"`` -> (T, T), ``"padding"`` -> (batch, 1, 1, T) and
    ``"both"`` -> (batch, 1, T, T): a query sees the real keys at or before its own position.
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"unknown mask kind {kind!r}: choose one of {MASK_KINDS}")
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(tokens.shape[1])  # (T, T)
    if kind == "padding":
        return padding_mask(tokens, pad_id)  # (batch, 1, 1, T)
    return causal_mask(tokens.shape[1]) & padding_mask(tokens, pad_id)  # (batch, 1, T, T)


def validate_mask(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """The one rule for every attention mask in this library; raise a ValueError naming the fix if it is broken.

    ``mask`` must be boolean (True = attention allowed) and broadcast to ``scores_shape`` (…, T_q, T_k) without
    growing it. A float 0/1 mask is refused rather than added to the scores, where it would silently shift them
    instead of blocking anything. Checks only dtype and shape: it never reads the mask's values.
    """
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor (True = attention allowed), got dtype {mask.dtype}: "
            "build it with causal_mask / padding_mask or compare, e.g. tokens != pad_id"
        )
    scores_shape = tuple(scores_shape)
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        legend, fix = "(…, T_q, T_k)", f"use (T_q, T_k) = {scores_shape[-2:]}, plus leading dimensions of size 1"
        if len(scores_shape) == 4:  # multi-head attention: name the two masks the lessons build
            legend = "(batch, heads, T_q, T_k)"
            fix = "use (T_q, T_k) for a causal mask or (batch, 1, 1, T_k) for padding"
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {legend} = "
            f"{scores_shape}: {fix}"
        )
