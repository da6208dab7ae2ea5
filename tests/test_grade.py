"""`course.py grade`: full marks for solutions/, 0 for the generated exercises, exactly one exercise lost for one wrong
answer, and every kind of broken or hostile submission graded with a clear message instead of a crash."""

import csv
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.preprocessors import ClearSolutions

from course_files import EXERCISES, SOLUTIONS, short
from course_tools.exercises import render_exercise
from course_tools.grading import class_run as class_runner
from course_tools.grading import cli, isolation, review, scoring
from course_tools.grading.assignments import identify_assignment, load_assignments
from course_tools.grading.class_report import summarise
from course_tools.grading.gradebook import build_rows, column_names, write_gradebook
from course_tools.grading.isolation import Isolation, find_isolation
from course_tools.grading.limits import Limits, memory_limit_holds, wrap_command
from course_tools.grading.results import Status, SubmissionGrade
from course_tools.grading.solution_format import check_call_parts
from course_tools.grading.submissions import Submission, student_name
from course_tools.notebook_files import read_notebook
from course_tools.system_packages import system_name
from grading_cases import (
    FAST,
    SIMILARITY,
    copy,
    exercise,
    full_except,
    function_cell,
    grade_paths,
    points,
    replace_solution,
    save,
    with_cells,
)

SLOW = os.environ.get("COURSE_SLOW_TESTS") == "1"
# Each graded notebook costs a few seconds (a fresh kernel imports torch): by default the whole-notebook tests grade
# lesson 01's assignment; COURSE_SLOW_TESTS=1 grades every assignment and a class of 30.
GRADED = SOLUTIONS if SLOW else [p for p in SOLUTIONS if p.stem == SIMILARITY][:1] or SOLUTIONS[:1]
# These tests are about grading, not sealing off: the sandbox where there is one, else none.
ISOLATION = find_isolation() or Isolation(bwrap=None)
NO_MEMORY_LIMIT = f"the memory limit (RLIMIT_AS) holds on Linux only; this is {system_name()}"
pytestmark = pytest.mark.skipif(not SOLUTIONS, reason="no solution notebooks yet")


def last_exercise_function(nb) -> str:
    """The function the last exercise checks (nothing later uses it, so breaking it costs only that exercise)."""
    check_cell = [c for c in nb.cells if "exercise" in c.metadata][-1]
    return check_call_parts(check_cell.source)[1][0]


@pytest.fixture(scope="module")
def assignments():
    return load_assignments()


@pytest.fixture(scope="module")
def class_run(tmp_path_factory, assignments):
    """Every solution, its generated exercise and a one-wrong-answer copy, graded in one run."""
    root = tmp_path_factory.mktemp("class")
    paths = []
    for solution in GRADED:
        nb = read_notebook(solution)
        paths.append(save(root / "solved" / solution.name, solution.read_bytes()))
        paths.append(save(root / "stub" / solution.name, render_exercise(nb, name=solution.name)))
        wrong = replace_solution(nb, last_exercise_function(nb), "return None")
        paths.append(save(root / "one_wrong" / solution.name, wrong))
    hashes = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}
    grades = grade_paths(paths, assignments, ISOLATION)
    return {Path(g.file): g for g in grades}, hashes


@pytest.mark.parametrize("solution", GRADED, ids=short)
def test_solutions_get_full_marks(class_run, solution):
    grades, _ = class_run
    g = next(g for path, g in grades.items() if path.parent.name == "solved" and path.name == solution.name)
    assert g.total == g.max_points > 0, [(e.id, e.status, e.lines[-1:]) for e in g.exercises]
    assert g.notes == []


@pytest.mark.parametrize("solution", GRADED, ids=short)
def test_generated_exercises_get_zero_not_attempted(class_run, solution):
    grades, _ = class_run
    g = next(g for path, g in grades.items() if path.parent.name == "stub" and path.name == solution.name)
    assert g.total == 0 and g.max_points > 0
    assert {e.status for e in g.exercises} == {Status.NOT_ATTEMPTED}
    assert all("not attempted yet" in e.lines[-1] for e in g.exercises)


