"""The solution-notebook format, in one place: what ``exercises.py`` strips and what the grader reads.

A solved notebook in ``solutions/`` marks the code a student writes between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` (nbgrader's markers). Each exercise ends with a check cell whose metadata is
``{"exercise": {"id": …, "points": P}}`` and whose source is exactly one call ``check.<name>(<student function>…)``;
the setup cell imports ``from transformer_lib.checks import exNN_topic as check``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import nbformat

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
STUB_LINES = ("# YOUR CODE HERE", "raise NotImplementedError()")
EXERCISE_KEY = "exercise"  # the check cell's metadata key
CHECK_IMPORT = re.compile(r"^\s*from\s+transformer_lib\.checks\s+import\s+(ex\w+)\s+as\s+check\b", re.MULTILINE)


class SolutionMarkerError(ValueError):
    """A solution region is not closed, or an END marker has no BEGIN."""


def strip_solutions(source: str, where: str = "cell", replacement: Sequence[str] = STUB_LINES) -> str:
    """Replace every marked solution region of ``source`` with the stub (or the lines of ``replacement``), indented
    like the markers."""
    kept: list[str] = []
    inside = False
    for line in source.splitlines():
        marker = line.strip()
        if marker == BEGIN_SOLUTION:
            if inside:
                raise SolutionMarkerError(f"{where}: nested '{BEGIN_SOLUTION}'")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            kept.extend(indent + line for line in replacement)
        elif marker == END_SOLUTION:
            if not inside:
                raise SolutionMarkerError(f"{where}: '{END_SOLUTION}' without '{BEGIN_SOLUTION}'")
            inside = False
        elif not inside:
            kept.append(line)
    if inside:
        raise SolutionMarkerError(f"{where}: '{BEGIN_SOLUTION}' is never closed by '{END_SOLUTION}'")
    return "\n".join(kept)


def check_module_of(text: str) -> str | None:
    """The check module a notebook's code imports as ``check`` (``ex01_similarity``), or None."""
    found = CHECK_IMPORT.search(text)
    return found.group(1) if found else None


def check_call_parts(source: str) -> tuple[str, tuple[str, ...]] | None:
    """For a source that is exactly one call ``check.<name>(…)``: the call and the other names it uses."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Call):
        return None
    call = body[0].value
    if not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "check"):
        return None
    needs = tuple(dict.fromkeys(
        node.id for argument in [*call.args, *(k.value for k in call.keywords)]
        for node in ast.walk(argument) if isinstance(node, ast.Name)
    ))
    return ast.unparse(call), needs


def is_check_cell(cell: nbformat.NotebookNode) -> bool:
    """A check cell: marked with exercise metadata, or one call ``check.<name>(…)`` (a student's copy of one)."""
    return EXERCISE_KEY in cell.metadata or check_call_parts(cell.source) is not None
