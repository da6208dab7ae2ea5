"""``python3 course.py doctor``: what this machine runs the lessons with, and whether each device computes right.

Run it when a lesson prints a number that differs from the one stored in the notebook, or before a class. It prints
the system, Python, torch and every package pinned in requirements.txt against its pin, the CPU, PyTorch's CPU
kernels, BLAS and thread count, its speed on the course's yardstick (the GPT benchmark's model; times in the README
and lessons are stated at the reference machine's speed), the environment variables that change results, and, for
every device available (the CPU, CUDA, Apple's MPS), the checks of ``transformer_lib.device_check``: each building
block in float32 on the device against float64 on the CPU. Exit status 0 when every check passes, 1 when one fails
(with what to do) or when TRANSFORMER_LIB_DEVICE names a device the lessons cannot use; a package that differs from
its pin is flagged but does not fail.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import torch

from transformer_lib.device import DEVICE_ENV_VAR, get_device, single_thread
from transformer_lib.device_check import DeviceCheckResult, DeviceTarget, check_device
from transformer_lib.speed import REFERENCE_STEPS_PER_S, machine_speed

from . import LESSON_BUDGET_S, ROOT

REQUIREMENTS = ROOT / "requirements.txt"
# Variables that change which kernels run, on how many threads, or on which device: each can change the last digits.
RESULT_VARIABLES = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", DEVICE_ENV_VAR)
MPS_NOTE = ("Apple's MPS backend has known bugs that give wrong results or NaN, in training especially: "
            "run the lessons on the CPU.")


def pinned_versions(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """``name -> version`` for every ``name==version`` line of a requirements file (comments skipped)."""
    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        name, separator, version = line.split("#")[0].strip().partition("==")
        if separator:
            pins[name.strip()] = version.strip()
    return pins


def installed_version(name: str) -> str | None:
    """The installed version of a distribution, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_lines(pins: dict[str, str]) -> list[tuple[str, str]]:
    """``(status, line)`` per pinned package; status is ``OK``, ``differs`` or ``missing``. A local version label
    (torch's ``+cpu``) does not count as a difference."""
    lines = []
    for name, pin in pins.items():
        installed = installed_version(name)
        if installed is None:
            lines.append(("missing", f"{'missing':<8} {name:<20} not installed (pinned {pin})"))
        elif installed.split("+")[0] != pin:
            lines.append(("differs", f"{'differs':<8} {name:<20} {installed} (pinned {pin})"))
        else:
            lines.append(("OK", f"{'OK':<8} {name:<20} {installed}"))
    return lines


