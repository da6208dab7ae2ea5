"""Views: plots and widgets built on the core, one module per lesson, named like it (``views/masking.py`` for
``05_masking.ipynb``); ``plots`` holds the shared drawing helpers and ``widget`` the scaffold of every widget. Import
from the submodule, e.g. ``from transformer_lib.views.similarity import vector_angle_widget``.

A widget builder returns a :class:`~transformer_lib.views.widget.LessonWidget`: its ``controls`` and its computed
``state`` are attributes, so tests drive it without a browser (set a control's ``value``, read the ``state`` it
produced). The numbers come from the core; a view only lays them out and draws them.
"""
