"""The course's notebook folders, shared by the harness tests."""

from course_tools import EXERCISES_DIR, NOTEBOOKS_DIR, ROOT, SOLUTIONS_DIR
from course_tools.notebook_files import notebooks_in

LESSONS = notebooks_in(NOTEBOOKS_DIR)
SOLUTIONS = notebooks_in(SOLUTIONS_DIR)
EXERCISES = notebooks_in(EXERCISES_DIR)
EXECUTED = LESSONS + SOLUTIONS


def short(path):
    """A readable test id: notebooks/01_similarity.ipynb."""
    return str(path.relative_to(ROOT))
