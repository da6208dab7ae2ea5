"""Grading a whole class: submissions in parallel worker processes, with a progress bar, in the order given.

The grader never runs submitted code itself: each worker starts a sealed-off kernel per submission. If a worker
process dies anyway (the machine's out-of-memory killer, say), its submissions are graded again in a fresh pool;
one that kills its worker twice is recorded as not graded, and every other submission still gets its grade.
"""

from __future__ import annotations

import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm import tqdm

from .isolation import Isolation
from .kernel import KernelSettings
from .results import ExerciseGrade, Status, SubmissionGrade
from .scoring import grade_submission
from .submissions import Submission

ATTEMPTS = 2


def crashed_grade(submission: Submission, error: BaseException, isolation: Isolation) -> SubmissionGrade:
    """0 points and a note, for a submission whose grading process died twice."""
    reason = f"the grader's worker process died while grading this file ({type(error).__name__}): grade it alone"
    exercises = [ExerciseGrade(e.id, 0, e.points, Status.NOT_GRADED, [reason])
                 for e in (submission.assignment.exercises if submission.assignment else ())]
    return SubmissionGrade(student=submission.student, file=str(submission.path), sha256=submission.sha256,
                           assignment=submission.assignment.name if submission.assignment else "?",
                           exercises=exercises, notes=[reason], isolation=isolation.name)


def grade_class(submissions: list[Submission], settings: KernelSettings, isolation: Isolation, jobs: int = 2,
                progress: bool = True) -> list[SubmissionGrade]:
    """Every submission's grade (``jobs`` at a time), in the order given."""
    grades: dict[int, SubmissionGrade] = {}
    attempts: Counter[int] = Counter()
    pending = list(range(len(submissions)))
    with tqdm(total=len(submissions), desc="[course] grading", unit="submission", file=sys.stderr,
              disable=not progress) as bar:
        while pending:
            again = []
            with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(pending)))) as pool:
                futures = {pool.submit(grade_submission, submissions[i], settings, isolation): i for i in pending}
                for future in as_completed(futures):
                    index = futures[future]
                    try:
                        grades[index] = future.result()
                    except Exception as error:  # the worker died or broke: try once more, then record it
                        attempts[index] += 1
                        if attempts[index] < ATTEMPTS:
                            again.append(index)
                            continue
                        grades[index] = crashed_grade(submissions[index], error, isolation)
                    bar.update()
            pending = sorted(again)
    return [grades[index] for index in range(len(submissions))]