@pytest.mark.parametrize("solution", GRADED, ids=short)
def test_one_wrong_answer_loses_exactly_that_exercise(class_run, assignments, solution):
    grades, _ = class_run
    g = next(g for path, g in grades.items() if path.parent.name == "one_wrong" and path.name == solution.name)
    last = assignments[solution.stem].exercises[-1]
    assert g.total == g.max_points - last.points
    assert [e.id for e in g.exercises if e.points == 0] == [last.id]
    assert g.exercises[-1].status == Status.FAILED
    assert any(line.startswith("✘") for line in g.exercises[-1].lines)


def test_submissions_are_never_modified(class_run):
    _, hashes = class_run
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path


# -- broken and hostile submissions (lesson 01's assignment) ------------------------------------------------------


def bad_submissions(solution_nb) -> dict[str, object]:
    """Each case: what a student could hand in."""
    nb = solution_nb
    cases = {"honest": nb}
    cases["norm_without_sqrt"] = replace_solution(nb, "norm", "return (v ** 2).sum()")
    cases["norm_other_wrong"] = replace_solution(nb, "norm", "return v.max()")
    cases["cosine_dot_products"] = replace_solution(nb, "cosine_matrix", "return a @ b.T")
    cases["cosine_wrong_axis"] = replace_solution(
        nb, "cosine_matrix", "return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T")
    cases["infinite_loop"] = replace_solution(nb, "norm", "while True:\n    pass")
    syntax = replace_solution(nb, "dot_product", "return (a * b).sum(")
    cases["syntax_error"] = syntax
    cases["exception"] = replace_solution(nb, "norm", "return 1 / 0")
    deleted = copy(nb)
    deleted.cells = [c for c in deleted.cells
                     if c.metadata.get("exercise", {}).get("id") != "dot_product" and "def norm(" not in c.source]
    cases["cells_deleted"] = deleted
    renamed = copy(nb)
    function_cell(renamed, "norm").source = function_cell(renamed, "norm").source.replace("def norm(", "def length(")
    cases["renamed_function"] = renamed
    faked = replace_solution(nb, "norm", "return v.sum()")
    for cell in faked.cells:
        if cell.metadata.get("exercise", {}).get("id") == "norm":
            cell.source = "print('✔ all checks passed')"
    cases["edited_checks"] = with_cells(faked, "import transformer_lib.checks._feedback as feedback\n"
                                               "feedback.describe_mismatch = lambda *args, **kwargs: None\n"
                                               "class check:\n    pass")
    cases["huge_output"] = with_cells(nb, "for _ in range(50):\n    print('x' * 100_000)")
    cases["kernel_dies"] = with_cells(nb, "import os\nos._exit(1)", at=3)
    cases["ignores_interrupts"] = with_cells(
        nb, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass")
    cases["memory_hog"] = with_cells(nb, "hog = bytearray(64 * 1024**3)",
                                     "open('written_by_student.txt', 'w').write('hi')")
    cases["invalid_json"] = '{"cells": ['
    cases["not_a_notebook"] = '{"hello": "world"}'
    cases["empty_file"] = b""
    return cases


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory, assignments):
    if SIMILARITY not in assignments:
        pytest.skip(f"solutions/{SIMILARITY}.ipynb not written yet")
    root = tmp_path_factory.mktemp("bad")
    solution_nb = read_notebook(next(p for p in SOLUTIONS if p.stem == SIMILARITY))
    paths = [save(root / name / f"{SIMILARITY}.ipynb", content)
             for name, content in bad_submissions(solution_nb).items()]
    hashes = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}
    started = os.getcwd()
    grades = grade_paths(paths, assignments, ISOLATION)
    assert os.getcwd() == started
    return {g.student: g for g in grades}, hashes, assignments[SIMILARITY]


def test_infinite_loop_costs_only_that_exercise(bad_run):
    grades, _, assignment = bad_run
    g = grades["infinite_loop"]
    assert points(g) == full_except(assignment, "norm")
    assert exercise(g, "norm").status == Status.TIMED_OUT
    assert "stopped after 12 s" in exercise(g, "norm").lines[0]


