"""The Debian packages some tests need, installed on CI only (``CI=true``, as root, with apt-get): Chromium for the
browser test (tests/browser/) and bubblewrap for the grading sandbox (tests/test_grade_hostile.py).

A learner's or teacher's machine is never changed: there, without them, those tests skip with a message naming the
package (on CI they fail instead).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

from .browser import find_chromium

PACKAGES: dict[str, Callable[[], str | None]] = {  # Debian package → finds it when installed
    "chromium": find_chromium,
    "bubblewrap": lambda: shutil.which("bwrap"),
}


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing_packages() -> list[str]:
    return [package for package, find in PACKAGES.items() if not find()]


def install_missing_on_ci() -> None:
    """On CI, as root, with apt-get: install every package of ``PACKAGES`` that is missing. Elsewhere: nothing."""
    missing = missing_packages()
    if not on_ci() or not missing or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    if not shutil.which("apt-get"):
        print(f"[course] CI=true but {', '.join(missing)} missing and no apt-get: their tests will fail.", flush=True)
        return
    print(f"[course] CI=true: installing Debian's {', '.join(missing)} for the tests that need them", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        # Output kept until it matters: this runs while another step prints.
        result = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            print(f"{result.stdout}\n[course] `{' '.join(command)}` failed: their tests will fail.", flush=True)
            return
    print(f"[course] Debian's {', '.join(missing)} installed", flush=True)
