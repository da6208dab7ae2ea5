"""The one scaffold every lesson widget is built on: controls, an HTML read-out and a figure that follow them.

A builder function (e.g. ``sampling_widget``) returns a :class:`LessonWidget` made of its controls and of:

- ``compute(values) -> state``: the controls' current values, by name, to everything the widget shows. It calls the
  core library and draws nothing, so a test can check it by setting a control's ``value`` and reading ``state``.
- ``readout``: one line of HTML under the controls, a ``str.format`` template filled from the state, e.g.
  ``"largest weight <b>{largest:.3f}</b>"``.
- ``draw(state, figure)``: draws on a fresh ``matplotlib.figure.Figure`` (leave it out for a widget without a plot).

Where widgets do not run, a displayed ``LessonWidget`` still shows something: its display data carries, beside the
widget view, a still picture of it (``image/png``) and one line of text (``text/plain``), and each front end shows
the richest type it can (JupyterLab the live widget; nbconvert and a static website, which have no widget state, the
picture).
"""

from __future__ import annotations

import base64
import html
import re
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from .plots import figure_to_png

State = dict[str, Any]

STILL_TEXT_WIDTH = 14  # characters of the still picture's text per inch of figure width
STILL_LINE_INCHES = 0.2  # height of one line of that text


def _shown_value(control: widgets.ValueWidget) -> str:
    """A control's value as a reader would say it: "on"/"off", 1.0 as "1", a word as itself."""
    value = control.value
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _plain_text(markup: str) -> str:
    """The text of a line of HTML: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


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

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """What the notebook stores when the widget is displayed: the widget view, which JupyterLab, VS Code and
        Colab draw live, then for front ends without live widgets a still picture and a line of text.

        The text names only the controls, so it reads the same on every machine; the picture (nbval does not
        compare images) shows the controls' values, the read-out and the figure as they are when displayed.
        """
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["image/png"] = base64.b64encode(self.still_png()).decode("ascii")
        bundle["text/plain"] = self.fallback_text()
        return bundle

    def fallback_text(self) -> str:
        """One line saying what this widget is and what it needs: shown where neither widgets nor pictures are."""
        names = ", ".join(control.description for control in self.controls.values())
        return (f"Interactive widget ({names}): it runs in a live Jupyter kernel with ipywidgets; where widgets "
                "cannot be shown, a still picture of it stands in.")

    def still_png(self) -> bytes:
        """A PNG of the widget as it is now: a note, the controls' values and the read-out above its figure."""
        width = self._figsize[0]
        settings = "controls: " + " · ".join(f"{c.description} = {_shown_value(c)}" for c in self.controls.values())
        lines = [
            "Still picture of an interactive widget: run the notebook in Jupyter to move its controls.",
            *textwrap.wrap(settings, int(STILL_TEXT_WIDTH * width)),
            *textwrap.wrap(_plain_text(self.readout.value), int(STILL_TEXT_WIDTH * width)),
        ]
        text = "\n".join(lines).replace("$", r"\$")  # a dollar sign is text here, not matplotlib's math mode
        text_height = STILL_LINE_INCHES * len(lines)
        if self._draw is None:
            figure = Figure(figsize=(width, text_height))
            figure.text(0.0, 1.0, text, ha="left", va="top", fontsize=9, linespacing=1.4)
        else:
            figure = Figure(figsize=(width, self._figsize[1] + text_height), layout="constrained")
            self._draw(self.state, figure)
            figure.suptitle(text, x=0.0, ha="left", fontsize=9, linespacing=1.4)
        return figure_to_png(figure)

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
