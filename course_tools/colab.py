"""`python3 course.py colab-links`: the "Open in Colab" link and the Colab setup cell of every course notebook.

Both are made from the repository's public address, ``REPOSITORY_URL`` and ``REPOSITORY_BRANCH`` in
``course_tools/__init__.py``; change those, then run this command. It rewrites, in place, the lessons
(``notebooks/``) and the solved exercises (``solutions/``):

- in the first markdown cell, the line under the title: ``[Open in Colab](https://colab.research.google.com/github/
  OWNER/REPO/blob/BRANCH/notebooks/NN_topic.ipynb)``;
- the first code cell: on Google Colab only, it clones the repository and installs the course packages from the
  clone with ``--no-deps`` (Colab keeps its own PyTorch and other packages); a lesson's cell then moves into the
  clone's ``notebooks/``, so the lessons' relative paths (``../benchmarks``, ``../checkpoints``) work. Anywhere else
  it does nothing. A solved and an exercise notebook get the same cell (only their links differ), so the code cells
  of an exercise notebook stay exactly its solution's, stubs aside.

Only those two cells change, never an output; a notebook that gets the setup cell for the first time must be
executed again (``course.py execute``: its execution counts shift). The exercise notebooks are generated from
``solutions/`` (``course.py exercises``), which points their link at ``exercises/`` with :func:`for_exercises`;
this command regenerates them at the end. ``--check`` changes nothing and exits 1 when a
notebook differs from what the command would write.
"""

from __future__ import annotations

import argparse
from pathlib import Path, PurePosixPath

import nbformat

from . import EXERCISES_DIR, NOTEBOOKS_DIR, REPOSITORY_BRANCH, REPOSITORY_URL, ROOT, SOLUTIONS_DIR
from .notebook_files import notebook_text, notebooks_in, read_notebook, write_notebook

COLAB_GITHUB = "https://colab.research.google.com/github"
LINK_TEXT = "Open in Colab"
SETUP_FIRST_LINE = "# Google Colab only: get the course and install its library"


def repository_slug(url: str = REPOSITORY_URL) -> str:
    """``owner/name`` of a GitHub address such as ``https://github.com/owner/name``."""
    prefix = "https://github.com/"
    slug = url.removesuffix("/").removesuffix(".git").removeprefix(prefix)
    if not url.startswith(prefix) or slug.count("/") != 1:
        raise ValueError(f"REPOSITORY_URL={url!r} is not a GitHub repository address: https://github.com/OWNER/NAME")
    return slug


def colab_url(relative: str) -> str:
    """Colab's address for the notebook at ``relative`` (``notebooks/01_similarity.ipynb``) in the repository."""
    return f"{COLAB_GITHUB}/{repository_slug()}/blob/{REPOSITORY_BRANCH}/{relative}"


def link_line(relative: str) -> str:
    return f"[{LINK_TEXT}]({colab_url(relative)})"


def setup_source(relative: str) -> str:
    """The setup cell of the notebook at ``relative``; a lesson's ends in the clone's ``notebooks/``."""
    clone = f"~/{repository_slug().split('/')[1]}"
    lines = [
        f"{SETUP_FIRST_LINE} (Colab's own PyTorch and packages",
        "# stay as they are); anywhere else this cell does nothing.",
        "import sys",
        "",
        'if "google.colab" in sys.modules:',
        f"    !test -d {clone} || git clone --quiet --depth 1 --branch {REPOSITORY_BRANCH} {REPOSITORY_URL} {clone}",
        f"    %pip install --quiet --no-deps {clone}",
    ]
    folder = PurePosixPath(relative).parent.as_posix()
    if folder == NOTEBOOKS_DIR.name:  # lessons read ../benchmarks and ../checkpoints
        lines.append(f"    %cd {clone}/{folder}")
    return "\n".join(lines)


def is_setup_cell(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and cell.source.startswith(SETUP_FIRST_LINE)


def is_link_line(line: str) -> bool:
    return line.startswith(f"[{LINK_TEXT}](")


def with_colab_cells(nb: nbformat.NotebookNode, relative: str) -> nbformat.NotebookNode:
    """Put the link for ``relative`` under the first markdown cell's title line and the setup cell first among the
    code cells (right after that markdown cell), replacing the ones already there. Changes ``nb`` and returns it."""
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        raise ValueError(f"{relative}: the first cell must be markdown (the title) to carry the Colab link")
    lines = nb.cells[0].source.split("\n")
    links = [index for index, line in enumerate(lines) if is_link_line(line)]
    if links:
        lines[links[0]] = link_line(relative)
    else:
        lines[1:1] = ["", link_line(relative)]
    nb.cells[0].source = "\n".join(lines)
    setups = [cell for cell in nb.cells if is_setup_cell(cell)]
    if len(setups) > 1:
        raise ValueError(f"{relative}: {len(setups)} Colab setup cells; keep one")
    if setups:
        setups[0].source = setup_source(relative)
    else:
        nb.cells.insert(1, nbformat.v4.new_code_cell(setup_source(relative)))
    return nb


def linked_notebook(nb: nbformat.NotebookNode) -> str | None:
    """The repository path that the first cell's Colab link opens, or None without a link."""
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        return None
    prefix = f"[{LINK_TEXT}]({COLAB_GITHUB}/{repository_slug()}/blob/{REPOSITORY_BRANCH}/"
    for line in nb.cells[0].source.split("\n"):
        if line.startswith(prefix) and line.endswith(")"):
            return line[len(prefix):-1]
    return None


def for_exercises(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A solved notebook with its link pointed at its exercise version (same name in ``exercises/``). A notebook
    without a Colab link is left as it is."""
    linked = linked_notebook(nb)
    if linked is None:
        return nb
    return with_colab_cells(nb, f"{EXERCISES_DIR.name}/{PurePosixPath(linked).name}")


def relative_path(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="course.py colab-links", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a lesson, solution or exercise notebook lacks its link or cell")
    args = parser.parse_args(argv)
    stale = []
    for path in notebooks_in(NOTEBOOKS_DIR) + notebooks_in(SOLUTIONS_DIR) + notebooks_in(EXERCISES_DIR):
        nb = read_notebook(path)
        had_setup = any(is_setup_cell(cell) for cell in nb.cells)
        with_colab_cells(nb, relative_path(path))
        if path.read_text(encoding="utf-8") == notebook_text(nb):
            continue
        stale.append(path)
        if args.check or path.parent == EXERCISES_DIR:  # exercises are regenerated below, never edited here
            continue
        write_notebook(nb, path)
        again = "" if had_setup else " (setup cell added: run `python3 course.py execute` on it)"
        print(f"[course] updated {relative_path(path)}{again}")
    if args.check:
        for path in stale:
            print(f"[course] {relative_path(path)}: its Colab link or setup cell is missing or out of date; "
                  "run `python3 course.py colab-links`")
        return 1 if stale else 0
    from .exercises import generate  # imported here: exercises.py imports this module

    return generate()
