"""Every generated exercise notebook runs top to bottom unsolved, and every check says "not attempted yet"."""

import pytest
from nbclient import NotebookClient

from course_files import EXERCISES, short
from course_tools.notebook_files import read_notebook
from transformer_lib.checks._feedback import FAIL_MARK, NOT_ATTEMPTED, PASS_MARK


def _text(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


@pytest.mark.parametrize("path", EXERCISES, ids=short)
def test_unsolved_exercises_run_and_report_not_attempted(path):
    nb = read_notebook(path)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [out for out in cell.outputs if out.output_type == "error"]
        assert not errors, f"cell {index} raised {errors[0].ename}: {errors[0].evalue}"
    check_cells = [cell for cell in nb.cells if "exercise" in cell.metadata]
    assert check_cells
    for cell in check_cells:
        text = _text(cell)
        assert NOT_ATTEMPTED in text, f"{cell.metadata['exercise']['id']}: {text!r}"
        assert PASS_MARK not in text and FAIL_MARK not in text, text
