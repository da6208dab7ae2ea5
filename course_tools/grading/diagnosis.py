"""What went wrong in one exercise, as one short id the class report counts.

A failed check records, per failed comparison, the id of the named mistake the answer matched (``missing-sqrt-dk``),
``other-wrong-answer``, or ``error:<ExceptionType>`` (see ``transformer_lib/checks/_feedback.py``). The exercise's
diagnosis is its first named mistake, else its first error, else ``other-wrong-answer``. Exercises that never reached
a comparison are diagnosed by how they ended (``not-attempted``, ``missing-function``, ``timed-out``, ``check-error``).
The diagnoses come out of the submission's kernel with its points, so they are read as untrusted text: ids that are not
short plain words become ``unreadable-diagnosis``.
"""

from __future__ import annotations

import re
from typing import Any

from .results import Status

OTHER_WRONG_ANSWER = "other-wrong-answer"
UNREADABLE = "unreadable-diagnosis"
SAFE_ID = re.compile(r"(error:)?[A-Za-z0-9][A-Za-z0-9_.-]{0,59}")
MAX_DIAGNOSES = 50
MAX_HINT_CHARS = 300

BY_STATUS = {
    Status.PASSED: "",
    Status.NOT_ATTEMPTED: "not-attempted",
    Status.MISSING: "missing-function",
    Status.TIMED_OUT: "timed-out",
    Status.ERROR: "check-error",
    Status.NOT_GRADED: "not-graded",
}


def safe_id(value: Any) -> str:
    return value if isinstance(value, str) and SAFE_ID.fullmatch(value) else UNREADABLE


def safe_hint(value: Any) -> str:
    text = " ".join(value.split()) if isinstance(value, str) else ""
    return text if len(text) <= MAX_HINT_CHARS else text[: MAX_HINT_CHARS - 1] + "…"


def failed_check_diagnosis(diagnoses: Any) -> tuple[str, str]:
    """(diagnosis id, the hint shown for it) of a failed exercise, from its check's recorded diagnoses."""
    records = [d for d in diagnoses[:MAX_DIAGNOSES] if isinstance(d, dict)] if isinstance(diagnoses, list) else []
    found = [(safe_id(d.get("mistake")), safe_hint(d.get("hint"))) for d in records]
    named = [f for f in found if f[0] not in (OTHER_WRONG_ANSWER, UNREADABLE) and not f[0].startswith("error:")]
    errors = [f for f in found if f[0].startswith("error:")]
    for choice in (named, errors, found):
        if choice:
            return choice[0]
    return OTHER_WRONG_ANSWER, ""