def test_syntax_error_is_reported_and_the_rest_graded(bad_run):
    grades, _, assignment = bad_run
    g = grades["syntax_error"]
    assert points(g) == full_except(assignment, "dot_product")
    assert exercise(g, "dot_product").lines == [
        "function `dot_product` not found: did you rename it, or delete or not run its cell?"]
    assert any("SyntaxError" in note and "def dot_product" in note for note in g.notes)


def test_exception_in_the_function_fails_its_checks(bad_run):
    grades, _, assignment = bad_run
    g = grades["exception"]
    assert points(g) == full_except(assignment, "norm")
    assert exercise(g, "norm").status == Status.FAILED
    assert any("raised ZeroDivisionError" in line for line in exercise(g, "norm").lines)


# What each submission's norm and cosine_matrix are diagnosed as ("" = passed): the class report counts these.
DIAGNOSES = {
    "honest": ("", ""),
    "norm_without_sqrt": ("norm-no-square-root", ""),
    "norm_other_wrong": ("other-wrong-answer", ""),
    "cosine_dot_products": ("", "cosine-not-normalised"),
    "cosine_wrong_axis": ("", "cosine-wrong-axis"),
    "exception": ("error:ZeroDivisionError", ""),
    "infinite_loop": ("timed-out", ""),
    "renamed_function": ("missing-function", ""),
    "cells_deleted": ("missing-function", ""),
    "edited_checks": ("norm-no-squares", ""),
}


def test_each_submission_is_diagnosed_and_the_class_report_counts_it(bad_run, tmp_path):
    grades, _, _ = bad_run
    got = {name: (exercise(grades[name], "norm").diagnosis, exercise(grades[name], "cosine_matrix").diagnosis)
           for name in DIAGNOSES}
    assert got == DIAGNOSES
    assert exercise(grades["norm_without_sqrt"], "norm").diagnosis_hint.startswith("you forgot the square root")
    summaries = {s.exercise: s for s in summarise(build_rows(list(grades.values())))}
    norm = summaries["norm"]
    counts = {f.diagnosis: f.count for f in norm.findings}
    assert counts["missing-function"] == 2 and counts["norm-no-square-root"] == 1
    assert norm.submissions == len(grades) and norm.passed == sum(
        exercise(g, "norm").status == Status.PASSED for g in grades.values())
    assert {f.diagnosis: f.count for f in summaries["cosine_matrix"].findings}.items() >= {
        "cosine-not-normalised": 1, "cosine-wrong-axis": 1}.items()


def test_deleted_cells(bad_run):
    grades, _, assignment = bad_run
    g = grades["cells_deleted"]
    assert points(g) == full_except(assignment, "norm")  # a deleted check cell changes nothing
    assert exercise(g, "norm").status == Status.MISSING


def test_renamed_function(bad_run):
    grades, _, assignment = bad_run
    g = grades["renamed_function"]
    assert points(g) == full_except(assignment, "norm")
    assert exercise(g, "norm").lines == ["function `norm` not found: did you rename it, or delete or not run its cell?"]


def test_edited_check_cells_and_patched_library_cannot_fake_a_pass(bad_run):
    grades, _, assignment = bad_run
    g = grades["edited_checks"]
    assert points(g) == full_except(assignment, "norm")
    assert any("you added the components without squaring them" in line for line in exercise(g, "norm").lines)


def test_huge_output_is_truncated(bad_run):
    grades, _, assignment = bad_run
    g = grades["huge_output"]
    assert points(g) == full_except(assignment)
    assert any("printed more than 1,000,000 characters; the rest was dropped" in note for note in g.notes)
    assert len(json.dumps([e.lines for e in g.exercises])) < 20_000


def test_dead_kernel_grades_zero_with_a_message(bad_run):
    grades, _, assignment = bad_run
    g = grades["kernel_dies"]
    assert g.total == 0 and {e.status for e in g.exercises} == {Status.NOT_GRADED}
    assert "the kernel died" in exercise(g, "norm").lines[0]
    assert any(note.startswith("cell 4 (`import os`): the kernel died") for note in g.notes)


