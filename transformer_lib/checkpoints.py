"""Checkpoints: save a trained model with the config that rebuilds it, load it back, and the folder lessons share.

Lesson 09 saves its translator; lesson 10 loads it instead of training it again.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import torch

from .model import Transformer, TransformerConfig

CHECKPOINTS_VARIABLE = "TRANSFORMER_LIB_CHECKPOINTS"


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Save the weights (state dict) and the ``TransformerConfig`` needed to rebuild the model."""
    torch.save({"config": asdict(model.config), "state_dict": model.state_dict()}, path)


def load_checkpoint(path: str | Path, device: torch.device | str | None = None) -> Transformer:
    """Rebuild a model saved by :func:`save_checkpoint` (in eval mode)."""
    checkpoint = torch.load(path, map_location=device or "cpu", weights_only=True)
    model = Transformer(TransformerConfig(**checkpoint["config"]))
    model.load_state_dict(checkpoint["state_dict"])
    return model.to(device or "cpu").eval()


def lesson_checkpoint(name: str) -> Path:
    """Where lessons keep a trained model for later lessons: ``checkpoints/NAME.pt`` in the course folder.

    Lessons run in ``notebooks/``, so that is ``../checkpoints`` (git-ignored). ``$TRANSFORMER_LIB_CHECKPOINTS``
    names another folder: the test command gives each of its runs a fresh one, so no run reads a model that an
    earlier run, another library version or other CPU kernels trained.
    """
    folder = Path(os.environ.get(CHECKPOINTS_VARIABLE, Path("..") / "checkpoints"))
    return folder / f"{name}.pt"
