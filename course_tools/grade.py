"""Grade submitted exercise notebooks into a gradebook: ``python3 course.py grade SUBMISSION.ipynb… [--out DIR]``.

What is graded, and with what
    The solution notebooks in ``solutions/`` are the single source. Each check cell there carries
    ``{"exercise": {"id": …, "points": P}}`` and its source is one call ``check.<name>(<function>…)``; the setup cell
    imports ``from transformer_lib.checks import exNN_topic as check``. The grader reads both from ``solutions/``, never
    from the submission, so deleting or editing a check cell, or redefining ``check``, changes nothing. An exercise
    earns all its points when every check passes, otherwise 0 (``--partial-credit``: a share, see ``gradebook.py``).

Which assignment, which student
    The assignment is taken from ``--assignment`` if given, else from the submission's own
    ``from transformer_lib.checks import exNN_… as check`` line, else from its file name; a file that says nothing
    (empty, not a notebook) is graded against the one assignment the rest of the class submitted. The student is the
    file name without the assignment's name (``alice_01_similarity_exercises.ipynb`` → ``alice``), or the folder when
    nothing is left (``submissions/alice/01_similarity_exercises.ipynb`` → ``alice``).

How one submission runs
    1. Every submission file is read into memory (and hashed) before any code runs; the file itself is never opened
       for writing.
    2. A fresh kernel starts in a new temporary working directory, through ``course_tools/sandbox.py``, which limits
       its memory, CPU time and file sizes. Its environment holds only what Python needs (no tokens of the teacher).
    3. The student's code cells run in order (their own check cells are skipped), each with a per-cell timeout;
       errors are allowed; a cell that runs too long is interrupted and the next one runs. Output beyond 1 MB per cell
       is dropped.
    4. In the same kernel, for each exercise: the course library is imported afresh (every ``transformer_lib`` module
       is dropped from ``sys.modules`` first, so a patched copy is not used), the check call from ``solutions/`` runs
       with its own timeout, and its ``CheckResult`` comes back as JSON on a line starting with a random marker made
       for this run. A missing function, a timeout, a dead kernel or a forged marker each give that exercise 0 with a
       message.
    5. A total time limit per submission bounds everything; a kernel that does not react to an interrupt is killed.
    6. Only after every kernel has finished does the grader (not the kernel) write ``grades.csv`` and
       ``grades.json`` into ``--out`` (default ``grades/``) through ``gradebook.py`` (with ``--roster``,
       ``--partial-credit`` and ``--lms canvas``); a gradebook already there is renamed ``grades.<time>.csv`` first,
       never overwritten.

What the sandbox does and does not protect against (read this before grading strangers' work)
    It protects the grading run from accidents and from the usual mischief: infinite loops, memory bombs, huge
    outputs, crashes, ``exit()``, edited or deleted check cells, a patched course library, files written into the
    working directory, and one submission changing another (they were all read before any ran). If a kernel changes
    the course library on disk (``transformer_lib/``), the run stops and writes no gradebook.
    It is not a security boundary: the kernel runs as your user, so code in a submission can read and write
    whatever your account can (your home directory included) and open network connections, and code written to
    attack the grader (e.g. replacing NumPy's comparison functions inside the kernel before the checks run) can fake
    a pass. For submissions you do not trust, run the grader inside a container or a throwaway account, e.g.
    ``bwrap``/``firejail``/``docker`` with the repository mounted read-only.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from . import ROOT, SOLUTIONS_DIR
from .gradebook import build_rows, print_summary, read_roster, write_gradebook
from .notebook_files import notebooks_in
from .sandbox import Limits, wrap_command

CHECK_IMPORT = re.compile(r"^\s*from\s+transformer_lib\.checks\s+import\s+(ex\w+)\s+as\s+check\b", re.MULTILINE)
LIBRARY_DIR = ROOT / "transformer_lib"
MAX_SUBMISSION_BYTES = 50 * 1024 * 1024
MAX_CELL_OUTPUT_CHARS = 1_000_000
MAX_FEEDBACK_LINES = 40
MAX_LINE_CHARS = 400
# What a kernel needs from the grader's environment (on Linux, macOS and Windows); tokens and keys stay behind.
KERNEL_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "PYTHONUTF8", "VIRTUAL_ENV", "TMP",
                   "TEMP", "TMPDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME", "SYSTEMROOT", "SYSTEMDRIVE", "USERPROFILE",
                   "APPDATA", "LOCALAPPDATA")


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


@dataclass(frozen=True)
class Settings:
    """Time and resource limits for one submission."""

    cell_timeout_s: float = 60.0
    check_timeout_s: float = 60.0
    total_timeout_s: float = 600.0
    limits: Limits = Limits()
    threads: int = 1  # CPU threads for torch/NumPy in each kernel
    grace_s: float = 10.0  # after a timeout's interrupt, how long a kernel may take to stop before it is killed


@dataclass
class ExerciseGrade:
    id: str
    points: float  # an int, unless --partial-credit gave a share of them
    max_points: int
    status: str  # passed, failed, not attempted, missing, timed out, error, not graded
    lines: list[str] = field(default_factory=list)
    checks_passed: int = 0  # how many of the checks that ran passed (for --partial-credit)
    checks_total: int = 0


@dataclass
class SubmissionGrade:
    student: str
    file: str
    sha256: str
    assignment: str
    exercises: list[ExerciseGrade] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    library_changed: bool = False

    @property
    def total(self) -> float:
        return sum(exercise.points for exercise in self.exercises)

    @property
    def max_points(self) -> int:
        return sum(exercise.max_points for exercise in self.exercises)


# -- assignments (from solutions/) -------------------------------------------------------------------------------


def check_call_parts(source: str) -> tuple[str, tuple[str, ...]] | None:
    """For a source that is exactly one call ``check.<name>(…)``: the call and the other names it uses."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Call):
        return None
    call = body[0].value
    if not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "check"):
        return None
    needs = tuple(dict.fromkeys(
        node.id for argument in [*call.args, *(k.value for k in call.keywords)]
        for node in ast.walk(argument) if isinstance(node, ast.Name)
    ))
    return ast.unparse(call), needs


