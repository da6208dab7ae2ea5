"""How long each lesson takes here and at the reference machine's speed, against its budget (for the README's note).

Run: ``.venv/bin/python -m course_tools.lesson_times [--order|--first] [NOTEBOOK ...]`` (default: every lesson of
notebooks/). Each notebook runs top to bottom in a fresh kernel, with this machine's own kernels and threads in the
caller's environment (as a learner runs it), and its outputs are not saved. ``--order`` (the default): a learner
going through the course, one model cache and checkpoint folder shared by the lessons in course order, so a lesson
loads what an earlier one trained; budget 45 s each at the reference. ``--first``: each lesson opened first, from an
empty cache; budget 90 s. The yardstick (``transformer_lib.speed``) is measured before the first lesson and after
the last, and the times are stated at the reference with the mean. Exit status 1 when a lesson is over its budget."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from transformer_lib.speed import REFERENCE_STEPS_PER_S, at_reference

from . import FIRST_OPEN_BUDGET_S, LESSON_BUDGET_S, NOTEBOOKS_DIR
from .execute import EXECUTION_ENV, fresh_folders, resolve_targets, run_notebook, shown
from .notebook_files import notebooks_in, read_notebook
from .yardstick import mean_speed, measured_speed, speed_lines


def over_budget(seconds: dict[str, float], steps_per_s: float, budget: float) -> list[str]:
    """The notebooks whose seconds, at the reference machine's speed, are over ``budget``."""
    return [name for name, spent in seconds.items() if at_reference(spent, steps_per_s) > budget]


def time_lines(seconds: dict[str, float], steps_per_s: float, budget: float) -> list[str]:
    """A table: each notebook's seconds here and at the reference machine's speed, its budget there, flagged when
    over; then the totals."""
    over = over_budget(seconds, steps_per_s, budget)
    lines = [f"{'here':>8}{f'at {REFERENCE_STEPS_PER_S:g}':>9}{'budget':>8}  notebook"]
    for name, spent in seconds.items():
        flag = "  OVER" if name in over else ""
        lines.append(f"{spent:8.1f}{at_reference(spent, steps_per_s):9.1f}{budget:8.0f}  {name}{flag}")
    total = sum(seconds.values())
    lines.append(f"{total:8.1f}{at_reference(total, steps_per_s):9.1f}{'':8}  in all")
    return lines


def run_lesson(path: Path) -> float:
    """Run one notebook in a fresh kernel without saving it; its seconds, also printed as it finishes."""
    seconds = run_notebook(read_notebook(path), path)
    print(f"[course] {shown(path)}: {seconds:.1f} s", flush=True)
    return seconds


def run_lessons(paths: list[Path], first: bool) -> dict[str, float]:
    """Each notebook's seconds, run in turn: each from an empty model cache (``first``), or all sharing one."""
    if first:
        seconds = {}
        for path in paths:
            with fresh_folders():
                seconds[str(shown(path))] = run_lesson(path)
        return seconds
    with fresh_folders():
        return {str(shown(path)): run_lesson(path) for path in paths}


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

    before = measured_speed()
    seconds = run_lessons(paths, args.first)
    after = measured_speed()
    budget = FIRST_OPEN_BUDGET_S if args.first else LESSON_BUDGET_S
    setting = "each opened first, from an empty model cache" if args.first else "in course order, one model cache"
    steps_per_s = mean_speed(before, after)
    print(f"\n[course] this machine's own kernels and threads, {setting}")
    for line in speed_lines(before, after) + time_lines(seconds, steps_per_s, budget):
        print(f"[course] {line}")
    return 1 if over_budget(seconds, steps_per_s, budget) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
