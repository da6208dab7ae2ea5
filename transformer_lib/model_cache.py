"""A cache of trained models on disk: a recipe trains once, and every later lesson or test that asks for the same
model, on the same setting, loads it instead of training it again.

A cached run is keyed by everything that decides its numbers: the recipe's name and arguments, the torch version,
the device, the CPU kernel set, the thread count, the last-bits test hook, and the source of this library. So a
lesson that runs alone still trains its model, and a lesson that finds the model cached gets exactly the weights,
the history and the random number generators' state it would have got by training: it prints the same outputs.

Files are written whole (to a temporary name, then renamed), and each carries a checksum, so a truncated or corrupt
one is retrained. Two processes that ask for the same run at once (the test command's workers) train it once: the
first holds a lock while it trains, the other waits and then loads it (POSIX; on Windows both train, and either
whole file is kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from .checked_files import DamagedFileError, read_checked, write_checked
from .device import random_states, restore_random_states

CACHE_VARIABLE = "TRANSFORMER_LIB_CACHE"  # a folder; unset: build/model-cache/ in the course's checkout
LAST_BITS_VARIABLE = "COURSE_MOVE_LAST_BITS"  # the test command's hook that moves matrix products' last bits
MAGIC = b"transformer-course model cache 1\n"
LIBRARY = Path(__file__).resolve().parent

History = TypeVar("History")
log = logging.getLogger(__name__)


def cache_folder() -> Path:
    """``$TRANSFORMER_LIB_CACHE``, or ``build/model-cache`` beside the library (git-ignored)."""
    return Path(os.environ.get(CACHE_VARIABLE) or LIBRARY.parent / "build" / "model-cache")


def library_digest() -> str:
    """A hash of the library's own source: any change to a model, the data or a training loop changes it."""
    digest = hashlib.sha256()
    for path in sorted(LIBRARY.rglob("*.py")):
        digest.update(path.relative_to(LIBRARY).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def setting_key(device: torch.device) -> dict[str, str]:
    """What, besides the recipe, changes a training run's numbers on this machine."""
    return {
        "torch": str(torch.__version__),
        "device": str(device),
        "cpu kernels": torch.backends.cpu.get_cpu_capability(),
        "threads": str(torch.get_num_threads()),
        "last bits moved": os.environ.get(LAST_BITS_VARIABLE, ""),
        "library": library_digest(),
    }


def _read(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The payload stored at ``path`` for ``key``, or None when it is missing, truncated, corrupt or another key's."""
    try:
        payload = read_checked(path, MAGIC)
    except FileNotFoundError:
        return None
    except DamagedFileError as error:
        log.info("model cache: %s; training again", error)
        return None
    return payload if payload.get("key") == key else None


@contextlib.contextmanager
def _training_lock(path: Path) -> Iterator[None]:
    """Held while this process trains the run stored at ``path``, so that another process asking for the same run
    waits for it instead of training it too. The lock (``fcntl.flock`` on a file beside the run) is released when
    the file is closed, also when the process dies. Without ``fcntl`` (Windows) or a writable folder: no lock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "w")  # noqa: SIM115 (closed below)
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _read_or_make(path: Path, key: dict[str, Any], make: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """The payload stored at ``path`` for ``key``, or else ``make()``'s, stored there; and whether it was made here.
    ``make`` runs under the training lock, after a second look: another process may have stored it while this one
    waited."""
    payload = _read(path, key)
    if payload is not None:
        return payload, False
    with _training_lock(path):
        payload = _read(path, key)
        if payload is not None:
            return payload, False
        payload = make()
        _store(path, payload)
        return payload, True


def _run_key(recipe: str, arguments: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Everything that names a run: the recipe, its arguments (as ``repr``) and this machine's setting."""
    return {"recipe": recipe, "arguments": {name: repr(value) for name, value in arguments.items()},
            **setting_key(device)}


def _digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()[:20]


def _payload(key: dict[str, Any], model: nn.Module, **extra: Any) -> dict[str, Any]:
    """What a cache file holds: the key, the weights, the model's mode and every generator's state, and ``extra``."""
    return {"key": key, "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "training": model.training, "random states": random_states(), **extra}


def _load(model: nn.Module, payload: dict[str, Any]) -> None:
    """Put the stored weights into ``model`` and the mode and generators where training left them."""
    model.load_state_dict(payload["state_dict"])
    model.train(payload["training"])
    restore_random_states(payload["random states"])


def cached_training(
    recipe: str,
    arguments: dict[str, Any],
    build: Callable[[], nn.Module],
    train: Callable[[nn.Module], History],
    history_type: type[History],
    device: torch.device,
) -> tuple[nn.Module, History]:
    """Return ``(model, history)`` as ``train(build())`` would, loading them from the cache when they are there.

    ``build`` seeds the generators and makes the untrained model on ``device`` (it runs in both cases, so the model
    is made the same way); ``train`` trains it in place and returns a dataclass of plain numbers and lists. After a
    load, the model's mode and every random number generator are as training would have left them.
    """
    key = _run_key(recipe, arguments, device)
    model = build()

    def train_and_pack() -> dict[str, Any]:
        return _payload(key, model, history=asdict(train(model)))

    payload, trained_here = _read_or_make(cache_folder() / f"{recipe}-{_digest(key)}.pt", key, train_and_pack)
    if not trained_here:
        _load(model, payload)
    return model, history_type(**payload["history"])


def cached_continued_training(
    recipe: str,
    arguments: dict[str, Any],
    steps: int,
    build: Callable[[], nn.Module],
    train: Callable[[nn.Module, dict[str, Any] | None], dict[str, Any]],
    device: torch.device,
) -> tuple[nn.Module, dict[str, Any]]:
    """Like :func:`cached_training`, for a run that can stop and go on: ``steps`` steps of the run that
    ``arguments`` name. Not cached, it starts from the longest run of the same arguments already cached with fewer
    steps, so a lesson that trains a recipe longer than an earlier lesson did pays only for the extra steps.

    ``train(model, state)`` continues the model from ``state`` (what an earlier call returned, or None to start
    from the beginning) up to ``steps`` and returns the state it stops in: a dict of plain numbers, lists and
    tensors (the step, the optimiser's moments, the batch generator's position, the history). The result is the
    model and that state, equal on one machine and setting to the run that never stopped (its tests show it).
    """
    run_key = _run_key(recipe, arguments, device)
    prefix = f"{recipe}-{_digest(run_key)}-"

    def key(length: int) -> dict[str, Any]:
        return {**run_key, "steps": length}

    path = cache_folder() / f"{prefix}{steps}.pt"
    model = build()

    def continue_and_pack() -> dict[str, Any]:
        state = None
        for length in sorted(_cached_lengths(prefix), reverse=True):  # the longest shorter run first
            if length < steps and (shorter := _read(path.with_name(f"{prefix}{length}.pt"), key(length))):
                _load(model, shorter)
                state = shorter["state"]
                break
        return _payload(key(steps), model, state=train(model, state))

    payload, trained_here = _read_or_make(path, key(steps), continue_and_pack)
    if not trained_here:
        _load(model, payload)
    return model, payload["state"]


def cached_text(name: str, arguments: dict[str, Any], make: Callable[[], str]) -> str:
    """``make()``'s text, kept in the cache under ``name`` and ``arguments`` (with numpy's version and the library's
    source, which decide generated data): data that takes seconds to generate is generated once per cache, not once
    per process. Text, not Python objects, so that loading it back costs milliseconds."""
    key = {"data": name, "arguments": {k: repr(v) for k, v in arguments.items()}, "numpy": np.__version__,
           "library": library_digest()}
    payload, _ = _read_or_make(cache_folder() / f"{name}-{_digest(key)}.pt", key,
                               lambda: {"key": key, "text": make()})
    return payload["text"]


def _cached_lengths(prefix: str) -> list[int]:
    """The step counts of the runs cached under ``prefix`` (files ``<prefix><steps>.pt``)."""
    lengths = []
    for path in cache_folder().glob(f"{prefix}*.pt"):
        count = path.stem.removeprefix(prefix)
        if count.isdigit():
            lengths.append(int(count))
    return lengths


def _store(path: Path, payload: dict[str, Any]) -> None:
    try:
        write_checked(path, payload, MAGIC)
    except OSError as error:  # a read-only checkout or a full disk: the run is still good, only not kept
        log.info("model cache: could not store %s (%s)", path, error)
