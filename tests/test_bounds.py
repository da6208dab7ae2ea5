"""The trained-claim tests' helper (tests/bounds.py) and `course.py bounds`'s table (course_tools/bounds.py)."""

import json
import math

import pytest

import bounds
from bounds import asserted_by, bound, bound_seeds, current_test, deferred_failures
from course_tools import BOUND_SEEDS_VARIABLE, BOUNDS_FILE_VARIABLE
from course_tools.bounds import (
    FAILED,
    MISSING,
    as_markdown,
    as_text,
    available_settings,
    parse_seeds,
    report,
    setting_environment,
    strip_seed,
    tabulate,
)


@pytest.fixture
def table_mode(monkeypatch, tmp_path):
    """Bounds recorded to a file, as `course.py bounds` runs them; the file's lines."""
    path = tmp_path / "bounds.jsonl"
    monkeypatch.setenv(BOUNDS_FILE_VARIABLE, str(path))
    return lambda: [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def no_table(monkeypatch):
    monkeypatch.delenv(BOUNDS_FILE_VARIABLE, raising=False)


def test_a_bound_that_holds_prints_its_positive_margin(no_table, capsys):
    bound("accuracy", 0.97, at_least=0.95)
    bound("loss", 0.2, at_most=0.3)
    assert capsys.readouterr().out.splitlines() == ["bound accuracy: 0.97 >= 0.95, margin 0.02",
                                                    "bound loss: 0.2 <= 0.3, margin 0.1"]


@pytest.mark.parametrize("value, limits, message", [
    (0.9, dict(at_least=0.95), "bound accuracy: 0.9 is not >= 0.95 (margin -0.05)"),
    (0.4, dict(at_most=0.3), "bound accuracy: 0.4 is not <= 0.3 (margin -0.1)"),
    (math.nan, dict(at_least=0.0), "bound accuracy: nan is not >= 0 (margin nan)"),
])
def test_a_bound_that_fails_says_its_value_limit_and_margin(no_table, value, limits, message):
    with pytest.raises(AssertionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bound("accuracy", value, **limits)


@pytest.mark.parametrize("limits", [{}, dict(at_least=0.1, at_most=0.9)])
def test_a_bound_takes_exactly_one_limit(limits):
    with pytest.raises(ValueError, match="exactly one of at_least and at_most"):
        bound("accuracy", 0.5, **limits)


def test_table_mode_records_every_bound_with_its_test_seed_and_setting(table_mode, monkeypatch):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_x.py::test_claims[3] (call)")  # pytest sets it at the call
    bound("accuracy", 0.97, at_least=0.95)
    bound("loss", 0.25, at_most=0.3, seed=7)  # a seed given outright wins over the test's
    first, second = table_mode()
    assert first["test"] == "tests/test_x.py::test_claims[3]" and first["seed"] == 3 and second["seed"] == 7
    assert (first["name"], first["kind"], first["limit"], first["passed"]) == ("accuracy", ">=", 0.95, True)
    assert first["margin"] == pytest.approx(0.02) and second["margin"] == pytest.approx(0.05)
    assert set(first["setting"]) == {"ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "capability", "threads"}


def test_table_mode_records_failures_first_and_raises_them_together_at_the_end(table_mode):
    with pytest.raises(AssertionError, match=r"2 bound\(s\) failed:\nbound a: .*\nbound c: "), deferred_failures():
        bound("a", 0.1, at_least=0.5)
        bound("b", 0.9, at_least=0.5)
        bound("c", 0.9, at_most=0.5)
    assert [(line["name"], line["passed"]) for line in table_mode()] == [("a", False), ("b", True), ("c", False)]
    assert table_mode()[0]["margin"] == pytest.approx(-0.4)


def test_outside_a_test_call_a_failure_is_raised_at_once_even_in_table_mode(table_mode):
    with pytest.raises(AssertionError, match="bound a: 0.1 is not >= 0.5"), deferred_failures():
        bounds._deferred = None  # as in a fixture's setup, outside pytest_runtest_call
        bound("a", 0.1, at_least=0.5)


def test_the_seed_is_the_tests_one_integer_parameter(monkeypatch):
    for current, expected in [("tests/t.py::test_a[12] (call)", ("tests/t.py::test_a[12]", 12)),
                              ("tests/t.py::test_a (setup)", ("tests/t.py::test_a", None)),
                              ("tests/t.py::test_a[3-relu] (call)", ("tests/t.py::test_a[3-relu]", None))]:
        monkeypatch.setenv("PYTEST_CURRENT_TEST", current)
        assert current_test() == expected


def test_bound_seeds_come_from_the_variable_when_it_is_set(monkeypatch):
    monkeypatch.delenv(BOUND_SEEDS_VARIABLE, raising=False)
    assert bound_seeds((0, 1, 2)) == (0, 1, 2)
    monkeypatch.setenv(BOUND_SEEDS_VARIABLE, "0, 1,2,3,4")
    assert bound_seeds((0, 1, 2)) == (0, 1, 2, 3, 4)
    with pytest.raises(ValueError, match="integers separated by commas"):
        parse_seeds("0;1")


def test_a_test_whose_bounds_a_lesson_asserts_runs_only_when_bounds_are_tabulated(monkeypatch):
    monkeypatch.delenv(BOUND_SEEDS_VARIABLE, raising=False)
    skipped = asserted_by("Lesson 10")
    assert skipped.args == (True,) and skipped.kwargs["reason"].startswith("Lesson 10 asserts each of its bounds")
    monkeypatch.setenv(BOUND_SEEDS_VARIABLE, "0,1,2,3,4")
    assert asserted_by("Lesson 10").args == (False,)


def record(test, seed, name, margin, kind=">=", limit=0.5):
    return {"test": test, "seed": seed, "name": name, "kind": kind, "limit": limit, "margin": margin,
            "passed": margin >= 0, "setting": {"capability": "AVX2", "threads": 1}}


def test_the_table_has_a_row_per_bound_and_a_column_per_setting_and_seed():
    x0, x1 = "tests/test_a.py::test_x[0]", "tests/test_a.py::test_x[1]"
    records = {
        "native": [record(x1, 1, "acc", 0.25), record(x0, 0, "acc", 0.5), record(x0, 0, "loss", 0.1, "<=", 2.0),
                   record("tests/test_a.py::test_ladder", None, "mean fall", 0.03)],
        "portable": [record(x0, 0, "acc", -0.125), record(x1, 1, "acc", 0.75)],
    }
    table = tabulate(records)
    assert table[0] == ["test", "bound", "limit", "native s0", "native s1", "native all", "portable s0", "portable s1",
                        "min margin"]
    assert table[1:] == [
        ["test_a.py::test_ladder", "mean fall", ">= 0.5", MISSING, MISSING, "0.03", MISSING, MISSING, "0.03"],
        ["test_a.py::test_x", "acc", ">= 0.5", "0.5", "0.25", MISSING, f"-0.125 {FAILED}", "0.75", f"-0.125 {FAILED}"],
        ["test_a.py::test_x", "loss", "<= 2", "0.1", MISSING, MISSING, MISSING, MISSING, "0.1"],
    ]
    assert as_text(table).splitlines()[2].startswith("test_a.py::test_x       acc        >= 0.5  0.5")
    assert as_markdown(table).splitlines()[1] == "| --- " * 9 + "|"


def test_only_the_seed_parameter_leaves_the_row_name():
    assert strip_seed("tests/test_a.py::test_x[3]", 3) == "test_a.py::test_x"
    assert strip_seed("tests/test_a.py::test_x[3-gelu]", 3) == "test_a.py::test_x[gelu]"
    assert strip_seed("tests/test_a.py::test_x[gelu]", 3) == "test_a.py::test_x[gelu]"
    assert strip_seed("tests/test_a.py::test_x", None) == "test_a.py::test_x"


def test_the_report_writes_the_markdown_and_fails_on_a_failed_bound_or_run(tmp_path, capsys):
    holding = {"native": [record("tests/test_a.py::test_x[0]", 0, "acc", 0.5)]}
    assert report(holding, {"native": 0}, "0", tmp_path / "held.md") == 0
    assert report(holding, {"native": 1}, "0", tmp_path / "broken.md") == 1
    failing = {"native": [record("tests/test_a.py::test_x[0]", 0, "acc", -0.5)]}
    assert report(failing, {"native": 1}, "0", tmp_path / "failed.md") == 1
    written = (tmp_path / "failed.md").read_text()
    assert "native: AVX2 kernels, 1 thread(s)" in written and f"| -0.5 {FAILED} |" in written
    assert "1 bounds, 1 failed record(s)" in capsys.readouterr().out


def test_each_setting_starts_from_no_kernel_variables_and_one_the_cpu_lacks_is_left_out(monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("COURSE_MOVE_LAST_BITS", "1")
    env = setting_environment({"ATEN_CPU_CAPABILITY": "avx2"}, EXTRA="x")
    assert "OMP_NUM_THREADS" not in env and "COURSE_MOVE_LAST_BITS" not in env
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["EXTRA"] == "x"
    monkeypatch.setattr("course_tools.bounds.capability_under", lambda variables: "DEFAULT")  # an ARM CPU, say
    settings = [("native", "", {}), ("portable", "", {"ATEN_CPU_CAPABILITY": "default"}),
                ("avx2", "", {"ATEN_CPU_CAPABILITY": "avx2"})]
    assert [name for name, _, _ in available_settings(settings)] == ["native", "portable"]
    assert "this CPU has no avx2 kernels (torch would run DEFAULT): left out" in capsys.readouterr().out
