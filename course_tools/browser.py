"""Finding the Chromium the browser test drives, and installing Debian's on CI (tests/browser/)."""

from __future__ import annotations

import os
import shutil
import subprocess

BROWSER_ENV_VAR = "COURSE_CHROMIUM"  # a learner can point the browser test at any Chromium or Chrome
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DEBIAN_PACKAGE = "chromium"


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def find_chromium() -> str | None:
    """The path of a Chromium-family browser: ``$COURSE_CHROMIUM`` if set, else the first one on PATH."""
    chosen = os.environ.get(BROWSER_ENV_VAR)
    if chosen:
        return chosen if os.path.isfile(chosen) else None
    return next(filter(None, (shutil.which(name) for name in BROWSER_NAMES)), None)


def install_chromium_on_ci() -> None:
    """On CI (``CI=true``), as root, with apt and no browser: install Debian's Chromium for the browser test.

    Anywhere else this does nothing: a learner's machine is never changed, and the test skips without a browser.
    """
    if not on_ci() or find_chromium() or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    if not shutil.which("apt-get"):
        print("[course] CI=true but no Chromium and no apt-get: the browser test will fail.", flush=True)
        return
    print(f"[course] CI=true and no Chromium: installing Debian's {DEBIAN_PACKAGE} for the browser test", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", DEBIAN_PACKAGE]):
        # Output kept until it matters: this may run while another step prints.
        result = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            print(f"{result.stdout}\n[course] `{' '.join(command)}` failed: the browser test will fail.", flush=True)
            return
    print(f"[course] Debian's {DEBIAN_PACKAGE} is installed", flush=True)
