"""Friendly, specific feedback for exercises.

A check function builds an :class:`Exercise`, runs the student's code inside ``with ex.run():`` and compares what
came back with what the course library computes. Every comparison prints one line::

    ✔ <what was checked>
    ✘ <what was checked>: expected <…>, got <…>
      hint: <the likely mistake>

A stub the student has not filled in yet (it still raises ``NotImplementedError``) is reported as
"not attempted yet", without a traceback. The check returns a :class:`CheckResult`, which the grader reads.

A hint can come in two tiers (:class:`Hint`): the idea on the first failure of a check, the code-level step only when
the same check fails again, or when the learner asks with ``show_hint("<exercise>")``.

Every failed check also records a diagnosis (``CheckResult.diagnoses``) that the grader's class report counts: the
``id`` of the named mistake the answer matched (``missing-sqrt-dk``), ``other-wrong-answer`` when none matched, or
``error:<ExceptionType>`` when the student's code raised.
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

PASS_MARK = "✔"
FAIL_MARK = "✘"
NOT_ATTEMPTED = "not attempted yet"
OTHER_WRONG_ANSWER = "other-wrong-answer"


@dataclass(frozen=True)
class Hint:
    """A hint: ``idea`` names the mistake; ``code`` (optional) is the code-level step, shown only on a second failure
    or on request; ``id`` (optional) is the mistake's stable short name in the teacher's report (``missing-sqrt-dk``).
    """

    idea: str
    code: str = ""
    id: str = ""

    def __str__(self) -> str:
        return self.idea


# How often each (exercise, check) failed in this kernel, and the code-level hints of each exercise's last run.
_FAILURES: dict[tuple[str, str], int] = {}
_LAST_CODE_HINTS: dict[str, list[str]] = {}


def show_hint(exercise: str) -> None:
    """Print the code-level hints of the checks that failed the last time ``exercise`` was checked."""
    hints = _LAST_CODE_HINTS.get(exercise)
    if hints is None:
        print(f"{exercise} has not been checked yet in this session: run its check cell first.")
    elif not hints:
        print(f"No code-level hint for {exercise}: its last check had no failure with one.")
    else:
        for hint in hints:
            print(f"next step: {hint}")


@dataclass
class CheckResult:
    """The outcome of one exercise's checks (what the grader records)."""

    exercise: str
    attempted: bool = True
    passed: int = 0
    total: int = 0
    lines: list[str] = field(default_factory=list)
    # One per failed check: {"check": what was checked, "mistake": its diagnosis id, "hint": the hint shown}.
    diagnoses: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the exercise was attempted and every check passed."""
        return self.attempted and self.total > 0 and self.passed == self.total

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def _ipython_display_(self) -> None:
        """Show nothing: the lines were already printed while checking."""


class _StopChecking(Exception):
    """Raised inside ``Exercise.run`` when later checks cannot go on (the student's code failed)."""


class Exercise:
    """Collects the checks of one exercise and prints each line as it is decided."""

    def __init__(self, name: str):
        self.result = CheckResult(exercise=name)
        _LAST_CODE_HINTS[name] = []

    # -- running the student's code -------------------------------------------------------------------------

    @contextmanager
    def run(self) -> Iterator[Exercise]:
        """Run checks; a stub reports "not attempted yet", any other error becomes a failed check."""
        try:
            yield self
        except NotImplementedError:
            self.result.attempted = False
        except _StopChecking:
            pass
        except Exception as error:  # the student's code (or its result) broke a check: say so, kindly
            self._fail_line(
                f"your code raised {type(error).__name__}: {error}",
                hint=_location_hint(error),
                mistake=error_diagnosis(error),
            )
        self._summarise()

    def call(self, function: Callable[..., Any], *args: Any, description: str | None = None, **kwargs: Any) -> Any:
        """Call the student's ``function``; a crash becomes one ✘ line naming the call and stops the checks."""
        if not callable(function):
            self._fail_line(
                f"expected a function, got {type(function).__name__}",
                hint="pass the function itself (no parentheses) to the check",
                mistake="not-a-function",
            )
            raise _StopChecking
        try:
            return function(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as error:
            name = getattr(function, "__name__", "your function")
            self._fail_line(
                f"{description or name + '(…)'} raised {type(error).__name__}: {error}",
                hint=_location_hint(error),
                mistake=error_diagnosis(error),
            )
            raise _StopChecking from None

    # -- comparisons -------------------------------------------------------------------------------------------

    def compare(
        self,
        what: str,
        got: Any,
        expected: Any,
        *,
        hint: str | Hint | None = None,
        mistakes: dict[str | Hint, Any] | None = None,
        atol: float = 1e-5,
        rtol: float = 1e-4,
        check_dtype: bool = False,
    ) -> bool:
        """Compare ``got`` with ``expected``: kind, then shape, then dtype (optional), then values.

        ``mistakes`` maps a hint to the value a typical wrong answer produces; when ``got`` matches one of them, that
        hint is shown instead of the generic ``hint``.
        """
        problem = describe_mismatch(got, expected, atol=atol, rtol=rtol, check_dtype=check_dtype)
        if problem is None:
            self._pass_line(what)
            return True
        mistake = OTHER_WRONG_ANSWER
        for mistake_hint, wrong_value in (mistakes or {}).items():
            if describe_mismatch(got, wrong_value, atol=atol, rtol=rtol) is None:
                hint, mistake = mistake_hint, mistake_id(mistake_hint)
                break
        self._fail_line(f"{what}: {problem}", hint=hint, check=what, mistake=mistake)
        return False

    def require(self, what: str, condition: bool, *, problem: str = "", hint: str | Hint | None = None) -> bool:
        """A yes/no check: ``problem`` says what was wrong when ``condition`` is false; ``hint`` names the mistake."""
        if condition:
            self._pass_line(what)
            return True
        self._fail_line(f"{what}: {problem}" if problem else what, hint=hint, check=what,
                        mistake=mistake_id(hint) if hint else OTHER_WRONG_ANSWER)
        return False

    # -- output --------------------------------------------------------------------------------------------------

    def _pass_line(self, text: str) -> None:
        self.result.total += 1
        self.result.passed += 1
        self._emit(f"{PASS_MARK} {text}")

    def _fail_line(self, text: str, hint: str | Hint | None = None, check: str | None = None,
                   mistake: str = OTHER_WRONG_ANSWER) -> None:
        self.result.total += 1
        self.result.diagnoses.append({"check": check or text, "mistake": mistake, "hint": str(hint or "")})
        self._emit(f"{FAIL_MARK} {text}")
        if not hint:
            return
        self._emit(f"  hint: {hint}")
        if isinstance(hint, Hint) and hint.code:
            key = (self.result.exercise, check or text)
            _FAILURES[key] = _FAILURES.get(key, 0) + 1
            _LAST_CODE_HINTS[self.result.exercise].append(hint.code)
            if _FAILURES[key] > 1:
                self._emit(f"  next step: {hint.code}")
            else:
                self._emit(f"  (still stuck? `from transformer_lib.checks import show_hint; "
                           f'show_hint("{self.result.exercise}")` shows the code-level step)')

    def _emit(self, line: str) -> None:
        self.result.lines.append(line)
        print(line)

    def _summarise(self) -> None:
        r = self.result
        if not r.attempted:
            self._emit(
                f"… {r.exercise}: {NOT_ATTEMPTED}. Replace `raise NotImplementedError()` with your code, "
                "run that cell, then run this one again."
            )
        elif r.ok:
            every = "the only check" if r.total == 1 else f"all {r.total} checks"
            self._emit(f"Well done: {every} of {r.exercise} passed.")
        else:
            checks = "check" if r.total == 1 else "checks"
            self._emit(f"{r.exercise}: {r.passed} of {r.total} {checks} passed. Read the hints above and try again.")


def mistake_id(hint: str | Hint) -> str:
    """A named mistake's short id: the hint's ``id``, else one made from its first words (``you-returned-dot``)."""
    if isinstance(hint, Hint) and hint.id:
        return hint.id
    words = re.findall(r"[a-z0-9]+", str(hint).lower())[:5]
    return "-".join(words) or OTHER_WRONG_ANSWER


def error_diagnosis(error: BaseException) -> str:
    """The diagnosis of a check stopped by the student's code raising: ``error:ValueError``."""
    return f"error:{type(error).__name__}"


def _location_hint(error: BaseException) -> str:
    """Point at the line of the student's notebook cell that raised, when there is one."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if "ipykernel" in frame.filename or frame.filename.startswith("<"):
            return f"the error comes from this line of your code: `{(frame.line or '').strip()}`"
    return "read the error message above; run your cell again after fixing it"


# -- describing differences ------------------------------------------------------------------------------------


def _as_array(value: Any) -> np.ndarray | None:
    """A NumPy view of tensors, arrays, numbers and (nested) lists; None for anything else."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, bool | int | float | np.number):
        return np.asarray(value)
    if isinstance(value, list | tuple):
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            return None
        return array
    return None


def format_value(value: Any, max_items: int = 8) -> str:
    """A short, rounded rendering of a value for a feedback line."""
    array = _as_array(value)
    if array is None or array.dtype == object:
        return repr(value)
    if array.ndim == 0:
        return _format_number(array.item())
    flat = array.reshape(-1)
    body = ", ".join(_format_number(x) for x in flat[:max_items].tolist())
    more = ", …" if flat.size > max_items else ""
    return f"[{body}{more}] (shape {tuple(array.shape)})" if array.ndim > 1 or more else f"[{body}]"


def _format_number(x: Any) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return f"{x:.4g}"


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "a torch tensor"
    if isinstance(value, np.ndarray):
        return "a NumPy array"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int | float | np.number):
        return "a number"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def describe_mismatch(
    got: Any, expected: Any, *, atol: float = 1e-5, rtol: float = 1e-4, check_dtype: bool = False
) -> str | None:
    """Say what differs first (kind, shape, dtype or values), or return None when ``got`` matches ``expected``."""
    expected_array = _as_array(expected)
    if expected_array is None or expected_array.dtype == object:
        return None if got == expected else f"expected {expected!r}, got {got!r}"
    got_array = _as_array(got)
    if got_array is None:
        hint = " (did you forget a `return`?)" if got is None else ""
        return f"expected {_kind(expected)}, got {_kind(got)}{hint}"
    if got_array.shape != expected_array.shape:
        return f"expected shape {tuple(expected_array.shape)}, got shape {tuple(got_array.shape)}"
    if check_dtype and isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor):
        if got.dtype != expected.dtype:
            return f"expected dtype {expected.dtype}, got dtype {got.dtype}"
    if expected_array.dtype == bool or got_array.dtype == bool:
        if got_array.dtype != bool:
            return f"expected a boolean result, got dtype {got_array.dtype}: {format_value(got)}"
        expected_bool = expected_array.astype(bool)
        differs = got_array != expected_bool
        if not differs.any():
            return None
        return f"expected {format_value(expected)}, got {format_value(got)}" + _first_difference(
            differs, expected_bool, got_array)
    got_float = got_array.astype(np.float64)
    expected_float = expected_array.astype(np.float64)
    if np.isnan(got_float).any() and not np.isnan(expected_float).any():
        return f"your result contains NaN: {format_value(got)}"
    differs = ~np.isclose(got_float, expected_float, atol=atol, rtol=rtol, equal_nan=True)
    if not differs.any():
        return None
    return f"expected {format_value(expected)}, got {format_value(got)}" + _first_difference(
        differs, expected_float, got_float)


def _first_difference(differs: np.ndarray, expected: np.ndarray, got: np.ndarray) -> str:
    """Where the first wrong entry of an array is, with both values (nothing to add for a single number)."""
    if differs.ndim == 0:
        return ""
    index = tuple(int(i) for i in np.argwhere(differs)[0])
    shown = index[0] if len(index) == 1 else index
    return (f"; first difference at index {shown}: expected {_format_number(expected[index].item())}, "
            f"got {_format_number(got[index].item())}")
