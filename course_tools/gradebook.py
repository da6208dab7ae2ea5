"""The gradebook of a grading run: rows per submission (and per roster student), the files, the printed summary.

``grade.py`` grades; this module only turns its ``SubmissionGrade`` objects into

- ``grades.csv`` and ``grades.json`` (an earlier gradebook there is renamed ``grades.<time>.csv``, never replaced);
- with ``--roster FILE``: one row for every roster student (``no submission`` and 0 points where none came) and
  submissions whose student is not on the roster kept, flagged ``not on roster`` and warned about;
- with ``--partial-credit``: an exercise earns points × checks passed / checks run instead of all or nothing;
- with ``--lms canvas``: ``grades_canvas.csv`` in Canvas's gradebook-import layout.

Roster matching: a roster row matches a submission when the submission's student name (``student_name`` in
``grade.py``: the file name without the assignment, or the folder) equals the roster's ``student``, ``email``, the
part of ``email`` before ``@``, or ``id``, ignoring case and treating runs of spaces, ``_``, ``-`` and ``.`` alike
(``Alice Smith`` matches ``alice_smith_01_similarity_exercises.ipynb``).
"""

from __future__ import annotations

import csv
import json
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # grade.py imports this module to write its gradebook
    from .grade import ExerciseGrade, SubmissionGrade

SYMBOLS = {"passed": "✔", "failed": "✘", "not attempted": "·", "missing": "?", "timed out": "⏱", "error": "!",
           "not graded": "-"}
NO_SUBMISSION = "no submission"
NOT_ON_ROSTER = "not on roster"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


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


# -- the roster -------------------------------------------------------------------------------------------------


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
    exercises = [replace(e, points=0, status="not graded", lines=[NO_SUBMISSION], checks_passed=0, checks_total=0)
                 for e in like.exercises]
    return replace(like, student=entry.student, file="", sha256="", exercises=exercises, notes=[NO_SUBMISSION],
                   seconds=0.0, library_changed=False)


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


# -- partial credit ---------------------------------------------------------------------------------------------


def partial_points(exercise: ExerciseGrade) -> float:
    """Points × checks passed / checks run (a failed exercise); a passed one keeps its points, others earn 0."""
    if exercise.status == "passed":
        return exercise.points
    if exercise.status != "failed" or exercise.checks_total <= 0:
        return 0
    return round(exercise.max_points * exercise.checks_passed / exercise.checks_total, 2)


def with_partial_credit(grade: SubmissionGrade) -> SubmissionGrade:
    exercises = [replace(e, points=partial_points(e)) for e in grade.exercises]
    return replace(grade, exercises=exercises)


def build_rows(grades: list[SubmissionGrade], roster: list[RosterEntry] | None = None,
               partial_credit: bool = False) -> list[Row]:
    """The gradebook's rows: one per submission, or per roster student and assignment when a roster is given."""
    if partial_credit:
        grades = [with_partial_credit(g) for g in grades]
    return roster_rows(grades, roster) if roster is not None else [Row(g) for g in grades]


def as_rows(rows: list[Row] | list[SubmissionGrade]) -> list[Row]:
    return [row if isinstance(row, Row) else Row(row) for row in rows]


def as_points(value: float) -> int | float:
    """Points as written: ``2`` not ``2.0``; partial credit rounded to two places (``1.5``)."""
    value = round(value, 2)
    return int(value) if float(value).is_integer() else value


# -- the files --------------------------------------------------------------------------------------------------


def column_names(grades: list[SubmissionGrade]) -> list[tuple[str, str, str]]:
    """(assignment, exercise id, column title); titles get the assignment's number when ids repeat."""
    columns = list(dict.fromkeys((g.assignment, e.id) for g in grades for e in g.exercises))
    ids = [exercise for _, exercise in columns]
    return [(a, e, e if ids.count(e) == 1 else f"{a[:2]}:{e}") for a, e in columns]


