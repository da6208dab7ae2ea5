"""Assignments as the solution notebooks define them, and which assignment a submission is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from .. import SOLUTIONS_DIR
from ..notebook_files import notebooks_in
from .solution_format import EXERCISE_KEY, check_call_parts, check_module_of


@dataclass(frozen=True)
class ExerciseSpec:
    """One exercise of an assignment, as the solution notebook defines it."""

    id: str
    points: int
    call: str  # the check call, e.g. "check.norm(norm)"
    needs: tuple[str, ...]  # the student's names the call uses, e.g. ("norm",)


@dataclass(frozen=True)
class Assignment:
    """An exercise notebook as handed out: its name, check module and exercises (from ``solutions/``)."""

    name: str  # e.g. "01_similarity_exercises"
    check_module: str  # e.g. "ex01_similarity"
    exercises: tuple[ExerciseSpec, ...]

    @property
    def max_points(self) -> int:
        return sum(exercise.points for exercise in self.exercises)


def assignment_from_solution(nb: nbformat.NotebookNode, name: str) -> Assignment:
    """Read the check module and every exercise (id, points, check call) of one solution notebook."""
    check_module = check_module_of("\n".join(cell.source for cell in nb.cells if cell.cell_type == "code"))
    if not check_module:
        raise ValueError(f"{name}: no `from transformer_lib.checks import exNN_… as check` line")
    exercises = []
    for cell in nb.cells:
        meta = cell.metadata.get(EXERCISE_KEY)
        if meta is None:
            continue
        parts = check_call_parts(cell.source)
        if parts is None:
            raise ValueError(f"{name}: the check cell of {meta.get('id')!r} is not one call `check.<name>(…)`")
        exercises.append(ExerciseSpec(id=str(meta["id"]), points=int(meta["points"]), call=parts[0], needs=parts[1]))
    if not exercises:
        raise ValueError(f"{name}: no check cell with {{'{EXERCISE_KEY}': {{'id': …, 'points': …}}}} metadata")
    return Assignment(name=name, check_module=check_module, exercises=tuple(exercises))


def load_assignments(solutions_dir: Path = SOLUTIONS_DIR) -> dict[str, Assignment]:
    """Every assignment, keyed by its notebook's stem (``01_similarity_exercises``)."""
    return {
        path.stem: assignment_from_solution(nbformat.read(path, as_version=4), path.stem)
        for path in notebooks_in(solutions_dir)
    }


def choose_assignment(wanted: str, assignments: dict[str, Assignment]) -> Assignment:
    """The assignment named by ``--assignment``: its full name or a unique prefix (``01``, ``01_similarity``)."""
    matches = [a for name, a in assignments.items() if name == wanted or name.startswith(wanted)]
    if len(matches) != 1:
        known = ", ".join(assignments) or "none (solutions/ is empty)"
        raise SystemExit(f"[course] --assignment {wanted!r} matches {len(matches)} assignments; known: {known}")
    return matches[0]


def identify_assignment(text: str, path: Path, assignments: dict[str, Assignment]) -> Assignment | None:
    """Which assignment a submission is: from its check import, else from its file name; None when neither says."""
    module = check_module_of(text)
    for assignment in assignments.values():
        if module and assignment.check_module == module:
            return assignment
    for assignment in sorted(assignments.values(), key=lambda a: -len(a.name)):
        if assignment.name in path.name:
            return assignment
    return None
