"""`python3 -m course_tools.demo_class FOLDER` (maintainers): a made-up class of lesson 01 submissions to grade.

Each student's notebook is the solved one with one function replaced by a classic mistake (or left a stub), so that
`python3 course.py grade FOLDER --out grades/` shows what the class report looks like; the README's picture of the
report comes from it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from . import SOLUTIONS_DIR
from .exercises import render_exercise
from .grading.solution_format import BEGIN_SOLUTION, strip_solutions

ASSIGNMENT = "01_similarity_exercises"

# student -> (function, its new body), or None for the honest solution, or "stub" for the untouched exercise.
CLASS: dict[str, tuple[str, str] | str | None] = {
    "ada": None, "ben": None, "chen": None, "dora": None, "emil": None,
    "femi": ("norm", "return (v ** 2).sum()"),
    "gita": ("norm", "return (v ** 2).sum()"),
    "hugo": ("norm", "return v.abs().sum()"),
    "ines": ("cosine_matrix", "return a @ b.T"),
    "jon": ("cosine_matrix", "return a @ b.T"),
    "kemal": ("cosine_matrix", "return a @ b.T"),
    "lea": ("cosine_matrix", "return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T"),
    "mo": ("dot_product", "return a * b"),
    "nia": ("norm", "return 1 / 0"),
    "omar": "stub",
}


def with_body(nb: nbformat.NotebookNode, function: str, body: str) -> nbformat.NotebookNode:
    """A copy of the solved notebook whose ``function`` has ``body`` instead of its solution."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    cell = next(c for c in nb.cells if f"def {function}(" in c.source and BEGIN_SOLUTION in c.source)
    cell.source = strip_solutions(cell.source, replacement=body.splitlines())
    return nb


def write_class(folder: Path) -> list[Path]:
    solved = nbformat.read(SOLUTIONS_DIR / f"{ASSIGNMENT}.ipynb", as_version=4)
    paths = []
    for student, change in CLASS.items():
        path = folder / student / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        if change == "stub":
            path.write_text(render_exercise(solved, name=path.name), encoding="utf-8")
        else:
            nbformat.write(with_body(solved, *change) if change else solved, path)
        paths.append(path)
    return paths


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m course_tools.demo_class FOLDER", file=sys.stderr)
        return 2
    paths = write_class(Path(argv[0]))
    print(f"[course] wrote {len(paths)} submissions under {argv[0]}: grade them with "
          f"`python3 course.py grade {argv[0]} --out grades/`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