def test_a_kernel_ignoring_interrupts_is_killed(bad_run):
    grades, _, assignment = bad_run
    g = grades["ignores_interrupts"]
    assert g.total == 0
    assert any("did not stop when interrupted, so it was killed" in note for note in g.notes)


@pytest.mark.skipif(not memory_limit_holds(), reason=NO_MEMORY_LIMIT)
def test_memory_is_limited(bad_run):
    grades, _, assignment = bad_run
    g = grades["memory_hog"]
    assert points(g) == full_except(assignment)
    assert any("MemoryError" in note for note in g.notes)


def test_files_land_in_a_temporary_folder(bad_run):
    grades, _, _ = bad_run
    assert grades["memory_hog"].exercises  # graded, and the cell writing a file ran after the allocation
    assert not Path("written_by_student.txt").exists()


@pytest.mark.parametrize("case, message", [
    ("invalid_json", "not a notebook: invalid JSON (Expecting value at line 1)"),
    ("not_a_notebook", "not a notebook: valid JSON, but it holds no notebook cells"),
    ("empty_file", "the file is empty"),
])
def test_files_that_are_not_notebooks_get_zero_and_a_message(bad_run, case, message):
    grades, _, assignment = bad_run
    g = grades[case]
    assert g.assignment == assignment.name and g.total == 0 and g.max_points == assignment.max_points
    assert any(note.startswith(message) for note in g.notes)


def test_bad_submissions_are_never_modified(bad_run):
    _, hashes, _ = bad_run
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path


def test_a_changed_library_is_detected(tmp_path, monkeypatch, assignments):
    if SIMILARITY not in assignments:
        pytest.skip(f"solutions/{SIMILARITY}.ipynb not written yet")
    library = tmp_path / "library"
    save(library / "module.py", "x = 1\n")
    monkeypatch.setattr(scoring, "LIBRARY_DIR", library)
    nb = with_cells(read_notebook(next(p for p in SOLUTIONS if p.stem == SIMILARITY)),
                    f"open({str(library / 'module.py')!r}, 'a').write('x = 2\\n')")
    path = save(tmp_path / "mallory" / f"{SIMILARITY}.ipynb", nb)
    submission = Submission(path, path.read_bytes(), assignments[SIMILARITY])
    assert scoring.grade_submission(submission, FAST, Isolation(bwrap=None)).library_changed  # without a sandbox


@pytest.mark.skipif(not memory_limit_holds(), reason=NO_MEMORY_LIMIT)
def test_the_sandbox_wrapper_limits_memory_cpu_and_file_size():
    code = ("from resource import RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, getrlimit\n"
            "print([getrlimit(r)[0] for r in (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE)])\n"
            "try:\n    bytearray(400 * 1024**2)\nexcept MemoryError:\n    print('MemoryError')")
    command = wrap_command([sys.executable, "-c", code], Limits(memory_mb=300, cpu_seconds=5, file_mb=1))
    shown = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
    assert shown == ["[314572800,", "5,", "1048576]", "MemoryError"]


# -- names, assignments, gradebook ------------------------------------------------------------------------------


@pytest.mark.parametrize("path, expected", [
    ("submissions/alice/01_similarity_exercises.ipynb", "alice"),
    ("alice_01_similarity_exercises.ipynb", "alice"),
    ("bob-01_similarity_exercises (1).ipynb", "bob"),
    ("carol.ipynb", "carol"),
])
def test_student_name_from_file_or_folder(path, expected):
    assert student_name(Path(path), SIMILARITY) == expected


def test_assignment_from_the_check_import_beats_the_file_name(assignments):
    if SIMILARITY not in assignments:
        pytest.skip(f"solutions/{SIMILARITY}.ipynb not written yet")
    text = "from transformer_lib.checks import ex01_similarity as check"
    assert identify_assignment(text, Path("homework.ipynb"), assignments).name == SIMILARITY
    assert identify_assignment("", Path(f"x_{SIMILARITY}.ipynb"), assignments).name == SIMILARITY
    assert identify_assignment("", Path("homework.ipynb"), assignments) is None


