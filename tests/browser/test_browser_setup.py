"""Finding the browser, and installing Debian's Chromium only on CI, as root, when none is there."""

from __future__ import annotations

import subprocess

import pytest

from course_tools import browser


@pytest.fixture
def no_browser_as_root_with_apt(monkeypatch):
    """A machine with apt-get and no Chromium, run as root; returns the commands install_chromium_on_ci ran."""
    ran: list[list[str]] = []
    monkeypatch.delenv(browser.BROWSER_ENV_VAR, raising=False)
    monkeypatch.setattr(browser.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0, raising=False)

    def run(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="")

    monkeypatch.setattr(browser.subprocess, "run", run)
    return ran


def test_the_environment_variable_chooses_the_browser(monkeypatch, tmp_path):
    chrome = tmp_path / "chrome"
    chrome.write_text("")
    monkeypatch.setenv(browser.BROWSER_ENV_VAR, str(chrome))
    assert browser.find_chromium() == str(chrome)
    monkeypatch.setenv(browser.BROWSER_ENV_VAR, str(tmp_path / "missing"))
    assert browser.find_chromium() is None


def test_ci_installs_debians_chromium(monkeypatch, no_browser_as_root_with_apt):
    monkeypatch.setenv("CI", "true")
    browser.install_chromium_on_ci()
    assert no_browser_as_root_with_apt[-1] == ["apt-get", "install", "-y", "-qq", "chromium"]


def test_a_learners_machine_is_never_changed(monkeypatch, no_browser_as_root_with_apt):
    monkeypatch.delenv("CI", raising=False)
    browser.install_chromium_on_ci()
    assert no_browser_as_root_with_apt == []
