"""A fixture shared by tests/ and tests/browser/: the course's website, built once per test session (per worker)."""

from __future__ import annotations

import pytest
from site_build import BuiltSite, build_course_site


@pytest.fixture(scope="session")
def course_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    return build_course_site(tmp_path_factory.mktemp("site") / "site")