def assignment_from_solution(nb: nbformat.NotebookNode, name: str) -> Assignment:
    """Read the check module and every exercise (id, points, check call) of one solution notebook."""
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    found = CHECK_IMPORT.search(text)
    if not found:
        raise ValueError(f"{name}: no `from transformer_lib.checks import exNN_… as check` line")
    exercises = []
    for cell in nb.cells:
        meta = cell.metadata.get("exercise")
        if meta is None:
            continue
        parts = check_call_parts(cell.source)
        if parts is None:
            raise ValueError(f"{name}: the check cell of {meta.get('id')!r} is not one call `check.<name>(…)`")
        exercises.append(ExerciseSpec(id=str(meta["id"]), points=int(meta["points"]), call=parts[0], needs=parts[1]))
    if not exercises:
        raise ValueError(f"{name}: no check cell with {{'exercise': {{'id': …, 'points': …}}}} metadata")
    return Assignment(name=name, check_module=found.group(1), exercises=tuple(exercises))


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
    found = CHECK_IMPORT.search(text)
    if found:
        for assignment in assignments.values():
            if assignment.check_module == found.group(1):
                return assignment
    for assignment in sorted(assignments.values(), key=lambda a: -len(a.name)):
        if assignment.name in path.name:
            return assignment
    return None


def student_name(path: Path, assignment_name: str | None) -> str:
    """``alice_01_similarity_exercises.ipynb`` → alice; ``alice/01_similarity_exercises.ipynb`` → alice."""
    stem = path.stem
    if assignment_name:
        stem = stem.replace(assignment_name, "")
    stem = re.sub(r"\s*\(\d+\)$", "", stem).strip(" _-.")  # "name (1)": a browser's second download
    if stem:
        return stem
    return path.parent.name or path.stem


