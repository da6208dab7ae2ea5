"""Finding the browser, and installing Debian's Chromium and bubblewrap only on CI, as root, when missing."""

from __future__ import annotations

import subprocess

import pytest

from course_tools import browser, system_packages


@pytest.fixture
def nothing_installed_as_root_with_apt(monkeypatch):
    """A Linux machine with apt-get, no Chromium and no bubblewrap, run as root; returns the commands that ran."""
    ran: list[list[str]] = []
    monkeypatch.delenv(browser.BROWSER_ENV_VAR, raising=False)
    monkeypatch.setattr(system_packages.platform, "system", lambda: "Linux")
    monkeypatch.setattr(system_packages.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None)
    monkeypatch.setattr(system_packages.os, "geteuid", lambda: 0, raising=False)

    def run(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="")

    monkeypatch.setattr(system_packages.subprocess, "run", run)
    return ran


def test_the_environment_variable_chooses_the_browser(monkeypatch, tmp_path):
    chrome = tmp_path / "chrome"
    chrome.write_text("")
    monkeypatch.setenv(browser.BROWSER_ENV_VAR, str(chrome))
    assert browser.find_chromium() == str(chrome)
    monkeypatch.setenv(browser.BROWSER_ENV_VAR, str(tmp_path / "missing"))
    assert browser.find_chromium() is None


def test_ci_installs_debians_chromium_and_bubblewrap(monkeypatch, nothing_installed_as_root_with_apt):
    monkeypatch.setenv("CI", "true")
    system_packages.install_missing_on_ci()
    assert nothing_installed_as_root_with_apt == [["apt-get", "update", "-qq"],
                                                  ["apt-get", "install", "-y", "-qq", "chromium", "bubblewrap"]]


def test_only_what_is_missing_is_installed(monkeypatch, nothing_installed_as_root_with_apt):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setitem(system_packages.PACKAGES, "chromium", lambda: "/usr/bin/chromium")
    system_packages.install_missing_on_ci()
    assert nothing_installed_as_root_with_apt[-1] == ["apt-get", "install", "-y", "-qq", "bubblewrap"]


def test_a_learners_machine_is_never_changed(monkeypatch, nothing_installed_as_root_with_apt):
    monkeypatch.delenv("CI", raising=False)
    system_packages.install_missing_on_ci()
    assert nothing_installed_as_root_with_apt == []
