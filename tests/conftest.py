"""Shared by tests/ and tests/browser/: the course's website, built once per test session (per worker); and the
trained-claim tests' bounds, raised together at the end of a test when `course.py bounds` tabulates them."""

from __future__ import annotations

import pytest
from site_build import BuiltSite, build_course_site

from bounds import deferred_failures


@pytest.fixture(scope="session")
def course_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    return build_course_site(tmp_path_factory.mktemp("site") / "site")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """With $COURSE_BOUNDS_FILE set, a failed bound lets the test go on recording its other bounds (tests/bounds.py)."""
    with deferred_failures():
        return (yield)
