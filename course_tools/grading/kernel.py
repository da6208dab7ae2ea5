"""Running cells in one sealed-off kernel: start it, feed it cells with timeouts, stop it, whatever it does.

The grader is the Jupyter client and stays outside the sandbox; the kernel starts inside it and the two talk over
Unix sockets in the submission's working folder (Jupyter's IPC transport: no TCP, so no network is needed).
Interrupts go as messages on the control channel (a signal would stop at the sandbox's own process), except on
Windows (never sandboxed), where ipykernel ignores interrupt messages: there jupyter_client's Win32 interrupt event.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from .isolation import Isolation
from .limits import Limits

MAX_CELL_OUTPUT_CHARS = 1_000_000
# What a kernel needs from the grader's environment (on Linux, macOS and Windows); tokens and keys stay behind.
KERNEL_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "PYTHONUTF8", "VIRTUAL_ENV", "TMP",
                   "TEMP", "TMPDIR", "SYSTEMROOT", "SYSTEMDRIVE", "USERPROFILE", "APPDATA", "LOCALAPPDATA")


@dataclass(frozen=True)
class KernelSettings:
    """Limits for one submission's kernel."""

    cell_timeout_s: float = 60.0
    check_timeout_s: float = 60.0
    total_timeout_s: float = 600.0
    limits: Limits = Limits()
    threads: int = 1  # CPU threads for torch/NumPy in each kernel
    grace_s: float = 10.0  # after a timeout's interrupt, how long a kernel may take to stop before it is killed


@dataclass
class CellRun:
    """What happened to one executed cell."""

    seconds: float = 0.0
    timed_out: bool = False
    error: str | None = None
    stdout: str = ""
    ran: bool = True
    stopped: bool = False  # the kernel died or was killed during this cell


@dataclass
class KernelRun:
    """Every cell's run, the cells whose output was cut, and why the kernel stopped early (None: it did not)."""

    cells: list[CellRun]
    truncated: set[int]
    stopped: str | None


def interrupt_mode() -> str:
    """How a timed-out cell is interrupted: "message" (ipykernel raises SIGINT in itself), or on Windows, where
    ipykernel logs "Interrupt message not supported on Windows" and goes on, "signal" (a Win32 event there)."""
    return "signal" if os.name == "nt" else "message"


class SealedKernelManager(AsyncKernelManager):
    """A kernel started through ``Isolation.kernel_command`` (over IPC in the sandbox), interrupted by message."""

    def __init__(self, isolation: Isolation, workdir: Path, limits: Limits, **kwargs: Any):
        # Without a sandbox, TCP on localhost: IPC sockets are not available on every platform (Windows).
        channels = {"transport": "ipc", "ip": str(workdir / "k")} if isolation.bwrap else {"transport": "tcp"}
        super().__init__(kernel_name="python3", connection_file=str(workdir / "kernel.json"), **channels, **kwargs)
        self.isolation, self.workdir, self.limits = isolation, workdir, limits

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        self.kernel_spec.interrupt_mode = interrupt_mode()
        kw.setdefault("stdout", subprocess.DEVNULL)  # the kernel's own log lines would flood the summary
        kw.setdefault("stderr", subprocess.DEVNULL)
        kw["env"] = self.isolation.environment(kw.get("env") or {})
        await super()._async_launch_kernel(self.isolation.kernel_command(kernel_cmd, self.workdir, self.limits), **kw)


class OutputCappedClient(NotebookClient):
    """An nbclient that keeps at most ``MAX_CELL_OUTPUT_CHARS`` of each cell's output (plus the result lines)."""

    def __init__(self, nb: nbformat.NotebookNode, marker: str, **kwargs: Any):
        super().__init__(nb, **kwargs)
        self.marker = marker
        self.output_chars: dict[int, int] = {}
        self.truncated: set[int] = set()

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        used = self.output_chars.get(cell_index, 0) + len(json.dumps(msg["content"], default=str))
        self.output_chars[cell_index] = used
        if used <= MAX_CELL_OUTPUT_CHARS:
            return super().output(outs, msg, display_id, cell_index)
        self.truncated.add(cell_index)
        text = msg["content"].get("text", "") if msg["msg_type"] == "stream" else ""
        kept = [line for line in text.splitlines() if line.startswith(self.marker)]
        if kept:
            outs.append(nbformat.v4.new_output("stream", name="stdout", text="\n".join(kept) + "\n"))
        return None


def kernel_environment(workdir: Path, settings: KernelSettings) -> dict[str, str]:
    env = {key: os.environ[key] for key in KERNEL_ENV_KEEP if key in os.environ}
    threads = str(settings.threads)
    env.update({
        "TRANSFORMER_LIB_DEVICE": "cpu", "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg",
        "IPYTHONDIR": str(workdir / ".ipython"), "MPLCONFIGDIR": str(workdir / ".matplotlib"),
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
    })
    return env


def finished_cell(cell: nbformat.NotebookNode, seconds: float, limit: float) -> CellRun:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    return CellRun(
        seconds=seconds, timed_out=seconds >= limit - 0.05,
        stdout="".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"),
        error=f"{errors[0].ename}: {errors[0].evalue}".rstrip(": ") if errors else None,
    )


async def run_cells(cells: list[nbformat.NotebookNode], timeouts: list[float], marker: str, workdir: Path,
                    settings: KernelSettings, isolation: Isolation) -> KernelRun:
    """Run ``cells`` in order in one sealed-off kernel, each within its timeout and all within the total."""
    deadline = time.monotonic() + settings.total_timeout_s
    current: dict[str, float] = {}
    client = OutputCappedClient(
        nbformat.v4.new_notebook(cells=cells), marker, km=SealedKernelManager(isolation, workdir, settings.limits),
        timeout=1, timeout_func=lambda cell: current["timeout"], interrupt_on_timeout=True, allow_errors=True,
        record_timing=False, shutdown_kernel="immediate", startup_timeout=120,
        resources={"metadata": {"path": str(workdir)}},
    )
    runs = [CellRun(ran=False) for _ in cells]
    stopped = None
    async with client.async_setup_kernel(env=kernel_environment(workdir, settings)):
        for index, (cell, limit) in enumerate(zip(cells, timeouts, strict=True)):
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                stopped = f"the total time limit of {settings.total_timeout_s:g} s was reached"
                break
            current["timeout"] = min(limit, remaining)
            started = time.monotonic()
            try:
                await asyncio.wait_for(client.async_execute_cell(cell, index), current["timeout"] + settings.grace_s)
            except (asyncio.TimeoutError, DeadKernelError):  # nbclient reports our own cancellation as DeadKernelError
                hung = await client.km.is_alive()
                runs[index] = CellRun(seconds=time.monotonic() - started, timed_out=hung, stopped=True)
                stopped = ("the kernel did not stop when interrupted, so it was killed" if hung
                           else "the kernel died (a memory or CPU limit, a crash, or exit())")
                break
            runs[index] = finished_cell(cell, time.monotonic() - started, current["timeout"])
    return KernelRun(runs, client.truncated, stopped)
