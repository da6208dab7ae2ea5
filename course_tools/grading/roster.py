"""The class list: reading a roster CSV and giving every roster student a gradebook row.

A roster row matches a submission when the submission's student name (the file name without the assignment, or
the folder: ``submissions.student_name``) equals the roster's ``student``, ``email``, the part of ``email`` before
``@``, or ``id``, ignoring case and treating runs of spaces, ``_``, ``-`` and ``.`` alike (``Alice Smith`` matches
``alice_smith_01_similarity_exercises.ipynb``). Roster students with no submission get ``no submission`` and 0;
submissions whose student is not on the roster are kept, flagged ``not on roster``.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, replace
from pathlib import Path

from .results import Status, SubmissionGrade

NO_SUBMISSION = "no submission"
NOT_ON_ROSTER = "not on roster"


@dataclass(frozen=True)
class RosterEntry:
    """One student of the class list: the name, and optionally an email and an id (e.g. the SIS user id)."""

    student: str
    email: str = ""
    id: str = ""


@dataclass
class Row:
    """One gradebook row: a submission's grade, and where it stands against the roster ("" without a roster)."""

    grade: SubmissionGrade
    roster: str = ""  # "", "on roster", "no submission", "not on roster"
    entry: RosterEntry | None = None


def read_roster(path: Path) -> list[RosterEntry]:
    """Read a roster CSV with a header holding ``student`` and optionally ``email`` and ``id`` (any case, any order)."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = [name.strip().lower() for name in next(reader, [])]
        if "student" not in header:
            raise ValueError(f"roster {path}: the first line must be a header with a `student` column (optional: "
                             f"`email`, `id`); got {header or 'an empty file'}")
        where = {name: header.index(name) for name in ("student", "email", "id") if name in header}
        entries = []
        for cells in reader:
            values = {name: cells[index].strip() if index < len(cells) else "" for name, index in where.items()}
            if values["student"]:
                entries.append(RosterEntry(values["student"], values.get("email", ""), values.get("id", "")))
    return entries


def name_key(name: str) -> str:
    """``Alice_Smith`` and ``alice smith`` → ``alice smith``: case and separators ignored."""
    return re.sub(r"[\s_.\-]+", " ", name).strip().casefold()


def entry_keys(entry: RosterEntry) -> set[str]:
    names = [entry.student, entry.email, entry.email.split("@")[0] if entry.email else "", entry.id]
    return {name_key(name) for name in names if name_key(name)}


def missing_grade(entry: RosterEntry, like: SubmissionGrade) -> SubmissionGrade:
    """The row of a roster student who submitted nothing for ``like``'s assignment: 0 of its points."""
    exercises = [replace(e, points=0, status=Status.NOT_GRADED, lines=[NO_SUBMISSION], checks_passed=0, checks_total=0,
                         diagnosis="no-submission", diagnosis_hint="") for e in like.exercises]
    return replace(like, student=entry.student, file="", sha256="", exercises=exercises, notes=[NO_SUBMISSION],
                   seconds=0.0, library_changed=False, isolation="")


def roster_rows(grades: list[SubmissionGrade], roster: list[RosterEntry]) -> list[Row]:
    """Every roster student for every assignment graded, in roster order; then the submissions not on the roster."""
    first_of = {}
    for g in grades:
        first_of.setdefault(g.assignment, g)
    matched: set[int] = set()
    rows = []
    for entry in roster:
        keys = entry_keys(entry)
        for assignment, like in first_of.items():
            mine = [i for i, g in enumerate(grades)
                    if g.assignment == assignment and i not in matched and name_key(g.student) in keys]
            matched.update(mine)
            rows.extend(Row(replace(grades[i], student=entry.student), "on roster", entry) for i in mine)
            if not mine:
                rows.append(Row(missing_grade(entry, like), NO_SUBMISSION, entry))
    rows.extend(Row(g, NOT_ON_ROSTER) for i, g in enumerate(grades) if i not in matched)
    return rows


