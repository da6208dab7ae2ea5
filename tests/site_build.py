"""Building the course's website for the tests (tests/test_site.py, tests/browser/test_site_pages.py).

The site is built by the site's own environment ``.venv-site``, which ``python3 course.py site`` and
``python3 course.py test`` make from requirements-site.txt; the tests only use it, so tests running side by side
never install into it at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from course_tools import ROOT
from course_tools.system_packages import on_ci

BUILD_TIMEOUT_S = 300


def site_python() -> Path:
    """The interpreter of ``.venv-site``, as course.py names it."""
    sys.path.insert(0, str(ROOT))
    try:
        import course
    finally:
        sys.path.remove(str(ROOT))
    return course.venv_python(course.SITE_VENV_DIR)


def missing_environment() -> str | None:
    """Why the site cannot be built here, or None when ``.venv-site`` can build it."""
    python = site_python()
    if not python.exists() or subprocess.run([python, "-c", "import myst_nb, sphinx_book_theme"],
                                             capture_output=True).returncode != 0:
        return ("the site's environment .venv-site is missing or incomplete: `python3 course.py site` makes it "
                "(it needs the package index)")
    return None


def build_site(out: Path, course: Path = ROOT) -> Path:
    """Build the site of ``course`` into ``out`` with ``.venv-site`` (as `python3 course.py site --out` does) and
    return ``out``. Without the environment the test is skipped, and on CI (``CI=true``) it fails."""
    reason = missing_environment()
    if reason:
        if on_ci():
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    env = {**os.environ, "PYTHONUTF8": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
    result = subprocess.run([site_python(), "-m", "course_tools", "site", "--out", out, "--course", course],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert result.returncode == 0, f"the site build failed:\n{result.stdout}\n{result.stderr}"
    return out


def git_status() -> str | None:
    """`git status` of the checkout in short form, or None outside a git checkout."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    command = ["git", "status", "--porcelain", "--untracked-files=all"]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout


@dataclass
class BuiltSite:
    path: Path
    git_status_before: str | None
    git_status_after: str | None


def build_course_site(out: Path) -> BuiltSite:
    """The course's own site built into ``out``, with `git status` before and after the build."""
    before = git_status()
    build_site(out)
    return BuiltSite(out, before, git_status())
