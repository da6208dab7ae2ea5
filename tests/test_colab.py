"""Colab: every lesson, solution and exercise notebook carries the link and setup cell `course.py colab-links` writes,
and the setup cell, run in a simulated Colab, installs the course library without touching PyTorch (and elsewhere
does nothing). Colab itself cannot be reached from the tests."""

import copy
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import nbformat
import pytest

from course_files import EXERCISES, LESSONS, SOLUTIONS, short
from course_tools import REPOSITORY_BRANCH, REPOSITORY_URL, ROOT
from course_tools.colab import (
    colab_url,
    for_exercises,
    is_setup_cell,
    link_line,
    relative_path,
    repository_slug,
    setup_source,
    with_colab_cells,
)
from course_tools.exercises import render_exercise
from course_tools.notebook_files import notebook_text, read_notebook


def colab_mismatch(nb: nbformat.NotebookNode, relative: str) -> str | None:
    """Why ``nb`` lacks the Colab link or setup cell the command writes for ``relative``; None when it has them."""
    title, *rest = nb.cells[0].source.split("\n")
    if rest[:2] != ["", link_line(relative)]:
        return f"the line under the title should be {link_line(relative)}"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if not code or code[0].source != setup_source(relative) or nb.cells[1] is not code[0]:
        return "the second cell, the first code cell, should be the Colab setup cell"
    if sum(is_setup_cell(cell) for cell in nb.cells) != 1:
        return "one Colab setup cell only"
    if notebook_text(with_colab_cells(copy.deepcopy(nb), relative)) != notebook_text(nb):
        return "`python3 course.py colab-links` would change this notebook"
    return None


@pytest.mark.parametrize("path", LESSONS + SOLUTIONS + EXERCISES, ids=short)
def test_every_notebook_carries_its_colab_link_and_setup_cell(path):
    assert colab_mismatch(read_notebook(path), relative_path(path)) is None


def test_the_check_catches_a_wrong_link_and_a_missing_cell():
    path = LESSONS[1]
    nb = read_notebook(path)
    wrong = copy.deepcopy(nb)
    wrong.cells[0].source = wrong.cells[0].source.replace(f"/blob/{REPOSITORY_BRANCH}/", "/blob/other-branch/")
    assert "the line under the title" in colab_mismatch(wrong, relative_path(path))
    elsewhere = copy.deepcopy(nb)
    assert "the line under the title" in colab_mismatch(elsewhere, "notebooks/99_other.ipynb")
    no_cell = copy.deepcopy(nb)
    del no_cell.cells[1]
    assert "setup cell" in colab_mismatch(no_cell, relative_path(path))


def test_links_are_made_from_the_one_repository_setting():
    owner_name = REPOSITORY_URL.removeprefix("https://github.com/")
    assert repository_slug() == owner_name
    assert colab_url("notebooks/01_similarity.ipynb") == (
        f"https://colab.research.google.com/github/{owner_name}/blob/{REPOSITORY_BRANCH}/notebooks/01_similarity.ipynb")
    assert REPOSITORY_URL in setup_source("exercises/01_similarity_exercises.ipynb")
    with pytest.raises(ValueError, match="not a GitHub repository address"):
        repository_slug("https://gitlab.com/someone")


def test_the_command_is_idempotent_and_keeps_outputs():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 99 · Demo\n\n**What you will learn**"),
        nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")]),
    ])
    once = with_colab_cells(copy.deepcopy(nb), "notebooks/99_demo.ipynb")
    assert once.cells[0].source == f"# 99 · Demo\n\n{link_line('notebooks/99_demo.ipynb')}\n\n**What you will learn**"
    assert once.cells[1].source == setup_source("notebooks/99_demo.ipynb") and once.cells[2] == nb.cells[1]
    twice = with_colab_cells(copy.deepcopy(once), "notebooks/99_demo.ipynb")
    assert notebook_text(twice) == notebook_text(once)
    moved = with_colab_cells(copy.deepcopy(once), "notebooks/98_moved.ipynb")
    assert len(moved.cells) == 3 and colab_mismatch(moved, "notebooks/98_moved.ipynb") is None


def test_exercises_are_generated_with_their_own_link():
    solution = read_notebook(SOLUTIONS[0])
    exercise = nbformat.reads(render_exercise(solution, name=SOLUTIONS[0].name), as_version=4)
    assert colab_mismatch(exercise, f"exercises/{SOLUTIONS[0].name}") is None
    plain = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# no link")])
    assert for_exercises(copy.deepcopy(plain)) == plain  # a notebook without a link is left alone


# --- the setup cell, run in a simulated Colab

