"""The notebook step really compares outputs, under every hardware setting of its matrix.

Each test stores the outputs of a tiny notebook with the course's own executor, then validates it with the exact
command the notebook step runs (`course_tools.testrun.notebook_command`): a changed stored number fails, and so does
an output that depends on PyTorch's CPU kernels.
"""

import os
import subprocess
import sys

import nbformat
import pytest

from course_tools.execute import execute_notebook
from course_tools.notebook_matrix import describe
from course_tools.testrun import HARDWARE_VARIABLES, NATIVE, PORTABLE, notebook_command
from transformer_lib import REFERENCE_STEPS_PER_S

ROBUST = ["print(sum(range(10)))",
          "import torch\nprint(f'{torch.tensor([0.1, 0.2], dtype=torch.float64).sum().item():.3f}')"]
# A float32 sum of a million numbers, printed in full: vectorised kernels add in another order than portable ones.
KERNEL_DEPENDENT = ["import torch\n"
                    "x = torch.randn(1_000_003, generator=torch.Generator().manual_seed(0))\n"
                    "print(x.sum().item())"]


@pytest.fixture(autouse=True)
def this_machines_own_setting(monkeypatch):
    """Every run here starts in this machine's own kernels and thread count, as a maintainer's execution does, also
    inside the test command's unit step (which computes in the portable setting, where the native and portable sums
    would agree and the kernel test would have nothing to tell apart): each test names the settings it compares."""
    for name in HARDWARE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def stored_notebook(folder, sources: list[str]):
    """A notebook with ``sources`` as code cells and the outputs of one run on this machine's native kernels."""
    folder.mkdir()
    path = folder / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]), path)
    execute_notebook(path, steps_per_s=REFERENCE_STEPS_PER_S)  # the speed is not what this tests
    return path


def validate(path, matrix) -> subprocess.CompletedProcess:
    command, env = notebook_command([str(path)], matrix)
    return subprocess.run([*command, "--rootdir", str(path.parent)], cwd=path.parent, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_changed_number_fails_validation(tmp_path):
    path = stored_notebook(tmp_path / "robust", ROBUST)
    assert validate(path, [NATIVE, PORTABLE]).returncode == 0, "a robust notebook passes every setting"

    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0].outputs[0]
    assert first.text == "45\n"
    first.text = "46\n"
    nbformat.write(nb, path)
    result = validate(path, [NATIVE])
    assert result.returncode != 0 and "1 failed" in result.stdout, result.stdout[-2000:]


def test_the_matrix_fails_an_output_that_depends_on_the_cpu_kernels(tmp_path):
    native_sum = subprocess.run([sys.executable, "-c", KERNEL_DEPENDENT[0]], capture_output=True, text=True).stdout
    portable_sum = subprocess.run([sys.executable, "-c", KERNEL_DEPENDENT[0]], capture_output=True, text=True,
                                  env={**os.environ, **PORTABLE[1]}).stdout
    if native_sum == portable_sum:
        pytest.skip("this CPU's native kernels sum like the portable ones: nothing to tell apart here")
    path = stored_notebook(tmp_path / "dependent", KERNEL_DEPENDENT)
    assert validate(path, [NATIVE]).returncode == 0, "stored on this machine, it passes its native setting"

    result = validate(path, [NATIVE, PORTABLE])
    assert result.returncode != 0, result.stdout[-2000:]
    summary = result.stdout[result.stdout.index("failures per hardware setting"):]
    assert f"{describe(*PORTABLE)}: 1 failed" in summary
    assert "native kernels" not in summary
