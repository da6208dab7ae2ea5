"""What grading one submission produces: a status per exercise, points, feedback lines and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    """How an exercise's check ended (the value is what the gradebook writes)."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_ATTEMPTED = "not attempted"  # the stub is still there
    MISSING = "missing"  # the function the check needs was never defined
    TIMED_OUT = "timed out"
    ERROR = "error"  # the check could not finish (the kernel died, a forged result, …)
    NOT_GRADED = "not graded"  # never reached: not a notebook, grading stopped early, no submission

    @property
    def symbol(self) -> str:
        return {"passed": "✔", "failed": "✘", "not attempted": "·", "missing": "?", "timed out": "⏱", "error": "!",
                "not graded": "-"}[self.value]


@dataclass
class ExerciseGrade:
    id: str
    points: float  # an int, unless --partial-credit gave a share of them
    max_points: int
    status: Status
    lines: list[str] = field(default_factory=list)
    checks_passed: int = 0  # how many of the checks that ran passed (for --partial-credit)
    checks_total: int = 0
    diagnosis: str = ""  # what went wrong, for the class report: a mistake id (see ``diagnosis.py``); "" if passed
    diagnosis_hint: str = ""  # the hint the learner saw for it


@dataclass
class SubmissionGrade:
    student: str
    file: str
    sha256: str
    assignment: str
    exercises: list[ExerciseGrade] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    library_changed: bool = False  # the course library on disk changed while this submission ran
    isolation: str = ""  # "bubblewrap", or "none (--unsandboxed)": how its code was sealed off

    @property
    def total(self) -> float:
        return sum(exercise.points for exercise in self.exercises)

    @property
    def max_points(self) -> int:
        return sum(exercise.max_points for exercise in self.exercises)
