"""Grading a class's exercise notebooks (``python3 course.py grade``), one small step per module:

``solution_format`` (the solved-notebook format) → ``assignments`` (what each exercise checks) → ``submissions``
(files read into memory, students named) → ``isolation`` + ``limits`` (the sandbox) → ``kernel`` (run cells in one
sealed-off kernel) with ``in_kernel`` (the check, inside it) → ``scoring`` (outputs into points and feedback) and
``review`` (flags for a look by hand), ``diagnosis`` (which mistake) → ``class_run`` (a whole class, in parallel, with
progress) → ``roster`` + ``gradebook`` (the files) + ``class_report`` (the class's mistakes) + ``feedback_files`` (one
file per student) ← ``cli``. Nothing is imported here, so the kernel can import ``in_kernel`` and ``limits``
without the rest.
"""
