"""The course's yardstick (``transformer_lib.speed``) for the tools: measured in a fresh process with the caller's
environment, as ``benchmarks/train_gpt.py`` runs (the reference machine's 15 steps/s were measured so), and two
measurements of one run compared.

A fresh process, because the environment a process starts with decides how its threads wait, and a variable set once
torch is loaded changes nothing: on one 2-core machine the yardstick ran 38 steps/s with OpenMP's default (active)
waiting and 20 with ``OMP_WAIT_POLICY=PASSIVE``, which the test command's native notebook setting uses. On a machine
busy elsewhere, active waiting can make it collapse (a few steps/s): a run measured so is flagged as busy, and
``tests/test_stored_times.py`` refuses outputs stored at such a speed.
"""

from __future__ import annotations

import os
import subprocess
import sys

from transformer_lib.speed import REFERENCE_STEPS_PER_S

from . import ROOT

BUSY_RATIO = 1.25  # two measurements of one run further apart than this: the machine was busy
MEASURE = "from transformer_lib.speed import machine_speed; print(machine_speed())"


def measured_speed(env: dict[str, str] | None = None) -> float:
    """Steps per second of the yardstick in a fresh Python started with ``env`` (default: this process's)."""
    result = subprocess.run([sys.executable, "-c", MEASURE], cwd=ROOT, env=env or dict(os.environ),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"measuring the yardstick failed:\n{result.stderr}")
    return float(result.stdout.split()[-1])


def mean_speed(before: float, after: float) -> float:
    """The speed a run's times are scaled with: the mean of the measurements before and after it."""
    return (before + after) / 2


def spread_too_wide(readings: list[float]) -> bool:
    """Whether the readings of one run lie further apart than ``BUSY_RATIO``: the machine's speed moved meanwhile."""
    return max(readings) > BUSY_RATIO * min(readings)


def speed_lines(before: float, after: float, when: tuple[str, str] = ("before", "after")) -> list[str]:
    """The two measurements, their mean (what times are scaled with), and a warning when they differ by more than
    ``BUSY_RATIO``."""
    lines = [f"yardstick: {before:.1f} steps/s {when[0]}, {after:.1f} {when[1]}; times at "
             f"{REFERENCE_STEPS_PER_S:g} steps/s (the reference machine) use their mean, "
             f"{mean_speed(before, after):.1f}"]
    if spread_too_wide([before, after]):
        lines.append(f"the two measurements differ by more than {BUSY_RATIO - 1:.0%}: the machine was busy, and the "
                     "times scaled to the reference are unreliable")
    return lines
