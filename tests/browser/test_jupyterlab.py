"""The lessons as a learner sees them: JupyterLab in Chromium, "Run All Cells" from the menu, widgets that render
and react to their sliders. Screenshots go to docs/screenshots/ for the README.

Run just this test with ``.venv/bin/python -m pytest tests/browser -q``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from course_tools import NOTEBOOKS_DIR, ROOT
from course_tools.notebook_files import notebooks_in, read_notebook

SCREENSHOTS_DIR = ROOT / "docs" / "screenshots"
TRAINING_LESSON = "09_training"  # no widget, but its training plot is worth a look in the browser and the README
TRAINING_PLOT_CALL = "plot_loss_curves("  # the cell that draws it
WIDGET_BUILDER_CALL = re.compile(r"\b\w+_widget\(")  # the lessons' widget builders are all named *_widget


def builds_widget(path: Path) -> bool:
    cells = read_notebook(path).cells
    return any(cell.cell_type == "code" and WIDGET_BUILDER_CALL.search(cell.source) for cell in cells)


def browser_lessons() -> list[str]:
    """Lesson 00, every lesson that calls a widget builder, and the training lesson (those that exist)."""
    return [path.stem for path in notebooks_in(NOTEBOOKS_DIR)
            if path.stem in ("00_start_here", TRAINING_LESSON) or builds_widget(path)]


SLIDER_HANDLE = ".noUi-handle"  # ipywidgets 8 draws its sliders with noUiSlider
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
RUN_ALL_TIMEOUT_MS = 300_000  # a lesson runs in under a minute on 2 idle cores; allow for a busy machine
UI_TIMEOUT_MS = 60_000
# A widget that did not render shows its text repr, e.g. "VBox(children=(FloatLogSlider(value=1.0, ...".
WIDGET_REPR = re.compile(r"^\s*[A-Z]\w*\((children|value|layout|description)=")
# What a widget displays (plots, HTML read-outs, Output-widget content), not its controls' own read-outs.
DISPLAYED_JS = """widget => [
    ...Array.from(widget.querySelectorAll('img'), img => img.src),
    ...Array.from(widget.querySelectorAll('.widget-html-content, .widget-output'), el => el.innerHTML),
].join('\\n')"""


@pytest.fixture
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1280, "height": 820}, device_scale_factor=1)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()
        lab_server.shut_down_kernels()  # the next lesson gets both cores


def start_kernel(page) -> None:
    """Wait until the notebook's kernel is idle, answering JupyterLab's "Select Kernel" dialog as a learner would."""
    select_dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    select_dialog.or_(kernel_idle(page)).first.wait_for(timeout=RUN_ALL_TIMEOUT_MS)
    if select_dialog.count():
        select_dialog.get_by_role("button", name="Select", exact=True).click()
    kernel_idle(page).wait_for(timeout=RUN_ALL_TIMEOUT_MS)


def kernel_idle(page):
    """The status bar's kernel status once it reads "Idle"."""
    return page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$"))


def wait_until_settled(page) -> None:
    """Wait for the kernel to go idle (its updates have then reached the page) and every image to load."""
    kernel_idle(page).wait_for()
    page.wait_for_function("() => Array.from(document.images).every(img => img.complete)", polling=100)


def wait_for_paint(page) -> None:
    """Wait two animation frames: the notebook draws cells that scrolled into view on the next frame."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def run_all_cells(page) -> None:
    """Click Run → Run All Cells, then wait until every code cell shows an execution count (or a cell fails).

    The notebook copies have no stored outputs, so every prompt and output on the page comes from this run.
    """
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # imported once the browser fixture found it

    try:
        page.wait_for_function(
            """() => {
                const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'),
                                           el => el.textContent.trim());
                const failed = Array.from(document.querySelectorAll('.jp-OutputArea-output[data-mime-type*="stderr"]'))
                    .some(el => el.textContent.includes('Traceback'));
                return failed || (prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p)));
            }""",
            timeout=RUN_ALL_TIMEOUT_MS, polling=500,
        )
    except PlaywrightTimeout:
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        pytest.fail(f"the cells had not all run after {RUN_ALL_TIMEOUT_MS // 1000} s; their prompts: {prompts}")


def save_and_read(page, lab_server, name: str) -> dict:
    """Save the notebook from the UI (Ctrl+S) and read the copy JupyterLab wrote once the file has changed."""
    path = lab_server.root_dir / "notebooks" / f"{name}.ipynb"
    written_before = path.stat().st_mtime_ns
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while path.stat().st_mtime_ns == written_before and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the file JupyterLab writes; no page element tells when it is on disk
    assert path.stat().st_mtime_ns != written_before, f"{name}: JupyterLab did not save the notebook"
    while True:  # the file may still be half written when its time changes
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def error_outputs(notebook: dict) -> list[str]:
    return [f"{out['ename']}: {out['evalue']}" for cell in notebook["cells"] if cell["cell_type"] == "code"
            for out in cell["outputs"] if out["output_type"] == "error"]


def move_first_slider(page, widget) -> bool:
    """Press an arrow key on the widget's first slider handle; True once what the widget displays has changed."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # imported once the browser fixture found it

    handle = widget.locator(SLIDER_HANDLE).first
    handle.scroll_into_view_if_needed()
    for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):  # a slider already at its maximum moves left
        before = widget.evaluate(DISPLAYED_JS)
        handle.focus()
        handle.press(key)
        try:
            page.wait_for_function(f"([widget, before]) => ({DISPLAYED_JS})(widget) !== before",
                                   arg=[widget.element_handle(), before], timeout=10_000, polling=100)
            wait_until_settled(page)
            return True
        except PlaywrightTimeout:  # not this direction: try the other
            continue
    return False


