"""Finding submissions, reading them into memory before any code runs, and naming their students."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .assignments import Assignment, choose_assignment, identify_assignment

MAX_SUBMISSION_BYTES = 50 * 1024 * 1024


@dataclass
class Submission:
    """One submitted file, read once: its bytes, its assignment and who wrote it."""

    path: Path
    data: bytes
    assignment: Assignment | None
    note: str | None = None  # e.g. how the assignment was guessed

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def student(self) -> str:
        return student_name(self.path, self.assignment.name if self.assignment else None)


def find_submission_files(given: list[Path]) -> list[Path]:
    """The notebooks named, and every ``.ipynb`` under the folders named (checkpoint copies left out)."""
    paths = []
    for path in (Path(p).resolve() for p in given):
        paths.extend(sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
                     if path.is_dir() else [path])
    return paths


def student_name(path: Path, assignment_name: str | None) -> str:
    """``alice_01_similarity_exercises.ipynb`` → alice; ``alice/01_similarity_exercises.ipynb`` → alice."""
    stem = path.stem
    if assignment_name:
        stem = stem.replace(assignment_name, "")
    stem = re.sub(r"\s*\(\d+\)$", "", stem).strip(" _-.")  # "name (1)": a browser's second download
    if stem:
        return stem
    return path.parent.name or path.stem


def read_submissions(paths: list[Path], assignments: dict[str, Assignment], wanted: str | None) -> list[Submission]:
    """Read every submission into memory and decide its assignment (before any submitted code runs)."""
    forced = choose_assignment(wanted, assignments) if wanted else None
    submissions = []
    for path in paths:
        data = path.read_bytes() if path.stat().st_size <= MAX_SUBMISSION_BYTES else b"x" * (MAX_SUBMISSION_BYTES + 1)
        text = data.decode("utf-8", errors="replace")
        submissions.append(Submission(path, data, forced or identify_assignment(text, path, assignments)))
    known = {s.assignment.name for s in submissions if s.assignment}
    if len(known) == 1:
        only = assignments[known.pop()]
        for submission in submissions:
            if submission.assignment is None:
                submission.assignment = only
                submission.note = f"assumed to be {only.name}, like the other submissions"
    return submissions


def parse_notebook(data: bytes) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The notebook in ``data``, or None and why it is not one."""
    if not data.strip():
        return None, "the file is empty"
    if len(data) > MAX_SUBMISSION_BYTES:
        return None, f"the file is larger than {MAX_SUBMISSION_BYTES // (1024 * 1024)} MB"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text"
    try:
        content = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"not a notebook: invalid JSON ({error.msg} at line {error.lineno})"
    if not isinstance(content, dict) or not ("cells" in content or "worksheets" in content):
        return None, "not a notebook: valid JSON, but it holds no notebook cells"
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # nbformat raises several kinds for JSON that is not a notebook
        return None, f"not a notebook: {' '.join(str(error).split())[:160]}"
    return nb, None