def test_points_come_from_the_solution_metadata(assignments):
    for solution in SOLUTIONS:
        nb = read_notebook(solution)
        expected = [(c.metadata["exercise"]["id"], c.metadata["exercise"]["points"])
                    for c in nb.cells if "exercise" in c.metadata]
        assert [(e.id, e.points) for e in assignments[solution.stem].exercises] == expected


def test_gradebook_files(class_run, tmp_path):
    grades, _ = class_run
    csv_path, json_path = write_gradebook(list(grades.values()), tmp_path)
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    titles = {(a, e): title for a, e, title in column_names(list(grades.values()))}  # "06:parameter_count" if shared
    assert len(rows) == len(grades)
    for row, g in zip(rows, grades.values(), strict=True):
        assert int(row["total"]) == g.total and int(row["max"]) == g.max_points
        assert sum(int(row[titles[g.assignment, e.id]]) for e in g.exercises) == g.total
    records = json.loads(json_path.read_text(encoding="utf-8"))
    assert all(isinstance(e["lines"], list) for r in records for e in r["exercises"])


@pytest.mark.skipif(not SLOW, reason="slow (about two minutes): set COURSE_SLOW_TESTS=1")
def test_a_class_of_30_mixed_submissions(tmp_path, assignments, capsys):
    if SIMILARITY not in assignments:
        pytest.skip(f"solutions/{SIMILARITY}.ipynb not written yet")
    solution = next(p for p in SOLUTIONS if p.stem == SIMILARITY)
    nb = read_notebook(solution)
    kinds = {
        "solved": nb,
        "stub": render_exercise(nb, name=solution.name),
        "wrong_norm": replace_solution(nb, "norm", "return v.sum()"),
        "wrong_cosine": replace_solution(nb, "cosine_matrix", "return a @ b.T"),
        **{k: v for k, v in bad_submissions(nb).items()
           if k in ("infinite_loop", "syntax_error", "renamed_function", "invalid_json", "empty_file")},
    }
    names = list(kinds)
    paths = [save(tmp_path / "submissions" / f"student{i:02d}_{names[i % len(names)]}" / solution.name,
                  kinds[names[i % len(names)]]) for i in range(30)]
    started = time.monotonic()
    code = cli.main([str(tmp_path / "submissions"), "--out", str(tmp_path / "out"), "--cell-timeout", "12",
                     "--check-timeout", "12"])
    seconds = time.monotonic() - started
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "out" / "grades.csv").open(encoding="utf-8")))
    assert len(rows) == len(paths) == 30
    full = assignments[SIMILARITY].max_points
    assert all(int(r["total"]) == full for r in rows if r["student"].endswith("_solved"))
    assert all(int(r["total"]) == 0 for r in rows if r["student"].endswith(("_stub", "_json", "_file")))
    print(f"graded 30 submissions in {seconds:.1f} s")


# -- nbgrader ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("solution", SOLUTIONS, ids=short)
def test_nbgrader_clear_solutions_makes_the_same_stubs(solution):
    """The README's claim: nbgrader's ClearSolutions turns our solution cells into our generator's stubs."""
    nb = read_notebook(solution)
    theirs, _ = ClearSolutions(enforce_metadata=False).preprocess(
        nbformat.from_dict(json.loads(json.dumps(nb))), {})
    ours = nbformat.reads(render_exercise(nb, name=solution.name), as_version=4)
    assert [c.source for c in theirs.cells if c.cell_type == "code"] == [
        c.source for c in ours.cells if c.cell_type == "code"]


# -- no sandbox, dying workers ----------------------------------------------------------------------------------


