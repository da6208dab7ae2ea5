"""Runs inside a submission's kernel, after the student's cells: one exercise's check, its result printed as JSON.

Standard library only at import time. The course library is imported afresh (every ``transformer_lib`` module is
dropped from ``sys.modules`` first), so a copy the student patched in memory is not the one that checks.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any


def fresh_check_module(name: str) -> Any:
    """``transformer_lib.checks.<name>``, imported again from disk (the disk copy is read-only in the sandbox)."""
    for module in [m for m in sys.modules if m == "transformer_lib" or m.startswith("transformer_lib.")]:
        del sys.modules[module]
    return importlib.import_module(f"transformer_lib.checks.{name}")


def report(namespace: dict[str, Any], check_module: str, call: str, needs: list[str], marker: str) -> None:
    """Run ``call`` (``check.norm(norm)``) on the student's ``namespace``; print ``marker`` + the result as JSON."""
    missing = [name for name in needs if name not in namespace]
    if missing:
        payload: dict[str, Any] = {"missing": missing}
    else:
        scope = {**namespace, "check": fresh_check_module(check_module)}
        payload = {"result": eval(call, scope).to_dict()}  # the call comes from solutions/, not the student
    print(marker + json.dumps(payload), flush=True)


def cell_source(check_module: str, call: str, needs: tuple[str, ...], marker: str) -> str:
    """The code cell the grader appends to run one check in the kernel."""
    return (f"from course_tools.grading.in_kernel import report as _grader_report\n"
            f"_grader_report(globals(), {check_module!r}, {call!r}, {list(needs)!r}, {marker!r})")