def cpu_model(system: str | None = None, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's vendor and model: /proc/cpuinfo on Linux, ``sysctl`` on macOS, ``platform.processor()`` elsewhere
    (on Windows it names the family and vendor, e.g. ``Intel64 Family 6 Model 158 Stepping 10, GenuineIntel``)."""
    system = system or platform.system()
    if system == "Linux" and cpuinfo.exists():
        fields: dict[str, str] = {}
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        model = fields.get("model name") or fields.get("Hardware") or fields.get("Model")  # x86, then ARM boards
        vendor = fields.get("vendor_id") or fields.get("CPU implementer")
        if model:
            return f"{model} ({vendor})" if vendor else model
    if system == "Darwin":
        try:
            brand = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                   timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            brand = ""
        if brand:
            return brand
    return platform.processor() or platform.machine() or "unknown"


def blas_description(config: str | None = None, mkl: bool | None = None) -> str:
    """The BLAS torch was built with (``BLAS_INFO`` of ``torch.__config__.show()``) and whether MKL is available."""
    config = torch.__config__.show() if config is None else config
    mkl = torch.backends.mkl.is_available() if mkl is None else mkl
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    mkl_version = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    mkl_text = f"MKL {mkl_version.group(1)}" if mkl and mkl_version else "MKL available" if mkl else "no MKL"
    return f"{blas.group(1) if blas else 'unknown'} ({mkl_text})"


def available_targets() -> list[DeviceTarget]:
    """The CPU, then CUDA (with the GPU's name) and Apple's MPS where torch can use them."""
    targets = [DeviceTarget("cpu")]
    if torch.cuda.is_available():
        targets.append(DeviceTarget("cuda", name=f"cuda ({torch.cuda.get_device_name(0)})"))
    if torch.backends.mps.is_available():
        targets.append(DeviceTarget("mps", name="mps (Apple silicon)"))
    return targets


def advice(target: DeviceTarget) -> list[str]:
    """What to do when ``target`` fails a check."""
    if target.device.type == "cpu":
        return ["What to do: the CPU itself computes wrongly. Check the package versions above (`python3 course.py "
                "lab` reinstalls requirements.txt into .venv), try `ATEN_CPU_CAPABILITY=default`, and report this "
                "output as an issue if it persists."]
    lines = [f"What to do: run the lessons on the CPU: set {DEVICE_ENV_VAR}=cpu before starting JupyterLab "
             f"(macOS, Linux: `{DEVICE_ENV_VAR}=cpu python3 course.py lab`; Windows cmd: "
             f"`set {DEVICE_ENV_VAR}=cpu`, then `python course.py lab`)."]
    if target.device.type == "mps":
        lines.append(MPS_NOTE)
    return lines


def speed_lines(steps_per_s: float, one_thread: float) -> list[str]:
    """The machine's speed on the yardstick, what a lesson's budget at the reference machine means here, and the
    speed on one thread, as the lessons train (README, "How fast is your machine?")."""
    here = LESSON_BUDGET_S * REFERENCE_STEPS_PER_S / steps_per_s
    reference = f"{REFERENCE_STEPS_PER_S:g}"
    return [f"speed        {steps_per_s:.1f} steps/s of the GPT benchmark's model (the reference machine: {reference}; "
            f"times in the README and lessons are stated at {reference})",
            f"             a lesson that takes {LESSON_BUDGET_S:g} s at the reference takes about {here:.0f} s here",
            f"             {one_thread:.1f} steps/s on one thread, as the lessons train: the other threads add "
            f"{steps_per_s / one_thread:.2f}x"]


def report_device(target: DeviceTarget, results: Iterable[DeviceCheckResult]) -> bool:
    """Print one device's checks, one line each, and the advice when one failed; True when all passed."""
    results = list(results)
    print(f"  {target.name}")
    for result in results:
        print(f"    {result}")
    passed = all(result.passed for result in results)
    if not passed:
        for line in advice(target):
            print(f"    {line}")
    return passed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="course.py doctor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    print("[course] doctor: what this machine runs the lessons with")
    print(f"system       {platform.system()} {platform.release()} ({platform.machine()})")
    print(f"python       {platform.python_version()} ({sys.executable})")
    print(f"torch        {torch.__version__}")
    print(f"cpu          {cpu_model()}")
    print(f"cpu kernels  {torch.backends.cpu.get_cpu_capability()} (torch.backends.cpu.get_cpu_capability())")
    print(f"blas         {blas_description()}")
    print(f"threads      {torch.get_num_threads()} (torch.get_num_threads(); {os.cpu_count()} logical cores)")
    with single_thread():
        one_thread = machine_speed()
    for line in speed_lines(machine_speed(), one_thread):
        print(line)
    print("environment variables that change results:")
    for name in RESULT_VARIABLES:
        print(f"  {name:<22} {os.environ.get(name, '(unset)')}")
    print(f"packages pinned in {REQUIREMENTS.name}:")
    packages = package_lines(pinned_versions())
    for _, line in packages:
        print(f"  {line}")
    if any(status != "OK" for status, _ in packages):
        print("  Versions that differ from the pins can change the lessons' numbers: `python3 course.py lab` "
              "installs the pinned ones into .venv.")
    try:
        print(f"lessons use  {get_device()} (transformer_lib.get_device())")
        chosen = True
    except (RuntimeError, ValueError) as error:
        print(f"lessons use  nothing: {error}")
        chosen = False
    print("device checks: float32 on the device against float64 on the CPU, the same inputs")
    passed = [report_device(target, check_device(target)) for target in available_targets()]
    if chosen and all(passed):
        print("[course] doctor: every device check passed")
        return 0
    print("[course] doctor: something failed (see above)")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
