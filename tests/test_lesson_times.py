"""The lesson-times tool states each lesson's seconds at the reference machine's speed, each with the yardstick read
on either side of it, and flags those over budget."""

import pytest

from course_tools.lesson_times import lesson_speeds, over_budget, reading_lines, time_lines

LESSONS = ["notebooks/01_similarity.ipynb", "notebooks/10_decoding.ipynb"]


def test_each_lesson_is_stated_at_the_reference_and_flagged_when_over():
    seconds = dict(zip(LESSONS, (10.0, 25.0), strict=True))
    speeds = dict.fromkeys(LESSONS, 30.0)  # twice the reference's speed: twice the seconds there
    lines = time_lines(seconds, speeds, budget=45.0)
    assert lines[0].split() == ["here", "speed", "at", "15", "budget", "notebook"]
    assert lines[1].split() == ["10.0", "30.0", "20.0", "45", "notebooks/01_similarity.ipynb"]
    assert lines[2].split() == ["25.0", "30.0", "50.0", "45", "notebooks/10_decoding.ipynb", "OVER"]
    assert lines[3].split() == ["35.0", "70.0", "in", "all"]
    assert over_budget(seconds, speeds, 45.0) == ["notebooks/10_decoding.ipynb"]
    assert over_budget(seconds, dict.fromkeys(LESSONS, 15.0), 45.0) == []  # on the reference machine, both fit


def test_each_lesson_is_scaled_by_the_readings_on_either_side_of_it():
    speeds = lesson_speeds(LESSONS, [20.0, 16.0, 14.0])  # before the first, after the first, after the second
    assert speeds == {LESSONS[0]: pytest.approx(18.0), LESSONS[1]: pytest.approx(15.0)}
    seconds = dict(zip(LESSONS, (40.0, 40.0), strict=True))
    assert over_budget(seconds, speeds, 45.0) == [LESSONS[0]]  # 40 s at 18 steps/s is 48 s at the reference
    with pytest.raises(ValueError):  # one reading more than lessons, or the readings are not the run's
        lesson_speeds(LESSONS, [20.0, 16.0])


def test_readings_that_spread_are_flagged():
    assert len(reading_lines([20.0, 19.0, 21.0])) == 1
    steady, moved = reading_lines([20.0, 19.0, 21.0])[0], reading_lines([23.2, 19.0, 16.2])
    assert "3 readings, 19.0 to 21.0 steps/s" in steady
    assert len(moved) == 2 and "moved" in moved[1]