# -- running one submission -------------------------------------------------------------------------------------


def _kernel_manager_class(limits: Limits) -> type[AsyncKernelManager]:
    class SandboxedKernelManager(AsyncKernelManager):
        """Starts the kernel through ``sandbox.py``, which sets the resource limits."""

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            kw.setdefault("stdout", subprocess.DEVNULL)  # the kernel's own log lines would flood the summary
            kw.setdefault("stderr", subprocess.DEVNULL)
            await super()._async_launch_kernel(wrap_command(kernel_cmd, limits), **kw)

    return SandboxedKernelManager


class _GradingClient(NotebookClient):
    """An nbclient that keeps at most ``MAX_CELL_OUTPUT_CHARS`` of each cell's output (plus the result lines)."""

    def __init__(self, nb: nbformat.NotebookNode, marker: str, **kwargs: Any):
        super().__init__(nb, **kwargs)
        self.marker = marker
        self.output_chars: dict[int, int] = {}
        self.truncated: set[int] = set()

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        size = len(json.dumps(msg["content"], default=str))
        used = self.output_chars.get(cell_index, 0) + size
        self.output_chars[cell_index] = used
        if used <= MAX_CELL_OUTPUT_CHARS:
            return super().output(outs, msg, display_id, cell_index)
        self.truncated.add(cell_index)
        text = msg["content"].get("text", "") if msg["msg_type"] == "stream" else ""
        kept = [line for line in text.splitlines() if line.startswith(self.marker)]
        if kept:
            outs.append(nbformat.v4.new_output("stream", name="stdout", text="\n".join(kept) + "\n"))
        return None


@dataclass
class CellRun:
    """What happened to one executed cell."""

    seconds: float = 0.0
    timed_out: bool = False
    error: str | None = None
    stdout: str = ""
    ran: bool = True
    stopped: bool = False  # the kernel died or was killed during this cell


def is_check_cell(cell: nbformat.NotebookNode) -> bool:
    return "exercise" in cell.metadata or check_call_parts(cell.source) is not None


def grader_cell_source(assignment: Assignment, exercise: ExerciseSpec, marker: str) -> str:
    """Code the grader appends: import the checks afresh, run the solution's check call, print the result."""
    call = exercise.call.replace("check.", "_grader_check.", 1)
    return "\n".join([
        "import importlib as _grader_importlib, json as _grader_json, sys as _grader_sys",
        "for _grader_name in [m for m in list(_grader_sys.modules)",
        "                     if m == 'transformer_lib' or m.startswith('transformer_lib.')]:",
        "    del _grader_sys.modules[_grader_name]",
        f"_grader_check = _grader_importlib.import_module('transformer_lib.checks.{assignment.check_module}')",
        f"_grader_missing = [n for n in {list(exercise.needs)!r} if n not in globals()]",
        "if _grader_missing:",
        "    _grader_payload = {'missing': _grader_missing}",
        "else:",
        f"    _grader_payload = {{'result': {call}.to_dict()}}",
        f"print({marker!r} + _grader_json.dumps(_grader_payload), flush=True)",
    ])


def kernel_environment(workdir: Path, settings: Settings) -> dict[str, str]:
    env = {key: os.environ[key] for key in KERNEL_ENV_KEEP if key in os.environ}
    threads = str(settings.threads)
    env.update({
        "TRANSFORMER_LIB_DEVICE": "cpu", "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg",
        "IPYTHONDIR": str(workdir / ".ipython"), "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
    })
    return env


