"""Views: plots and widgets built on the core. Import from the submodule, e.g.
``from transformer_lib.views.similarity import vector_angle_widget``.

Widget builders return an ipywidgets container whose controls and computed state are attributes, so tests can drive
them without a browser (set a slider's ``value``, read the state it produced).
"""
