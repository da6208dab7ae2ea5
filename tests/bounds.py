"""Bounds on trained or sampled figures, recorded with their margins (CONTRIBUTING.md, "Tests and tools").

A trained-claim test asserts each bound with :func:`bound` and takes its seeds from :func:`bound_seeds`:

    @pytest.mark.trained
    @pytest.mark.parametrize("seed", bound_seeds((0, 1, 2)))
    def test_the_lessons_claims(seed):
        ...
        bound("held-out exact match", score, at_least=0.95)

``python3 course.py bounds`` runs every such test on more seeds and several CPU kernel settings, with
``$COURSE_BOUNDS_FILE`` set: each bound is then appended to that file, and a failed one does not stop the test's
other bounds (tests/conftest.py raises them together at the end of the test).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator

import pytest

from course_tools import BOUND_SEEDS_VARIABLE, BOUNDS_FILE_VARIABLE
from course_tools.bounds import parse_seeds

_deferred: list[str] | None = None  # inside deferred_failures() in table mode: the failed bounds' messages


def bound_seeds(default: tuple[int, ...]) -> tuple[int, ...]:
    """The seeds a trained-claim test runs: ``$COURSE_BOUND_SEEDS`` ("0,1,2,3,4") when set, else ``default``."""
    chosen = os.environ.get(BOUND_SEEDS_VARIABLE)
    return parse_seeds(chosen) if chosen else default


def asserted_by(lesson: str, seeds: str = "0") -> pytest.MarkDecorator:
    """Mark a trained-claim test whose every bound ``lesson`` asserts itself on the test's default ``seeds``, on the
    same runs and data, with limits at least as strict. The test command's notebook step runs that lesson in the unit
    step's own setting (and the native one), so by default the test is skipped, with that reason, instead of
    computing it all again; with ``$COURSE_BOUND_SEEDS`` set (`course.py bounds`: seeds 0-4 in three settings) it
    runs."""
    return pytest.mark.skipif(not os.environ.get(BOUND_SEEDS_VARIABLE),
                              reason=f"{lesson} asserts each of its bounds on the same runs in the notebook step; "
                                     f"`course.py bounds` (or {BOUND_SEEDS_VARIABLE}={seeds}) runs it")


def current_test() -> tuple[str, int | None]:
    """The running test's node id, and its seed: the parameter in brackets when it is one integer (``test_x[2]``)."""
    nodeid = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]  # "...::test_x[2] (call)"
    parameter = re.search(r"\[(-?\d+)\]$", nodeid)
    return nodeid, int(parameter.group(1)) if parameter else None


def current_setting() -> dict[str, str | int | None]:
    """The CPU kernel setting this process computes in: the variables that choose it, and what torch runs."""
    import torch

    return {
        "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def record(line: dict, path: str) -> None:
    """Append ``line`` to ``path`` as one JSON line, in a single write: several test workers append at once."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (json.dumps(line) + "\n").encode())
    finally:
        os.close(descriptor)


def bound(name: str, value: float, *, at_least: float | None = None, at_most: float | None = None,
          seed: int | None = None) -> None:
    """Assert ``value >= at_least`` or ``value <= at_most`` (exactly one of them) and print the margin, positive when
    the bound holds, in the bound's own units. With ``$COURSE_BOUNDS_FILE`` set, the bound is appended to that file
    first (``seed`` defaults to the test's seed parameter); a failure there is kept until the test ends."""
    __tracebackhide__ = True  # pytest shows the test's line that called bound()
    if (at_least is None) == (at_most is None):
        raise ValueError(f"bound {name!r}: give exactly one of at_least and at_most, got {at_least=} and {at_most=}")
    value = float(value)
    kind, limit = (">=", at_least) if at_most is None else ("<=", at_most)
    margin = value - limit if kind == ">=" else limit - value
    passed = margin >= 0  # False for NaN
    print(f"bound {name}: {value:.6g} {kind} {limit:.6g}, margin {margin:.3g}")
    path = os.environ.get(BOUNDS_FILE_VARIABLE)
    if path:
        test, test_seed = current_test()
        record({"test": test, "seed": test_seed if seed is None else seed, "setting": current_setting(), "name": name,
                "value": value, "limit": limit, "kind": kind, "margin": margin, "passed": passed}, path)
    if not passed:
        message = f"bound {name}: {value:.6g} is not {kind} {limit:.6g} (margin {margin:.3g})"
        if path and _deferred is not None:
            _deferred.append(message)
        else:
            raise AssertionError(message)


@contextlib.contextmanager
def deferred_failures() -> Iterator[None]:
    """Around one test: in table mode, bounds that fail inside are collected and raised together at the end."""
    global _deferred
    outer, _deferred = _deferred, []
    try:
        yield
        failed = _deferred
    finally:
        _deferred = outer
    if failed:
        raise AssertionError(f"{len(failed)} bound(s) failed:\n" + "\n".join(failed))
