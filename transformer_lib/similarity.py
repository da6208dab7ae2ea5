"""Dot products and cosine similarity between word vectors."""

from __future__ import annotations

import math

import numpy as np
import torch

ArrayLike = torch.Tensor | np.ndarray


def cosine_similarity(a: ArrayLike, b: ArrayLike, eps: float = 1e-12) -> torch.Tensor | np.ndarray:
    """Cosine of the angle between vectors: ``a·b / (|a| |b|)``.

    Shapes: 1-D ``a`` (d,) and ``b`` (d,) give a scalar; 2-D ``a`` (n, d) and ``b`` (m, d) give the pairwise
    matrix (n, m) whose entry [i, j] compares row i of ``a`` with row j of ``b``.

    Accepts torch tensors or NumPy arrays and returns the same kind as ``a``; results are clipped to [-1, 1]
    (rounding can push a cosine just past 1). A zero vector has no direction, so its cosine is undefined:
    instead of returning NaN this raises a ``ValueError`` naming the zero rows.
    """
    is_numpy = isinstance(a, np.ndarray)
    a_t = torch.as_tensor(a)
    b_t = torch.as_tensor(b)
    if a_t.dim() not in (1, 2) or b_t.dim() != a_t.dim():
        raise ValueError(
            f"cosine_similarity expects two vectors (d,) or two matrices (n, d) and (m, d); "
            f"got shapes {tuple(a_t.shape)} and {tuple(b_t.shape)}."
        )
    if a_t.shape[-1] != b_t.shape[-1]:
        raise ValueError(
            f"vectors must have the same number of components: got {a_t.shape[-1]} and {b_t.shape[-1]} "
            f"(shapes {tuple(a_t.shape)} and {tuple(b_t.shape)})."
        )
    dtype = torch.promote_types(torch.promote_types(a_t.dtype, b_t.dtype), torch.float32)
    a_t, b_t = a_t.to(dtype), b_t.to(dtype)
    for name, t in (("a", a_t), ("b", b_t)):
        norms = t.norm(dim=-1)
        if (norms <= eps).any():
            rows = torch.nonzero(norms.reshape(-1) <= eps).flatten().tolist()
            where = "" if t.dim() == 1 else f" (rows {rows})"
            raise ValueError(
                f"cosine similarity is undefined for a zero vector: {name}{where} has length 0. "
                "Remove the zero vector or give it at least one non-zero component."
            )
    a_unit = a_t / a_t.norm(dim=-1, keepdim=True)  # (n, d) or (d,)
    b_unit = b_t / b_t.norm(dim=-1, keepdim=True)  # (m, d) or (d,)
    result = a_unit @ b_unit.T if a_t.dim() == 2 else a_unit @ b_unit  # (n, m) or ()
    result = result.clamp(-1.0, 1.0)
    return result.numpy() if is_numpy else result


def vector_from_polar(length: float, angle_degrees: float) -> torch.Tensor:
    """The 2-D vector of the given length, turned ``angle_degrees`` anticlockwise from the x axis: (2,) float64."""
    angle = math.radians(angle_degrees)
    return torch.tensor([length * math.cos(angle), length * math.sin(angle)], dtype=torch.float64)  # (2,)


FEATURE_NAMES = ("Tech", "Fruitness", "Other")


def word_feature_table() -> tuple[list[str], torch.Tensor]:
    """Five words described by three hand-made features (Tech, Fruitness, Other), as in lesson 01.

    Returns ``(words, features)``: five words and a float64 tensor (5 words, 3 features) whose row ``i``
    describes ``words[i]``.
    """
    words = ["Orange", "Phone", "Apple", "And", "An"]
    features = torch.tensor(
        [
            [0.0, 3.0, 0.0],  # Orange: a fruit
            [4.0, 0.0, 0.0],  # Phone: technology
            [2.0, 2.0, 0.0],  # Apple: a fruit and a tech brand
            [0.0, 0.0, 2.0],  # And: neither
            [0.0, 0.0, 3.0],  # An: neither
        ],
        dtype=torch.float64,
    )
    return words, features


def most_similar_word(word: str, words: list[str], features: ArrayLike) -> str:
    """The word other than ``word`` whose feature row has the highest cosine similarity to ``word``'s row.

    ``features`` has shape (n_words, d), row ``i`` describing ``words[i]``. Ties go to the earlier word.
    """
    if word not in words:
        raise ValueError(f"{word!r} is not one of the words {words}.")
    if len(words) < 2 or len(words) != len(features):
        raise ValueError(
            f"need at least two words and one feature row per word: got {len(words)} words and "
            f"{len(features)} rows."
        )
    table = torch.as_tensor(features)
    i = words.index(word)
    similarities = torch.as_tensor(cosine_similarity(table[i : i + 1], table))[0]  # (n_words,)
    similarities[i] = float("-inf")  # a word is always most similar to itself: leave it out
    return words[int(similarities.argmax())]
