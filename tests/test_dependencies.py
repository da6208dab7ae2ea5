"""Dependency hygiene: every package is pinned exactly, used, in the right requirements file, and explained.

The learner's environment (requirements.txt) holds what the lessons and the course commands use; the tools only the
test command needs live in requirements-test.txt. The README's "Why each package" table lists exactly these pins.
"""

import re
import subprocess
import sys
from importlib.metadata import requires, version

from packaging.requirements import Requirement

from course_tools import ROOT

LEARNER = ROOT / "requirements.txt"
TEST_ONLY = ROOT / "requirements-test.txt"
SITE_ONLY = ROOT / "requirements-site.txt"  # the website builder's own environment, .venv-site
SITE_TOOLS = {"sphinx", "myst-nb", "sphinx-book-theme", "sphinx-mathjax-offline"}
TEST_TOOLS = {"pytest", "pytest-xdist", "nbval", "ruff", "playwright", "nbgrader", "peft", "scipy"}
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
    "regex": ("transformer_lib/bpe.py", r"^import regex$"),
    "pytest": ("tests/*.py", r"^import pytest$"),
    "pytest-xdist": ("course_tools/testrun.py", r'"--dist"'),
    "nbval": ("course_tools/testrun.py", r'"--nbval"'),
    "ruff": ("course_tools/testrun.py", r'"ruff", "check"'),
    "playwright": ("tests/browser/*.py", r"from playwright"),
    "nbgrader": ("tests/test_grade.py", r"^from nbgrader"),
    "peft": ("tests/test_lora.py", r'importorskip\("peft"\)'),
    "scipy": ("tests/test_confidence.py", r"^from scipy import stats$"),
    "sphinx": ("course_tools/site.py", r"from sphinx\.cmd\.build import"),
    "myst-nb": ("course_tools/site_config/conf.py", r'"myst_nb"'),
    "sphinx-book-theme": ("course_tools/site_config/conf.py", r'html_theme = "sphinx_book_theme"'),
    "sphinx-mathjax-offline": ("course_tools/site_config/conf.py", r'"sphinx-mathjax-offline"'),
}
# Pinned though the course never imports them: a pinned package's own dependencies, held at the releases made with
# it (ipywidgets' front ends) or below a release that slows every process down (jsonschema; see the README). Each
# maps to the package that requires it.
COMPANIONS = {"jupyterlab_widgets": "ipywidgets", "widgetsnbextension": "ipywidgets", "jsonschema": "nbformat"}


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
    for path in (LEARNER, TEST_ONLY, SITE_ONLY):
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        requirements = [line for line in lines if line]
        assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][\w.]*", line) for line in requirements), requirements
    assert pins(LEARNER)["torch"] == "2.13.0"


def test_test_tools_stay_out_of_the_learners_environment():
    assert set(pins(TEST_ONLY)) == TEST_TOOLS
    assert not TEST_TOOLS & set(pins(LEARNER))


def test_the_site_builder_stays_in_its_own_environment():
    assert set(pins(SITE_ONLY)) == SITE_TOOLS
    assert not SITE_TOOLS & (set(pins(LEARNER)) | set(pins(TEST_ONLY)))


def test_every_pinned_package_is_used():
    pinned = set(pins(LEARNER)) | set(pins(TEST_ONLY)) | set(pins(SITE_ONLY))
    explained = set(USED) | set(COMPANIONS)
    assert pinned == explained, f"say where these are used, or unpin them: {sorted(pinned ^ explained)}"
    for package, (pattern, usage) in USED.items():
        texts = [path.read_text(encoding="utf-8") for path in ROOT.glob(pattern)]
        assert any(re.search(usage, text, re.MULTILINE) for text in texts), f"{package}: {usage!r} not in {pattern}"


def test_the_readme_explains_exactly_the_pinned_packages():
    assert readme_packages() == set(pins(LEARNER)) | set(pins(TEST_ONLY)) | set(pins(SITE_ONLY))


def test_companions_are_required_by_their_package_and_pinned_within_its_range():
    """ipywidgets 8.1.8 needs jupyterlab_widgets ~=3.0.15 and widgetsnbextension ~=4.0.14, nbformat jsonschema >=2.6:
    the pins must satisfy the installed package's own requirement (else pip would refuse or pick other versions)."""
    learner = pins(LEARNER)
    for companion, parent in COMPANIONS.items():
        assert companion in learner and parent in learner, f"pin {companion} beside {parent} in requirements.txt"
        assert version(parent) == learner[parent], f"{parent} {version(parent)} is installed: install requirements.txt"
        wanted = [Requirement(line) for line in requires(parent) or []]
        matching = [r for r in wanted if r.name.replace("-", "_") == companion.replace("-", "_") and not r.marker]
        assert matching, f"{parent} {learner[parent]} no longer requires {companion}: unpin it"
        assert matching[0].specifier.contains(learner[companion]), (
            f"{companion}=={learner[companion]} is outside {parent}'s requirement {matching[0]}")


def test_reading_a_notebook_or_serving_jupyterlab_builds_no_iri_grammar():
    """Why jsonschema is held at 4.24.1: with 4.25 or later, a process that imports nbformat or JupyterLab's event
    validators also imports rfc3987_syntax, which builds its parsers on import (about 1.6 s of CPU each time)."""
    code = "import sys, nbformat, jupyter_events.validators; print('rfc3987_syntax' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False"], f"jsonschema {version('jsonschema')} imports rfc3987_syntax"
