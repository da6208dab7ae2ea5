"""Fixtures for the browser test: a JupyterLab server on copies of the lessons, and Debian's Chromium via Playwright.

Both are started once per session and always stopped (kernels, server and browser), even when a test fails.
Without Chromium or Playwright the test is skipped with a one-line reason; on CI (``CI=true``) that is a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from course_tools import NOTEBOOKS_DIR, ROOT
from course_tools.browser import find_chromium, install_hint
from course_tools.notebook_files import clear_outputs, notebooks_in, read_notebook, write_notebook
from course_tools.system_packages import on_ci

SERVER_START_TIMEOUT_S = 120
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# JupyterLab user settings: no news or update checks (no network, no pop-up in the screenshots).
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}

_skip_reasons: set[str] = set()


def skip_or_fail(reason: str) -> None:
    """Skip on a learner's machine (the reason is printed at the end of the run); fail on CI."""
    if on_ci():
        pytest.fail(f"CI=true and {reason}")
    _skip_reasons.add(reason)
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter) -> None:
    for reason in sorted(_skip_reasons):
        terminalreporter.write_line(f"[course] browser test skipped: {reason}", yellow=True)


@dataclass
class LabServer:
    url: str
    token: str
    root_dir: Path  # holds notebooks/, a copy of the course's lessons

    def lab_url(self, relative_path: str) -> str:
        """Open ``relative_path`` alone (``reset``: no tabs restored from an earlier test)."""
        return f"{self.url}/lab/tree/{relative_path}?reset&token={self.token}"

    def shut_down_kernels(self) -> None:
        for kernel in self.api("kernels"):
            self.api(f"kernels/{kernel['id']}", method="DELETE")

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None


def copy_lessons_without_outputs(target: Path) -> None:
    """Copy the lessons with outputs cleared, so every output the browser shows comes from the test's own run."""
    target.mkdir(parents=True)
    for path in notebooks_in(NOTEBOOKS_DIR):
        write_notebook(clear_outputs(read_notebook(path)), target / path.name)


def link_rest_of_course(root_dir: Path) -> None:
    """Link the course's other folders beside the copy, for lessons that use them (../benchmarks, ../checkpoints)."""
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name == NOTEBOOKS_DIR.name:
            continue
        try:
            (root_dir / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        except OSError:  # Windows without the right to make links: copy instead
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, root_dir / entry.name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_lab_settings(settings_dir: Path) -> None:
    for plugin, values in LAB_SETTINGS.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _wait_until_serving(server: LabServer, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode}:\n{log.read_text()}")
        try:
            server.api("status")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)  # polling the server's own readiness endpoint
    raise RuntimeError(f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S} s:\n{log.read_text()}")


def _stop_server(server: LabServer, process: subprocess.Popen, runtime_dir: Path) -> None:
    """Shut down every kernel and the server; kill what is left (kernels run in sessions of their own)."""
    try:
        server.shut_down_kernels()
        server.api("shutdown", method="POST")
        process.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired, urllib.error.URLError):
        pass
    if process.poll() is None:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        process.wait(timeout=30)
    _kill_leftover_kernels(runtime_dir)


def _kill_leftover_kernels(runtime_dir: Path) -> None:
    """Kill kernels whose command line names this server's runtime directory (Linux; elsewhere nothing to scan)."""
    marker = str(runtime_dir).encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except OSError:
            continue


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab from the course's environment on 127.0.0.1, with a token, serving a temporary copy of notebooks/."""
    base = tmp_path_factory.mktemp("jupyterlab")
    root_dir, runtime_dir, settings_dir = base / "course", base / "runtime", base / "settings"
    copy_lessons_without_outputs(root_dir / NOTEBOOKS_DIR.name)  # JupyterLab autosaves: never the repo's files
    link_rest_of_course(root_dir)
    _write_lab_settings(settings_dir)
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime_dir), "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings_dir), "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    }
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = base / "jupyterlab.log"
    with log.open("w") as log_file:
        process = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = LabServer(f"http://127.0.0.1:{port}", token, root_dir)
    try:
        _wait_until_serving(server, process, log)
        yield server
    finally:
        _stop_server(server, process, runtime_dir)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium driven by Playwright; skipped (failed on CI) when either is missing."""
    executable = find_chromium()
    if executable is None:
        skip_or_fail(f"no Chromium found ({install_hint()})")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Playwright is not installed (`python3 course.py test` installs requirements-test.txt)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
