"""`course.py test`: every check the course has, in one command (lint, notebook validation, unit tests)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from transformer_lib.speed import REFERENCE_STEPS_PER_S, at_reference

from . import MODEL_CACHE_VARIABLE, NOTEBOOKS_DIR, ROOT, SOLUTIONS_DIR
from .last_bits import LAST_BITS_VARIABLE, with_last_bits_moved
from .notebook_matrix import MATRIX_VARIABLE, SHARED_CACHE_VARIABLE, describe
from .system_packages import install_missing_on_ci
from .timing import TIMING_VARIABLE, notebook_table, read_timing, slowest
from .yardstick import mean_speed, measured_speed, speed_lines

STEPS = ("lint", "notebooks", "unit")  # the order they run in
MAX_UNIT_WORKERS = 4  # each worker imports torch and starts kernels: more rarely pays on a laptop
SLOWEST_SHOWN = 10  # unit tests named after the summary, slowest first
NOTEBOOK_NICENESS = 5  # the notebook step's priority beside the unit step (higher is lower: 0 normal, 19 lowest)


def device_problem(device: str) -> str | None:
    """Why ``device`` cannot be used here, or None when it can."""
    import torch

    kind = device.split(":")[0]
    if kind == "cuda" and not torch.cuda.is_available():
        return f"--device {device} was asked for, but torch {torch.__version__} sees no CUDA GPU on this machine."
    if kind == "mps" and not torch.backends.mps.is_available():
        return f"--device {device} was asked for, but Apple's MPS backend is not available here."
    return None


# The notebook step runs every notebook once per setting, against the same stored outputs (CONTRIBUTING.md, "What
# the notebook tests compare"): the machine's own CPU kernels and thread count; and PyTorch's portable kernels on
# one thread, which sum in another order, with every matrix product's last bits moved as another CPU's BLAS might
# round them (course_tools/last_bits.py). A stored output that passes both does not depend on this machine's CPU.
NATIVE = ("native kernels", {"OMP_WAIT_POLICY": "PASSIVE"})
PORTABLE = ("portable kernels, one thread, last bits moved",
            {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1", LAST_BITS_VARIABLE: "1"})
HARDWARE_VARIABLES = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", LAST_BITS_VARIABLE)


def notebook_matrix(environ: dict[str, str] = os.environ) -> list[tuple[str, dict[str, str]]]:
    """The settings to run: the matrix, or only the caller's own when they set a hardware variable themselves."""
    chosen = {name: environ[name] for name in HARDWARE_VARIABLES if name in environ}
    return [("as you set it", chosen)] if chosen else [NATIVE, PORTABLE]


def notebook_command(paths: list[str], matrix: list[tuple[str, dict[str, str]]],
                     shared_cache: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """The pytest command and environment that validate ``paths`` with nbval once per setting of ``matrix``; the last
    setting keeps its trained models in ``shared_cache`` when given (course_tools/notebook_matrix.py)."""
    command = [
        sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "--nbval-cell-timeout", "600",
        "--nbval-sanitize-with", str(ROOT / "course_tools" / "nbval_sanitize.cfg"),
        "-p", "course_tools.notebook_matrix", "-p", "course_tools.timing", "-p", "no:cacheprovider", "-q",
    ]
    env = {**os.environ, MATRIX_VARIABLE: json.dumps(matrix)}
    if shared_cache is not None:
        env[SHARED_CACHE_VARIABLE] = str(shared_cache)
    if len(matrix) > 1:  # one xdist worker per setting, each running every notebook, each from a clean slate
        command += ["-n", str(len(matrix)), "--dist", "each"]
        env = {name: value for name, value in env.items() if name not in HARDWARE_VARIABLES}
    return [*command, *paths], env


def unit_environment(model_cache: Path) -> dict[str, str]:
    """The unit step computes in the notebook step's last setting (portable kernels, one thread, last bits moved,
    unless the caller chose a setting) and shares that setting's model cache: a model a lesson trained there (lesson
    11's character GPT, the start of lessons 15-16, ...) loads in the tests instead of being trained again. One
    thread per worker: the tests' tensors are small, and more threads than cores only wait on each other. Every
    matrix product's last bits are moved (course_tools/last_bits.py), so a test that compares two code paths bit for
    bit fails here as it would on another CPU."""
    _, variables = notebook_matrix()[-1]
    return with_last_bits_moved({**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), **variables,
                                 MODEL_CACHE_VARIABLE: str(model_cache)})


def unit_workers() -> int:
    """One test module per worker, a worker more than the cores: many unit tests wait on a kernel, a browser or a
    sandbox rather than compute, and the extra worker computes meanwhile."""
    return min(MAX_UNIT_WORKERS, (os.cpu_count() or 1) + 1)


