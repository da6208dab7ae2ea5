"""`course.py screenshots` (maintainers): refresh the README's pictures in docs/screenshots/ from a real browser.

It runs the browser test's README case, which opens those lessons in JupyterLab in Chromium, runs them from the menu
and photographs the window, a widget and a plot. `course.py test` never writes there (its pictures go to build/).
"""

from __future__ import annotations

import os
import subprocess
import sys

from . import ROOT
from .browser import find_chromium, install_hint

README_SCREENSHOTS_DIR = ROOT / "docs" / "screenshots"
README_SCREENSHOTS_VARIABLE = "COURSE_README_SCREENSHOTS"  # read by tests/browser/test_jupyterlab.py


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python3 course.py screenshots   (no arguments)", file=sys.stderr)
        return 2
    if find_chromium() is None:
        print(f"[course] no Chromium found: {install_hint()}", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "pytest", "tests/browser/test_jupyterlab.py", "-k", "readme_pictures",
               "-p", "no:cacheprovider", "-q", "-rs"]
    env = {**os.environ, README_SCREENSHOTS_VARIABLE: str(README_SCREENSHOTS_DIR)}
    code = subprocess.call(command, cwd=ROOT, env=env)
    if code == 0:
        print(f"[course] README pictures written to {README_SCREENSHOTS_DIR.relative_to(ROOT)}/", flush=True)
    return code
