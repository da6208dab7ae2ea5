"""A pytest plugin that records where a test run's time goes: the seconds of every notebook (kernel start and every
cell, one column per hardware setting when the notebook step runs the matrix) and of every unit test (setup, call
and teardown together, so a fixture's work counts where it happens).

pytest prints the notebooks' table at the end of its own report; with ``$COURSE_TIMING_FILE`` set, the seconds are
also written there as JSON, from which `course.py test` prints the table and the slowest tests after its summary.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

from .notebook_matrix import leg_of

TIMING_VARIABLE = "COURSE_TIMING_FILE"

_seconds: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))  # leg -> item -> s


def item_name(nodeid: str) -> str:
    """A notebook's cells count towards the notebook; a unit test is itself."""
    path = nodeid.split("::")[0]
    return path if path.endswith(".ipynb") else nodeid


def pytest_runtest_logreport(report) -> None:
    _seconds[leg_of(report)][item_name(report.nodeid)] += report.duration


def notebook_table(seconds: dict[str, dict[str, float]], steps_per_s: float | None = None) -> list[str]:
    """Lines of a table: one row per notebook, one column per setting, and the totals; given this machine's speed on
    the yardstick (``transformer_lib.speed``), also a column per setting with its seconds at the reference's speed."""
    legs = sorted(leg for leg, table in seconds.items() if any(item.endswith(".ipynb") for item in table))
    if not legs:
        return []
    lines = [f"  [{index}] {leg or 'this machine'}" for index, leg in enumerate(legs, start=1)]
    paths = sorted({path for leg in legs for path in seconds[leg] if path.endswith(".ipynb")})
    columns = {f"[{index}]": [seconds[leg].get(path, 0.0) for path in paths] + [sum(seconds[leg].values())]
               for index, leg in enumerate(legs, start=1)}
    if steps_per_s is not None:
        from transformer_lib.speed import REFERENCE_STEPS_PER_S, at_reference  # torch: not in every pytest process

        reference = f"{REFERENCE_STEPS_PER_S:g}"
        lines.append(f"  [i] at {reference}: setting i's seconds at the reference machine's speed, {reference} "
                     f"steps/s of the yardstick (this machine: {steps_per_s:.1f})")
        columns |= {f"{label} at {reference}": [at_reference(value, steps_per_s) for value in values]
                    for label, values in columns.items()}
    widths = {label: max(8, len(label) + 2) for label in columns}
    lines.append("".join(f"{label:>{widths[label]}}" for label in columns) + "  notebook")
    for row, name in enumerate([*paths, "in all"]):
        lines.append("".join(f"{values[row]:{widths[label]}.1f}" for label, values in columns.items()) + f"  {name}")
    return lines


def slowest(seconds: dict[str, dict[str, float]], count: int = 10) -> list[str]:
    """Lines naming the ``count`` slowest items of every setting, slowest first."""
    items = [(spent, item) for table in seconds.values() for item, spent in table.items()]
    return [f"{spent:8.1f} s  {item}" for spent, item in sorted(items, reverse=True)[:count]]


def pytest_terminal_summary(terminalreporter) -> None:
    lines = notebook_table(_seconds)
    if lines:
        terminalreporter.section("time per notebook in seconds (kernel start and every cell)")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(TIMING_VARIABLE)
    if target and not hasattr(session.config, "workerinput"):  # the controller, which sees every worker's reports
        Path(target).write_text(json.dumps(_seconds, indent=1))


def read_timing(path: Path) -> dict[str, dict[str, float]]:
    """What a run wrote to ``$COURSE_TIMING_FILE``; empty when the step did not get that far."""
    return json.loads(path.read_text()) if path.exists() else {}