def step_commands(args: argparse.Namespace, scratch: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each step's command and environment; ``scratch``, a folder that lives as long as the run, gets each step's
    timing file and the unit tests' model cache (trained models shared by the test workers, once per run)."""
    python = sys.executable
    notebook_dirs = args.notebook or [str(NOTEBOOKS_DIR.relative_to(ROOT)), str(SOLUTIONS_DIR.relative_to(ROOT))]
    commands = {
        "lint": ([python, "-m", "ruff", "check", "."], dict(os.environ)),
        # Spread over the cores, a test module per worker (modules share fixtures such as the JupyterLab server).
        # -rs: each skipped part says why in one line (no sandbox off Linux, no Chromium, ...).
        "unit": ([python, "-m", "pytest", "tests", "-q", "-rs", "-p", "no:cacheprovider", "-p", "course_tools.timing",
                  "-n", str(unit_workers()), "--dist", "loadfile", *args.pytest_args],
                 unit_environment(scratch / "model-cache")),
        "notebooks": notebook_command(notebook_dirs, notebook_matrix(), shared_cache=scratch / "model-cache"),
    }
    for name, (_, env) in commands.items():
        env[TIMING_VARIABLE] = str(scratch / f"{name}-timing.json")
    return commands


def prepare_site_environment() -> None:
    """Make or update ``.venv-site``, with which the unit step's site tests build the website (tests/test_site.py)."""
    command = [sys.executable, str(ROOT / "course.py"), "site", "--prepare"]
    # Output kept until it matters: this runs while another step prints.
    result = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        print(f"{result.stdout}\n[course] the site's environment .venv-site could not be made: the site tests will "
              "be skipped (on CI they fail).", flush=True)


def announce(name: str, command: list[str], beside: bool = False) -> None:
    started = " (started beside the notebook step; its output so far, then as it comes)" if beside else ""
    print(f"\n[course] ── {name}{started}: {' '.join(command[1:])}", flush=True)
    if name == "notebooks":
        print("[course]    against the stored outputs, once per setting: "
              + "; ".join(describe(*leg) for leg in notebook_matrix()), flush=True)
    if name == "unit":
        print(f"[course]    with every matrix product's last bits moved ({LAST_BITS_VARIABLE}=1), as another "
              "CPU's BLAS may round them", flush=True)


def children_cpu_seconds() -> float | None:
    """User plus system CPU seconds of this process's finished children (and theirs), or None where the ``resource``
    module is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_line(cpu_seconds: float, steps_per_s: float) -> str:
    """The run's CPU time, here and at the reference machine's speed."""
    return (f"CPU time of the run: {cpu_seconds:.1f} s (user + system of every step's processes), "
            f"{at_reference(cpu_seconds, steps_per_s):.1f} s at {REFERENCE_STEPS_PER_S:g} steps/s")


def report_speed(before: float, after: float, cpu_seconds: float | None) -> float:
    """Print the yardstick's measurements before and after the steps and the run's CPU time; return the speed the
    run's times are stated with at the reference machine's (the mean of the two)."""
    steps_per_s = mean_speed(before, after)
    print()
    for line in speed_lines(before, after, when=("before the steps", "after them")):
        print(f"[course] {line}")
    if cpu_seconds is not None:
        print(f"[course] {cpu_line(cpu_seconds, steps_per_s)}")
    return steps_per_s


def print_timing(scratch: Path, steps_per_s: float | None = None) -> None:
    """Where the time went, after the summary: every notebook's seconds (with the machine's speed, also at the
    reference machine's), then the slowest unit tests."""
    notebooks = notebook_table(read_timing(scratch / "notebooks-timing.json"), steps_per_s)
    if notebooks:
        print("\n[course] seconds per notebook (kernel start and every cell)")
        for line in notebooks:
            print(f"[course] {line}")
    tests = slowest(read_timing(scratch / "unit-timing.json"), SLOWEST_SHOWN)
    if tests:
        print(f"\n[course] the {len(tests)} slowest unit tests (setup, call and teardown)")
        for line in tests:
            print(f"[course] {line}")


class Step:
    """One step's process, started now; its output goes to the terminal, or to ``log`` to be shown later."""

    def __init__(self, spec: tuple[list[str], dict[str, str]], log: Path | None = None, niceness: int = 0) -> None:
        command, env = spec
        self.log, self.started = log, time.perf_counter()
        self.output = open(log, "w") if log else None  # noqa: SIM115 (closed in finish)
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.output,
                                        stderr=subprocess.STDOUT if log else None)
        if niceness and hasattr(os, "setpriority"):  # POSIX; its workers and kernels, started later, inherit it
            os.setpriority(os.PRIO_PROCESS, self.process.pid, niceness)

    def finish(self) -> tuple[int, float]:
        """Wait for the step, showing its logged output as it comes; its exit status and seconds."""
        if self.log is None:
            code = self.process.wait()
        else:
            with open(self.log, errors="replace") as shown:
                while (code := self.process.poll()) is None:
                    sys.stdout.write(shown.read())
                    sys.stdout.flush()
                    time.sleep(0.5)
                sys.stdout.write(shown.read())
            self.output.close()
        return code, time.perf_counter() - self.started


