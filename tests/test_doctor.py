"""The device checks pass on the CPU and catch a faulty device; `course.py doctor` reports versions, the CPU, its speed
on the yardstick and every check, gives advice and exits non-zero when a device fails."""

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from course_tools import ROOT, doctor
from transformer_lib import DeviceTarget, check_device
from transformer_lib.device import DEVICE_ENV_VAR
from transformer_lib.device_check import CHECKS, QUICK_CHECKS


class OffByOneThousandth(DeviceTarget):
    """A device whose results come back 1e-3 too large (about what a half-precision kernel gets wrong)."""

    def fetch(self, x: torch.Tensor) -> torch.Tensor:
        return super().fetch(x) + 1e-3


class ReturnsNaN(DeviceTarget):
    """A device whose results come back as NaN, as MPS training steps have been seen to."""

    def fetch(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(super().fetch(x), float("nan"))


class FakeMPS(OffByOneThousandth):
    """Reports itself as Apple's MPS, computes on the CPU, and returns results 1e-3 off."""

    def __init__(self):
        super().__init__("mps", name="mps (simulated, faulty)")

    def send(self, x):
        return x.to("cpu")


@pytest.fixture(autouse=True)
def yardstick_of_30_steps_per_s(monkeypatch):
    """The doctor's runs here report a machine twice the reference's speed (the yardstick is tested in test_speed)."""
    monkeypatch.setattr(doctor, "machine_speed", lambda: 30.0)


def test_every_check_passes_on_the_cpu_with_a_wide_margin():
    results = check_device("cpu")
    assert [result.name for result in results] == list(CHECKS)
    for result in results:
        assert result.passed and result.note == "", str(result)
        assert result.max_abs_error * 20 < result.tolerance, f"less than a 20-fold margin: {result}"


def test_quick_runs_the_subset_and_leaves_the_global_random_state_alone():
    before = torch.get_rng_state()
    results = check_device(torch.device("cpu"), quick=True)
    assert torch.equal(torch.get_rng_state(), before)
    assert [result.name for result in results] == list(QUICK_CHECKS)
    assert all(result.passed for result in results)


def test_a_device_with_wrong_results_fails_every_check():
    results = check_device(OffByOneThousandth("cpu", name="off by 1e-3"))
    for result in results:
        assert not result.passed
        assert 0.9e-3 < result.max_abs_error < 1.1e-3
        assert result.note.startswith("largest error in the ")
    assert str(results[0]).startswith("FAIL  attention, causal mask")
    assert "error  1.0e-03  tolerance 1e-04" in str(results[0])


def test_a_device_returning_nan_fails_every_check():
    for result in check_device(ReturnsNaN("cpu"), quick=True):
        assert not result.passed
        assert str(result).endswith("error      nan  tolerance 1e-04  (NaN or inf in the device's results)")


def test_a_device_that_raises_is_a_failed_check():
    class Unsupported(DeviceTarget):
        def send(self, x):
            raise NotImplementedError("operator not implemented for this device")

    (result, *_) = check_device(Unsupported("cpu"), quick=True)
    assert not result.passed
    assert result.note == "raised NotImplementedError: operator not implemented for this device"


def test_the_doctor_reports_a_faulty_device_with_advice_and_fails(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "available_targets", lambda: [DeviceTarget("cpu"), FakeMPS()])
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    cpu_part, mps_part = out.split("  mps (simulated, faulty)\n")
    assert cpu_part.count("    PASS  ") == len(CHECKS) and "FAIL" not in cpu_part
    assert "    FAIL  attention, causal mask             error  1.0e-03  tolerance 1e-04" in mps_part
    assert mps_part.count("    FAIL  ") == len(CHECKS)
    assert f"set {DEVICE_ENV_VAR}=cpu" in mps_part
    assert f"`{DEVICE_ENV_VAR}=cpu python3 course.py lab`" in mps_part
    assert "Apple's MPS backend has known bugs that give wrong results or NaN" in mps_part
    assert out.rstrip().endswith("[course] doctor: something failed (see above)")


def test_a_healthy_run_prints_every_check_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "available_targets", lambda: [DeviceTarget("cpu")])
    monkeypatch.setenv(DEVICE_ENV_VAR, "cpu")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    for name, (_, tolerance) in CHECKS.items():
        line = re.search(rf"^    PASS  {re.escape(name)} +error +(\S+)  tolerance (\S+)$", out, re.MULTILINE)
        assert line, f"no PASS line for {name!r} in:\n{out}"
        assert float(line[1]) < tolerance and float(line[2]) == tolerance
    assert f"torch        {torch.__version__}\n" in out
    assert f"cpu kernels  {torch.backends.cpu.get_cpu_capability()} " in out
    assert f"threads      {torch.get_num_threads()} " in out
    assert ("speed        30.0 steps/s of the GPT benchmark's model (the reference machine: 15; times in the README "
            "and lessons are stated at 15)\n"
            "             a lesson that takes 45 s at the reference takes about 22 s here\n"
            "             30.0 steps/s on one thread, as the lessons train: the other threads add 1.00x\n") in out
    assert "  OMP_NUM_THREADS        2\n" in out and f"  {DEVICE_ENV_VAR} cpu\n" in out
    assert "lessons use  cpu " in out
    assert out.rstrip().endswith("[course] doctor: every device check passed")


