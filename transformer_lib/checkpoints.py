"""Checkpoints: save a trained model with the config that rebuilds it, load it back, and the folder lessons share;
and training checkpoints, from which a stopped GPT run goes on exactly where it stopped.

Lesson 09 saves its translator; lesson 10 loads it instead of training it again. Lesson 11 stops a run, saves a
training checkpoint and goes on from it. A training checkpoint is written whole or not at all, and a damaged or
foreign file is refused with an error naming it (:mod:`~transformer_lib.checked_files`).
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import torch

from .checked_files import read_checked, write_checked
from .device import random_states, restore_random_states
from .gpt import GPT, GPTConfig
from .model import Transformer, TransformerConfig
from .training import LMTrainingState

CHECKPOINTS_VARIABLE = "TRANSFORMER_LIB_CHECKPOINTS"
TRAINING_MAGIC = b"transformer-course training checkpoint 1\n"


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Save the weights (state dict) and the ``TransformerConfig`` needed to rebuild the model."""
    torch.save({"config": asdict(model.config), "state_dict": model.state_dict()}, path)


def load_checkpoint(path: str | Path, device: torch.device | str | None = None) -> Transformer:
    """Rebuild a model saved by :func:`save_checkpoint` (in eval mode)."""
    checkpoint = torch.load(path, map_location=device or "cpu", weights_only=True)
    model = Transformer(TransformerConfig(**checkpoint["config"]))
    model.load_state_dict(checkpoint["state_dict"])
    return model.to(device or "cpu").eval()


def save_training_checkpoint(path: str | Path, model: GPT, state: LMTrainingState) -> None:
    """Save all a stopped :func:`~transformer_lib.training.train_gpt` run needs to go on, in one file: the model's
    config and weights, ``state`` (the step, AdamW's moments, the batch generator, the history) and every global
    random generator. Written to a temporary file, then renamed: an interrupted save leaves the old file."""
    write_checked(path, {"config": asdict(model.config),
                         "state_dict": {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()},
                         "state": asdict(state), "random states": random_states()}, TRAINING_MAGIC)


def load_training_checkpoint(path: str | Path, device: torch.device | str | None = None) -> tuple[GPT, LMTrainingState]:
    """The model and the run's state that :func:`save_training_checkpoint` stored, with every global generator put
    back: pass both to ``train_gpt(model, ..., state=state)`` to go on. A truncated, changed or foreign file raises
    :class:`~transformer_lib.checked_files.DamagedFileError` naming it, and nothing is loaded."""
    payload = read_checked(path, TRAINING_MAGIC)
    model = GPT(GPTConfig(**payload["config"]))
    model.load_state_dict(payload["state_dict"])
    restore_random_states(payload["random states"])
    return model.to(device or "cpu"), LMTrainingState.from_dict(payload["state"])


def lesson_checkpoint(name: str) -> Path:
    """Where lessons keep a trained model for later lessons: ``checkpoints/NAME.pt`` in the course folder.

    Lessons run in ``notebooks/``, so that is ``../checkpoints`` (git-ignored). ``$TRANSFORMER_LIB_CHECKPOINTS``
    names another folder: the test command gives each of its runs a fresh one, so no run reads a model that an
    earlier run, another library version or other CPU kernels trained.
    """
    folder = Path(os.environ.get(CHECKPOINTS_VARIABLE, Path("..") / "checkpoints"))
    return folder / f"{name}.pt"
