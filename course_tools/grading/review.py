"""Flags for the teacher: submitted code that reaches for the machinery the checks run on.

This is not protection (README, "What grading protects"): a submission's code shares its kernel with the checks, so
it can fake its own marks. These patterns are the usual ways to try; plain exercise code needs none of them, so a
submission that uses one gets a note asking for a look by hand. Lines the course itself puts in exercise notebooks
are not counted: the import of the check module as ``check``, the import of ``show_hint`` (which only prints a hint)
and the Colab setup cell's test for ``google.colab``.
"""

from __future__ import annotations

import re

import nbformat

from .solution_format import CHECK_IMPORT, is_check_cell

TAMPERING = {  # what the note names → the pattern that finds it
    "sys.modules": r"\bsys\s*\.\s*modules\b",
    "builtins": r"\b__builtins__\b|\bimport\s+builtins\b|\bbuiltins\s*\.",
    "__import__ or importlib": r"\b__import__\b|\bimportlib\b",
    "the course's check code": r"\btransformer_lib\s*\.\s*checks\b|\b_feedback\b|\bcourse_tools\b",
    "frames or the garbage collector": r"\bsys\s*\.\s*_getframe\b|\binspect\s*\.\s*(stack|currentframe)\b"
                                       r"|\bgc\s*\.\s*get_(objects|referrers)\b",
    "tracing or audit hooks": r"\bsys\s*\.\s*(settrace|setprofile|addaudithook)\b",
    "ctypes": r"\bctypes\b",
    "replaced library functions": r"^\s*(torch|np|numpy|math)(\s*\.\s*\w+)+\s*=(?!=)",
}
EVERY_NOTEBOOK = re.compile(CHECK_IMPORT.pattern + r'|^\s*if "google\.colab" in sys\.modules:\s*$'
                            r"|^\s*from transformer_lib\.checks import show_hint\b[^;\n]*$", re.MULTILINE)


def tampering_in(nb: nbformat.NotebookNode) -> list[str]:
    """The kinds of tampering the student's code cells show (check cells and the check import left out)."""
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code" and not is_check_cell(cell))
    code = EVERY_NOTEBOOK.sub("", code)
    return [name for name, pattern in TAMPERING.items() if re.search(pattern, code, re.MULTILINE)]


def review_note(nb: nbformat.NotebookNode) -> str | None:
    """A note for the gradebook when the code uses any of ``TAMPERING``, else None."""
    found = tampering_in(nb)
    if not found:
        return None
    return (f"review by hand: the code uses {', '.join(found)}, which can tamper with the checks in its own kernel "
            "(its marks may be faked; no other submission is affected)")
