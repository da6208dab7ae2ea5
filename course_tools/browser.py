"""Finding the Chromium the browser test drives (tests/browser/); ``system_packages.py`` installs it on CI."""

from __future__ import annotations

import ntpath
import os
import platform
import posixpath
import shutil

BROWSER_ENV_VAR = "COURSE_CHROMIUM"  # a learner can point the browser test at any Chromium or Chrome
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# Where Chrome and Chromium install themselves off PATH (macOS apps; Windows, per machine or per user; Microsoft
# Edge, on every Windows, is Chromium too), first found first used.
MACOS_APPS = ("Google Chrome.app/Contents/MacOS/Google Chrome", "Chromium.app/Contents/MacOS/Chromium")
WINDOWS_PROGRAMS = (r"Google\Chrome\Application\chrome.exe", r"Chromium\Application\chrome.exe",
                    r"Microsoft\Edge\Application\msedge.exe")
WINDOWS_FOLDERS = ("PROGRAMFILES", "PROGRAMFILES(X86)", "LOCALAPPDATA")  # environment variables naming them


def installed_browsers() -> list[str]:
    """Where this system's installers put a Chromium-family browser (whether or not one is there)."""
    system = platform.system()
    if system == "Darwin":
        return [posixpath.join(apps, app) for apps in ("/Applications", posixpath.expanduser("~/Applications"))
                for app in MACOS_APPS]
    if system == "Windows":
        folders = [os.environ[name] for name in WINDOWS_FOLDERS if os.environ.get(name)]
        return [ntpath.join(folder, program) for program in WINDOWS_PROGRAMS for folder in folders]
    return []


def find_chromium() -> str | None:
    """The path of a Chromium-family browser: ``$COURSE_CHROMIUM`` if set, else the first one on PATH, else the
    first one where macOS or Windows installs Chrome, Chromium or Edge."""
    chosen = os.environ.get(BROWSER_ENV_VAR)
    if chosen:
        return chosen if os.path.isfile(chosen) else None
    on_path = next(filter(None, (shutil.which(name) for name in BROWSER_NAMES)), None)
    return on_path or next((path for path in installed_browsers() if os.path.isfile(path)), None)


def install_hint() -> str:
    """What to install (or set) on this system for the browser test, in a few words."""
    system = platform.system()
    if system in ("Darwin", "Windows"):
        return f"install Google Chrome, or set {BROWSER_ENV_VAR}=/path/to/chrome"
    return f"install Debian's `chromium` or Google Chrome, or set {BROWSER_ENV_VAR}=/path/to/chrome"
