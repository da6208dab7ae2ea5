"""Execute lesson and solution notebooks top to bottom and store their outputs (one clean run)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from nbclient import NotebookClient

from . import CHECKPOINTS_VARIABLE, EXERCISES_DIR, MODEL_CACHE_VARIABLE, NOTEBOOKS_DIR, ROOT, SOLUTIONS_DIR
from .notebook_files import clean_metadata, notebooks_in, read_notebook, write_notebook

CELL_TIMEOUT_S = 600

# Stored outputs are always made on the CPU with a fixed hash seed, so every machine can reproduce them.
EXECUTION_ENV = {"TRANSFORMER_LIB_DEVICE": "cpu", "PYTHONHASHSEED": "0"}


def execute_notebook(path: Path) -> float:
    """Run ``path`` in a fresh kernel (working directory: its folder), store outputs; return seconds taken."""
    nb = read_notebook(path)
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    write_notebook(clean_metadata(nb), path)
    return seconds


def resolve_targets(names: list[str]) -> list[Path]:
    """The notebooks to execute: the given ones, or every lesson and solution notebook."""
    if not names:
        return notebooks_in(NOTEBOOKS_DIR) + notebooks_in(SOLUTIONS_DIR)
    paths = [Path(name).resolve() for name in names]
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"[course] no such notebook: {path}")
        if path.is_relative_to(EXERCISES_DIR):
            raise SystemExit(
                f"[course] refusing to execute {path.relative_to(ROOT)}: exercise notebooks are stored without "
                "outputs and may hold a student's work. Open it in JupyterLab instead."
            )
        if not (path.is_relative_to(NOTEBOOKS_DIR) or path.is_relative_to(SOLUTIONS_DIR)):
            raise SystemExit(
                f"[course] refusing to execute {path}: only notebooks in notebooks/ and solutions/ are executed "
                "and stored; a notebook elsewhere may be someone's work, so it is left exactly as it is."
            )
    return paths


def main(names: list[str]) -> int:
    os.environ.update(EXECUTION_ENV)
    # A fresh checkpoint folder and model cache: lesson 10 then reads the model lesson 09 trained in this run (or
    # trains its own), never one that an older library version left in checkpoints/ or build/model-cache/.
    with tempfile.TemporaryDirectory(prefix="course-checkpoints-") as checkpoints:
        os.environ[CHECKPOINTS_VARIABLE] = checkpoints
        os.environ[MODEL_CACHE_VARIABLE] = os.path.join(checkpoints, "model-cache")
        for path in resolve_targets(names):
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            print(f"[course] executing {shown} …", flush=True)
            seconds = execute_notebook(path)
            print(f"[course]   done in {seconds:.1f} s", flush=True)
    return 0