def test_a_device_variable_the_lessons_cannot_use_fails(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "available_targets", lambda: [])
    monkeypatch.setenv(DEVICE_ENV_VAR, "gpu")
    assert doctor.main([]) == 1
    assert "lessons use  nothing: TRANSFORMER_LIB_DEVICE='gpu' is not a device name" in capsys.readouterr().out


def test_the_speed_says_what_a_lessons_budget_takes_here():
    [_, slow, one_thread] = doctor.speed_lines(7.5, 5.0)  # half the reference's speed; 5 on one thread
    assert slow.endswith("a lesson that takes 45 s at the reference takes about 90 s here")
    assert one_thread.endswith("5.0 steps/s on one thread, as the lessons train: the other threads add 1.50x")


def test_packages_that_differ_or_are_missing_are_reported(monkeypatch, tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# a comment\ntorch==2.13.0\nnumpy==2.4.6  # why\n\ntqdm==4.70.1\n")
    pins = doctor.pinned_versions(requirements)
    assert pins == {"torch": "2.13.0", "numpy": "2.4.6", "tqdm": "4.70.1"}
    installed = {"torch": "2.13.0+cpu", "numpy": "2.4.5"}
    monkeypatch.setattr(doctor, "installed_version", installed.get)
    assert doctor.package_lines(pins) == [
        ("OK", "OK       torch                2.13.0+cpu"),
        ("differs", "differs  numpy                2.4.5 (pinned 2.4.6)"),
        ("missing", "missing  tqdm                 not installed (pinned 4.70.1)"),
    ]


def test_every_pin_of_requirements_txt_is_compared():
    pins = doctor.pinned_versions()
    assert pins["torch"] == "2.13.0" and "transformers" in pins
    assert doctor.installed_version("no-such-package-for-the-doctor") is None


def test_cpu_model_on_linux_reads_proc_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338\n\n"
                   "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338\n")
    assert doctor.cpu_model("Linux", x86) == "Intel(R) Xeon(R) Gold 6338 (GenuineIntel)"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\n\n"
                   "Model\t\t: Raspberry Pi 4 Model B Rev 1.4\n")
    assert doctor.cpu_model("Linux", arm) == "Raspberry Pi 4 Model B Rev 1.4 (0x41)"


def test_cpu_model_on_macos_asks_sysctl(monkeypatch):
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return SimpleNamespace(stdout="Apple M2 Pro\n")

    monkeypatch.setattr(doctor.subprocess, "run", fake_run)
    assert doctor.cpu_model("Darwin") == "Apple M2 Pro"
    assert calls == [["sysctl", "-n", "machdep.cpu.brand_string"]]


def test_cpu_model_on_windows_uses_platform_processor(monkeypatch):
    monkeypatch.setattr(doctor.platform, "processor", lambda: "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel")
    assert doctor.cpu_model("Windows") == "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel"


def test_blas_is_read_from_torch_config():
    mkl_build = ("  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605\n"
                 "  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, LAPACK_INFO=mkl\n")
    assert doctor.blas_description(mkl_build, mkl=True) == "mkl (MKL 2024.2)"
    assert doctor.blas_description("  - Build settings: BLAS_INFO=accelerate, X=1\n", mkl=False) == \
        "accelerate (no MKL)"
    assert doctor.blas_description("", mkl=False) == "unknown (no MKL)"


def test_course_py_lists_the_doctor():
    result = subprocess.run([sys.executable, str(ROOT / "course.py"), "--help"], capture_output=True, text=True,
                            check=True)
    text = " ".join(result.stdout.split())  # argparse wraps the help
    assert "doctor show versions and hardware; check each device computes right" in text
