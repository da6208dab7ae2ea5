"""The gradebook (course_tools/grading/gradebook.py, roster.py): files, roster, partial credit, Canvas layout, from
grades built here."""

from __future__ import annotations

import csv
import json

import pytest

from course_tools.grading import cli
from course_tools.grading.gradebook import build_rows, print_summary, write_gradebook
from course_tools.grading.results import ExerciseGrade, Status, SubmissionGrade
from course_tools.grading.roster import NO_SUBMISSION, NOT_ON_ROSTER, RosterEntry, read_roster

SIM, ATT = "01_similarity_exercises", "02_attention_exercises"


def sample_grades() -> list[SubmissionGrade]:
    return [
        SubmissionGrade("alice", f"subs/alice_{SIM}.ipynb", "a" * 64, SIM,
                        [ExerciseGrade("norm", 1, 1, Status.PASSED, ["✔ ok"], 2, 2),
                         ExerciseGrade("cosine_matrix", 0, 2, Status.FAILED, ["✘ no"], 3, 4)],
                        notes=['cell 3 (`x = 1`) raised ValueError: bad, "quoted"'], isolation="bubblewrap"),
        SubmissionGrade("bob", f"subs/bob/{ATT}.ipynb", "b" * 64, ATT,
                        [ExerciseGrade("norm", 0, 3, Status.MISSING, ["function `norm` not found"])]),
    ]


def test_without_options_the_csv_layout_is_exactly_this(tmp_path):
    """One column per exercise (numbered where two assignments share an id), then totals, notes, file, sandbox."""
    csv_path, _ = write_gradebook(sample_grades(), tmp_path)
    assert csv_path.read_bytes() == (
        b'student,assignment,01:norm,cosine_matrix,02:norm,total,max,notes,file,sandbox\r\n'
        b'alice,01_similarity_exercises,1,0,,1,3,"cell 3 (`x = 1`) raised ValueError: bad, ""quoted""",'
        b'subs/alice_01_similarity_exercises.ipynb,bubblewrap\r\n'
        b'bob,02_attention_exercises,,,0,0,3,,subs/bob/02_attention_exercises.ipynb,\r\n')
    assert not (tmp_path / "grades_canvas.csv").exists()
    assert build_rows(sample_grades())[0].grade == sample_grades()[0]


def test_partial_credit_arithmetic(tmp_path):
    rows = build_rows(sample_grades(), partial_credit=True)
    alice = rows[0].grade
    assert [e.points for e in alice.exercises] == [1, 1.5]  # 3 of 4 checks on a 2-point exercise = 1.5
    assert alice.total == 2.5 and alice.max_points == 3
    assert rows[1].grade.total == 0  # a missing function earns nothing
    csv_path, json_path = write_gradebook(rows, tmp_path)
    row = next(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert (row["01:norm"], row["cosine_matrix"], row["total"]) == ("1", "1.5", "2.5")
    assert json.loads(json_path.read_text(encoding="utf-8"))[0]["total"] == 2.5


def test_partial_credit_gives_nothing_for_stubs_and_timeouts():
    g = SubmissionGrade("c", "c.ipynb", "", SIM, [ExerciseGrade("norm", 0, 2, "not attempted", [], 0, 0),
                                                  ExerciseGrade("cosine_matrix", 0, 2, "timed out", [], 1, 2)])
    assert build_rows([g], partial_credit=True)[0].grade.total == 0


def roster_file(tmp_path, text: str):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_roster_rows_for_missing_students_and_off_roster_submissions(tmp_path, capsys):
    roster = read_roster(roster_file(tmp_path, "ID,Student,Email\n7,Alice,a@uni.edu\n8,Carol Smith,cs@uni.edu\n"))
    assert roster == [RosterEntry("Alice", "a@uni.edu", "7"), RosterEntry("Carol Smith", "cs@uni.edu", "8")]
    rows = build_rows(sample_grades(), roster)
    table = [(r.grade.student, r.grade.assignment, r.roster, r.grade.total) for r in rows]
    assert table == [("Alice", SIM, "on roster", 1), ("Alice", ATT, NO_SUBMISSION, 0),
                     ("Carol Smith", SIM, NO_SUBMISSION, 0), ("Carol Smith", ATT, NO_SUBMISSION, 0),
                     ("bob", ATT, NOT_ON_ROSTER, 0)]
    missing = rows[2].grade
    assert missing.max_points == 3 and missing.notes == [NO_SUBMISSION]
    csv_path, json_path = write_gradebook(rows, tmp_path / "out")
    csv_rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [(r["student"], r["roster"], r["total"], r["sandbox"]) for r in csv_rows] == [
        ("Alice", "on roster", "1", "bubblewrap"), ("Alice", NO_SUBMISSION, "0", ""),
        ("Carol Smith", NO_SUBMISSION, "0", ""), ("Carol Smith", NO_SUBMISSION, "0", ""),
        ("bob", NOT_ON_ROSTER, "0", "")]  # nothing ran for a missing submission
    assert json.loads(json_path.read_text(encoding="utf-8"))[4]["roster"] == NOT_ON_ROSTER
    print_summary(rows)
    assert "WARNING: 'bob'" in capsys.readouterr().out


@pytest.mark.parametrize("submitted, roster_line", [
    ("alice_smith", "Alice Smith,,"),
    ("Alice-Smith", "alice smith,,"),
    ("asmith", "Alice Smith,asmith@uni.edu,"),
    ("s123", "Alice Smith,,s123"),
])
def test_roster_name_matching(tmp_path, submitted, roster_line):
    roster = read_roster(roster_file(tmp_path, f"student,email,id\n{roster_line}\n"))
    g = SubmissionGrade(submitted, f"{submitted}.ipynb", "", SIM, [ExerciseGrade("norm", 1, 1, Status.PASSED)])
    rows = build_rows([g], roster)
    assert [(r.grade.student, r.roster) for r in rows] == [(roster[0].student, "on roster")]


def test_a_roster_without_a_student_column_is_refused(tmp_path):
    with pytest.raises(ValueError, match="`student` column"):
        read_roster(roster_file(tmp_path, "name,email\nAlice,a@uni.edu\n"))
    submission = tmp_path / "alice.ipynb"
    submission.write_text("{}", encoding="utf-8")
    assert cli.main([str(submission), "--roster", str(tmp_path / "none.csv")]) == 2  # before any grading


def test_canvas_csv_layout(tmp_path):
    roster = [RosterEntry("Alice", "a@uni.edu", "7"), RosterEntry("Carol")]
    rows = build_rows(sample_grades(), roster, partial_credit=True)
    write_gradebook(rows, tmp_path, lms="canvas")
    lines = list(csv.reader((tmp_path / "grades_canvas.csv").open(encoding="utf-8")))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_similarity", "02_attention"]
    assert lines[1] == ["Points Possible", "", "", "", "", "3", "3"]
    assert lines[2:] == [["Alice", "", "7", "a@uni.edu", "", "2.5", "0"],
                         ["Carol", "", "", "", "", "0", "0"],
                         ["bob", "", "", "", "", "", "0"]]
