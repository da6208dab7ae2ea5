"""Start a command under resource limits: the last step before a submission's kernel starts (inside the sandbox).

    python course_tools/grading/limits.py --memory-mb 4096 --cpu-seconds 600 --file-mb 64 -- python -m ipykernel …

It sets the limits on its own process, then replaces itself with the command (``os.execvp``), so the kernel keeps the
same process id (interrupts from the grader reach it) and inherits the limits:

- address space (RLIMIT_AS): an allocation beyond it fails with MemoryError, or the kernel dies;
- CPU time (RLIMIT_CPU, all threads together): past it the kernel is killed;
- size of any file it writes (RLIMIT_FSIZE).

Standard library only, because it runs before the kernel. Where the platform has no ``resource`` module (Windows),
the command starts without limits; the grader's timeouts still apply.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import resource
except ImportError:  # Windows
    resource = None

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one submission's kernel may use."""

    memory_mb: int = 4096
    cpu_seconds: int = 1200
    file_mb: int = 64


def limits_supported() -> bool:
    return resource is not None


def memory_limit_holds() -> bool:
    """Whether RLIMIT_AS bounds a kernel's memory: on Linux. macOS does not enforce it; Windows has no limits."""
    return limits_supported() and platform.system() == "Linux"


def wrap_command(command: list[str], limits: Limits) -> list[str]:
    """``command`` started through this wrapper with ``limits`` (unchanged where limits are not supported)."""
    if not limits_supported():
        return list(command)
    return [
        os.path.abspath(sys.executable), str(Path(__file__).resolve()),
        "--memory-mb", str(limits.memory_mb), "--cpu-seconds", str(limits.cpu_seconds),
        "--file-mb", str(limits.file_mb), "--", *command,
    ]


def apply_limits(limits: Limits) -> None:
    """Lower this process's limits (never above a hard limit already in place); skip one the platform refuses."""
    wanted = {
        resource.RLIMIT_AS: limits.memory_mb * MIB,
        resource.RLIMIT_CPU: limits.cpu_seconds,
        resource.RLIMIT_FSIZE: limits.file_mb * MIB,
    }
    for which, value in wanted.items():
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):  # e.g. macOS refuses RLIMIT_AS: start anyway, the timeouts still hold
            continue


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="limits.py", description=__doc__.split("\n")[0])
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--cpu-seconds", type=int, required=True)
    parser.add_argument("--file-mb", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    if limits_supported():
        apply_limits(Limits(args.memory_mb, args.cpu_seconds, args.file_mb))
    os.execvp(command[0], command)
    return 127  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
