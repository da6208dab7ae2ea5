"""The system packages some tests need: Chromium for the browser test (tests/browser/) and bubblewrap for the grading
sandbox (tests/test_grade_hostile.py); on CI (``CI=true``), as root with apt-get, Debian's are installed when missing.

A learner's or teacher's machine is never changed: there, without them, those tests skip with a one-line message
naming the package. On CI a missing package is a failure, except where it cannot exist at all: bubblewrap is
Linux's, so on macOS and Windows the sandbox's tests skip with that reason, on CI too.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Callable

from .browser import find_chromium

PACKAGES: dict[str, Callable[[], str | None]] = {  # Debian package → finds it when installed
    "chromium": find_chromium,
    "bubblewrap": lambda: shutil.which("bwrap"),
}
# Packages that exist on one system only: the system (as platform.system() names it) and what needs the package.
ONLY_ON: dict[str, tuple[str, str]] = {"bubblewrap": ("Linux", "the grading sandbox needs Linux (bubblewrap)")}
SYSTEM_NAMES = {"Darwin": "macOS"}  # platform.system() → the name learners know; Linux and Windows are as given


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def system_name() -> str:
    """This operating system as its users call it: Linux, macOS, Windows (others as platform.system() says)."""
    system = platform.system()
    return SYSTEM_NAMES.get(system, system or "an unknown system")


def impossible_here(package: str) -> str | None:
    """Why ``package`` cannot exist on this system, in one line (its tests skip, even on CI); None where it can."""
    only = ONLY_ON.get(package)
    if only and platform.system() != only[0]:
        return f"{only[1]}; this is {system_name()}"
    return None


def missing_packages() -> list[str]:
    """The packages this system could have but lacks."""
    return [package for package, find in PACKAGES.items() if not impossible_here(package) and not find()]


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
