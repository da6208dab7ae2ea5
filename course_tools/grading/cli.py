"""``python3 course.py grade``: the command line (the manual is the README's "Grading" section)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .. import SOLUTIONS_DIR
from .assignments import load_assignments
from .class_report import write_class_report
from .class_run import grade_class
from .feedback_files import write_feedback
from .gradebook import build_rows, print_summary, write_gradebook
from .isolation import Isolation, find_isolation, why_no_sandbox
from .kernel import KernelSettings
from .limits import Limits
from .roster import read_roster
from .submissions import find_submission_files, read_submissions


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="course.py grade", description="Grade submitted exercise notebooks into grades/grades.csv and "
        "grades.json, each submission in a sandbox. Full manual: README, section Grading.")
    parser.add_argument("submissions", nargs="+", type=Path, help="submitted notebooks, or folders holding them")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="folder for the gradebook (default grades/)")
    parser.add_argument("--assignment", help="grade every submission as this assignment (e.g. 01_similarity)")
    parser.add_argument("--roster", type=Path, help="CSV of the class (header: student[,email][,id])")
    parser.add_argument("--partial-credit", action="store_true", help="points × share of the checks passed")
    parser.add_argument("--names", action="store_true",
                        help="name the students in the class report (default: counts only)")
    parser.add_argument("--lms", choices=["canvas"], help="also write grades_canvas.csv for Canvas's import")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="grade without a sandbox where none is possible (submissions run as you; recorded)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    parser.add_argument("--cell-timeout", type=float, default=60, help="seconds per student cell (default 60)")
    parser.add_argument("--check-timeout", type=float, default=60, help="seconds per exercise check (default 60)")
    parser.add_argument("--total-timeout", type=float, default=600, help="seconds per submission (default 600)")
    parser.add_argument("--memory-mb", type=int, default=4096, help="memory per kernel (default 4096)")
    parser.add_argument("--solutions", type=Path, default=SOLUTIONS_DIR, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def choose_isolation(unsandboxed: bool) -> Isolation | None:
    """The sandbox; with ``--unsandboxed`` and none available, no sandbox (said loudly); else None: refuse."""
    found = find_isolation()
    if found:
        return found
    if not unsandboxed:
        print(f"[course] REFUSED: no sandbox for the submissions' code: {why_no_sandbox()}.\n"
              "[course] Without one, a submission runs as you and can read your files, use the network and harm "
              "the grading. To grade anyway (your own or trusted notebooks), add --unsandboxed; the gradebook "
              "records it.", file=sys.stderr)
        return None
    print(f"[course] WARNING: grading WITHOUT a sandbox (--unsandboxed): {why_no_sandbox()}.", file=sys.stderr)
    return Isolation(bwrap=None)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    paths = find_submission_files(args.submissions)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        print(f"[course] no such submission file: {', '.join(missing) or 'none given'}", file=sys.stderr)
        return 2
    try:
        roster = read_roster(args.roster) if args.roster else None
    except (OSError, ValueError) as error:
        print(f"[course] cannot read the roster: {error}", file=sys.stderr)
        return 2
    isolation = choose_isolation(args.unsandboxed)
    if isolation is None:
        return 4
    submissions = read_submissions(paths, load_assignments(args.solutions), args.assignment)
    settings = KernelSettings(
        cell_timeout_s=args.cell_timeout, check_timeout_s=args.check_timeout, total_timeout_s=args.total_timeout,
        limits=Limits(memory_mb=args.memory_mb, cpu_seconds=int(2 * args.total_timeout)),
        threads=max(1, (os.cpu_count() or 1) // max(1, args.jobs)),
    )
    print(f"[course] grading {len(paths)} submission(s), {args.jobs} at a time, sandbox: {isolation.name}", flush=True)
    started = time.monotonic()
    grades = grade_class(submissions, settings, isolation, jobs=args.jobs)
    changed = [g.file for g in grades if g.library_changed]
    if changed:
        print(f"[course] STOPPED: the course library (transformer_lib/) changed on disk while grading {changed[0]}. "
              "Restore it (e.g. `git checkout transformer_lib`) and grade again without that file. "
              "No gradebook was written.", file=sys.stderr)
        return 3
    rows = build_rows(grades, roster, partial_credit=args.partial_credit)
    print_summary(rows)
    csv_path, json_path = write_gradebook(rows, args.out.resolve(), lms=args.lms)
    report = write_class_report(rows, args.out.resolve(), names=args.names)
    feedback = write_feedback(rows, args.out.resolve())
    print(f"\n[course] graded {len(grades)} submission(s) in {time.monotonic() - started:.1f} s; "
          f"wrote {csv_path} and {json_path}\n[course] the class's mistakes: {report} (and .md, .png); "
          f"feedback to hand back: {feedback}")
    return 0
