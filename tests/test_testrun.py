"""The test command's own machinery: where the time went is printed after the summary, also at the reference machine's
speed, and with --beside the unit step runs beside the notebook step with its output shown in one piece after the
notebooks'."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from course_tools import testrun
from course_tools.timing import TIMING_VARIABLE, notebook_table, slowest
from course_tools.yardstick import speed_lines

SLOW_AND_FAST = """
import time
def test_slow():
    time.sleep(0.6)
def test_fast():
    pass
"""


def test_the_timing_plugin_sees_every_workers_tests(tmp_path):
    (tmp_path / "test_sample.py").write_text(SLOW_AND_FAST)
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    timing = tmp_path / "timing.json"
    env = {**os.environ, TIMING_VARIABLE: str(timing)}
    finished = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                               "course_tools.timing", "-n", "2", "--dist", "loadfile", str(tmp_path)],
                              cwd=tmp_path, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stdout
    seconds = json.loads(timing.read_text())
    [items] = seconds.values()  # no hardware setting: one table
    assert {name.split("::")[-1] for name in items} == {"test_slow", "test_fast", "test_other"}
    lines = slowest(seconds, 2)
    assert len(lines) == 2 and lines[0].endswith("test_sample.py::test_slow")
    assert float(lines[0].split()[0]) >= 0.6


def test_the_notebook_table_has_a_column_per_setting_and_totals():
    seconds = {"native": {"notebooks/01.ipynb": 2.0, "notebooks/02.ipynb": 3.5},
               "portable": {"notebooks/01.ipynb": 4.0, "notebooks/02.ipynb": 1.0}}
    lines = notebook_table(seconds)
    assert lines[:2] == ["  [1] native", "  [2] portable"]
    assert lines[3].split() == ["2.0", "4.0", "notebooks/01.ipynb"]
    assert lines[-1].split() == ["5.5", "5.0", "in", "all"]
    assert notebook_table({"": {"tests/test_x.py::test_y": 1.0}}) == []  # unit tests make no notebook table


def test_with_the_machines_speed_the_table_adds_each_settings_seconds_at_the_reference():
    seconds = {"native": {"notebooks/01.ipynb": 2.0, "notebooks/02.ipynb": 3.5},
               "portable": {"notebooks/01.ipynb": 4.0, "notebooks/02.ipynb": 1.0}}
    lines = notebook_table(seconds, steps_per_s=30.0)  # twice the reference's speed: twice the seconds there
    assert lines[2] == ("  [i] at 15: setting i's seconds at the reference machine's speed, 15 steps/s of the "
                        "yardstick (this machine: 30.0)")
    assert lines[3].split() == ["[1]", "[2]", "[1]", "at", "15", "[2]", "at", "15", "notebook"]
    assert lines[4].split() == ["2.0", "4.0", "4.0", "8.0", "notebooks/01.ipynb"]
    assert lines[-1].split() == ["5.5", "5.0", "11.0", "10.0", "in", "all"]
    assert lines[3].index("[2] at 15") + len("[2] at 15") == lines[4].index("8.0") + len("8.0")  # aligned


def test_two_measurements_far_apart_say_the_machine_was_busy():
    [quiet] = speed_lines(30.0, 33.0)  # 10 % apart
    assert quiet == ("yardstick: 30.0 steps/s before, 33.0 after; times at 15 steps/s (the reference machine) use "
                     "their mean, 31.5")
    _, warning = speed_lines(30.0, 40.0)  # 33 % apart
    assert warning == ("the two measurements differ by more than 25%: the machine was busy, and the times scaled to "
                       "the reference are unreliable")
    assert len(speed_lines(40.0, 30.0)) == 2  # either way round


def test_the_runs_cpu_time_is_also_stated_at_the_reference():
    assert testrun.cpu_line(600.0, 7.5) == ("CPU time of the run: 600.0 s (user + system of every step's processes), "
                                            "300.0 s at 15 steps/s")
    assert testrun.children_cpu_seconds() >= 0  # POSIX: resource.getrusage; None only where it is missing


def fake_steps(scratch, notebook_code: str, unit_code: str):
    """Each step a tiny Python program that writes its timing file as the real ones do."""
    def step(code: str, name: str, item: str):
        timing, path = json.dumps({"": {item: 1.5}}), str(scratch / f"{name}-timing.json")
        program = f"{code}\nimport pathlib; pathlib.Path({path!r}).write_text({timing!r})"
        return [sys.executable, "-c", program], dict(os.environ)

    return {"lint": step("print('lint done')", "lint", "lint"),
            "notebooks": step(notebook_code, "notebooks", "notebooks/07_demo.ipynb"),
            "unit": step(unit_code, "unit", "tests/test_demo.py::test_it")}


@pytest.fixture
def quiet_helpers(monkeypatch):
    monkeypatch.setattr(testrun, "install_missing_on_ci", lambda: None)
    monkeypatch.setattr(testrun, "prepare_site_environment", lambda: None)
    speeds = iter([30.0, 36.0])  # before the steps and after them
    monkeypatch.setattr(testrun, "measured_speed", lambda: next(speeds))


@pytest.mark.parametrize("beside", [True, False])
def test_steps_beside_or_in_turn_print_in_order_and_report_every_step(quiet_helpers, monkeypatch, tmp_path, capfd,
                                                                      beside):
    marker = tmp_path / "unit-ran"
    notebook_code = ("import time, pathlib\ntime.sleep(1.5)\n"
                     f"print('unit had started:', pathlib.Path({str(marker)!r}).exists(), flush=True)")
    unit_code = f"import pathlib; pathlib.Path({str(marker)!r}).touch(); print('unit output', flush=True)"
    monkeypatch.setattr(testrun, "step_commands", lambda args, scratch: fake_steps(scratch, notebook_code, unit_code))
    args = argparse.Namespace(only=None, beside=beside, device="cpu")
    assert testrun.run_steps(args, tmp_path) == 0
    out = capfd.readouterr().out
    assert f"unit had started: {beside}" in out  # beside: the unit step ran during the notebook step
    assert out.index("unit had started") < out.index("unit output") < out.index("[course] summary")
    assert ("started beside the notebook step" in out) is beside
    for step in ("lint", "notebooks", "unit"):
        assert f"passed  {step}" in out
    summary = out[out.index("[course] summary"):]
    assert "notebooks/07_demo.ipynb" in summary and "tests/test_demo.py::test_it" in summary  # after the summary
    assert "[course] yardstick: 30.0 steps/s before the steps, 36.0 after them; times at 15 steps/s" in summary
    assert "the machine was busy" not in summary  # 20 % apart
    assert "[course] CPU time of the run: " in summary
    assert "[1] at 15" in summary  # the notebook's seconds at the reference, with the mean speed, 33.0


def test_a_failing_unit_step_beside_the_notebooks_fails_the_run(quiet_helpers, monkeypatch, tmp_path, capfd):
    monkeypatch.setattr(testrun, "step_commands",
                        lambda args, scratch: fake_steps(scratch, "print('fine')", "raise SystemExit(3)"))
    args = argparse.Namespace(only=None, beside=True, device="cpu")
    assert testrun.run_steps(args, tmp_path) == 1
    assert "FAILED  unit" in capfd.readouterr().out


def test_the_unit_step_has_a_worker_more_than_the_cores(monkeypatch):
    monkeypatch.setattr(testrun.os, "cpu_count", lambda: 2)
    assert testrun.unit_workers() == 3
    monkeypatch.setattr(testrun.os, "cpu_count", lambda: 16)
    assert testrun.unit_workers() == testrun.MAX_UNIT_WORKERS


SETTING_KEY = ("import torch; from transformer_lib.model_cache import setting_key; "
               "print(setting_key(torch.device('cpu')))")


def test_the_unit_step_computes_in_the_notebook_steps_last_setting_and_shares_its_model_cache(tmp_path, monkeypatch):
    """The key under which a recipe stores a trained model is the same in a unit-test worker and in the notebook
    step's portable setting, and both point at one cache folder: a model a lesson trained there loads in the tests."""
    for name in testrun.HARDWARE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    cache = tmp_path / "model-cache"
    unit = testrun.unit_environment(cache)
    _, notebooks = testrun.notebook_command(["notebooks"], testrun.notebook_matrix(), shared_cache=cache)
    assert unit["TRANSFORMER_LIB_CACHE"] == notebooks["COURSE_SHARED_MODEL_CACHE"] == str(cache)
    _, portable = testrun.notebook_matrix()[-1]
    assert portable == testrun.PORTABLE[1]
    kernel = testrun.with_last_bits_moved({**notebooks, **portable})  # what notebook_matrix.py gives that worker
    keys = [subprocess.run([sys.executable, "-c", SETTING_KEY], env=env, capture_output=True, text=True,
                           check=True).stdout for env in (unit, kernel)]
    assert keys[0] == keys[1] and "'cpu kernels': 'DEFAULT'" in keys[0]
