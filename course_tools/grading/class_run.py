"""Grading a whole class: submissions in parallel worker processes, with a progress bar, in the order given.

The grader never runs submitted code itself: each worker starts a sealed-off kernel per submission. If a worker
process dies anyway (the machine's out-of-memory killer, say), the pool breaks: every submission it had not finished
is graded again alone, in a fresh worker; one that kills that worker too is recorded as not graded.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from tqdm import tqdm

from .isolation import Isolation
from .kernel import KernelSettings
from .results import ExerciseGrade, Status, SubmissionGrade
from .scoring import grade_submission
from .submissions import Submission


def crashed_grade(submission: Submission, error: BaseException, isolation: Isolation) -> SubmissionGrade:
    """0 points and a note, for a submission whose grading failed even when graded alone (its worker died, or the
    grader itself raised)."""
    reason = (f"the grader's worker process died while grading this file ({type(error).__name__}): grade it alone"
              if isinstance(error, BrokenProcessPool) else f"the grader failed on this file: {type(error).__name__}: "
              f"{error} (please report it)")
    exercises = [ExerciseGrade(e.id, 0, e.points, Status.NOT_GRADED, [reason], diagnosis="not-graded")
                 for e in (submission.assignment.exercises if submission.assignment else ())]
    return SubmissionGrade(student=submission.student, file=str(submission.path), sha256=submission.sha256,
                           assignment=submission.assignment.name if submission.assignment else "?",
                           exercises=exercises, notes=[reason], isolation=isolation.name)


def grade_in_pool(submissions: list[Submission], settings: KernelSettings, isolation: Isolation, jobs: int,
                  bar: tqdm) -> tuple[dict[int, SubmissionGrade], dict[int, BaseException]]:
    """Grade ``submissions`` in one pool of ``jobs`` workers: the grades, and the error of each one that broke."""
    grades, errors = {}, {}
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(submissions)))) as pool:
        futures = {pool.submit(grade_submission, s, settings, isolation): i for i, s in enumerate(submissions)}
        for future in as_completed(futures):
            try:
                grades[futures[future]] = future.result()
                bar.update()
            except Exception as error:  # the worker died (and the pool with it): graded again, alone
                errors[futures[future]] = error
    return grades, errors


def grade_class(submissions: list[Submission], settings: KernelSettings, isolation: Isolation, jobs: int = 2,
                progress: bool = True) -> list[SubmissionGrade]:
    """Every submission's grade (``jobs`` at a time), in the order given."""
    with tqdm(total=len(submissions), desc="[course] grading", unit="submission", file=sys.stderr,
              disable=not progress) as bar:
        grades, broken = grade_in_pool(submissions, settings, isolation, jobs, bar)
        for index in sorted(broken):  # one at a time, so that a submission that kills its worker harms no other
            alone, error = grade_in_pool([submissions[index]], settings, isolation, 1, bar)
            if error:
                bar.update()
            grades[index] = alone.get(0) or crashed_grade(submissions[index], error[0], isolation)
    return [grades[index] for index in range(len(submissions))]