def keep_previous(path: Path) -> Path | None:
    """Rename an existing gradebook file to ``grades.<its time>.csv`` (never replacing one); return the new name."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
    kept, number = path.with_name(f"{path.stem}.{stamp}{path.suffix}"), 2
    while kept.exists():
        kept, number = path.with_name(f"{path.stem}.{stamp}-{number}{path.suffix}"), number + 1
    path.rename(kept)
    return kept


def write_csv(rows: list[Row], path: Path) -> None:
    """``grades.csv``: student, [roster,] assignment, one column per exercise, total, max, notes, file."""
    columns = column_names([row.grade for row in rows])
    with_roster = any(row.roster for row in rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *(["roster"] if with_roster else []), "assignment",
                         *(title for _, _, title in columns), "total", "max", "notes", "file"])
        for row in rows:
            g = row.grade
            points = {(g.assignment, e.id): as_points(e.points) for e in g.exercises}
            writer.writerow([g.student, *([row.roster] if with_roster else []), g.assignment,
                             *(points.get((a, e), "") for a, e, _ in columns), as_points(g.total), g.max_points,
                             " | ".join(g.notes), g.file])


def write_json(rows: list[Row], path: Path) -> None:
    """``grades.json``: every row's grade with each exercise's feedback lines (and its roster status, if any)."""
    records = []
    for row in rows:
        record = {**asdict(row.grade), "total": as_points(row.grade.total), "max": row.grade.max_points}
        if row.roster:
            record["roster"] = row.roster
        records.append(record)
    path.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def canvas_title(assignment: str) -> str:
    """The Canvas column of an assignment: ``01_similarity_exercises`` → ``01_similarity``."""
    return assignment.removesuffix("_exercises")


def write_canvas(rows: list[Row], path: Path) -> None:
    """``grades_canvas.csv``: Canvas's import layout, one row per student, one column of totals per assignment.

    Columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one per assignment; the second line is the
    ``Points Possible`` row. ``SIS User ID`` comes from the roster's ``id``, ``SIS Login ID`` from its ``email``;
    ``ID`` (Canvas's own number) and ``Section`` stay empty. A student with two submissions of one assignment gets
    the higher total.
    """
    assignments = list(dict.fromkeys(row.grade.assignment for row in rows))
    possible = {row.grade.assignment: row.grade.max_points for row in rows}
    students: dict[str, tuple[RosterEntry | None, dict[str, float]]] = {}
    for row in rows:
        _, totals = students.setdefault(row.grade.student, (row.entry, {}))
        totals[row.grade.assignment] = max(totals.get(row.grade.assignment, 0), row.grade.total)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CANVAS_COLUMNS, *(canvas_title(a) for a in assignments)])
        writer.writerow(["Points Possible", "", "", "", "", *(possible[a] for a in assignments)])
        for student, (entry, totals) in students.items():
            sis_id, login = (entry.id, entry.email) if entry else ("", "")
            writer.writerow([student, "", sis_id, login, "",
                             *(as_points(totals[a]) if a in totals else "" for a in assignments)])


def write_gradebook(grades: list[Row] | list[SubmissionGrade], out_dir: Path,
                    lms: str | None = None) -> tuple[Path, Path]:
    """Write ``grades.csv`` and ``grades.json`` (and ``grades_canvas.csv`` for ``lms="canvas"``); keep earlier ones."""
    rows = as_rows(grades)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out_dir / "grades.csv", out_dir / "grades.json"
    canvas_path = out_dir / "grades_canvas.csv" if lms == "canvas" else None
    for path in (csv_path, json_path, canvas_path):
        kept = keep_previous(path) if path else None
        if kept:
            print(f"[course] kept the previous {path.name} as {kept.name}")
    write_csv(rows, csv_path)
    write_json(rows, json_path)
    if canvas_path:
        write_canvas(rows, canvas_path)
        print(f"[course] wrote {canvas_path} (Canvas import layout: see README, Grading)")
    return csv_path, json_path


# -- the summary ------------------------------------------------------------------------------------------------


def print_summary(grades: list[Row] | list[SubmissionGrade]) -> None:
    """One line per row (points and a mark per exercise), its first notes, and a warning per off-roster submission."""
    rows = as_rows(grades)
    width = max([len(row.grade.student) for row in rows] + [7])
    print(f"\n{'student':{width}}  {'points':>9}  exercises ({', '.join(f'{s} {k}' for k, s in SYMBOLS.items())})")
    for row in rows:
        g = row.grade
        marks = " ".join(SYMBOLS[e.status] for e in g.exercises)
        print(f"{g.student:{width}}  {as_points(g.total):>4}/{g.max_points:<4}  {marks}")
        for note in g.notes[:4]:
            print(f"{'':{width}}    note: {note}")
        for e in g.exercises:
            if e.status in ("missing", "timed out", "error") and e.lines:
                print(f"{'':{width}}    {e.id}: {e.lines[0]}")
    for row in rows:
        if row.roster == NOT_ON_ROSTER:
            print(f"[course] WARNING: {row.grade.student!r} ({row.grade.file}) is not on the roster; kept in the "
                  "gradebook with roster = 'not on roster'")
