"""The class report beside the gradebook: which mistakes the class made, per exercise, most common first.

- ``class_report.md`` and ``class_report.html``: per assignment and exercise, the pass rate and how many submissions
  got each diagnosis (``diagnosis.py``), with the hint each diagnosis stands for; the class's most common diagnoses
  first. Students are counted, not named, unless ``names=True``.
- ``class_report_<assignment>.png``: a bar chart of the diagnoses per exercise.
Earlier reports are kept (renamed with their time), as the gradebook's are.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .gradebook import keep_previous
from .roster import Row


@dataclass
class Finding:
    """One diagnosis of one exercise: how many submissions got it, who, and the hint it stands for."""

    assignment: str
    exercise: str
    diagnosis: str
    count: int
    hint: str
    students: list[str] = field(default_factory=list)


@dataclass
class ExerciseSummary:
    assignment: str
    exercise: str
    submissions: int
    passed: int
    findings: list[Finding]

    @property
    def pass_rate(self) -> float:
        return self.passed / self.submissions if self.submissions else 0.0


def summarise(rows: list[Row]) -> list[ExerciseSummary]:
    """Per exercise (in gradebook order): the submissions, the passes and the diagnoses, most common first."""
    graded: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for row in rows:
        for e in row.grade.exercises:
            graded.setdefault((row.grade.assignment, e.id), []).append((row.grade.student, e.diagnosis,
                                                                        e.diagnosis_hint))
    summaries = []
    for (assignment, exercise), outcomes in graded.items():
        counts = Counter(diagnosis for _, diagnosis, _ in outcomes if diagnosis)
        findings = []
        for diagnosis, count in counts.most_common():
            hints = Counter(hint for _, d, hint in outcomes if d == diagnosis and hint)
            students = sorted({student for student, d, _ in outcomes if d == diagnosis})
            findings.append(Finding(assignment, exercise, diagnosis, count,
                                    hints.most_common(1)[0][0] if hints else "", students))
        passed = sum(1 for _, diagnosis, _ in outcomes if not diagnosis)
        summaries.append(ExerciseSummary(assignment, exercise, len(outcomes), passed, findings))
    return summaries


def most_common(summaries: list[ExerciseSummary]) -> list[Finding]:
    """Every finding of the class, the most frequent first (ties in gradebook order)."""
    findings = [f for s in summaries for f in s.findings]
    return sorted(findings, key=lambda f: -f.count)


def plain(diagnosis: str) -> str:
    """A diagnosis as a teacher reads it: ``missing-sqrt-dk`` stays, the status ids get a word of explanation."""
    return {"not-attempted": "not attempted (stub left)", "missing-function": "function missing",
            "timed-out": "timed out", "check-error": "check could not finish", "not-graded": "not graded",
            "no-submission": "no submission"}.get(diagnosis, diagnosis)


# -- Markdown ---------------------------------------------------------------------------------------------------


def markdown(summaries: list[ExerciseSummary], names: bool) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    who = " | students" if names else ""
    lines = ["# Class report: what went wrong", "",
             "Each failed exercise is diagnosed by the first named mistake its answer matched (the hint the student "
             "saw), `other-wrong-answer` when none matched, or the error the code raised.", "",
             "## Most common, whole class", "", f"| submissions | assignment | exercise | diagnosis | hint{who} |",
             "|---:|---|---|---|---|" + ("---|" if names else "")]
    for f in most_common(summaries):
        students = f" | {cell(', '.join(f.students))}" if names else ""
        lines.append(f"| {f.count} | {f.assignment} | {f.exercise} | `{plain(f.diagnosis)}` | {cell(f.hint)}"
                     f"{students} |")
    for assignment in dict.fromkeys(s.assignment for s in summaries):
        lines += ["", f"## {assignment}", "", "| exercise | passed | diagnoses (submissions) |", "|---|---:|---|"]
        for s in (s for s in summaries if s.assignment == assignment):
            found = ", ".join(f"`{plain(f.diagnosis)}` ({f.count})" for f in s.findings) or "none"
            lines.append(f"| {s.exercise} | {s.passed}/{s.submissions} ({s.pass_rate:.0%}) | {found} |")
    return "\n".join(lines) + "\n"


# -- HTML -------------------------------------------------------------------------------------------------------

STYLE = ("body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;"
         "vertical-align:top}th{background:#f3f3f3}code{background:#f6f6f6;padding:0 .2em}img{max-width:100%}")


def html_page(summaries: list[ExerciseSummary], charts: dict[str, str], names: bool) -> str:
    e = html.escape

    def students(f: Finding) -> str:
        return f"<td>{e(', '.join(f.students))}</td>" if names else ""

    head = "<th>submissions</th><th>assignment</th><th>exercise</th><th>diagnosis</th><th>hint</th>"
    rows = "".join(
        f"<tr><td>{f.count}</td><td>{e(f.assignment)}</td><td>{e(f.exercise)}</td><td><code>{e(plain(f.diagnosis))}"
        f"</code></td><td>{e(f.hint)}</td>{students(f)}</tr>"
        for f in most_common(summaries))
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Class report</title><style>{STYLE}</style>"
             "</head><body><h1>Class report: what went wrong</h1><p>Each failed exercise is diagnosed by the first "
             "named mistake its answer matched (with the hint the student saw), <code>other-wrong-answer</code> when "
             "none matched, or the error the code raised. Students are "
             + ("named." if names else "counted, not named (grade with <code>--names</code> to list them).")
             + f"</p><h2>Most common, whole class</h2><table><tr>{head}{'<th>students</th>' if names else ''}</tr>"
             f"{rows}</table>"]
    for assignment in dict.fromkeys(s.assignment for s in summaries):
        parts.append(f"<h2>{e(assignment)}</h2><table><tr><th>exercise</th><th>passed</th><th>diagnoses</th></tr>")
        for s in (s for s in summaries if s.assignment == assignment):
            found = "<br>".join(f"<code>{e(plain(f.diagnosis))}</code>: {f.count}" for f in s.findings) or "none"
            parts.append(f"<tr><td>{e(s.exercise)}</td><td>{s.passed}/{s.submissions} ({s.pass_rate:.0%})</td>"
                         f"<td>{found}</td></tr>")
        parts.append("</table>")
        if assignment in charts:
            parts.append(f"<img src='{e(charts[assignment])}' alt='diagnoses of {e(assignment)}'>")
    return "".join(parts) + "</body></html>\n"


# -- the chart --------------------------------------------------------------------------------------------------


def draw_chart(summaries: list[ExerciseSummary], assignment: str, path: Path) -> None:
    """Horizontal bars: one per (exercise, diagnosis) of ``assignment``, in gradebook order, longest first within."""
    from matplotlib.figure import Figure

    bars = [(f"{s.exercise}: {plain(f.diagnosis)}", f.count, index) for index, s in
            enumerate(x for x in summaries if x.assignment == assignment) for f in s.findings]
    submissions = max((s.submissions for s in summaries if s.assignment == assignment), default=0)
    figure = Figure(figsize=(8, 1.2 + 0.32 * max(len(bars), 1)), layout="constrained")
    axes = figure.add_subplot()
    colours = [f"C{index % 10}" for _, _, index in bars]
    axes.barh(range(len(bars)), [count for _, count, _ in bars], color=colours)
    axes.set_yticks(range(len(bars)), [label for label, _, _ in bars])
    axes.invert_yaxis()
    axes.set_xlabel("submissions")
    figure.suptitle(f"{assignment}: what went wrong ({submissions} submissions)")
    axes.xaxis.get_major_locator().set_params(integer=True)
    figure.savefig(path, dpi=110)


def write_class_report(rows: list[Row], out_dir: Path, names: bool = False) -> Path:
    """Write the report files into ``out_dir`` (keeping earlier ones); return the HTML page's path."""
    summaries = summarise(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    charts = {}
    for number, assignment in enumerate(dict.fromkeys(s.assignment for s in summaries), start=1):
        name = f"class_report_{''.join(c if c.isalnum() or c in '_-' else '_' for c in assignment) or number}.png"
        keep_previous(out_dir / name)
        draw_chart(summaries, assignment, out_dir / name)
        charts[assignment] = name
    md_path, html_path = out_dir / "class_report.md", out_dir / "class_report.html"
    for path in (md_path, html_path):
        keep_previous(path)
    md_path.write_text(markdown(summaries, names), encoding="utf-8")
    html_path.write_text(html_page(summaries, charts, names), encoding="utf-8")
    return html_path