RUN_CELL = textwrap.dedent("""
    import os, sys
    if sys.argv[2] == "colab":
        import google.colab  # Colab's kernel has imported it before any cell runs
    from IPython.core.interactiveshell import InteractiveShell
    InteractiveShell.instance().run_cell(sys.argv[1]).raise_error()
    print("cwd:", os.getcwd())
    import torch
    print("torch:", torch.__file__)
    import transformer_lib, transformer_lib.checks, transformer_lib.views.widget
    print("transformer_lib:", transformer_lib.__file__)
""")


@pytest.fixture
def colab(tmp_path):
    """A stand-in for Colab: a fresh Python environment that sees this one's packages (PyTorch, IPython, pip) but not
    the course library, a fake ``google.colab`` module, and git told to clone the repository's address from a local
    copy of this checkout (no network)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    remote = tmp_path / "remote"  # the repository as GitHub would serve it: this checkout's course packages
    remote.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", remote)
    for folder in ("transformer_lib", "course_tools", "benchmarks"):
        shutil.copytree(ROOT / folder, remote / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (remote / "notebooks").mkdir()
    (remote / "notebooks" / "README.md").write_text("the lessons' folder\n")
    home = tmp_path / "home"
    home.mkdir()
    base_env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}
    for command in (["init", "-q", "-b", REPOSITORY_BRANCH], ["add", "-A"],
                    ["-c", "user.name=test", "-c", "user.email=test@example.org", "commit", "-q", "-m", "course"]):
        subprocess.run(["git", *command], cwd=remote, env=base_env, check=True, capture_output=True)

    venv = tmp_path / "colab-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # Only a path: the .pth files of this environment (its editable course install among them) are not run there.
    (Path(site) / "preinstalled.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    fake = tmp_path / "fake-colab"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text('"""Stands in for Colab\'s module in the tests."""\n')
    env = {
        **base_env,
        "PYTHONPATH": str(fake),
        # git clones the repository's address from the local copy.
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{remote.as_uri()}.insteadOf",
        "GIT_CONFIG_VALUE_0": REPOSITORY_URL,
        # pip: no index, no configuration files; the build uses setuptools from the environment (pip reads this
        # variable inverted: 0 turns build isolation off, pypa/pip#5735).
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return {"python": python, "site": site, "home": home, "cwd": tmp_path, "env": env}


def run_cell(colab, source: str, on_colab: bool) -> subprocess.CompletedProcess:
    return subprocess.run([colab["python"], "-c", RUN_CELL, source, "colab" if on_colab else "elsewhere"],
                          cwd=colab["cwd"], env=colab["env"], capture_output=True, text=True, timeout=120)


def test_on_colab_the_setup_cell_installs_the_library_and_leaves_torch_alone(colab):
    import torch

    relative = relative_path(LESSONS[1])
    result = run_cell(colab, setup_source(relative), on_colab=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    clone = colab["home"] / REPOSITORY_URL.rsplit("/", 1)[1]
    assert f"cwd: {clone / 'notebooks'}" in result.stdout  # a lesson's folder: its ../benchmarks path works
    assert (clone / "benchmarks" / "attention_memory.py").exists()
    assert f"transformer_lib: {os.path.join(colab['site'], 'transformer_lib', '__init__.py')}" in result.stdout
    assert f"torch: {torch.__file__}" in result.stdout  # the environment's own PyTorch
    installed = sorted(os.listdir(colab["site"]))
    assert [name for name in installed if "torch" in name.lower()] == []
    assert {"transformer_lib", "course_tools"} <= set(installed)

    again = run_cell(colab, setup_source(relative), on_colab=True)  # running the cell twice is harmless
    assert again.returncode == 0, again.stderr[-2000:]


def test_exercise_and_solution_notebooks_share_one_setup_cell_that_stays_put():
    exercise = setup_source("exercises/01_similarity_exercises.ipynb")
    solution = setup_source("solutions/01_similarity_exercises.ipynb")
    assert exercise == solution and "%cd" not in exercise  # they read no file of the course: no folder to move to
    assert "%cd" in setup_source(relative_path(LESSONS[1]))


def test_elsewhere_the_setup_cell_does_nothing(colab):
    result = run_cell(colab, setup_source(relative_path(LESSONS[1])), on_colab=False)
    assert result.stdout.startswith(f"cwd: {colab['cwd']}\ntorch: ")  # no output of its own, same folder
    assert "No module named 'transformer_lib'" in result.stderr  # nothing installed
    assert not (colab["home"] / REPOSITORY_URL.rsplit("/", 1)[1]).exists()  # nothing cloned
