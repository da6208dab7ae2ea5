"""Generate the student notebooks in exercises/ from the solved ones in solutions/ (the single source).

Solution code sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (nbgrader's markers); each marked region
becomes nbgrader's stub, indented like the markers (the format is ``grading/solution_format.py``'s)::

    # YOUR CODE HERE
    raise NotImplementedError()

A student's work is never overwritten: ``exercises/.generated.json`` records a fingerprint of every file as generated;
a file whose content no longer matches it was edited, and generation refuses to replace it unless ``--force`` is
given, in which case the edited file is first copied to ``<name>.backup-<time>.ipynb`` beside it.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import EXERCISES_DIR, SOLUTIONS_DIR
from .colab import for_exercises
from .grading.solution_format import strip_solutions
from .notebook_files import clean_metadata, clear_outputs, notebook_text, notebooks_in, read_notebook

MANIFEST_NAME = ".generated.json"


def render_exercise(solution: nbformat.NotebookNode, name: str = "notebook") -> str:
    """The exact text of the exercise notebook generated from a solved notebook (its Colab link pointed at
    ``exercises/``)."""
    nb = copy.deepcopy(solution)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source, where=f"{name}, cell {index}")
    return notebook_text(clear_outputs(clean_metadata(for_exercises(nb))))


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Plan:
    """What generation would do to one exercise notebook."""

    target: Path
    text: str
    action: str  # "create", "update", "unchanged" or "edited" (refused unless forced)


def plan_generation(solutions_dir: Path, exercises_dir: Path) -> list[Plan]:
    manifest = load_manifest(exercises_dir)
    plans = []
    for solution_path in notebooks_in(solutions_dir):
        target = exercises_dir / solution_path.name
        text = render_exercise(read_notebook(solution_path), name=solution_path.name)
        if not target.exists():
            action = "create"
        else:
            current = target.read_text(encoding="utf-8")
            if current == text:
                action = "unchanged"
            elif manifest.get(target.name) == fingerprint(current):
                action = "update"
            else:
                action = "edited"
        plans.append(Plan(target, text, action))
    return plans


def load_manifest(exercises_dir: Path) -> dict[str, str]:
    path = exercises_dir / MANIFEST_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def save_manifest(exercises_dir: Path, manifest: dict[str, str]) -> None:
    text = json.dumps(dict(sorted(manifest.items())), indent=1) + "\n"
    (exercises_dir / MANIFEST_NAME).write_text(text, encoding="utf-8", newline="\n")


def unused_backup_path(target: Path, stamp: str) -> Path:
    """``<name>.backup-<stamp>.ipynb`` beside ``target``, numbered so that an earlier backup is never replaced."""
    candidate = target.with_name(f"{target.stem}.backup-{stamp}.ipynb")
    number = 2
    while candidate.exists():
        candidate = target.with_name(f"{target.stem}.backup-{stamp}-{number}.ipynb")
        number += 1
    return candidate


def generate(solutions_dir: Path = SOLUTIONS_DIR, exercises_dir: Path = EXERCISES_DIR, force: bool = False) -> int:
    """Write exercises/ from solutions/; return 0, or 1 when edited notebooks were left untouched."""
    exercises_dir.mkdir(parents=True, exist_ok=True)
    plans = plan_generation(solutions_dir, exercises_dir)
    edited = [plan for plan in plans if plan.action == "edited"]
    if edited and not force:
        names = "\n".join(f"  - {plan.target.name}" for plan in edited)
        print(
            "[course] These exercise notebooks were edited since they were generated (perhaps by a student):\n"
            f"{names}\n"
            "[course] Nothing was written. To keep that work, copy or rename those files first, then run again;\n"
            "[course] or run `python3 course.py exercises --force` to regenerate them, keeping a backup beside each."
        )
        return 1
    manifest = load_manifest(exercises_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for plan in plans:
        if plan.action == "edited":
            backup = unused_backup_path(plan.target, stamp)
            shutil.copy2(plan.target, backup)
            print(f"[course] kept the edited {plan.target.name} as {backup.name}")
        if plan.action != "unchanged":
            plan.target.write_text(plan.text, encoding="utf-8", newline="\n")
        manifest[plan.target.name] = fingerprint(plan.text)
        print(f"[course] {plan.action:9} {plan.target.name}")
    save_manifest(exercises_dir, manifest)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="course.py exercises", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true",
                        help="also regenerate notebooks edited since generation (a backup of each is kept)")
    args = parser.parse_args(argv)
    return generate(force=args.force)
