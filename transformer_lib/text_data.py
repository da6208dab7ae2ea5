"""Text for a character-level language model: two corpora that ship with Python, a character tokenizer, a held-out
split, and random training windows.

Shape legend: N = number of characters (token ids) in a split, batch, T = window length (``block_size``).
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io

import torch


def zen_of_python() -> str:
    """The text of ``import this``, which every Python installation ships (stored ROT13-encoded in ``this.s``)."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing ``this`` prints the poem
        this = importlib.import_module("this")
    return codecs.decode(this.s, "rot13")


def python_docs() -> str:
    """Python's own documentation of its statements, operators and special methods, about 465 000 characters in
    CPython 3.11 (the help topics of ``pydoc_data.topics``, joined in their stored order).

    ``pydoc_data`` is part of CPython's standard library, so nothing is downloaded; a few trimmed-down Pythons
    (some Linux distributions' minimal packages, embedded builds) leave it out, and then this raises an ImportError
    that says what to install. The text differs a little between Python versions.
    """
    try:
        topics = importlib.import_module("pydoc_data.topics")
    except ImportError as error:
        raise ImportError(
            "this Python has no pydoc_data module (its standard library was trimmed): install the full standard "
            "library (on Debian/Ubuntu: apt install libpython3-stdlib, or use the python.org or conda builds), or "
            "train on zen_of_python() instead"
        ) from error
    return "".join(topics.topics.values())


class CharTokenizer:
    """One token per distinct character of a text, numbered in sorted order."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.ids = {char: index for index, char in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """``text`` -> (len(text),) long tensor of ids; a character the tokenizer has not seen raises."""
        unknown = sorted(set(text) - set(self.ids))
        if unknown:
            raise ValueError(f"characters not in the vocabulary: {unknown}")
        return torch.tensor([self.ids[char] for char in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """(T,) ids -> text."""
        return "".join(self.chars[i] for i in ids.tolist())


def train_valid_split(data: torch.Tensor, valid_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Split (N,) ids into a training part (the first ``1 - valid_fraction``) and a held-out part (the rest).

    The held-out part is one contiguous stretch at the end, so the model is measured on text it never saw (random
    windows from both ends would share most of their characters).
    """
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction={valid_fraction} must be between 0 and 1, e.g. 0.1 for 10 % held out")
    cut = int(len(data) * (1 - valid_fraction))
    return data[:cut], data[cut:]


def random_windows(
    data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut ``batch_size`` random windows from ``data`` (N,): inputs (batch, block_size) and the same windows shifted
    by one character as targets (batch, block_size)."""
    if data.dim() != 1 or len(data) <= block_size:
        raise ValueError(
            f"windows of block_size={block_size} need data shaped (N,) with N > block_size={block_size} (one window "
            f"plus its next character), got shape {tuple(data.shape)}: pass a longer text, encoded, e.g. "
            "tokenizer.encode(text)"
        )
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (batch,)
    offsets = torch.arange(block_size)  # (block_size,)
    inputs = data[starts[:, None] + offsets]  # (batch, block_size)
    targets = data[starts[:, None] + offsets + 1]  # (batch, block_size)
    return inputs, targets
