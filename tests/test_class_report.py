"""The class report and the feedback files (course_tools/grading/class_report.py, feedback_files.py, diagnosis.py),
from grades built here: which mistake each student made, counted per exercise, most common first, and nothing a
submission wrote reaching the teacher's page as markup."""

from __future__ import annotations

from course_tools.grading.class_report import summarise, write_class_report
from course_tools.grading.diagnosis import OTHER_WRONG_ANSWER, UNREADABLE, failed_check_diagnosis
from course_tools.grading.feedback_files import file_name, write_feedback
from course_tools.grading.gradebook import build_rows
from course_tools.grading.results import ExerciseGrade, Status, SubmissionGrade
from course_tools.grading.roster import RosterEntry
from transformer_lib.checks._feedback import Exercise, Hint

SIM = "01_similarity_exercises"
SQRT = "you forgot the square root"


def graded(student: str, norm: tuple[Status, str, str], cosine: tuple[Status, str, str]) -> SubmissionGrade:
    def exercise(name: str, outcome: tuple[Status, str, str]) -> ExerciseGrade:
        status, diagnosis, hint = outcome
        points = 2 if status == Status.PASSED else 0
        return ExerciseGrade(name, points, 2, status, [f"✘ {name}", f"  hint: {hint}"] if hint else ["✔ ok"],
                             diagnosis=diagnosis, diagnosis_hint=hint)
    return SubmissionGrade(student, f"subs/{student}.ipynb", "", SIM,
                           [exercise("norm", norm), exercise("cosine_matrix", cosine)])


PASSED = (Status.PASSED, "", "")


def sample_class() -> list[SubmissionGrade]:
    no_sqrt = (Status.FAILED, "norm-no-square-root", SQRT)
    return [
        graded("ann", PASSED, PASSED),
        graded("ben", no_sqrt, PASSED),
        graded("cleo", no_sqrt, (Status.FAILED, "dot-products-not-cosines", "divide by both lengths")),
        graded("dan", no_sqrt, (Status.NOT_ATTEMPTED, "not-attempted", "")),
        graded("eve", (Status.FAILED, "error:ZeroDivisionError", "the error comes from this line"), PASSED),
        graded("fay", (Status.FAILED, UNREADABLE, "<script>alert('x')</script>"),
               (Status.FAILED, OTHER_WRONG_ANSWER, "<img src=x onerror=alert(1)>")),
    ]


def test_each_exercise_counts_its_diagnoses_most_common_first():
    summaries = {s.exercise: s for s in summarise(build_rows(sample_class()))}
    norm = summaries["norm"]
    assert (norm.submissions, norm.passed) == (6, 1)
    assert [(f.diagnosis, f.count) for f in norm.findings] == [
        ("norm-no-square-root", 3), ("error:ZeroDivisionError", 1), (UNREADABLE, 1)]
    assert norm.findings[0].hint == SQRT and norm.findings[0].students == ["ben", "cleo", "dan"]
    cosine = summaries["cosine_matrix"]
    assert (cosine.passed, cosine.pass_rate) == (3, 0.5)
    assert sorted(f.diagnosis for f in cosine.findings) == ["dot-products-not-cosines", "not-attempted",
                                                            OTHER_WRONG_ANSWER]


def test_the_report_files_lead_with_the_commonest_mistake_and_name_no_one_by_default(tmp_path):
    page = write_class_report(build_rows(sample_class()), tmp_path)
    text = (tmp_path / "class_report.md").read_text(encoding="utf-8")
    table = text.split("## Most common, whole class")[1]
    first_row = next(line for line in table.splitlines() if line.startswith("| 3 "))
    assert "norm-no-square-root" in first_row and SQRT in first_row
    assert table.index("| 3 ") < table.index("| 1 ")
    assert "| norm | 1/6 (17%) |" in text
    html = page.read_text(encoding="utf-8")
    for name in ("ann", "ben", "cleo", "dan", "eve", "fay"):
        assert name not in text and f">{name}" not in html
    assert "<script>" not in html and "<img src=x" not in html and "&lt;script&gt;" in html
    assert (tmp_path / f"class_report_{SIM}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"src='class_report_{SIM}.png'" in html


def test_names_are_listed_on_request_and_earlier_reports_are_kept(tmp_path):
    write_class_report(build_rows(sample_class()), tmp_path)
    write_class_report(build_rows(sample_class()), tmp_path, names=True)
    assert "ben, cleo, dan" in (tmp_path / "class_report.md").read_text(encoding="utf-8")
    kept = sorted(p.name for p in tmp_path.glob("class_report.*.md"))
    assert len(kept) == 1, kept


def test_feedback_files_hand_back_the_hints_and_skip_students_who_submitted_nothing(tmp_path):
    rows = build_rows(sample_class()[:2], roster=[RosterEntry("ann"), RosterEntry("ben"), RosterEntry("gus")])
    folder = write_feedback(rows, tmp_path)
    ben = (folder / SIM / "ben.md").read_text(encoding="utf-8")
    assert "**2 of 4 points**" in ben and f"  hint: {SQRT}" in ben and "## ✔ cosine_matrix: 2/2 (passed)" in ben
    assert sorted(p.name for p in (folder / SIM).iterdir()) == ["ann.md", "ben.md"]
    write_feedback(rows, tmp_path)
    assert len(list(tmp_path.glob("feedback.*"))) == 1  # the earlier folder, kept
    assert file_name("../../etc/passwd") == "etc_passwd" and file_name("ann.lee") == "ann.lee"


def test_a_check_records_the_named_mistake_an_error_or_other():
    ex = Exercise("demo")
    with ex.run():
        ex.compare("a", 4.0, 2.0, mistakes={Hint("you squared it", id="squared"): 4.0, "you halved it": 1.0})
        ex.compare("b", 1.0, 2.0, mistakes={"you halved it": 1.0})
        ex.compare("c", 7.0, 2.0, hint="look again")
        ex.call(lambda: 1 / 0)
    assert [d["mistake"] for d in ex.result.diagnoses] == [
        "squared", "you-halved-it", OTHER_WRONG_ANSWER, "error:ZeroDivisionError"]
    assert ex.result.diagnoses[0]["hint"] == "you squared it"
    assert failed_check_diagnosis(ex.result.to_dict()["diagnoses"]) == ("squared", "you squared it")


def test_untrusted_diagnoses_are_read_safely():
    assert failed_check_diagnosis(None) == (OTHER_WRONG_ANSWER, "")
    assert failed_check_diagnosis("forged") == (OTHER_WRONG_ANSWER, "")
    assert failed_check_diagnosis([{"mistake": "<b>x</b>", "hint": "h"}]) == (UNREADABLE, "h")
    assert failed_check_diagnosis([{"mistake": OTHER_WRONG_ANSWER}, {"mistake": "error:KeyError", "hint": 3},
                                   {"mistake": "x" * 61}]) == ("error:KeyError", "")
    long_hint = failed_check_diagnosis([{"mistake": "ok-id", "hint": "word " * 200}])[1]
    assert len(long_hint) == 300 and long_hint.endswith("…")
