"""Grading one submission: its cells and the checks run in a sealed-off kernel, the outputs turned into points."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import tempfile
import time
from pathlib import Path

import nbformat

from .. import ROOT
from .assignments import Assignment, ExerciseSpec
from .diagnosis import BY_STATUS, failed_check_diagnosis
from .in_kernel import cell_source
from .isolation import Isolation
from .kernel import MAX_CELL_OUTPUT_CHARS, CellRun, KernelRun, KernelSettings, run_cells
from .results import ExerciseGrade, Status, SubmissionGrade
from .review import review_note
from .solution_format import is_check_cell
from .submissions import Submission, parse_notebook

MAX_FEEDBACK_LINES = 40
MAX_LINE_CHARS = 400
LIBRARY_DIR = ROOT / "transformer_lib"


def short(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def library_fingerprint() -> str:
    """A hash of the course library's code on disk (read-only in the sandbox; checked for unsandboxed runs)."""
    digest = hashlib.sha256()
    for path in sorted(LIBRARY_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(LIBRARY_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def exercise_grade(exercise: ExerciseSpec, run: CellRun, marker: str, check_timeout_s: float,
                   stopped: str | None) -> ExerciseGrade:
    """Turn the output of one check cell into points and feedback."""
    def zero(status: Status, message: str) -> ExerciseGrade:
        return ExerciseGrade(exercise.id, 0, exercise.points, status, [message], diagnosis=BY_STATUS[status])

    if not run.ran:
        return zero(Status.NOT_GRADED, f"not graded: {stopped}")
    if run.stopped and not run.timed_out:
        return zero(Status.ERROR, f"the check could not finish: {stopped}")
    if run.timed_out:
        return zero(Status.TIMED_OUT, f"the check was stopped after {check_timeout_s:g} s: does your code loop "
                                      "forever or take far too long?")
    results = [line[len(marker):] for line in run.stdout.splitlines() if line.startswith(marker)]
    if len(results) > 1:
        return zero(Status.ERROR, "the grader's result line appeared more than once (printed by the submission?)")
    if not results:
        return zero(Status.ERROR, f"the check could not finish: {short(run.error or 'no result')}")
    try:
        payload = json.loads(results[0])
    except json.JSONDecodeError:
        return zero(Status.ERROR, "the check's result could not be read")
    if "missing" in payload:
        names = ", ".join(f"`{name}`" for name in payload["missing"])
        return zero(Status.MISSING, f"function {names} not found: did you rename it, or delete or not run its cell?")
    result = payload["result"]
    lines = [short(line) for line in result.get("lines", [])[:MAX_FEEDBACK_LINES]]
    counts = {"checks_passed": int(result.get("passed", 0)), "checks_total": int(result.get("total", 0))}
    if result.get("ok"):
        return ExerciseGrade(exercise.id, exercise.points, exercise.points, Status.PASSED, lines, **counts)
    if not result.get("attempted", True):
        return ExerciseGrade(exercise.id, 0, exercise.points, Status.NOT_ATTEMPTED, lines,
                             diagnosis=BY_STATUS[Status.NOT_ATTEMPTED], **counts)
    diagnosis, hint = failed_check_diagnosis(result.get("diagnoses"))
    return ExerciseGrade(exercise.id, 0, exercise.points, Status.FAILED, lines, diagnosis=diagnosis,
                         diagnosis_hint=hint, **counts)


def cell_notes(numbered: list[tuple[int, nbformat.NotebookNode]], run: KernelRun,
               settings: KernelSettings) -> list[str]:
    """A note for each student cell that failed, ran too long, printed too much, or was running when it stopped."""
    notes = []
    for index, ((number, cell), cell_run) in enumerate(zip(numbered, run.cells, strict=False)):
        where = f"cell {number} (`{short(cell.source.strip().splitlines()[0], 40)}`)"
        if cell_run.stopped:
            notes.append(f"{where}: {run.stopped}")
        elif cell_run.timed_out:
            notes.append(f"{where} was stopped after {settings.cell_timeout_s:g} s (an endless loop?)")
        elif cell_run.error:
            notes.append(f"{where} raised {short(cell_run.error, 160)}")
        if index in run.truncated:
            notes.append(f"{where} printed more than {MAX_CELL_OUTPUT_CHARS:,} characters; the rest was dropped")
    if run.stopped:
        notes.append("grading stopped early: the exercises not reached earn 0")
    return notes


def short_temp_parent() -> str | None:
    """Where submissions' working folders go: ``/tmp``, a short path (the sandboxed kernel's channels are Unix sockets
    in that folder, and their names are limited to about 100 bytes); where there is no ``/tmp`` (Windows, where
    kernels talk TCP), None: the system's temporary folder."""
    return "/tmp" if Path("/tmp").is_dir() else None


def grade_notebook(nb: nbformat.NotebookNode, assignment: Assignment, settings: KernelSettings,
                   isolation: Isolation) -> tuple[list[ExerciseGrade], list[str]]:
    """Run the student's cells, then the checks from ``solutions/``; return the exercises' grades and the notes."""
    marker = f"@@grade-{secrets.token_hex(16)}@@"
    numbered = [(number, cell) for number, cell in enumerate(nb.cells, start=1)
                if cell.cell_type == "code" and cell.source.strip() and not is_check_cell(cell)]
    cells = [nbformat.v4.new_code_cell(cell.source) for _, cell in numbered]
    cells += [nbformat.v4.new_code_cell(cell_source(assignment.check_module, e.call, e.needs, marker))
              for e in assignment.exercises]
    timeouts = [settings.cell_timeout_s] * len(numbered) + [settings.check_timeout_s] * len(assignment.exercises)
    with tempfile.TemporaryDirectory(prefix="cg-", dir=short_temp_parent()) as workdir:
        run = asyncio.run(run_cells(cells, timeouts, marker, Path(workdir), settings, isolation))
    grades = [exercise_grade(exercise, run.cells[len(numbered) + offset], marker, settings.check_timeout_s, run.stopped)
              for offset, exercise in enumerate(assignment.exercises)]
    return grades, cell_notes(numbered, run, settings)


def grade_submission(submission: Submission, settings: KernelSettings, isolation: Isolation) -> SubmissionGrade:
    """Grade one submission held in memory; bad files get 0 points and a note, never an exception."""
    started = time.monotonic()
    assignment = submission.assignment
    grade = SubmissionGrade(student=submission.student, file=str(submission.path), sha256=submission.sha256,
                            assignment=assignment.name if assignment else "?", isolation=isolation.name)
    grade.notes.extend([submission.note] if submission.note else [])
    nb, problem = parse_notebook(submission.data)
    if problem or assignment is None:
        grade.notes.append(problem or "could not tell which assignment this is: use --assignment")
        grade.exercises = [ExerciseGrade(e.id, 0, e.points, Status.NOT_GRADED, [problem or "unknown assignment"],
                                         diagnosis=BY_STATUS[Status.NOT_GRADED])
                           for e in (assignment.exercises if assignment else ())]
    else:
        before = library_fingerprint()
        exercises, notes = grade_notebook(nb, assignment, settings, isolation)
        grade.exercises, grade.library_changed = exercises, library_fingerprint() != before
        grade.notes.extend([*notes, *filter(None, [review_note(nb)])])
    grade.seconds = time.monotonic() - started
    return grade
