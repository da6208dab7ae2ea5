"""What only a browser can show: JupyterLab opens a lesson, "Run All Cells" from the menu runs it, and every widget
the lessons build is drawn and reacts to its slider.

Whether each lesson's cells run and print what they should is nbval's job (the notebook step); here lesson 00 runs
as a learner would run it, and every widget builder the lessons call is drawn once in a gallery notebook, so no
lesson is executed twice. Screenshots go to the git-ignored ``build/screenshots/``; ``python3 course.py screenshots``
refreshes the README's pictures in ``docs/screenshots/`` (the one test here that writes there, and only then).

Run just this module with ``.venv/bin/python -m pytest tests/browser -q``.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import nbformat
import pytest

from course_tools import NOTEBOOKS_DIR, ROOT
from course_tools.notebook_files import clean_metadata, notebooks_in, read_notebook, write_notebook
from course_tools.screenshots import README_SCREENSHOTS_VARIABLE

SCREENSHOTS_DIR = ROOT / "build" / "screenshots"  # git-ignored: a test run leaves the checkout as it was
README_PICTURES = {"00_start_here": "window", "03_queries_keys_values": "widget", "09_training": "plot"}
FIRST_LESSON = "00_start_here"
TRAINING_PLOT_CALL = "plot_loss_curves("  # the cell of lesson 09 that draws its README picture
WIDGET_BUILDER_CALL = re.compile(r"\b(\w+_widget)\(")  # the lessons' widget builders are all named *_widget
GALLERY_NAME = "widget_gallery"
# One call per widget builder, with small inputs: what a widget looks like and does does not depend on the lesson's
# data. test_the_gallery_has_every_widget_the_lessons_build keeps this in step with the lessons.
GALLERY = {
    "pipeline_widget": ("transformer_lib.views.start_here", "pipeline_widget()"),
    "vector_angle_widget": ("transformer_lib.views.similarity", "vector_angle_widget()"),
    "attention_scores_widget": ("transformer_lib.views.attention_scores",
                                'attention_scores_widget(["cat", "dog", "car"], torch.eye(3), ["cat dog car", "car"])'),
    "masking_widget": ("transformer_lib.views.masking", "masking_widget()"),
    "scaling_widget": ("transformer_lib.views.queries_keys_values", "scaling_widget()"),
    "translator_heads_widget": (
        "transformer_lib.views.multi_head_attention",
        '(lambda lib, task: translator_heads_widget(lib.Transformer(lib.TransformerConfig(len(task.src_vocab), '
        'len(task.tgt_vocab), d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16, '
        'max_len=32, share_embeddings=False)), task, task.test[:2]))(__import__("transformer_lib"), '
        '__import__("transformer_lib").make_translation_task(num_train=20, num_valid=2, num_test=4, num_unseen=0))'),
    "sampling_widget": ("transformer_lib.views.decoding", 'sampling_widget(torch.randn(6), list("abcdef"))'),
    "attention_memory_widget": ("transformer_lib.views.gpt2_and_llms", "attention_memory_widget()"),
    "speculative_widget": ("transformer_lib.views.faster_and_bigger", "speculative_widget()"),
    "bpe_merges_widget": ("transformer_lib.views.gpt2_and_llms", "bpe_merges_widget()"),
    "induction_head_widget": (
        "transformer_lib.views.inside_a_trained_model",
        '(lambda lib: induction_head_widget(lib.GPT(lib.GPTConfig(64, block_size=32, d_model=16, num_heads=2, '
        'num_layers=2, feed_forward=False)).eval()))(__import__("transformer_lib"))'),
    "fine_tuning_widget": (
        "transformer_lib.views.fine_tuning",
        '(lambda lib, tokenizer: fine_tuning_widget({"base": lib.GPT(lib.GPTConfig(len(tokenizer), block_size=32, '
        'd_model=16, num_heads=2, num_layers=1, d_ff=32)).eval()}, tokenizer))(__import__("transformer_lib"), '
        '__import__("transformer_lib").CharTokenizer("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 '
        '+{}~"))'),
    "group_advantage_widget": ("transformer_lib.views.preferences_and_rewards", "group_advantage_widget()"),
    "comparison_widget": ("transformer_lib.views.evaluation", "comparison_widget()"),
}


def widget_builders_called(path: Path) -> set[str]:
    cells = read_notebook(path).cells
    return {name for cell in cells if cell.cell_type == "code" for name in WIDGET_BUILDER_CALL.findall(cell.source)}


def gallery_notebook() -> nbformat.NotebookNode:
    """A notebook that imports every widget builder and calls each once, one cell per widget."""
    imports = "\n".join(f"from {module} import {name}" for name, (module, _) in GALLERY.items())
    cells = [nbformat.v4.new_code_cell(f"import torch\n\n{imports}\n\ntorch.manual_seed(0)")]
    cells += [nbformat.v4.new_code_cell(call) for _, call in GALLERY.values()]
    return clean_metadata(nbformat.v4.new_notebook(cells=cells))  # the lessons' kernelspec: no kernel dialog


def test_the_gallery_has_every_widget_the_lessons_build():
    called = set().union(*(widget_builders_called(path) for path in notebooks_in(NOTEBOOKS_DIR)))
    assert called, "the lessons call no widget builder: has the naming convention (*_widget) changed?"
    assert called <= set(GALLERY), f"add these builders to GALLERY: {sorted(called - set(GALLERY))}"


SLIDER_HANDLE = ".noUi-handle"  # ipywidgets 8 draws its sliders with noUiSlider
# A rendered widget view is an output holding the widget's own DOM; a failed one holds only text.
WIDGET_VIEW = ".jp-OutputArea-output:has(> .jupyter-widgets)"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
RUN_ALL_TIMEOUT_MS = 300_000  # a lesson runs in under a minute on 2 idle cores; allow for a busy machine
UI_TIMEOUT_MS = 60_000
# A widget that did not render shows its text repr, e.g. "VBox(children=(FloatLogSlider(value=1.0, ...", or a
# LessonWidget's fallback text "Interactive widget (temperature): ...".
WIDGET_REPR = re.compile(r"^\s*([A-Z]\w*\((children|value|layout|description)=|Interactive widget \()")
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


def save_and_read(page, path: Path) -> dict:
    """Save the notebook from the UI (Ctrl+S) and read the copy JupyterLab wrote at ``path`` once it has changed."""
    name = path.stem
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
    """Press an arrow key on the widget's first slider handle (or, for a widget without a slider, pick its first
    menu's next option); True once what the widget displays has changed."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # imported once the browser fixture found it

    def changed(before) -> bool:
        try:
            page.wait_for_function(f"([widget, before]) => ({DISPLAYED_JS})(widget) !== before",
                                   arg=[widget.element_handle(), before], timeout=10_000, polling=100)
        except PlaywrightTimeout:
            return False
        wait_until_settled(page)
        return True

    if widget.locator(SLIDER_HANDLE).count() == 0:  # a menu instead (a Dropdown draws a <select>)
        menu = widget.locator("select").first
        menu.scroll_into_view_if_needed()
        before = widget.evaluate(DISPLAYED_JS)
        menu.select_option(index=menu.evaluate("menu => (menu.selectedIndex + 1) % menu.options.length"))
        return changed(before)
    handle = widget.locator(SLIDER_HANDLE).first
    handle.scroll_into_view_if_needed()
    for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):  # a slider already at its maximum moves left
        before = widget.evaluate(DISPLAYED_JS)
        handle.focus()
        handle.press(key)
        if changed(before):
            return True
    return False


