"""Reading, cleaning and writing notebooks in the one format the repository stores."""

from __future__ import annotations

from pathlib import Path

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
KEPT_CELL_METADATA = ("tags", "exercise")
# The notebook's metadata key for its stored run: {"steps_per_s": the machine's speed on the yardstick
# (transformer_lib.speed) just before, "seconds": the run's wall time}; written by `course.py execute`.
RUN_KEY = "course"


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def clean_metadata(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop widget state, timings and machine-specific metadata; keep the stored run's record (``RUN_KEY``), cell tags
    and exercise points."""
    run = {RUN_KEY: nb.metadata[RUN_KEY]} if RUN_KEY in nb.metadata else {}
    nb.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC, "language_info": {"name": "python"}, **run})
    for cell in nb.cells:
        cell.metadata = nbformat.from_dict({k: cell.metadata[k] for k in KEPT_CELL_METADATA if k in cell.metadata})
    return nb


def with_run(nb: nbformat.NotebookNode, steps_per_s: float, seconds: float) -> nbformat.NotebookNode:
    """Record the run whose outputs ``nb`` stores: the machine's speed on the yardstick and the run's seconds."""
    nb.metadata[RUN_KEY] = {"steps_per_s": round(steps_per_s, 1), "seconds": round(seconds, 1)}
    return nb


def clear_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop every output, execution count and the record of the run that made them."""
    nb.metadata.pop(RUN_KEY, None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The exact text the repository stores for ``nb`` (stable key order, one-space indent, final newline)."""
    return nbformat.writes(nb, version=4) + "\n"


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.validate(nb)
    path.write_text(notebook_text(nb), encoding="utf-8", newline="\n")


def notebooks_in(directory: Path) -> list[Path]:
    """The notebooks of a course folder, in lesson order (backups and checkpoints excluded)."""
    return sorted(p for p in directory.glob("*.ipynb") if ".backup-" not in p.name)