def run_steps(args: argparse.Namespace, scratch: Path) -> int:
    steps = {name: spec for name, spec in step_commands(args, scratch).items() if not args.only or name in args.only}
    # The yardstick before any step and after the last, on a machine this run does not load: the notebooks' seconds
    # and the run's CPU time are then also stated at the reference machine's speed.
    timed = "notebooks" in steps or "unit" in steps
    speed_before = measured_speed() if timed else None
    cpu_before = children_cpu_seconds()
    # On CI the unit step may need Chromium and bubblewrap installed: that happens while the notebook step runs.
    packages = threading.Thread(target=install_missing_on_ci)
    site_environment = threading.Thread(target=prepare_site_environment)  # beside the notebook step too
    if "unit" in steps:
        packages.start()
        site_environment.start()
    results: dict[str, tuple[int, float]] = {}
    if "lint" in steps:
        announce("lint", steps["lint"][0])
        results["lint"] = Step(steps["lint"]).finish()
    notebooks = None
    if "notebooks" in steps:
        announce("notebooks", steps["notebooks"][0])
        # Beside the unit step, the notebooks yield the CPU to it: unit tests hold time limits (a grading kernel's
        # 12 s per cell), the notebooks' cells have 600 s.
        beside_unit = "unit" in steps and args.beside
        notebooks = Step(steps["notebooks"], niceness=NOTEBOOK_NICENESS if beside_unit else 0)
    if "unit" in steps:
        packages.join()
        site_environment.join()
        # With --beside, next to the notebook step, its output kept in a file and shown once the notebook step is
        # done. Measured on 2 cores (README): 5 % less wall time, but each notebook's seconds then count the unit
        # tests' work too, so one after the other is the default.
        beside = notebooks is not None and args.beside
        if notebooks is not None and not beside:
            results["notebooks"] = notebooks.finish()
            notebooks = None
        if not beside:
            announce("unit", steps["unit"][0])
        unit = Step(steps["unit"], log=scratch / "unit.log" if beside else None)
        if notebooks is not None:
            results["notebooks"] = notebooks.finish()
            notebooks = None
            announce("unit", steps["unit"][0], beside=True)
        results["unit"] = unit.finish()
    if notebooks is not None:
        results["notebooks"] = notebooks.finish()

    cpu_seconds = None if cpu_before is None else children_cpu_seconds() - cpu_before
    speed_after = measured_speed() if timed else None

    print("\n[course] summary")
    for name, (code, seconds) in results.items():
        print(f"[course]   {'passed' if code == 0 else 'FAILED'}  {name:10} {seconds:6.1f} s")
    failed = [name for name, (code, _) in results.items() if code != 0]
    print(f"[course] {'all checks passed' if not failed else 'failed: ' + ', '.join(failed)} (device {args.device})")
    steps_per_s = report_speed(speed_before, speed_after, cpu_seconds) if timed else None
    print_timing(scratch, steps_per_s)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="course.py test",
        description="Run every check: ruff, the unit tests (tests/, including the exercise checks, the harness and "
                    "the browser test) and nbval on every lesson and solution notebook. Exits non-zero on any failure.",
    )
    parser.add_argument("--device", default="cpu",
                        help="device the notebooks and tests run on: cpu (default), cuda or mps; "
                             "the stored outputs must still match")
    parser.add_argument("--only", choices=STEPS, action="append", help="run only this step (repeatable)")
    parser.add_argument("--notebook", action="append", metavar="PATH",
                        help="validate only this notebook (repeatable; relative to the course folder)")
    parser.add_argument("--beside", action="store_true",
                        help="run the unit tests beside the notebook step instead of after it (a little faster on "
                             "a 2-core machine; each notebook's seconds then include the unit tests' load)")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for the unit-test step (e.g. -k softmax)")
    args = parser.parse_args(argv)

    problem = device_problem(args.device)
    if problem:
        print(f"[course] {problem}", file=sys.stderr)
        return 2
    os.environ["TRANSFORMER_LIB_DEVICE"] = args.device
    os.environ.setdefault("PYTHONHASHSEED", "0")

    with tempfile.TemporaryDirectory(prefix="course-test-") as scratch:
        return run_steps(args, Path(scratch))