async def run_cells(cells: list[nbformat.NotebookNode], timeouts: list[float], marker: str, workdir: Path,
                    settings: Settings) -> tuple[list[CellRun], set[int], str | None]:
    """Run ``cells`` in one sandboxed kernel; return each cell's run, the truncated cells, and why it stopped early."""
    nb = nbformat.v4.new_notebook(cells=cells)
    deadline = time.monotonic() + settings.total_timeout_s
    current: dict[str, float] = {}
    client = _GradingClient(
        nb, marker, timeout=1, timeout_func=lambda cell: current["timeout"], interrupt_on_timeout=True,
        allow_errors=True, kernel_name="python3", record_timing=False, shutdown_kernel="immediate",
        startup_timeout=120, kernel_manager_class=_kernel_manager_class(settings.limits),
        resources={"metadata": {"path": str(workdir)}},
    )
    runs = [CellRun(ran=False) for _ in cells]
    stopped = None
    async with client.async_setup_kernel(env=kernel_environment(workdir, settings)):
        for index, (cell, limit) in enumerate(zip(cells, timeouts, strict=True)):
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                stopped = f"the total time limit of {settings.total_timeout_s:g} s was reached"
                break
            current["timeout"] = min(limit, remaining)
            started = time.monotonic()
            try:
                await asyncio.wait_for(client.async_execute_cell(cell, index), current["timeout"] + settings.grace_s)
            except (asyncio.TimeoutError, DeadKernelError):  # nbclient reports our own cancellation as DeadKernelError
                seconds = time.monotonic() - started
                hung = await client.km.is_alive()
                runs[index] = CellRun(seconds=seconds, timed_out=hung, stopped=True)
                stopped = ("the kernel did not stop when interrupted, so it was killed" if hung
                           else "the kernel died (a memory or CPU limit, a crash, or exit())")
                break
            seconds = time.monotonic() - started
            errors = [o for o in cell.outputs if o.output_type == "error"]
            stdout = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            runs[index] = CellRun(
                seconds=seconds, timed_out=seconds >= current["timeout"] - 0.05, stdout=stdout,
                error=f"{errors[0].ename}: {errors[0].evalue}".rstrip(": ") if errors else None,
            )
    return runs, client.truncated, stopped


