"""solutions/ is the single source: exercises/ is exactly what generation produces, leaks nothing, and generation
never destroys a student's edits."""

import ast
import json

import nbformat
import pytest

from course_files import EXERCISES, SOLUTIONS, short
from course_tools import EXERCISES_DIR
from course_tools.exercises import MANIFEST_NAME, fingerprint, generate, render_exercise
from course_tools.grading.solution_format import (
    BEGIN_SOLUTION,
    END_SOLUTION,
    SolutionMarkerError,
    strip_solutions,
)
from course_tools.notebook_files import read_notebook


def test_every_solution_has_its_exercise_and_nothing_else():
    assert sorted(p.name for p in EXERCISES) == sorted(p.name for p in SOLUTIONS)


@pytest.mark.parametrize("solution", SOLUTIONS, ids=short)
def test_exercises_match_generation(solution):
    """Fails when someone edits exercises/ by hand or forgets `python3 course.py exercises`."""
    target = EXERCISES_DIR / solution.name
    assert target.exists(), f"{target.name} missing: run `python3 course.py exercises`"
    expected = render_exercise(read_notebook(solution), name=solution.name)
    assert target.read_text(encoding="utf-8") == expected, (
        f"{short(target)} differs from what solutions/ generates: run `python3 course.py exercises`"
    )
    manifest = json.loads((EXERCISES_DIR / MANIFEST_NAME).read_text())
    assert manifest[target.name] == fingerprint(expected)


def _solution_lines(nb):
    """The solution's own lines: inside the markers, and not also given outside them (a debugging exercise hands
    out the buggy code whose fixed version shares most of its lines)."""
    lines, given, inside = [], set(), False
    for cell in nb.cells:
        for line in cell.source.splitlines():
            if line.strip() == BEGIN_SOLUTION:
                inside = True
            elif line.strip() == END_SOLUTION:
                inside = False
            elif inside and len(line.strip()) > 12:
                lines.append(line.strip())
            elif not inside:
                given.add(line.strip())
    return [line for line in lines if line not in given]


@pytest.mark.parametrize("solution", SOLUTIONS, ids=short)
def test_no_solution_leaks_into_exercises(solution):
    exercise = read_notebook(EXERCISES_DIR / solution.name)
    text = "\n".join(cell.source for cell in exercise.cells)
    assert BEGIN_SOLUTION not in text and END_SOLUTION not in text
    exercise_lines = {line.strip() for line in text.splitlines()}
    leaked = [line for line in _solution_lines(read_notebook(solution)) if line in exercise_lines]
    assert not leaked, f"solution lines found in the exercise notebook: {leaked[:3]}"
    assert all(not cell.get("outputs") for cell in exercise.cells if cell.cell_type == "code")


@pytest.mark.parametrize("solution", SOLUTIONS, ids=short)
def test_solution_notebooks_follow_the_exercise_layout(solution):
    nb = read_notebook(solution)
    checks = [cell for cell in nb.cells if "exercise" in cell.metadata]
    assert checks, "a solution notebook has at least one check cell"
    assert any(BEGIN_SOLUTION in cell.source for cell in nb.cells)
    ids = [cell.metadata["exercise"]["id"] for cell in checks]
    assert len(ids) == len(set(ids)), f"duplicate exercise ids {ids}"
    for cell in checks:
        meta = cell.metadata["exercise"]
        assert isinstance(meta.get("points"), int) and meta["points"] > 0
        call = ast.parse(cell.source.strip()).body
        assert len(call) == 1 and isinstance(call[0], ast.Expr) and isinstance(call[0].value, ast.Call), (
            f"check cell {meta['id']} must be exactly one call `check.<name>(...)`"
        )
        assert ast.unparse(call[0].value.func).startswith("check."), cell.source


# -- the generator itself ----------------------------------------------------------------------------------------


def test_strip_solutions_keeps_indentation_and_uses_nbgraders_stub():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    assert strip_solutions(source) == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"


@pytest.mark.parametrize("source", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION"])
def test_unbalanced_markers_are_an_error(source):
    with pytest.raises(SolutionMarkerError):
        strip_solutions(source)


def _solution_notebook(body: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Exercise"),
        nbformat.v4.new_code_cell(f"def add_one(x):\n    ### BEGIN SOLUTION\n    {body}\n    ### END SOLUTION"),
    ]
    return nb


@pytest.fixture
def course_copy(tmp_path):
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    nbformat.write(_solution_notebook("return x + 1"), solutions / "99_demo_exercises.ipynb")
    return solutions, exercises


def test_generation_refuses_to_overwrite_a_students_work(course_copy, capsys):
    solutions, exercises = course_copy
    assert generate(solutions, exercises) == 0
    target = exercises / "99_demo_exercises.ipynb"
    student_work = target.read_text().replace("raise NotImplementedError()", "return x + 1  # mine")
    target.write_text(student_work)

    nbformat.write(_solution_notebook("return 1 + x"), solutions / "99_demo_exercises.ipynb")  # course update
    assert generate(solutions, exercises) == 1
    assert target.read_text() == student_work, "the student's notebook was changed"
    assert "were edited since they were generated" in capsys.readouterr().out

    assert generate(solutions, exercises, force=True) == 0
    backups = list(exercises.glob("99_demo_exercises.backup-*.ipynb"))
    assert len(backups) == 1 and backups[0].read_text() == student_work
    assert "raise NotImplementedError()" in target.read_text()


def test_unedited_exercises_follow_solution_updates(course_copy):
    solutions, exercises = course_copy
    assert generate(solutions, exercises) == 0
    nb = _solution_notebook("return x + 1")
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("A new explanation."))
    nbformat.write(nb, solutions / "99_demo_exercises.ipynb")
    assert generate(solutions, exercises) == 0
    assert "A new explanation." in (exercises / "99_demo_exercises.ipynb").read_text()
    assert not list(exercises.glob("*.backup-*"))
