"""No course command overwrites, deletes or reformats a notebook a student edited: each one refuses and explains, or
writes beside it. (Grading never modifies a submission: see test_grade.py.)"""

import argparse
import hashlib
import shutil

import nbformat
import pytest

from course_files import SOLUTIONS
from course_tools import execute, exercises, testrun
from course_tools.exercises import MANIFEST_NAME, generate
from course_tools.grading.gradebook import write_gradebook
from course_tools.grading.results import SubmissionGrade


def snapshot(folder):
    """Every file under ``folder``: its bytes' hash and its modification time."""
    return {p.relative_to(folder): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def demo_solution(answer: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Exercises"),
        nbformat.v4.new_code_cell(f"def add_one(x):\n    ### BEGIN SOLUTION\n    {answer}\n    ### END SOLUTION"),
    ]
    return nb


@pytest.fixture
def course(tmp_path):
    """A course copy: the real solution notebooks (or a demo one), and exercises/ generated from them."""
    solutions, exercise_dir = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    for path in SOLUTIONS:
        shutil.copy(path, solutions / path.name)
    nbformat.write(demo_solution("return x + 1"), solutions / "99_demo_exercises.ipynb")
    assert generate(solutions, exercise_dir) == 0
    return solutions, exercise_dir


def edit(path, text="# my own notes"):
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(text))
    nbformat.write(nb, path)


def update_course(solutions):
    nbformat.write(demo_solution("return 1 + x"), solutions / "99_demo_exercises.ipynb")


@pytest.mark.parametrize("how", ["edited cell", "saved by JupyterLab", "no manifest"])
def test_exercises_refuses_and_leaves_every_byte(course, capsys, how):
    solutions, exercise_dir = course
    target = exercise_dir / "99_demo_exercises.ipynb"
    if how == "edited cell":
        edit(target)
    elif how == "saved by JupyterLab":  # only metadata and an execution count change: still the student's file
        nb = nbformat.read(target, as_version=4)
        nb.metadata["widgets"] = {}
        nb.cells[1].execution_count = 1
        nbformat.write(nb, target)
    else:  # an old checkout without the manifest, with a student's edit
        (exercise_dir / MANIFEST_NAME).unlink()
        edit(target)
    update_course(solutions)
    before = snapshot(exercise_dir)
    assert generate(solutions, exercise_dir) == 1
    assert snapshot(exercise_dir) == before
    out = capsys.readouterr().out
    assert "99_demo_exercises.ipynb" in out and "Nothing was written" in out


def test_force_keeps_every_version_beside_it(course, monkeypatch):
    solutions, exercise_dir = course
    target = exercise_dir / "99_demo_exercises.ipynb"
    monkeypatch.setattr(exercises.time, "strftime", lambda *args: "20250101-120000")  # two runs in one second
    works = []
    for attempt in ("first try", "second try"):
        edit(target, f"# {attempt}")
        works.append(target.read_bytes())
        update_course(solutions)
        assert generate(solutions, exercise_dir, force=True) == 0
    backups = sorted(exercise_dir.glob("99_demo_exercises.backup-*.ipynb"))
    assert [b.name for b in backups] == ["99_demo_exercises.backup-20250101-120000-2.ipynb",
                                         "99_demo_exercises.backup-20250101-120000.ipynb"]
    assert sorted(b.read_bytes() for b in backups) == sorted(works)


def test_students_own_notebooks_are_never_touched(course):
    solutions, exercise_dir = course
    own = [exercise_dir / "my_notes.ipynb", exercise_dir / "99_demo_exercises-Copy1.ipynb",
           exercise_dir / "alice" / "99_demo_exercises.ipynb"]
    for path in own:
        path.parent.mkdir(exist_ok=True)
        nbformat.write(demo_solution("return x + 2  # mine"), path)
    before = {path: path.read_bytes() for path in own}
    update_course(solutions)
    assert generate(solutions, exercise_dir, force=True) == 0
    assert {path: path.read_bytes() for path in own} == before


@pytest.fixture
def course_folders(tmp_path, monkeypatch):
    for name in ("ROOT", "NOTEBOOKS_DIR", "SOLUTIONS_DIR", "EXERCISES_DIR"):
        folder = tmp_path if name == "ROOT" else tmp_path / name.split("_")[0].lower()
        folder.mkdir(exist_ok=True)
        monkeypatch.setattr(execute, name, folder)
    return tmp_path


@pytest.mark.parametrize("where, message", [
    ("exercises/01_demo_exercises.ipynb", "exercise notebooks are stored without outputs"),
    ("exercises/alice/01_demo_exercises.ipynb", "exercise notebooks are stored without outputs"),
    ("homework/01_demo_exercises.ipynb", "a notebook elsewhere may be someone's work"),
])
def test_execute_refuses_student_notebooks(course_folders, where, message):
    path = course_folders / where
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(demo_solution("return x + 1"), path)
    before = snapshot(course_folders)
    with pytest.raises(SystemExit, match=message):
        execute.main([str(path)])
    assert snapshot(course_folders) == before


def test_execute_accepts_lessons_and_solutions(course_folders):
    lesson = course_folders / "notebooks" / "01_demo.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), lesson)
    assert execute.resolve_targets([str(lesson)]) == [lesson]


def test_the_test_command_only_reads(tmp_path):
    """`course.py test` lints without fixing and validates notebooks without rewriting them."""
    commands = testrun.step_commands(argparse.Namespace(pytest_args=[], notebook=None), tmp_path)
    lint, _ = commands["lint"]
    notebooks, _ = commands["notebooks"]
    assert lint[1:4] == ["-m", "ruff", "check"] and not any("fix" in part or "format" in part for part in lint)
    assert "--nbval" in notebooks and not any("overwrite" in part for part in notebooks)


def test_grading_keeps_the_previous_gradebook(tmp_path):
    first = [SubmissionGrade(student="alice", file="a.ipynb", sha256="0", assignment="01_demo_exercises")]
    write_gradebook(first, tmp_path)
    (tmp_path / "grades.csv").write_text("hand-corrected by the teacher\n", encoding="utf-8")
    write_gradebook(first, tmp_path)
    kept = [p for p in tmp_path.glob("grades.*.csv")]
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == "hand-corrected by the teacher\n"
    assert len(list(tmp_path.glob("grades.*.json"))) == 1
    assert (tmp_path / "grades.csv").read_text(encoding="utf-8").startswith("student,assignment")
