"""A pytest plugin that runs the notebook validation once per hardware setting, against the same stored outputs.

`course.py test` starts pytest-xdist with one worker per setting and ``--dist each``, so every worker runs every
notebook; this plugin gives each worker its setting before any kernel starts (kernels inherit the environment).
A setting is a name and the environment variables that make it, e.g. PyTorch's portable CPU kernels on one thread:
``ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1``; ``COURSE_MOVE_LAST_BITS=1`` also moves the last bits of every matrix
product (course_tools/last_bits.py). Each setting also gets its own empty checkpoint folder and model cache, so
every run trains each model once, and no run loads a model that an earlier run, another library version or other
kernels trained. The last setting's model cache may be one the caller names (``$COURSE_SHARED_MODEL_CACHE``): the
test command's unit step, which computes in that same setting, then loads the models the lessons trained there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import defaultdict

import pytest

from . import CHECKPOINTS_VARIABLE, MODEL_CACHE_VARIABLE
from .last_bits import LAST_BITS_VARIABLE, with_last_bits_moved

MATRIX_VARIABLE = "COURSE_NOTEBOOK_MATRIX"  # JSON: [[name, {variable: value}], ...], one per xdist worker
SHARED_CACHE_VARIABLE = "COURSE_SHARED_MODEL_CACHE"  # a folder: the last setting's model cache, shared with the caller
LEG_PROPERTY = "hardware setting"

_leg_name = ""
_checkpoints = ""
_failures: defaultdict[str, list[str]] = defaultdict(list)


def describe(name: str, variables: dict[str, str]) -> str:
    shown = " ".join(f"{key}={value}" for key, value in variables.items())
    return f"{name} ({shown})" if shown else name


def _worker_index(config: pytest.Config) -> int:
    worker = getattr(config, "workerinput", {}).get("workerid", "gw0")  # "gw3" under xdist; no xdist: the first
    return int(worker.removeprefix("gw"))


def pytest_configure(config: pytest.Config) -> None:
    global _leg_name, _checkpoints
    matrix = json.loads(os.environ.get(MATRIX_VARIABLE, "[]"))
    if not matrix or (len(matrix) > 1 and not hasattr(config, "workerinput")):
        return  # the xdist controller (or no matrix): its workers run the notebooks
    index = _worker_index(config)
    name, variables = matrix[index]
    os.environ.update(variables)
    if variables.get(LAST_BITS_VARIABLE) == "1":  # the kernels' start-up hook must be on their PYTHONPATH too
        os.environ.update(with_last_bits_moved(os.environ))
    _checkpoints = tempfile.mkdtemp(prefix="course-checkpoints-")
    os.environ[CHECKPOINTS_VARIABLE] = _checkpoints
    shared = os.environ.get(SHARED_CACHE_VARIABLE) if index == len(matrix) - 1 else None
    # Trained once per setting and run.
    os.environ[MODEL_CACHE_VARIABLE] = shared or os.path.join(_checkpoints, "model-cache")
    _leg_name = describe(name, variables)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _checkpoints:
        shutil.rmtree(_checkpoints, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if _leg_name:
        report.user_properties.append((LEG_PROPERTY, _leg_name))
        if report.failed:
            report.sections.append((LEG_PROPERTY, _leg_name))


def leg_of(report) -> str:
    return dict(report.user_properties).get(LEG_PROPERTY, "")


def pytest_runtest_logreport(report) -> None:
    if report.failed:
        _failures[leg_of(report)].append(report.nodeid)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _failures:
        return
    terminalreporter.section("failures per hardware setting")
    for leg, nodeids in sorted(_failures.items()):
        terminalreporter.write_line(f"{leg or 'this machine'}: {len(nodeids)} failed")
        for nodeid in nodeids:
            terminalreporter.write_line(f"    {nodeid}")
    terminalreporter.write_line("To rerun one setting alone, set its variables yourself, e.g. "
                                "ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 python3 course.py test --only notebooks")
