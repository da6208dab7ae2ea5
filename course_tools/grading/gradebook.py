"""The gradebook of a grading run: rows (see ``roster.py``), partial credit, the files, the printed summary.

- ``grades.csv`` and ``grades.json`` (an earlier gradebook there is renamed ``grades.<time>.csv``, never replaced);
- with ``--partial-credit``: an exercise earns points × checks passed / checks run instead of all or nothing;
- with ``--lms canvas``: ``grades_canvas.csv`` in Canvas's gradebook-import layout.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from .results import ExerciseGrade, Status, SubmissionGrade
from .roster import NOT_ON_ROSTER, RosterEntry, Row, roster_rows

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


# -- partial credit ---------------------------------------------------------------------------------------------


def partial_points(exercise: ExerciseGrade) -> float:
    """Points × checks passed / checks run (a failed exercise); a passed one keeps its points, others earn 0."""
    if exercise.status == Status.PASSED:
        return exercise.points
    if exercise.status != Status.FAILED or exercise.checks_total <= 0:
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
    """``grades.csv``: student, [roster,] assignment, one column per exercise, total, max, notes, file, sandbox."""
    columns = column_names([row.grade for row in rows])
    with_roster = any(row.roster for row in rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *(["roster"] if with_roster else []), "assignment",
                         *(title for _, _, title in columns), "total", "max", "notes", "file", "sandbox"])
        for row in rows:
            g = row.grade
            points = {(g.assignment, e.id): as_points(e.points) for e in g.exercises}
            writer.writerow([g.student, *([row.roster] if with_roster else []), g.assignment,
                             *(points.get((a, e), "") for a, e, _ in columns), as_points(g.total), g.max_points,
                             " | ".join(g.notes), g.file, g.isolation])


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
    print(f"\n{'student':{width}}  {'points':>9}  exercises ({', '.join(f'{s.symbol} {s}' for s in Status)})")
    for row in rows:
        g = row.grade
        marks = " ".join(Status(e.status).symbol for e in g.exercises)
        print(f"{g.student:{width}}  {as_points(g.total):>4}/{g.max_points:<4}  {marks}")
        for note in g.notes[:4]:
            print(f"{'':{width}}    note: {note}")
        for e in g.exercises:
            if e.status in (Status.MISSING, Status.TIMED_OUT, Status.ERROR) and e.lines:
                print(f"{'':{width}}    {e.id}: {e.lines[0]}")
    for row in rows:
        if row.roster == NOT_ON_ROSTER:
            print(f"[course] WARNING: {row.grade.student!r} ({row.grade.file}) is not on the roster; kept in the "
                  "gradebook with roster = 'not on roster'")
