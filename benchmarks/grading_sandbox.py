"""A class graded with the sandbox and without it, side by side: what sealing each submission off costs.

The class is lesson 01's assignment handed in N times (default 30): solved, untouched, one wrong answer, another
wrong answer, a syntax error and a renamed function, in turn. It is graded twice in one run with the same settings
as ``course.py grade`` (2 at a time, default timeouts), the gradebook, class report and feedback files written each
time: in the bubblewrap sandbox, then without one. Last line:
``sandboxed_s=… unsandboxed_s=… overhead_per_submission_s=… sandbox_start_ms=… goal_met=…``; the goal is the
whole class in at most 180 s with the sandbox (``--quick``: 4 submissions, never fails on the goal).
Run: ``python benchmarks/grading_sandbox.py`` (Linux with bubblewrap).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from course_tools import SOLUTIONS_DIR
from course_tools.demo_class import with_body
from course_tools.exercises import render_exercise
from course_tools.grading.assignments import load_assignments
from course_tools.grading.class_report import write_class_report
from course_tools.grading.class_run import grade_class
from course_tools.grading.feedback_files import write_feedback
from course_tools.grading.gradebook import build_rows, write_gradebook
from course_tools.grading.isolation import Isolation, bubblewrap_arguments, find_isolation
from course_tools.grading.kernel import KernelSettings
from course_tools.grading.submissions import read_submissions

ASSIGNMENT = "01_similarity_exercises"
GOAL_S = 180.0


def write_class(folder: Path, count: int) -> list[Path]:
    solved = nbformat.read(SOLUTIONS_DIR / f"{ASSIGNMENT}.ipynb", as_version=4)
    renamed = nbformat.from_dict(solved)
    for cell in renamed.cells:
        cell.source = cell.source.replace("def norm(", "def length(")
    kinds = [solved, nbformat.reads(render_exercise(solved), as_version=4), with_body(solved, "norm", "return v.sum()"),
             with_body(solved, "cosine_matrix", "return a @ b.T"), with_body(solved, "dot_product", "return (a * b"),
             renamed]
    paths = []
    for i in range(count):
        path = folder / f"student{i:02d}" / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(kinds[i % len(kinds)], path)
        paths.append(path)
    return paths


def seconds_to_grade(paths: list[Path], isolation: Isolation, jobs: int) -> float:
    submissions = read_submissions(paths, load_assignments(), None)
    started = time.perf_counter()
    grades = grade_class(submissions, KernelSettings(threads=1), isolation, jobs=jobs, progress=False)
    with tempfile.TemporaryDirectory() as out:
        rows = build_rows(grades)
        write_gradebook(rows, Path(out))
        write_class_report(rows, Path(out))
        write_feedback(rows, Path(out))
    seconds = time.perf_counter() - started
    assert all(g.isolation == isolation.name for g in grades)
    return seconds


def start_milliseconds(isolation: Isolation, repeats: int = 10) -> float:
    """Median time to start Python inside the sandbox minus starting it plainly."""
    with tempfile.TemporaryDirectory(prefix="cg-") as workdir:
        plain = [sys.executable, "-c", "pass"]
        sealed = [*bubblewrap_arguments(isolation.bwrap, Path(workdir)), "--", *plain]
        times = {"plain": [], "sealed": []}
        for _ in range(repeats):
            for name, command in (("plain", plain), ("sealed", sealed)):
                started = time.perf_counter()
                subprocess.run(command, check=True)
                times[name].append(time.perf_counter() - started)
    return 1000 * (statistics.median(times["sealed"]) - statistics.median(times["plain"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="4 submissions, for tests")
    args = parser.parse_args()
    count = 4 if args.quick else args.submissions
    sandbox = find_isolation()
    if sandbox is None:
        print("no working bubblewrap sandbox here (`apt-get install bubblewrap`)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        paths = write_class(Path(folder), count)
        sealed = seconds_to_grade(paths, sandbox, args.jobs)
        plain = seconds_to_grade(paths, Isolation(bwrap=None), args.jobs)
    start_ms = start_milliseconds(sandbox)
    overhead = (sealed - plain) / count
    goal_met = sealed <= GOAL_S * count / 30
    print(f"{count} submissions, {args.jobs} at a time: sandboxed {sealed:.1f} s, unsandboxed {plain:.1f} s")
    print(f"device=cpu submissions={count} sandboxed_s={sealed:.1f} unsandboxed_s={plain:.1f} "
          f"overhead_per_submission_s={overhead:.2f} sandbox_start_ms={start_ms:.0f} "
          f"goal_met={str(goal_met).lower()}")
    return 0 if goal_met or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
