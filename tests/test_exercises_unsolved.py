"""Every generated exercise notebook runs top to bottom unsolved, and every check says "not attempted yet".

The notebooks run one after another in one kernel, each after ``%reset -f`` (an empty namespace: a notebook gets no
name an earlier one defined), so the kernel start and the imports of torch and the course library are paid once
rather than once per notebook."""

import nbformat
import pytest
from nbclient import NotebookClient

from course_files import EXERCISES, short
from course_tools.notebook_files import read_notebook
from transformer_lib.checks._feedback import FAIL_MARK, NOT_ATTEMPTED, PASS_MARK


def _text(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


@pytest.fixture(scope="module")
def executed() -> dict:
    """Each exercise notebook's cells, executed unsolved: path -> its code cells with their outputs."""
    combined, owners = nbformat.v4.new_notebook(), []
    for path in EXERCISES:
        cells = [nbformat.v4.new_code_cell("%reset -f"), *read_notebook(path).cells]
        combined.cells.extend(cells)
        owners.extend([path] * len(cells))
    folders = {path.parent for path in EXERCISES}
    assert len(folders) == 1  # one working directory serves them all
    NotebookClient(combined, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(folders.pop())}}).execute()
    by_path = {path: [] for path in EXERCISES}
    for owner, cell in zip(owners, combined.cells, strict=True):
        by_path[owner].append(cell)
    return by_path


@pytest.mark.parametrize("path", EXERCISES, ids=short)
def test_unsolved_exercises_run_and_report_not_attempted(path, executed):
    cells = executed[path][1:]  # after the reset
    for index, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        errors = [out for out in cell.outputs if out.output_type == "error"]
        assert not errors, f"cell {index} raised {errors[0].ename}: {errors[0].evalue}"
    check_cells = [cell for cell in cells if "exercise" in cell.metadata]
    assert check_cells
    for cell in check_cells:
        text = _text(cell)
        assert NOT_ATTEMPTED in text, f"{cell.metadata['exercise']['id']}: {text!r}"
        assert PASS_MARK not in text and FAIL_MARK not in text, text
