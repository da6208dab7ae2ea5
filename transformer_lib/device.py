"""Choosing a device, seeding every random number generator the course uses (and saving where they stand), and running
tiny work on one thread."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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


def random_states() -> dict[str, Any]:
    """Python's, NumPy's and PyTorch's generator states (every GPU's too), in types that
    ``torch.load(weights_only=True)`` accepts: what a run must store to go on drawing where it stopped."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_random_states(states: dict[str, Any]) -> None:
    """Put every generator back where :func:`random_states` found it."""
    random.setstate(states["python"])
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(states["torch"])
    if "cuda" in states:
        torch.cuda.set_rng_state_all(states["cuda"])


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
