"""Choosing a device, seeding every random number generator the course uses, and running tiny work on one thread."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

DEVICE_ENV_VAR = "TRANSFORMER_LIB_DEVICE"


def get_device() -> torch.device:
    """Return the best available device: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable ``TRANSFORMER_LIB_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``) to override
    the choice; asking for a device that is not available raises a ``RuntimeError`` that says so.
    """
    requested = os.environ.get(DEVICE_ENV_VAR, "").strip()
    if requested:
        try:
            device = torch.device(requested)
        except RuntimeError as error:
            raise ValueError(
                f"{DEVICE_ENV_VAR}={requested!r} is not a device name: use cpu, cuda, cuda:N or mps ({error})."
            ) from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(
                f"{DEVICE_ENV_VAR}={requested!r} but CUDA is not available on this machine "
                f"(torch {torch.__version__}). Unset {DEVICE_ENV_VAR} to fall back to the CPU."
            )
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise RuntimeError(
                f"{DEVICE_ENV_VAR}={requested!r} but Apple's MPS backend is not available. "
                f"Unset {DEVICE_ENV_VAR} to fall back to the CPU."
            )
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's random number generators (CPU and all GPUs).

    Draw random tensors on the CPU and move them with ``.to(device)`` when results must match across devices:
    the same seed draws different numbers on a GPU.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


@contextmanager
def single_thread() -> Iterator[None]:
    """Run the ``with`` block on one CPU thread, then restore the thread count (also after an error).

    The course's models are tiny: splitting each of their small matrix products across cores costs more than it
    gains, and one thread is also far steadier when other work shares the CPU.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