def open_and_run_all(page, lab_server, relative_path: str) -> dict:
    """Open a notebook in JupyterLab, start its kernel, run every cell from the menu; return the saved notebook."""
    page.goto(lab_server.lab_url(relative_path))
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    start_kernel(page)
    run_all_cells(page)
    name = Path(relative_path).stem
    notebook = save_and_read(page, lab_server.root_dir / relative_path)
    assert error_outputs(notebook) == [], f"{name} raised in JupyterLab"
    code_cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(cell["execution_count"] for cell in code_cells), f"{name}: not every cell ran"
    return notebook


def drawn_widgets(page, notebook: dict, name: str):
    """The widget views JupyterLab drew, after checking there is one for every widget the kernel showed."""
    expected = sum(WIDGET_MIME in out.get("data", {}) for cell in notebook["cells"] if cell["cell_type"] == "code"
                   for out in cell["outputs"])
    widgets = page.locator(WIDGET_VIEW)
    drawn = widgets.count()
    assert drawn == expected, f"{name}: the kernel showed {expected} widgets, JupyterLab drew {drawn}"
    for index in range(expected):
        assert "Loading widget" not in widgets.nth(index).inner_text()
    reprs = [text for text in page.locator(".jp-OutputArea-output[data-mime-type='text/plain']").all_inner_texts()
             if WIDGET_REPR.match(text)]
    assert reprs == [], f"{name}: widgets shown as text, not rendered"
    # Progress bars are widgets too; ours have sliders or a menu.
    return widgets.filter(has=page.locator(f"{SLIDER_HANDLE}, select"))