def test_without_a_sandbox_grading_refuses_unless_told(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "find_isolation", lambda: None)
    monkeypatch.setattr(isolation.platform, "system", lambda: "Linux")  # a Linux without bubblewrap, wherever this runs
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    solution = next(p for p in SOLUTIONS if p.stem == SIMILARITY)
    submission = save(tmp_path / "alice" / solution.name, solution.read_bytes())
    assert cli.main([str(submission), "--out", str(tmp_path / "out")]) == 4
    message = capsys.readouterr().err
    assert "REFUSED" in message and "apt-get install bubblewrap" in message and "--unsandboxed" in message
    assert not (tmp_path / "out").exists()
    assert cli.main([str(submission), "--out", str(tmp_path / "out"), "--unsandboxed", "--jobs", "1"]) == 0
    rows = list(csv.DictReader((tmp_path / "out" / "grades.csv").open(encoding="utf-8")))
    assert [(r["student"], r["sandbox"]) for r in rows] == [("alice", "none (--unsandboxed)")]
    assert "WARNING: grading WITHOUT a sandbox" in capsys.readouterr().err
    out = tmp_path / "out"  # beside the gradebook: the class report and the feedback to hand back
    assert "| dot_product | 1/1 (100%) | none |" in (out / "class_report.md").read_text(encoding="utf-8")
    assert (out / "class_report.html").exists() and (out / f"class_report_{SIMILARITY}.png").exists()
    assert "## ✔ norm" in (out / "feedback" / SIMILARITY / "alice.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("system, expected", [("Darwin", "this is macOS: the sandbox needs Linux (bubblewrap)"),
                                              ("Windows", "this is Windows: the sandbox needs Linux (bubblewrap)")])
def test_the_refusal_names_what_is_missing(monkeypatch, system, expected):
    monkeypatch.setattr(isolation.platform, "system", lambda: system)
    assert expected in isolation.why_no_sandbox()


def _grade_or_die(submission, settings, chosen):
    """Stands in for grade_submission in the workers: the file named crash_* kills its worker process."""
    if submission.path.name.startswith("crash"):
        os._exit(1)
    return SubmissionGrade(submission.student, str(submission.path), "", SIMILARITY, isolation=chosen.name)


def test_a_dying_worker_costs_only_its_own_submission(monkeypatch, tmp_path):
    monkeypatch.setattr(class_runner, "grade_submission", _grade_or_die)
    names = ["alice", "crash_mallory", "bob", "carol"]
    submissions = [Submission(tmp_path / f"{name}.ipynb", b"{}", None) for name in names]
    grades = class_runner.grade_class(submissions, FAST, Isolation(bwrap=None), jobs=2, progress=False)
    assert [g.student for g in grades] == names
    assert [g.notes[:1] == [] for g in grades] == [True, False, True, True]
    assert "worker process died" in grades[1].notes[0]


# -- flags for review ---------------------------------------------------------------------------------------------


def test_no_course_notebook_is_flagged_for_review():
    for path in [*SOLUTIONS, *EXERCISES]:
        assert review.tampering_in(read_notebook(path)) == [], path


@pytest.mark.parametrize("code, kind", [
    ("import sys\nsys.modules['x'] = None", "sys.modules"),
    ("import builtins\nbuiltins.print = len", "builtins"),
    ("__builtins__.print = len", "builtins"),
    ("m = __import__('json')", "__import__ or importlib"),
    ("import importlib\nimportlib.reload(torch)", "__import__ or importlib"),
    ("import transformer_lib.checks._feedback as f", "the course's check code"),
    ("from transformer_lib.checks import show_hint; import transformer_lib.checks._feedback as f",
     "the course's check code"),
    ("import course_tools", "the course's check code"),
    ("import inspect\ninspect.stack()", "frames or the garbage collector"),
    ("import gc\ngc.get_objects()", "frames or the garbage collector"),
    ("sys.settrace(None)", "tracing or audit hooks"),
    ("import ctypes", "ctypes"),
    ("torch.allclose = lambda *a, **k: True", "replaced library functions"),
    ("np.testing.assert_allclose = print", "replaced library functions"),
])
def test_ways_to_tamper_with_the_checks_are_flagged(code, kind):
    nb = with_cells(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# x")]), code)
    assert review.tampering_in(nb) == [kind]
    assert review.review_note(nb).startswith(f"review by hand: the code uses {kind},")


def test_comparisons_and_ordinary_code_are_not_flagged():
    nb = with_cells(nbformat.v4.new_notebook(), "ok = torch.allclose(a, b) == True\nx = np.zeros(3)\nimport sys",
                    "from transformer_lib.checks import ex01_similarity as check",
                    "from transformer_lib.checks import show_hint  # prints the code-level hint\nshow_hint('norm')")
    assert review.tampering_in(nb) == [] and review.review_note(nb) is None
