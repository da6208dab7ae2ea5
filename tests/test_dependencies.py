"""Dependency hygiene: every package is pinned exactly, used, in the right requirements file, and explained.

The learner's environment (requirements.txt) holds what the lessons and the course commands use; the tools only the
test command needs live in requirements-test.txt. The README's "Why each package" table lists exactly these pins.
"""

import re

from course_tools import ROOT

LEARNER = ROOT / "requirements.txt"
TEST_ONLY = ROOT / "requirements-test.txt"
TEST_TOOLS = {"pytest", "pytest-xdist", "nbval", "ruff", "playwright", "nbgrader"}
# For each pinned package: where the course uses it (files, and a pattern found in one of them).
USED = {
    "torch": ("transformer_lib/*.py", r"^import torch$"),
    "numpy": ("notebooks/*.ipynb", r"import numpy as np"),
    "matplotlib": ("transformer_lib/views/*.py", r"import matplotlib"),
    "jupyterlab": ("course.py", r'"jupyter", "lab"'),
    "ipywidgets": ("transformer_lib/views/*.py", r"import ipywidgets"),
    "ipykernel": ("course_tools/notebook_files.py", r'"name": "python3"'),  # the kernel every notebook names
    "nbformat": ("course_tools/*.py", r"^import nbformat$"),
    "nbclient": ("course_tools/*.py", r"^from nbclient import"),
    "jupyter_client": ("course_tools/grading/kernel.py", r"^from jupyter_client"),
    "tqdm": ("transformer_lib/training.py", r"from tqdm"),
    "transformers": ("notebooks/*.ipynb", r"import transformers"),
    "tokenizers": ("notebooks/*.ipynb", r"from tokenizers import"),
    "pytest": ("tests/*.py", r"^import pytest$"),
    "pytest-xdist": ("course_tools/testrun.py", r'"--dist"'),
    "nbval": ("course_tools/testrun.py", r'"--nbval"'),
    "ruff": ("course_tools/testrun.py", r'"ruff", "check"'),
    "playwright": ("tests/browser/*.py", r"from playwright"),
    "nbgrader": ("tests/test_grade.py", r"^from nbgrader"),
}


def pins(path) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return dict(line.split("==") for line in lines if line)


def readme_packages() -> set[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Why each package"):]
    section = section[: section.index("\n## ", 1)]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")]
    return {row.strip("`") for row in rows[1:]}  # the first row is the header


def test_every_requirement_is_pinned_exactly():
    for path in (LEARNER, TEST_ONLY):
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        requirements = [line for line in lines if line]
        assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][\w.]*", line) for line in requirements), requirements
    assert pins(LEARNER)["torch"] == "2.13.0"


def test_test_tools_stay_out_of_the_learners_environment():
    assert set(pins(TEST_ONLY)) == TEST_TOOLS
    assert not TEST_TOOLS & set(pins(LEARNER))


def test_every_pinned_package_is_used():
    pinned = set(pins(LEARNER)) | set(pins(TEST_ONLY))
    assert pinned == set(USED), f"say where these are used, or unpin them: {sorted(pinned ^ set(USED))}"
    for package, (pattern, usage) in USED.items():
        texts = [path.read_text(encoding="utf-8") for path in ROOT.glob(pattern)]
        assert any(re.search(usage, text, re.MULTILINE) for text in texts), f"{package}: {usage!r} not in {pattern}"


def test_the_readme_explains_exactly_the_pinned_packages():
    assert readme_packages() == set(pins(LEARNER)) | set(pins(TEST_ONLY))
