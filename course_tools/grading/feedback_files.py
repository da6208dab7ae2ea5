"""One Markdown feedback file per submission, for the teacher to hand back: ``feedback/<assignment>/<student>.md``.

Each lists the exercises' points and, for each one not passed, what the learner's own notebook would have printed
(the ✘ lines and their hints). An earlier ``feedback/`` folder is kept (renamed with its time), never replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

from .gradebook import as_points, keep_previous
from .results import Status, SubmissionGrade
from .roster import Row


def file_name(text: str) -> str:
    """A name safe on every file system: letters, digits, ``-``, ``_`` and ``.`` only, never ``..``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "unnamed"
    return name[:80]


def feedback_markdown(grade: SubmissionGrade) -> str:
    lines = [f"# {grade.assignment}: feedback for {grade.student}", "",
             f"**{as_points(grade.total)} of {grade.max_points} points**", ""]
    lines += [f"- note: {note}" for note in grade.notes]
    lines += [""] if grade.notes else []
    for e in grade.exercises:
        lines.append(f"## {Status(e.status).symbol} {e.id}: {as_points(e.points)}/{e.max_points} ({e.status})")
        if e.status != Status.PASSED:
            lines += ["", "```text", *e.lines, "```"] if e.lines else []
        lines.append("")
    return "\n".join(lines)


def write_feedback(rows: list[Row], out_dir: Path) -> Path:
    """Write every submitted row's feedback under ``out_dir/feedback/``; return that folder."""
    folder = out_dir / "feedback"
    keep_previous(folder)
    used: set[Path] = set()
    for row in rows:
        if not row.grade.file:  # a roster student with no submission: nothing to hand back
            continue
        base = folder / file_name(row.grade.assignment) / file_name(row.grade.student)
        path, number = base.with_name(f"{base.name}.md"), 2
        while path in used:
            path, number = base.with_name(f"{base.name}-{number}.md"), number + 1
        used.add(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(feedback_markdown(row.grade), encoding="utf-8")
    return folder
