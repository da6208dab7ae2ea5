"""Files written whole and read back only when whole: the format of the model cache and the checkpoints.

A file is a magic line that names its kind, the SHA-256 of the payload, then the payload (``torch.save`` of a dict).
It is written to a temporary name beside its place and renamed into place, so a reader sees the old file or the new
one, never half of one; a file cut short, changed, or of another kind is refused with an error that names it.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import torch


class DamagedFileError(ValueError):
    """A file that is missing its end, was changed after writing, or is not of the kind asked for."""


def write_checked(path: str | Path, payload: dict[str, Any], magic: bytes) -> None:
    """Write ``payload`` with its checksum after ``magic`` to a temporary file beside ``path``, then rename it."""
    path = Path(path)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as file:
        file.write(magic + hashlib.sha256(data).digest() + data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(file.name, path)  # atomic: a reader sees the old file or the new one, never half of one


def read_checked(path: str | Path, magic: bytes) -> dict[str, Any]:
    """The payload :func:`write_checked` stored at ``path`` with ``magic``.

    Raises ``FileNotFoundError`` when there is no file, and :class:`DamagedFileError`, naming the file, when it is
    of another kind, truncated or corrupt: nothing is loaded from such a file.
    """
    path = Path(path)
    blob = path.read_bytes()
    header = len(magic) + hashlib.sha256().digest_size
    data = blob[header:]
    if not blob.startswith(magic):
        kind = magic.decode().strip()
        raise DamagedFileError(f"{path} is not a {kind} file (it does not start with its header): pass a file "
                               "that this course's library wrote, or delete this one and train again")
    if blob[len(magic) : header] != hashlib.sha256(data).digest():
        raise DamagedFileError(f"{path} is truncated or corrupt (its checksum does not match its content), so "
                               "nothing was loaded from it: delete it and save it again")
    try:
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, ValueError) as error:
        raise DamagedFileError(f"{path} is whole but does not load ({error}): delete it and save it again") from error
    if not isinstance(payload, dict):
        raise DamagedFileError(f"{path} holds a {type(payload).__name__}, not a dict: delete it and save it again")
    return payload
