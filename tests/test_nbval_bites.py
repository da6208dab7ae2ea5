"""The notebook validation really compares outputs: one changed number in a stored output makes it fail."""

import re
import shutil
import subprocess
import sys

import nbformat

from course_tools import NOTEBOOKS_DIR

LESSON = NOTEBOOKS_DIR / "01_similarity.ipynb"


def _run_nbval(path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider", "-q",
               "--rootdir", str(path.parent), str(path)]
    return subprocess.run(command, cwd=path.parent, capture_output=True, text=True, timeout=600)


def _change_one_stored_number(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type != "code" or "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        for out in cell.outputs:
            if out.output_type == "stream" and re.search(r"\d", out.text):
                match = re.search(r"\d", out.text)
                digit = match.group()
                new_digit = str((int(digit) + 1) % 10)
                out.text = out.text[: match.start()] + new_digit + out.text[match.end():]
                return f"{digit} -> {new_digit} in {out.text[:60]!r}"
    raise AssertionError("no compared stream output with a number found")


def test_a_changed_number_fails_validation(tmp_path):
    untouched = tmp_path / "untouched" / LESSON.name
    changed = tmp_path / "changed" / LESSON.name
    for target in (untouched, changed):
        target.parent.mkdir()
        shutil.copy(LESSON, target)
    nb = nbformat.read(changed, as_version=4)
    change = _change_one_stored_number(nb)
    nbformat.write(nb, changed)

    assert _run_nbval(untouched).returncode == 0, "the committed lesson must pass as it is"
    result = _run_nbval(changed)
    assert result.returncode != 0, f"nbval did not notice the change ({change})"
    assert "1 failed" in result.stdout, result.stdout[-2000:]
