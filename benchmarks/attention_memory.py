"""Peak memory of attention at a long sequence: naive (full score matrix) vs key/value chunks vs PyTorch's kernel.

Each method runs in a fresh subprocess, so one method's peak cannot hide another's. On the CPU the peak is the
growth of the process's peak resident memory (``VmHWM``), with ``MALLOC_MMAP_THRESHOLD_=131072`` so that glibc
returns large freed blocks to the system at once (with its default, adaptive threshold, freed blocks are reused
silently and the peak misleads); on a GPU it is ``torch.cuda.max_memory_allocated``.

Last line: ``memory_ratio=<chunked/naive> max_abs_diff=<chunked vs naive> time_vs_sdpa=<chunked/sdpa> …``.
Run: ``python benchmarks/attention_memory.py`` (T = 8192) or ``--quick`` (T = 1024).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from transformer_lib.attention import scaled_dot_product_attention
from transformer_lib.chunked_attention import chunked_attention
from transformer_lib.device import get_device

METHODS = ("naive", "chunked", "sdpa")
MIB = 2**20


def inputs(length: int, d_head: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One sequence, one head: query, key, value each (1, 1, T, d_head), float32, drawn on the CPU."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, length, d_head, generator=generator) for _ in range(3))
    return q.to(device), k.to(device), v.to(device)


def attend(method: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_size: int) -> torch.Tensor:
    if method == "naive":
        return scaled_dot_product_attention(q, k, v)[0]
    if method == "chunked":
        return chunked_attention(q, k, v, chunk_size=chunk_size)
    return F.scaled_dot_product_attention(q, k, v)


PROC_STATUS = Path("/proc/self/status")


def peak_rss_bytes() -> int:
    """This process's peak resident memory: ``VmHWM`` of its own address space where Linux reports it, the peak
    working set on Windows, else ``ru_maxrss``.

    ``ru_maxrss`` is not used on Linux: it survives ``fork`` + ``exec``, so a child of a big process (a Jupyter
    kernel holding a model) starts with its parent's peak and hides smaller ones.
    """
    if PROC_STATUS.exists():
        for line in PROC_STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # reported in kB
    if os.name == "nt":  # no resource module there
        return windows_peak_working_set()
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def windows_peak_working_set() -> int:
    """This process's peak working set in bytes (Windows' ``GetProcessMemoryInfo``), through ctypes."""
    from ctypes import wintypes

    class ProcessMemoryCounters(ctypes.Structure):  # PROCESS_MEMORY_COUNTERS
        _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD),
                    *((name, ctypes.c_size_t) for name in (
                        "PeakWorkingSetSize", "WorkingSetSize", "QuotaPeakPagedPoolUsage", "QuotaPagedPoolUsage",
                        "QuotaPeakNonPagedPoolUsage", "QuotaNonPagedPoolUsage", "PagefileUsage", "PeakPagefileUsage"))]

    kernel32 = ctypes.WinDLL("kernel32")
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.K32GetProcessMemoryInfo.argtypes = [wintypes.HANDLE, ctypes.POINTER(ProcessMemoryCounters),
                                                 wintypes.DWORD]
    kernel32.K32GetProcessMemoryInfo.restype = wintypes.BOOL
    counters = ProcessMemoryCounters(cb=ctypes.sizeof(ProcessMemoryCounters))
    if not kernel32.K32GetProcessMemoryInfo(kernel32.GetCurrentProcess(), ctypes.byref(counters), counters.cb):
        raise OSError("GetProcessMemoryInfo failed")
    return counters.PeakWorkingSetSize


def peak_bytes_per_length(method: str, lengths: list[int], d_head: int, chunk_size: int) -> list[int]:
    """Run in the subprocess: extra memory at the peak of one call per length, beyond the inputs.

    Lengths are taken in increasing order, so each call's peak exceeds the previous ones and the process's peak
    (:func:`peak_rss_bytes`) can be read after each call.
    """
    device = get_device()
    all_inputs = [inputs(length, d_head, device) for length in sorted(lengths)]
    peaks = []
    with torch.no_grad():
        q, k, v = all_inputs[0]
        attend(method, q[..., :64, :], k[..., :64, :], v[..., :64, :], chunk_size)  # load kernels first
        before = peak_rss_bytes()
        for q, k, v in all_inputs:
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                start = torch.cuda.memory_allocated()
                attend(method, q, k, v, chunk_size)
                torch.cuda.synchronize()
                peaks.append(torch.cuda.max_memory_allocated() - start)
            else:
                attend(method, q, k, v, chunk_size)
                peaks.append(peak_rss_bytes() - before)
    return peaks


def measure_in_subprocesses(
    methods: list[str], lengths: list[int], d_head: int = 64, chunk_size: int = 256
) -> dict[str, list[int]]:
    """Peak extra bytes of each of ``methods`` ("naive", "chunked" or "sdpa") at each of ``lengths``: one fresh
    process per method, all started at once (each pays for importing torch, so they overlap where cores allow)."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    common = ["--lengths", ",".join(map(str, lengths)), "--d-head", str(d_head), "--chunk-size", str(chunk_size)]
    running = {
        method: subprocess.Popen([sys.executable, __file__, "--measure", method, *common], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for method in methods
    }
    peaks = {}
    for method, process in running.items():
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            raise subprocess.CalledProcessError(process.returncode, process.args, stdout, stderr)
        peaks[method] = json.loads(stdout.strip().splitlines()[-1])["peak_bytes"]
    return peaks


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small size for tests (T=1024)")
    parser.add_argument("--T", type=int, default=None, help="sequence length (default 8192)")
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--measure", choices=METHODS, help=argparse.SUPPRESS)  # internal: one subprocess's job
    parser.add_argument("--lengths", help=argparse.SUPPRESS)  # internal: comma-separated lengths to measure
    args = parser.parse_args()
    length = args.T or (1024 if args.quick else 8192)

    if args.measure:
        lengths = sorted(int(n) for n in args.lengths.split(","))
        print(json.dumps({"peak_bytes": peak_bytes_per_length(args.measure, lengths, args.d_head, args.chunk_size)}))
        return

    device = get_device()
    peaks = {m: p[0] for m, p in measure_in_subprocesses(list(METHODS), [length], args.d_head, args.chunk_size).items()}
    q, k, v = inputs(length, args.d_head, device)
    with torch.no_grad():
        naive = attend("naive", q, k, v, args.chunk_size)
        chunked = attend("chunked", q, k, v, args.chunk_size)
        max_abs_diff = (naive - chunked).abs().max().item()
        del naive
        seconds = {
            m: median_seconds(lambda m=m: attend(m, q, k, v, args.chunk_size), args.repeats)
            for m in ("chunked", "sdpa")
        }

    print(f"T={length}, one head, d_head={args.d_head}, float32, chunks of {args.chunk_size} keys, on {device}")
    for method in METHODS:
        print(f"  {method:8s} peak extra memory {peaks[method] / MIB:8.1f} MiB")
    print(f"  chunked {seconds['chunked'] * 1e3:.1f} ms, F.scaled_dot_product_attention {seconds['sdpa'] * 1e3:.1f} ms")
    memory_ratio = peaks["chunked"] / peaks["naive"]
    print(
        f"memory_ratio={memory_ratio:.3f} max_abs_diff={max_abs_diff:.1e} "
        f"time_vs_sdpa={seconds['chunked'] / seconds['sdpa']:.2f} naive_mib={peaks['naive'] / MIB:.0f} "
        f"chunked_mib={peaks['chunked'] / MIB:.0f} sdpa_mib={peaks['sdpa'] / MIB:.0f} T={length} device={device.type}"
    )


if __name__ == "__main__":
    main()
