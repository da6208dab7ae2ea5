"""The one scaffold every lesson widget is built on: controls, an HTML read-out and a figure that follow them.

A builder function (e.g. ``sampling_widget``) returns a :class:`LessonWidget` made of its controls and of:

- ``compute(values) -> state``: the controls' current values, by name, to everything the widget shows. It calls the
  core library and draws nothing, so a test can check it by setting a control's ``value`` and reading ``state``.
- ``readout``: one line of HTML under the controls, a ``str.format`` template filled from the state, e.g.
  ``"largest weight <b>{largest:.3f}</b>"``.
- ``draw(state, figure)``: draws on a fresh ``matplotlib.figure.Figure`` (leave it out for a widget without a plot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from .plots import figure_to_png

State = dict[str, Any]


class LessonWidget(widgets.VBox):
    """Controls on top, then an HTML read-out, then one figure; all of it is recomputed when a control changes.

    Drawing route: ``draw`` fills a ``matplotlib.figure.Figure`` (not pyplot), rendered to PNG into an
    ``ipywidgets.Image``. The picture is then an ordinary widget value: it shows wherever ipywidgets render
    (JupyterLab, VS Code, Colab) whatever matplotlib backend the notebook uses, and a headless test can read it.
    The other route, ``plt.show()`` inside an ``Output`` widget, puts the figure there only with the inline backend
    (``%matplotlib widget`` or ``notebook`` draw it elsewhere), and relies on each front end routing output made in
    a callback.

    The controls are wired once, by ``ipywidgets.interactive_output``; the ``Output`` it returns stays empty unless a
    callback raises, and then shows the error under the figure instead of hiding it in the kernel log.
    """

    controls: dict[str, widgets.ValueWidget]
    """The controls by name, in display order; set one's ``value`` and the state, read-out and figure follow."""
    state: State
    """What ``compute`` returned for the current values: one dict, updated in place on every change."""
    readout: widgets.HTML
    """The HTML line under the controls: the ``readout`` template filled from the state."""
    plot: widgets.Image | None
    """The figure as a PNG image; None for a widget without ``draw``."""

    def __init__(
        self,
        controls: Mapping[str, widgets.ValueWidget],
        compute: Callable[[dict[str, Any]], State],
        readout: str,
        draw: Callable[[State, Figure], None] | None = None,
        figsize: tuple[float, float] = (6.0, 3.0),
    ) -> None:
        self.controls = dict(controls)
        self.state = {}
        self.readout = widgets.HTML()
        self.plot = widgets.Image(format="png") if draw is not None else None
        self._compute, self._template, self._draw, self._figsize = compute, readout, draw, figsize
        for control in self.controls.values():
            control.style.description_width = "initial"  # the whole label, not "temperat…"
        errors = widgets.interactive_output(self._show, self.controls)  # shows the current values at once
        parts = [*self.controls.values(), self.readout, self.plot, errors]
        super().__init__([part for part in parts if part is not None])

    def _show(self, **values: Any) -> None:
        """Recompute the state from the controls' values, then the read-out and the figure."""
        state = self._compute(values)
        self.state.clear()
        self.state.update(state)
        self.readout.value = self._template.format_map(self.state)
        if self.plot is not None:
            figure = Figure(figsize=self._figsize, layout="constrained")
            self._draw(self.state, figure)
            self.plot.value = figure_to_png(figure)
