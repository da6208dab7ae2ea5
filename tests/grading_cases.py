"""Shared by the grading tests: submissions built from a solution notebook, and one call that grades a class."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from course_tools.grading.class_run import grade_class
from course_tools.grading.isolation import Isolation, find_isolation
from course_tools.grading.kernel import KernelSettings
from course_tools.grading.solution_format import BEGIN_SOLUTION, strip_solutions
from course_tools.grading.submissions import read_submissions
from course_tools.system_packages import impossible_here, on_ci

FAST = KernelSettings(cell_timeout_s=12, check_timeout_s=12, total_timeout_s=240, grace_s=3)
SIMILARITY = "01_similarity_exercises"


def sandbox_or_skip() -> Isolation:
    """The sandbox; where none can run, a skip with the reason: a failure on Linux CI, which installs bubblewrap,
    but a skip on CI too where bubblewrap cannot exist (macOS, Windows)."""
    found = find_isolation()
    if found is None:
        impossible = impossible_here("bubblewrap")
        if impossible:
            pytest.skip(impossible)
        message = "no working bubblewrap sandbox on this machine (`apt-get install bubblewrap`)"
        if on_ci():
            pytest.fail(f"{message}: `course.py test` installs it on CI as root; it did not")
        pytest.skip(message)
    return found


def copy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def replace_solution(nb: nbformat.NotebookNode, function: str, body: str) -> nbformat.NotebookNode:
    """A copy of a solved notebook whose ``function`` has ``body`` instead of its marked solution."""
    nb = copy(nb)
    cell = next((c for c in nb.cells if f"def {function}(" in c.source and BEGIN_SOLUTION in c.source), None)
    assert cell is not None, f"no solution cell defines {function}"
    cell.source = strip_solutions(cell.source, replacement=body.splitlines())
    return nb


def with_cells(nb: nbformat.NotebookNode, *sources: str, at: int | None = None) -> nbformat.NotebookNode:
    """A copy of ``nb`` with code cells holding ``sources`` appended (or inserted at ``at``)."""
    nb = copy(nb)
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    if at is None:
        nb.cells.extend(cells)
    else:
        nb.cells[at:at] = cells
    return nb


def function_cell(nb, function: str):
    return next(c for c in nb.cells if c.cell_type == "code" and f"def {function}(" in c.source)


def save(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        nbformat.write(content, path)
    return path


def grade_paths(paths: list[Path], assignments, isolation: Isolation, settings: KernelSettings = FAST, jobs: int = 2):
    """Grade ``paths`` as one class run does (read first, then graded ``jobs`` at a time, no progress bar)."""
    return grade_class(read_submissions(paths, assignments, None), settings, isolation, jobs=jobs, progress=False)


def points(g) -> dict[str, float]:
    return {e.id: e.points for e in g.exercises}


def full_except(assignment, *ids) -> dict[str, int]:
    return {e.id: 0 if e.id in ids else e.points for e in assignment.exercises}


def exercise(g, exercise_id):
    return next(e for e in g.exercises if e.id == exercise_id)
