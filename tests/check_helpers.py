"""Helpers shared by the exercise-check tests (tests/test_checks_exNN.py)."""


def stub(*args):
    """What a student's untouched exercise does."""
    raise NotImplementedError()


def assert_rejected_with(result, text):
    """The check failed and one of its feedback lines says ``text``."""
    assert not result.ok
    assert any(text in line for line in result.lines), result.lines
