"""Exercise checks: one module per lesson (``from transformer_lib.checks import ex01_similarity as check``).

Each check compares the student's code with the course library and prints ``✔``/``✘`` lines with hints.
"""

from ._feedback import CheckResult, Exercise, Hint, describe_mismatch, format_value, show_hint

__all__ = ["CheckResult", "Exercise", "Hint", "describe_mismatch", "format_value", "show_hint"]
