"""Finding the Chromium the browser test drives (tests/browser/); ``system_packages.py`` installs it on CI."""

from __future__ import annotations

import os
import shutil

BROWSER_ENV_VAR = "COURSE_CHROMIUM"  # a learner can point the browser test at any Chromium or Chrome
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium-family browser: ``$COURSE_CHROMIUM`` if set, else the first one on PATH."""
    chosen = os.environ.get(BROWSER_ENV_VAR)
    if chosen:
        return chosen if os.path.isfile(chosen) else None
    return next(filter(None, (shutil.which(name) for name in BROWSER_NAMES)), None)