def test_lesson_00_runs_from_the_menu_and_its_widget_responds(browser, lab_server, page):
    # `browser` comes first: without one the test skips before JupyterLab is started.
    notebook = open_and_run_all(page, lab_server, f"notebooks/{FIRST_LESSON}.ipynb")
    with_sliders = drawn_widgets(page, notebook, FIRST_LESSON)
    assert with_sliders.count() > 0, f"{FIRST_LESSON} builds a widget, but no slider was drawn"
    assert move_first_slider(page, with_sliders.first), "moving the slider did not change what the widget displays"
    screenshot_window(page, SCREENSHOTS_DIR / f"{FIRST_LESSON}.png")


def test_every_widget_renders_and_responds(browser, lab_server, page):
    write_notebook(gallery_notebook(), lab_server.root_dir / f"{GALLERY_NAME}.ipynb")
    notebook = open_and_run_all(page, lab_server, f"{GALLERY_NAME}.ipynb")
    with_sliders = drawn_widgets(page, notebook, GALLERY_NAME)
    assert with_sliders.count() == len(GALLERY), f"{len(GALLERY)} widgets built, {with_sliders.count()} with controls"
    moved = {name: move_first_slider(page, with_sliders.nth(index)) for index, name in enumerate(GALLERY)}
    assert all(moved.values()), f"moving a slider did not change what these widgets display: {moved}"
    for index, name in enumerate(GALLERY):
        screenshot_element(page, with_sliders.nth(index), SCREENSHOTS_DIR / f"{name}.png")


@pytest.mark.skipif(README_SCREENSHOTS_VARIABLE not in os.environ,
                    reason="refreshes the README's pictures: run `python3 course.py screenshots`")
@pytest.mark.parametrize("name", sorted(README_PICTURES))
def test_readme_pictures(browser, lab_server, page, name):
    folder = Path(os.environ[README_SCREENSHOTS_VARIABLE])
    open_and_run_all(page, lab_server, f"notebooks/{name}.ipynb")
    kind = README_PICTURES[name]
    if kind == "window":
        screenshot_window(page, folder / f"{name}.png")
        return
    if kind == "widget":
        feature = page.locator(WIDGET_VIEW).filter(has=page.locator(SLIDER_HANDLE)).first
    else:
        plot_cell = page.locator(".jp-CodeCell", has=page.locator(".jp-OutputArea-output img")).filter(
            has_text=TRAINING_PLOT_CALL)
        feature = plot_cell.locator(".jp-OutputArea-output img").last
    screenshot_element(page, feature, folder / f"{name}-{kind}.png")


def screenshot_window(page, path: Path) -> None:
    """The window scrolled to the notebook's title."""
    path.parent.mkdir(parents=True, exist_ok=True)
    wait_until_settled(page)
    title = page.locator(".jp-Cell").first.locator("h1")
    title.scroll_into_view_if_needed()
    title.wait_for(state="visible")
    wait_for_paint(page)  # cells scrolled back into view are drawn on the next frames
    page.screenshot(path=path)


def screenshot_element(page, element, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    wait_until_settled(page)
    page.set_viewport_size({"width": 1280, "height": 1600})  # room for a tall widget inside the notebook panel
    element.scroll_into_view_if_needed()
    wait_for_paint(page)
    element.screenshot(path=path)
