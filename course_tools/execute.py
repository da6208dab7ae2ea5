"""Execute lesson and solution notebooks top to bottom and store their outputs (one clean run each), with the
machine's speed on the yardstick (``transformer_lib.speed``) and the run's seconds in the notebook's metadata."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from . import CHECKPOINTS_VARIABLE, EXERCISES_DIR, MODEL_CACHE_VARIABLE, NOTEBOOKS_DIR, ROOT, SOLUTIONS_DIR
from .notebook_files import clean_metadata, notebooks_in, read_notebook, with_run, write_notebook
from .yardstick import measured_speed

CELL_TIMEOUT_S = 600

# Stored outputs are always made on the CPU with a fixed hash seed, so every machine can reproduce them. Otherwise the
# kernels get the maintainer's environment, as a learner's would, and so does the yardstick measured beside them.
EXECUTION_ENV = {"TRANSFORMER_LIB_DEVICE": "cpu", "PYTHONHASHSEED": "0"}


def run_notebook(nb: nbformat.NotebookNode, path: Path) -> float:
    """Run ``nb`` (read from ``path``) in a fresh kernel whose working directory is its folder, keeping the outputs in
    ``nb``; return the seconds taken."""
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.perf_counter()
    client.execute()
    return time.perf_counter() - started


@contextmanager
def fresh_folders() -> Iterator[None]:
    """An empty checkpoint folder and model cache for the kernels started in the ``with`` block: they load no model
    that an earlier run or an older library version left in checkpoints/ or build/model-cache/."""
    saved = {name: os.environ.get(name) for name in (CHECKPOINTS_VARIABLE, MODEL_CACHE_VARIABLE)}
    with tempfile.TemporaryDirectory(prefix="course-checkpoints-") as checkpoints:
        os.environ[CHECKPOINTS_VARIABLE] = checkpoints
        os.environ[MODEL_CACHE_VARIABLE] = os.path.join(checkpoints, "model-cache")
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def execute_notebook(path: Path, steps_per_s: float) -> float:
    """Run ``path`` alone, from an empty model cache and checkpoint folder, and store its outputs with the seconds
    taken (what a learner opening it first waits) and ``steps_per_s``, the machine's speed on the yardstick measured
    just before; return the seconds."""
    nb = read_notebook(path)
    with fresh_folders():
        seconds = run_notebook(nb, path)
    write_notebook(with_run(clean_metadata(nb), steps_per_s, seconds), path)
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


def shown(path: Path) -> Path:
    """``path`` relative to the course folder where it lies inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(names: list[str]) -> int:
    os.environ.update(EXECUTION_ENV)
    for path in resolve_targets(names):
        print(f"[course] executing {shown(path)} …", flush=True)
        steps_per_s = measured_speed()  # in a fresh process with this environment, as the kernel gets
        seconds = execute_notebook(path, steps_per_s)
        print(f"[course]   done in {seconds:.1f} s (the machine: {steps_per_s:.1f} steps/s on the yardstick)",
              flush=True)
    return 0
