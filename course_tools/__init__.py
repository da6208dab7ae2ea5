"""The work `course.py` starts inside the course's environment: executing notebooks, generating exercises,
grading submissions and running the whole test suite. Not part of the teaching library."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
SOLUTIONS_DIR = ROOT / "solutions"
EXERCISES_DIR = ROOT / "exercises"
# Where lessons keep trained models between notebooks; transformer_lib.checkpoints.lesson_checkpoint reads it.
CHECKPOINTS_VARIABLE = "TRANSFORMER_LIB_CHECKPOINTS"
# Where recipes cache trained models (transformer_lib.model_cache reads it); the test command gives each run its own.
MODEL_CACHE_VARIABLE = "TRANSFORMER_LIB_CACHE"
# The repository's public address and branch: `python3 course.py colab-links` writes the "Open in Colab" links and
# the Colab setup cell of every notebook from them (run it after changing either).
REPOSITORY_URL = "https://github.com/transformer-course/transformer-course"
REPOSITORY_BRANCH = "main"
# Trained-claim tests (tests/bounds.py): the seeds they run when set ("0,1,2,3,4"), and a file each bound is appended
# to as a JSON line; `python3 course.py bounds` sets both for every kernel setting and tabulates the margins.
BOUND_SEEDS_VARIABLE = "COURSE_BOUND_SEEDS"
BOUNDS_FILE_VARIABLE = "COURSE_BOUNDS_FILE"
# Time budgets at the reference machine's speed (transformer_lib.speed.REFERENCE_STEPS_PER_S steps/s of the yardstick):
# a lesson run in course order (the models earlier lessons trained already cached), and one opened first (an empty
# model cache and checkpoint folder).
LESSON_BUDGET_S = 45.0
FIRST_OPEN_BUDGET_S = 90.0