def library_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(LIBRARY_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(LIBRARY_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _short(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exercise_grade(exercise: ExerciseSpec, run: CellRun, marker: str, settings: Settings,
                   stopped: str | None) -> ExerciseGrade:
    """Turn the output of one grader cell into points and feedback."""
    def zero(status: str, message: str) -> ExerciseGrade:
        return ExerciseGrade(exercise.id, 0, exercise.points, status, [message])

    if not run.ran:
        return zero("not graded", f"not graded: {stopped}")
    if run.stopped and not run.timed_out:
        return zero("error", f"the check could not finish: {stopped}")
    results = [line[len(marker):] for line in run.stdout.splitlines() if line.startswith(marker)]
    if run.timed_out:
        return zero("timed out", f"the check was stopped after {settings.check_timeout_s:g} s: does your code loop "
                                 "forever or take far too long?")
    if len(results) > 1:
        return zero("error", "the grader's result line appeared more than once (printed by the submission?)")
    if not results:
        return zero("error", f"the check could not finish: {_short(run.error or 'no result')}")
    try:
        payload = json.loads(results[0])
    except json.JSONDecodeError:
        return zero("error", "the check's result could not be read")
    if "missing" in payload:
        names = ", ".join(f"`{name}`" for name in payload["missing"])
        return zero("missing", f"function {names} not found: did you rename it, or delete or not run its cell?")
    result = payload["result"]
    lines = [_short(line) for line in result.get("lines", [])[:MAX_FEEDBACK_LINES]]
    counts = {"checks_passed": int(result.get("passed", 0)), "checks_total": int(result.get("total", 0))}
    if result.get("ok"):
        return ExerciseGrade(exercise.id, exercise.points, exercise.points, "passed", lines, **counts)
    status = "failed" if result.get("attempted", True) else "not attempted"
    return ExerciseGrade(exercise.id, 0, exercise.points, status, lines, **counts)


def parse_submission(data: bytes) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The notebook in ``data``, or None and why it is not one."""
    if not data.strip():
        return None, "the file is empty"
    if len(data) > MAX_SUBMISSION_BYTES:
        return None, f"the file is larger than {MAX_SUBMISSION_BYTES // (1024 * 1024)} MB"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text"
    try:
        content = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"not a notebook: invalid JSON ({error.msg} at line {error.lineno})"
    if not isinstance(content, dict) or not ("cells" in content or "worksheets" in content):
        return None, "not a notebook: valid JSON, but it holds no notebook cells"
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # nbformat raises several kinds for JSON that is not a notebook
        return None, f"not a notebook: {_short(str(error), 160)}"
    return nb, None


def grade_notebook(nb: nbformat.NotebookNode, assignment: Assignment, settings: Settings,
                   grade: SubmissionGrade) -> None:
    """Execute the student's cells, then the checks from ``solutions/``; fill ``grade``'s exercises and notes."""
    marker = f"@@grade-{secrets.token_hex(16)}@@"
    numbered = [(number, cell) for number, cell in enumerate(nb.cells, start=1)
                if cell.cell_type == "code" and cell.source.strip() and not is_check_cell(cell)]
    student_cells = [nbformat.v4.new_code_cell(cell.source) for _, cell in numbered]
    grader_cells = [nbformat.v4.new_code_cell(grader_cell_source(assignment, exercise, marker))
                    for exercise in assignment.exercises]
    timeouts = [settings.cell_timeout_s] * len(student_cells) + [settings.check_timeout_s] * len(grader_cells)
    with tempfile.TemporaryDirectory(prefix="course-grade-") as workdir:
        runs, truncated, stopped = asyncio.run(
            run_cells(student_cells + grader_cells, timeouts, marker, Path(workdir), settings))
    for index, ((number, cell), run) in enumerate(zip(numbered, runs, strict=False)):
        where = f"cell {number} (`{_short(cell.source.strip().splitlines()[0], 40)}`)"
        if run.stopped:
            grade.notes.append(f"{where}: {stopped}")
        elif run.timed_out:
            grade.notes.append(f"{where} was stopped after {settings.cell_timeout_s:g} s (an endless loop?)")
        elif run.error:
            grade.notes.append(f"{where} raised {_short(run.error, 160)}")
        if index in truncated:
            grade.notes.append(f"{where} printed more than {MAX_CELL_OUTPUT_CHARS:,} characters; the rest was dropped")
    if stopped:
        grade.notes.append("grading stopped early: the exercises not reached earn 0")
    for offset, exercise in enumerate(assignment.exercises):
        run = runs[len(student_cells) + offset]
        grade.exercises.append(exercise_grade(exercise, run, marker, settings, stopped))


def grade_submission(path: Path, data: bytes, assignment: Assignment | None, settings: Settings,
                     note: str | None = None) -> SubmissionGrade:
    """Grade one submission held in memory; bad files get 0 points and a note, never an exception."""
    started = time.monotonic()
    grade = SubmissionGrade(
        student=student_name(path, assignment.name if assignment else None), file=str(path),
        sha256=hashlib.sha256(data).hexdigest(), assignment=assignment.name if assignment else "?",
    )
    if note:
        grade.notes.append(note)
    nb, problem = parse_submission(data)
    if problem or assignment is None:
        grade.notes.append(problem or "could not tell which assignment this is: use --assignment")
        for exercise in assignment.exercises if assignment else ():
            grade.exercises.append(ExerciseGrade(exercise.id, 0, exercise.points, "not graded", [problem]))
    else:
        before = library_fingerprint()
        grade_notebook(nb, assignment, settings, grade)
        grade.library_changed = library_fingerprint() != before
    grade.seconds = time.monotonic() - started
    return grade


# -- the class: many submissions, the gradebook ---------------------------------------------------------------


@dataclass
class Job:
    path: Path
    data: bytes
    assignment: Assignment | None
    note: str | None = None


def plan_jobs(paths: list[Path], assignments: dict[str, Assignment], wanted: str | None) -> list[Job]:
    """Read every submission into memory and decide its assignment (before any submitted code runs)."""
    forced = choose_assignment(wanted, assignments) if wanted else None
    jobs = []
    for path in paths:
        data = path.read_bytes() if path.stat().st_size <= MAX_SUBMISSION_BYTES else b"x" * (MAX_SUBMISSION_BYTES + 1)
        text = data.decode("utf-8", errors="replace")
        jobs.append(Job(path, data, forced or identify_assignment(text, path, assignments)))
    known = {job.assignment.name for job in jobs if job.assignment}
    if len(known) == 1:
        only = assignments[known.pop()]
        for job in jobs:
            if job.assignment is None:
                job.assignment, job.note = only, f"assumed to be {only.name}, like the other submissions"
    return jobs


def _run_job(job: Job, settings: Settings) -> SubmissionGrade:
    return grade_submission(job.path, job.data, job.assignment, settings, job.note)


def grade_all(paths: list[Path], assignments: dict[str, Assignment], settings: Settings, jobs: int = 2,
              wanted: str | None = None) -> list[SubmissionGrade]:
    """Grade every submission (``jobs`` at a time), in the order given."""
    planned = plan_jobs(paths, assignments, wanted)
    if jobs <= 1 or len(planned) <= 1:
        return [_run_job(job, settings) for job in planned]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run_job, planned, [settings] * len(planned)))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="course.py grade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="+", type=Path, help="submitted notebooks, or folders holding them")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="folder for grades.csv and grades.json")
    parser.add_argument("--assignment", help="grade every submission as this assignment (e.g. 01_similarity)")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at the same time (default 2)")
    parser.add_argument("--cell-timeout", type=float, default=60, help="seconds per student cell (default 60)")
    parser.add_argument("--check-timeout", type=float, default=60, help="seconds per exercise check (default 60)")
    parser.add_argument("--total-timeout", type=float, default=600, help="seconds per submission (default 600)")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per kernel (default 4096)")
    parser.add_argument("--roster", type=Path, help="CSV of the class (header: student[,email][,id]): every student "
                                                     "gets a row; submissions not on it are flagged")
    parser.add_argument("--partial-credit", action="store_true",
                        help="an exercise earns points × checks passed / checks run instead of all or nothing")
    parser.add_argument("--lms", choices=["canvas"], help="also write grades_canvas.csv in Canvas's import layout")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    args.out = Path(args.out).resolve()
    paths = []
    for given in (Path(path).resolve() for path in args.submissions):
        paths.extend(sorted(p for p in given.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
                     if given.is_dir() else [given])
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        print(f"[course] no such submission file: {', '.join(missing) or 'none given'}", file=sys.stderr)
        return 2
    try:
        roster = read_roster(Path(args.roster)) if args.roster else None
    except (OSError, ValueError) as error:
        print(f"[course] cannot read the roster: {error}", file=sys.stderr)
        return 2
    assignments = load_assignments(args.solutions)
    settings = Settings(
        cell_timeout_s=args.cell_timeout, check_timeout_s=args.check_timeout, total_timeout_s=args.total_timeout,
        limits=Limits(memory_mb=args.memory_mb, cpu_seconds=int(2 * args.total_timeout)),
        threads=max(1, (os.cpu_count() or 1) // max(1, args.jobs)),
    )
    print(f"[course] grading {len(paths)} submission(s), {args.jobs} at a time …", flush=True)
    started = time.monotonic()
    grades = grade_all(paths, assignments, settings, jobs=args.jobs, wanted=args.assignment)
    changed = [g.file for g in grades if g.library_changed]
    if changed:
        print(f"[course] STOPPED: the course library (transformer_lib/) changed on disk while grading {changed[0]}. "
              "Restore it (e.g. `git checkout transformer_lib`) and grade again without that file. "
              "No gradebook was written.", file=sys.stderr)
        return 3
    rows = build_rows(grades, roster, partial_credit=args.partial_credit)
    print_summary(rows)
    csv_path, json_path = write_gradebook(rows, args.out, lms=args.lms)
    print(f"\n[course] graded {len(grades)} submission(s) in {time.monotonic() - started:.1f} s; "
          f"wrote {csv_path} and {json_path}")
    return 0
