"""How long each lesson takes here and at the reference machine's speed, against its budget (for the README's note).

Run: ``.venv/bin/python -m course_tools.lesson_times [--order|--first] [NOTEBOOK ...]`` (default: every lesson of
notebooks/). Each notebook runs top to bottom in a fresh kernel, with this machine's own kernels and threads in the
caller's environment (as a learner runs it), and its outputs are not saved. ``--order`` (the default): a learner
going through the course, one model cache and checkpoint folder shared by the lessons in course order, so a lesson
loads what an earlier one trained; budget 45 s each at the reference. ``--first``: each lesson opened first, from an
empty cache; budget 90 s. The yardstick (``transformer_lib.speed``) is measured before the first lesson and after
each one, and each lesson is stated at the reference with the mean of the two readings on either side of it: on a
shared machine the speed drifts by a fifth within minutes, more than one reading before and one after a long run
can follow. Exit status 1 when a lesson is over its budget."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from transformer_lib.speed import REFERENCE_STEPS_PER_S, at_reference

from . import FIRST_OPEN_BUDGET_S, LESSON_BUDGET_S, NOTEBOOKS_DIR
from .execute import EXECUTION_ENV, fresh_folders, resolve_targets, run_notebook, shown
from .notebook_files import notebooks_in, read_notebook
from .yardstick import BUSY_RATIO, mean_speed, measured_speed, spread_too_wide


def over_budget(seconds: dict[str, float], speeds: dict[str, float], budget: float) -> list[str]:
    """The notebooks whose seconds, at the reference machine's speed (each scaled by its own ``speeds`` entry, in
    steps/s of the yardstick), are over ``budget``."""
    return [name for name, spent in seconds.items() if at_reference(spent, speeds[name]) > budget]


def time_lines(seconds: dict[str, float], speeds: dict[str, float], budget: float) -> list[str]:
    """A table: each notebook's seconds here, the yardstick's speed it is scaled with, its seconds at the reference
    machine's speed and its budget there, flagged when over; then the totals."""
    over = over_budget(seconds, speeds, budget)
    lines = [f"{'here':>8}{'speed':>7}{f'at {REFERENCE_STEPS_PER_S:g}':>9}{'budget':>8}  notebook"]
    for name, spent in seconds.items():
        flag = "  OVER" if name in over else ""
        lines.append(f"{spent:8.1f}{speeds[name]:7.1f}{at_reference(spent, speeds[name]):9.1f}{budget:8.0f}  "
                     f"{name}{flag}")
    total = sum(seconds.values())
    total_there = sum(at_reference(spent, speeds[name]) for name, spent in seconds.items())
    lines.append(f"{total:8.1f}{'':7}{total_there:9.1f}{'':8}  in all")
    return lines


def reading_lines(readings: list[float]) -> list[str]:
    """The yardstick's readings (before the first lesson and after each), and a warning when they spread by more
    than ``BUSY_RATIO``: the machine's speed moved during the run, so the seconds at the reference are rough."""
    lines = [f"yardstick: {len(readings)} readings, {min(readings):.1f} to {max(readings):.1f} steps/s; each lesson is "
             f"stated at {REFERENCE_STEPS_PER_S:g} steps/s (the reference machine) with the mean of the readings "
             "before and after it (the speed column)"]
    if spread_too_wide(readings):
        lines.append(f"the readings differ by more than {BUSY_RATIO - 1:.0%}: the machine's speed moved during the "
                     "run, and the times scaled to the reference are rough")
    return lines


def lesson_speeds(names: list[str], readings: list[float]) -> dict[str, float]:
    """Each lesson's speed: the mean of the readings on either side of it (``readings`` has one more entry)."""
    return {name: mean_speed(before, after)
            for name, before, after in zip(names, readings[:-1], readings[1:], strict=True)}


def run_lesson(path: Path) -> float:
    """Run one notebook in a fresh kernel without saving it; its seconds, also printed as it finishes."""
    seconds = run_notebook(read_notebook(path), path)
    print(f"[course] {shown(path)}: {seconds:.1f} s", flush=True)
    return seconds


def run_lessons(paths: list[Path], first: bool) -> tuple[dict[str, float], list[float]]:
    """Each notebook's seconds, run in turn: each from an empty model cache (``first``), or all sharing one; and the
    yardstick read before the first and after each (one reading more than notebooks)."""
    seconds, readings = {}, [measured_speed()]

    def run_one(path: Path) -> None:
        seconds[str(shown(path))] = run_lesson(path)
        readings.append(measured_speed())

    if first:
        for path in paths:
            with fresh_folders():
                run_one(path)
    else:
        with fresh_folders():
            for path in paths:
                run_one(path)
    return seconds, readings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.lesson_times", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--order", action="store_true", help="in course order, one shared model cache (the default)")
    mode.add_argument("--first", action="store_true", help="each notebook opened first, from an empty model cache")
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="default: every lesson of notebooks/")
    args = parser.parse_args(argv)
    paths = resolve_targets(args.notebooks) if args.notebooks else notebooks_in(NOTEBOOKS_DIR)
    os.environ.update(EXECUTION_ENV)  # otherwise the learner's environment, as the yardstick's reference was measured

    seconds, readings = run_lessons(paths, args.first)
    speeds = lesson_speeds(list(seconds), readings)
    budget = FIRST_OPEN_BUDGET_S if args.first else LESSON_BUDGET_S
    setting = "each opened first, from an empty model cache" if args.first else "in course order, one model cache"
    print(f"\n[course] this machine's own kernels and threads, {setting}")
    for line in reading_lines(readings) + time_lines(seconds, speeds, budget):
        print(f"[course] {line}")
    return 1 if over_budget(seconds, speeds, budget) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
