"""No stored figure a learner cannot trust: every time a notebook's stored outputs print, and the stored run itself,
fits the lesson budgets once stated at the reference machine's speed (``transformer_lib.speed``).

`course.py execute` stores, in each notebook's metadata, the machine's speed on the yardstick just before the run and
the run's seconds (the notebook alone, from an empty model cache). A time printed by a run on a busy machine is
larger than the lesson's own, and the learner reads it as the lesson's: these tests catch it.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from course_files import EXECUTED, short
from course_tools import FIRST_OPEN_BUDGET_S, LESSON_BUDGET_S
from course_tools.notebook_files import RUN_KEY, clean_metadata, clear_outputs, read_notebook, with_run
from transformer_lib import REFERENCE_STEPS_PER_S, at_reference

# A time in seconds: a decimal number, or a whole one after "in", followed by " s" ("trained 600 steps in 5.8 s",
# "in 7 s", "(0.9 s)", "0.40 s on cpu"); milliseconds per token or per pass are not times a learner waits.
SECONDS = re.compile(r"(?<![\w.])(\d+\.\d+|(?<=\bin )\d+) s\b")
# Any figure followed by " s", to prove SECONDS misses no time; the lines below say "s" for something else.
ANY_SECONDS = re.compile(r"\d s\b")
NOT_TIMES = {"✔ softmax(2 s) from w alone"}  # a check's name: softmax of the scores doubled
CAUSE = "Likely cause: it was executed on a busy machine. Re-execute it on a quiet one: python3 course.py execute {}"


def output_lines(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, line) for every line of every stored text output: printed (stdout, stderr) or displayed."""
    lines = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            lines += [(index, line) for line in "".join(text).splitlines()]
    return lines


def stored_times(nb: nbformat.NotebookNode) -> list[tuple[int, str, float]]:
    """(cell index, line, seconds) for every time the stored outputs print."""
    return [(index, line, float(seconds)) for index, line in output_lines(nb) for seconds in SECONDS.findall(line)]


# A machine whose cores are busy elsewhere can train the yardstick many times slower than it runs a lesson (threads
# that spin while they wait), and so make a loaded run's times look small at the reference: outputs are stored on a
# machine at least this fast.
SLOWEST_EXECUTING_STEPS_PER_S = 0.5 * REFERENCE_STEPS_PER_S


def stored_run(path) -> dict[str, float]:
    """The run the notebook stores (speed and seconds); fails naming the fix when it stores none, or a speed so low
    that the machine was busy or too slow to store outputs on."""
    run = read_notebook(path).metadata.get(RUN_KEY)
    if run is None:
        pytest.fail(f"{short(path)} stores no machine speed, so its times cannot be stated at the reference: run "
                    f"`python3 course.py execute {short(path)}`")
    if run["steps_per_s"] < SLOWEST_EXECUTING_STEPS_PER_S:
        pytest.fail(f"{short(path)} was executed on a machine that ran the yardstick at {run['steps_per_s']} steps/s, "
                    f"under {SLOWEST_EXECUTING_STEPS_PER_S:g}: busy or too slow, its times say little. "
                    + CAUSE.format(short(path)))
    return run


def test_the_pattern_finds_every_kind_of_time_the_lessons_print():
    found = {line: SECONDS.findall(line) for line in [
        "trained 600 steps in 5.8 s", "character GPT, 300 steps in 377.7 s: held-out loss 1.96", "trained in 1.5 s",
        "trained 400 steps in 7 s", "value under the named key 13%, both 13% (0.9 s)",
        "accuracy after 300 steps 100.0% (chance 12.5%), 1.5 s",
        "plain greedy, 6 x 48 characters: 0.40 s on cpu, 0.02 s of it outside the passes",
        "200 steps in 1.3 s (6.5 ms per step)", "trained in 8.9 s on one thread",
    ]}
    assert list(found.values()) == [["5.8"], ["377.7"], ["1.5"], ["7"], ["0.9"], ["1.5"], ["0.40", "0.02"], ["1.3"],
                                    ["8.9"]]
    for not_a_time in ["✔ softmax(2 s) from w alone", "0.69 ms per token with the cache (3.2x)", "12 steps",
                       "1.5 steps per second", "T = 512: naive 0.8 ms"]:
        assert SECONDS.findall(not_a_time) == [], not_a_time


@pytest.mark.parametrize("path", EXECUTED, ids=short)
def test_the_pattern_misses_no_stored_time(path):
    for index, line in output_lines(read_notebook(path)):
        if ANY_SECONDS.search(line) and line.strip() not in NOT_TIMES:
            assert SECONDS.search(line), f"cell {index} prints {line.strip()!r}: a time SECONDS does not read"


@pytest.mark.parametrize("path", EXECUTED, ids=short)
def test_every_stored_time_fits_the_lesson_budget_at_the_reference(path):
    """Each printed time within a lesson's budget for a learner going in order; their sum within the budget of a
    lesson opened first, since `course.py execute` runs every notebook alone (lesson 15 then prints the training of
    lesson 11's model, which a learner going in order loads from the cache)."""
    times = stored_times(read_notebook(path))
    if not times:
        return
    steps_per_s = stored_run(path)["steps_per_s"]
    scaled = [(index, line, seconds, at_reference(seconds, steps_per_s)) for index, line, seconds in times]
    for index, line, seconds, at_ref in scaled:
        assert at_ref <= LESSON_BUDGET_S, (
            f"{short(path)}, cell {index}: {line.strip()!r} prints {seconds:g} s on a machine of {steps_per_s} steps/s"
            f", {at_ref:.1f} s at the reference's {REFERENCE_STEPS_PER_S:g}: over the lesson budget of "
            f"{LESSON_BUDGET_S:g} s. {CAUSE.format(short(path))}")
    total = sum(at_ref for *_, at_ref in scaled)
    parts = "; ".join(f"cell {index} {at_ref:.1f} s" for index, _, _, at_ref in scaled)
    assert total <= FIRST_OPEN_BUDGET_S, (
        f"{short(path)}: its stored times add up to {total:.1f} s at the reference's {REFERENCE_STEPS_PER_S:g} "
        f"steps/s (stored at {steps_per_s}), over the budget of a lesson opened first, {FIRST_OPEN_BUDGET_S:g} s: "
        f"{parts}. "
        f"{CAUSE.format(short(path))}")


@pytest.mark.parametrize("path", EXECUTED, ids=short)
def test_the_stored_run_fits_the_budget_of_a_notebook_opened_first(path):
    run = stored_run(path)
    at_ref = at_reference(run["seconds"], run["steps_per_s"])
    assert at_ref <= FIRST_OPEN_BUDGET_S, (
        f"{short(path)} ran {run['seconds']} s on a machine of {run['steps_per_s']} steps/s, {at_ref:.1f} s at the "
        f"reference's {REFERENCE_STEPS_PER_S:g}: over the budget of {FIRST_OPEN_BUDGET_S:g} s for a notebook run "
        f"alone from an empty model cache. {CAUSE.format(short(path))}; if it stays over, the notebook must get faster")


def test_the_run_record_survives_cleaning_and_goes_with_the_outputs():
    nb = with_run(nbformat.v4.new_notebook(), steps_per_s=34.14, seconds=21.26)
    nb.metadata["widgets"] = {"state": {}}
    assert clean_metadata(nb).metadata[RUN_KEY] == {"steps_per_s": 34.1, "seconds": 21.3}
    assert "widgets" not in nb.metadata
    assert RUN_KEY not in clear_outputs(nb).metadata  # an exercise notebook, without outputs, has no run
