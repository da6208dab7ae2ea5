"""Sealing a submission off: the bubblewrap sandbox each kernel starts in, or none when the teacher accepts that.

Inside the sandbox (``bwrap``, Debian/Ubuntu package ``bubblewrap``; unprivileged Linux user namespaces) a kernel
sees only: the system's programs and libraries (``/usr``, read-only), a few harmless files of ``/etc``, the Python
environment and the course's ``transformer_lib`` and ``course_tools`` (read-only), an empty private home and
``/tmp``, and its own working folder (the only place it can write, deleted afterwards). It runs as ``nobody`` in
its own user, PID, network, IPC and UTS namespaces: no network at all (the host's loopback services included),
no other process of the machine visible, and it dies with the grader. The grader talks to it through Unix sockets
in that working folder (Jupyter's IPC transport), so no TCP port is needed.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import ROOT
from ..system_packages import system_name
from .limits import Limits, wrap_command

SANDBOX_HOME = "/home/grader"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/passwd",
                "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/alternatives")
NOBODY = "65534"
BUBBLEWRAP = "bubblewrap"
UNSANDBOXED = "none (--unsandboxed)"


@dataclass(frozen=True)
class Isolation:
    """How kernels are sealed off: ``bwrap`` is the sandbox program, or None for no sandbox."""

    bwrap: str | None

    @property
    def name(self) -> str:
        return BUBBLEWRAP if self.bwrap else UNSANDBOXED

    def kernel_command(self, command: list[str], workdir: Path, limits: Limits) -> list[str]:
        """``command`` (a kernel) started under ``limits``, inside the sandbox when there is one."""
        # An interpreter started as tests/../.venv/bin/python names a folder the sandbox does not have: normalise.
        command = [os.path.abspath(part) if part == sys.executable else part for part in command]
        limited = wrap_command(command, limits)
        return [*bubblewrap_arguments(self.bwrap, workdir), "--", *limited] if self.bwrap else limited

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The kernel's environment, with a home and temporary folder that exist where it runs."""
        if not self.bwrap:
            return env
        return {**env, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "TMP": "/tmp", "TEMP": "/tmp"}


def read_only_paths() -> list[str]:
    """What a kernel must read besides the system: the environment, its base Python and the course packages."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             str(ROOT / "transformer_lib"), str(ROOT / "course_tools")}
    return sorted(paths)


def bubblewrap_arguments(bwrap: str, workdir: Path) -> list[str]:
    """The ``bwrap`` command line that starts a program sealed off, writing only into ``workdir``."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--uid", NOBODY, "--gid", NOBODY,
            "--hostname", "sandbox", "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--tmpfs", SANDBOX_HOME,
            # The kernel would watch this parent process, which it cannot see from inside, and quit; it dies with
            # the sandbox anyway (--die-with-parent).
            "--unsetenv", "JPY_PARENT_PID"]
    for path in (*SYSTEM_DIRS, *SYSTEM_FILES):
        args += ["--ro-bind-try", path, path]
    for path in read_only_paths():
        args += ["--ro-bind", path, path]
    args += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--remount-ro", "/"]
    return args


@cache
def find_isolation() -> Isolation | None:
    """The sandbox this machine can run (bubblewrap that really starts a program), or None."""
    bwrap = shutil.which("bwrap")
    if not bwrap or platform.system() != "Linux":
        return None
    with tempfile.TemporaryDirectory(prefix="course-probe-") as workdir:
        probe = [*bubblewrap_arguments(bwrap, Path(workdir)), "--", os.path.abspath(sys.executable), "-c", "pass"]
        try:
            works = subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            works = False
    return Isolation(bwrap) if works else None


def why_no_sandbox() -> str:
    """What to install (or why nothing can be), for the refusal message."""
    if platform.system() != "Linux":
        return (f"this is {system_name()}: the sandbox needs Linux (bubblewrap). Grade on a Linux machine or in a "
                "Linux virtual machine")
    if not shutil.which("bwrap"):
        return ("bubblewrap is not installed: `sudo apt-get install bubblewrap` (Debian/Ubuntu), "
                "`sudo dnf install bubblewrap` (Fedora), `sudo pacman -S bubblewrap` (Arch)")
    return ("bubblewrap is installed but cannot start a sandbox here (user namespaces are off, e.g. inside a "
            "container that forbids them, or `kernel.unprivileged_userns_clone=0`)")