@pytest.mark.parametrize("name", browser_lessons())
def test_lesson_runs_in_jupyterlab_and_its_widgets_respond(browser, lab_server, page, name):
    # `browser` comes first: without one the test skips before JupyterLab is started.
    page.goto(lab_server.lab_url(f"notebooks/{name}.ipynb"))
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    start_kernel(page)
    run_all_cells(page)

    notebook = save_and_read(page, lab_server, name)
    assert error_outputs(notebook) == [], f"{name} raised in JupyterLab"
    code_cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(cell["execution_count"] for cell in code_cells), f"{name}: not every cell ran"

    expected_widgets = sum(WIDGET_MIME in out.get("data", {}) for cell in code_cells for out in cell["outputs"])
    # A rendered widget view is an output holding the widget's own DOM; a failed one holds only text.
    widgets = page.locator(".jp-OutputArea-output:has(> .jupyter-widgets)")
    drawn = widgets.count()
    assert drawn == expected_widgets, f"{name}: the kernel showed {expected_widgets} widgets, JupyterLab drew {drawn}"
    for index in range(expected_widgets):
        assert "Loading widget" not in widgets.nth(index).inner_text()
    reprs = [text for text in page.locator(".jp-OutputArea-output[data-mime-type='text/plain']").all_inner_texts()
             if WIDGET_REPR.match(text)]
    assert reprs == [], f"{name}: widgets shown as text, not rendered"

    # Progress bars (tqdm) are widgets too; the lessons' own widgets are the ones with sliders.
    with_sliders = widgets.filter(has=page.locator(SLIDER_HANDLE))
    if builds_widget(NOTEBOOKS_DIR / f"{name}.ipynb"):
        assert with_sliders.count() > 0, f"{name} builds a widget, but no slider was drawn"
    moved = [move_first_slider(page, with_sliders.nth(index)) for index in range(with_sliders.count())]
    assert all(moved), f"{name}: moving a slider did not change what these widgets display: {moved}"
    save_screenshots(page, name, with_sliders)


def save_screenshots(page, name: str, widgets) -> None:
    """The window at the top of lesson 00; per lesson, its first of ``widgets``, else its training or last plot."""
    SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
    wait_until_settled(page)
    if name == "00_start_here":
        title = page.locator(".jp-Cell").first.locator("h1")
        title.scroll_into_view_if_needed()
        title.wait_for(state="visible")
        wait_for_paint(page)  # cells scrolled back into view are drawn on the next frames
        page.screenshot(path=SCREENSHOTS_DIR / f"{name}.png")
    if widgets.count():
        feature, kind = widgets.first, "widget"
    else:
        cells_with_plots = page.locator(".jp-CodeCell", has=page.locator(".jp-OutputArea-output img"))
        training_plot = cells_with_plots.filter(has_text=TRAINING_PLOT_CALL)
        cell = training_plot if training_plot.count() else cells_with_plots.last
        feature, kind = cell.locator(".jp-OutputArea-output img").last, "plot"
    if feature.count():
        page.set_viewport_size({"width": 1280, "height": 1600})  # room for a tall widget inside the notebook panel
        feature.scroll_into_view_if_needed()
        wait_for_paint(page)
        feature.screenshot(path=SCREENSHOTS_DIR / f"{name}-{kind}.png")
