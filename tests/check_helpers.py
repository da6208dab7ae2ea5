"""Helpers shared by the exercise-check tests (tests/test_checks_exNN.py)."""


def stub(*args):
    """What a student's untouched exercise does."""
    raise NotImplementedError()


def assert_rejected_with(result, text):
    """The check failed and one of its feedback lines says ``text``."""
    assert not result.ok
    assert any(text in line for line in result.lines), result.lines


def assert_diagnosed(result, mistake_id):
    """The check failed and diagnosed ``mistake_id`` first: the answer was recognised as that mistake and as no
    other (the grader's class report counts this diagnosis)."""
    assert not result.ok
    named = [d["mistake"] for d in result.diagnoses]
    assert named and named[0] == mistake_id, (named, result.lines)
