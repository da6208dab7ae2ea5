"""Committed notebooks hold the outputs of one clean run and nothing noisy; lessons have the agreed shape."""

import re

import pytest

from course_files import EXECUTED, EXERCISES, LESSONS, short
from course_tools.notebook_files import KEPT_CELL_METADATA, KERNELSPEC, RUN_KEY, read_notebook


def test_the_course_has_lessons_and_solutions():
    assert [p.name for p in LESSONS][:2] == ["00_start_here.ipynb", "01_similarity.ipynb"]
    assert EXECUTED, "no notebooks found"


@pytest.mark.parametrize("path", EXECUTED, ids=short)
def test_outputs_come_from_one_clean_run(path):
    nb = read_notebook(path)
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code_cells]
    assert counts == list(range(1, len(code_cells) + 1)), (
        f"execution counts {counts}: run `python3 course.py execute {short(path)}` to store one clean run"
    )
    for index, cell in enumerate(code_cells, start=1):
        errors = [out for out in cell.outputs if out.output_type == "error"]
        assert not errors, f"code cell {index} stored an error: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    assert any(cell.outputs for cell in code_cells), "no outputs stored: nbval would compare nothing"


@pytest.mark.parametrize("path", EXECUTED + EXERCISES, ids=short)
def test_no_noisy_metadata(path):
    nb = read_notebook(path)
    assert "widgets" not in nb.metadata, "widget state stored in the notebook"
    metadata = dict(nb.metadata)
    run = metadata.pop(RUN_KEY, None)  # the stored run's speed and seconds (tests/test_stored_times.py)
    assert metadata == {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    if path in EXERCISES:
        assert run is None, "an exercise notebook stores no outputs, so no run"
    else:
        assert run is None or set(run) == {"steps_per_s", "seconds"}, f"unexpected run record {run}"
    for index, cell in enumerate(nb.cells):
        extra = set(cell.metadata) - set(KEPT_CELL_METADATA)
        assert not extra, f"cell {index} carries metadata {sorted(extra)}"


@pytest.mark.parametrize("path", EXECUTED, ids=short)
def test_ignored_outputs_say_why(path):
    """A cell whose output nbval ignores must say why in a comment."""
    nb = read_notebook(path)
    for index, cell in enumerate(nb.cells):
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            assert re.search(r"^\s*#", cell.source, re.MULTILINE), f"cell {index} ignores its output without a comment"


@pytest.mark.parametrize("path", LESSONS, ids=short)
def test_lesson_opens_with_goals_and_closes_with_summary(path):
    nb = read_notebook(path)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and "what you will learn" in first.source.lower()
    tail = "\n".join(cell.source for cell in nb.cells[-3:] if cell.cell_type == "markdown").lower()
    assert "summary" in tail, "a lesson ends with a summary"
    stem = path.stem
    if stem != "00_start_here":
        assert f"exercises/{stem}_exercises.ipynb" in tail, "a lesson ends by pointing to its exercises"


MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", EXECUTED + EXERCISES, ids=short)
def test_relative_links_open_a_file(path):
    """A link in a notebook's text points at a file of the course (a web address is not followed)."""
    nb = read_notebook(path)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for target in MARKDOWN_LINK.findall(cell.source):
            if re.match(r"[a-z]+:", target):
                continue
            assert (path.parent / target).exists(), f"cell {index} links to {target}, which does not exist"


SOURCE_DOCUMENT_NAME = re.compile(r"\bseeds?\s+(documents?|notes|slides|0\d\d)\b|\bthe seed adds\b", re.IGNORECASE)


@pytest.mark.parametrize("path", EXECUTED + EXERCISES, ids=short)
def test_learners_never_see_the_source_documents_names(path):
    """Learners never see the course's source documents by name: text says "the lecture notes" instead."""
    nb = read_notebook(path)
    for index, cell in enumerate(nb.cells):
        named = SOURCE_DOCUMENT_NAME.search(cell.source)
        assert not named, f"cell {index} says {named.group(0)!r}: call them 'the lecture notes'"
