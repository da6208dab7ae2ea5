"""The notebook step really compares outputs, under every hardware setting of its matrix.

A tiny notebook is stored with the course's own executor, a copy of it gets one stored number changed, and both are
validated once with the exact command the notebook step runs (`course_tools.testrun.notebook_command`), native and
portable settings side by side. Each test reads its own cells' verdicts from that one run: a changed stored number
fails in every setting, an output that depends on PyTorch's CPU kernels fails the portable setting, and so does a
bitwise comparison of two code paths (the last bits moved, course_tools/last_bits.py), while robust cells pass.
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

# A float32 sum of a million numbers, printed in full: vectorised kernels add in another order than portable ones.
KERNEL_DEPENDENT = ("import torch\n"
                    "x = torch.randn(1_000_003, generator=torch.Generator().manual_seed(0))\n"
                    "print(x.sum().item())")
CELLS = {
    "robust integer": "print(sum(range(10)))",
    "robust float": "import torch\nprint(f'{torch.tensor([0.1, 0.2], dtype=torch.float64).sum().item():.3f}')",
    "kernel-dependent sum": KERNEL_DEPENDENT,
    # Two code paths of one float64 product, compared bit for bit: equal on this machine, not on every BLAS.
    "two code paths": ("import torch\n"
                       "a = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))\n"
                       "print(torch.equal(a @ a, torch.mm(a, a)))"),
}
NATIVE_NAME, PORTABLE_NAME = describe(*NATIVE), describe(*PORTABLE)


def cell_id(notebook: str, name: str) -> str:
    return f"{notebook}::Cell {list(CELLS).index(name)}"


def failures_per_setting(stdout: str) -> dict[str, set[str]]:
    """The node ids under each setting of the run's "failures per hardware setting" section (course_tools/
    notebook_matrix.py), e.g. {"portable kernels, ... (...)": {"stored.ipynb::Cell 2"}}."""
    failures: dict[str, set[str]] = {NATIVE_NAME: set(), PORTABLE_NAME: set()}
    if "failures per hardware setting" not in stdout:
        return failures
    setting = None
    for line in stdout[stdout.index("failures per hardware setting"):].splitlines()[1:]:
        if line.startswith("    ") and setting is not None:
            failures[setting].add(line.strip())
        elif line.endswith(" failed"):
            setting = line.rsplit(": ", 1)[0]
    return failures


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory):
    """Store the notebook on this machine's own kernels and thread count, as a maintainer's execution does (also
    inside the test command's unit step, which computes in the portable setting), change one stored number in a
    copy, and validate both in the two settings: (completed process, failures per setting, stored notebook)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in HARDWARE_VARIABLES:
            patch.delenv(name, raising=False)
        folder = tmp_path_factory.mktemp("harness")
        stored = folder / "stored.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in CELLS.values()]), stored)
        execute_notebook(stored, steps_per_s=REFERENCE_STEPS_PER_S)  # the speed is not what this tests
        notebook = nbformat.read(stored, as_version=4)
        first = notebook.cells[0].outputs[0]
        assert first.text == "45\n"
        first.text = "46\n"
        nbformat.write(notebook, folder / "changed.ipynb")
        command, env = notebook_command([str(stored), str(folder / "changed.ipynb")], [NATIVE, PORTABLE])
        result = subprocess.run([*command, "--rootdir", str(folder)], cwd=folder, env=env, capture_output=True,
                                text=True, timeout=600)
    return result, failures_per_setting(result.stdout), nbformat.read(stored, as_version=4)


def test_a_changed_number_fails_validation_and_robust_cells_pass(harness_run):
    result, failures, _ = harness_run
    assert result.returncode != 0, result.stdout[-2000:]
    for setting in (NATIVE_NAME, PORTABLE_NAME):
        assert cell_id("changed.ipynb", "robust integer") in failures[setting], result.stdout[-2000:]
        robust = {cell_id(notebook, name) for notebook in ("stored.ipynb", "changed.ipynb")
                  for name in ("robust float", "robust integer")} - {cell_id("changed.ipynb", "robust integer")}
        assert not robust & failures[setting], f"{setting}: {robust & failures[setting]}"
    assert failures[NATIVE_NAME] == {cell_id("changed.ipynb", "robust integer")}, "stored here, the rest passes here"


def test_the_matrix_fails_an_output_that_depends_on_the_cpu_kernels(harness_run):
    environ = {name: value for name, value in os.environ.items() if name not in HARDWARE_VARIABLES}
    native_sum, portable_sum = (subprocess.run([sys.executable, "-c", KERNEL_DEPENDENT], capture_output=True, text=True,
                                               env={**environ, **variables}).stdout for variables in ({}, PORTABLE[1]))
    if native_sum == portable_sum:
        pytest.skip("this CPU's native kernels sum like the portable ones: nothing to tell apart here")
    result, failures, _ = harness_run
    dependent = cell_id("stored.ipynb", "kernel-dependent sum")
    assert dependent in failures[PORTABLE_NAME], result.stdout[-2000:]
    assert dependent not in failures[NATIVE_NAME], "stored on this machine, it passes its native setting"


def test_the_notebook_step_fails_a_stored_bitwise_comparison_of_two_code_paths(harness_run):
    result, failures, stored = harness_run
    assert stored.cells[list(CELLS).index("two code paths")].outputs[0].text == "True\n"  # one machine: alike
    two_paths = cell_id("stored.ipynb", "two code paths")
    assert two_paths in failures[PORTABLE_NAME], result.stdout[-2000:]  # the last bits moved: apart
    assert two_paths not in failures[NATIVE_NAME]
