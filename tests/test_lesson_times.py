"""The lesson-times tool states each lesson's seconds at the reference machine's speed and flags those over budget."""

from course_tools.lesson_times import over_budget, time_lines


def test_each_lesson_is_stated_at_the_reference_and_flagged_when_over():
    seconds = {"notebooks/01_similarity.ipynb": 10.0, "notebooks/10_decoding.ipynb": 25.0}
    lines = time_lines(seconds, steps_per_s=30.0, budget=45.0)  # twice the reference's speed: twice the seconds there
    assert lines[0].split() == ["here", "at", "15", "budget", "notebook"]
    assert lines[1].split() == ["10.0", "20.0", "45", "notebooks/01_similarity.ipynb"]
    assert lines[2].split() == ["25.0", "50.0", "45", "notebooks/10_decoding.ipynb", "OVER"]
    assert lines[3].split() == ["35.0", "70.0", "in", "all"]
    assert over_budget(seconds, 30.0, 45.0) == ["notebooks/10_decoding.ipynb"]
    assert over_budget(seconds, 15.0, 45.0) == []  # on the reference machine itself, both fit
