"""The course's website in Chromium: the front page and a lesson page open from the built files (``file://``), show
their title, figures and formulas, link to the next lesson, and load nothing from the network.

The site is built into a temporary folder by ``.venv-site`` (tests/conftest.py); screenshots go to the git-ignored
``build/screenshots/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from course_tools import NOTEBOOKS_DIR, ROOT
from course_tools.notebook_files import notebooks_in, read_notebook
from course_tools.site import SITE_TITLE

SCREENSHOTS_DIR = ROOT / "build" / "screenshots"
LESSON = "03_queries_keys_values"  # figures, formulas and a widget


@pytest.fixture
def site(course_site) -> Path:
    return course_site.path  # built once per session (tests/conftest.py)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    page.requests = []
    page.on("request", lambda request: page.requests.append(request.url))
    try:
        yield page
    finally:
        context.close()


def title_of(notebook: Path) -> str:
    """The text of the notebook's first heading, ``# 03 · Queries, …`` → ``03 · Queries, …``."""
    first = read_notebook(notebook).cells[0].source.splitlines()[0]
    return first.removeprefix("# ").strip()


def open_page(page, path: Path) -> None:
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_function("() => Array.from(document.images).every(img => img.complete)", polling=100)


def test_the_front_page_shows_the_map(browser, site, page):
    open_page(page, site / "index.html")
    assert page.locator("article h1").first.inner_text().strip() == SITE_TITLE
    first_lesson = notebooks_in(NOTEBOOKS_DIR)[0]
    link = page.locator("article table a", has_text=title_of(first_lesson)).first
    assert link.get_attribute("href") == f"notebooks/{first_lesson.stem}.html"
    link.click()
    page.wait_for_load_state("load")
    assert page.locator("article h1").first.inner_text().strip() == title_of(first_lesson)
    assert all(url.startswith("file://") for url in page.requests), [u for u in page.requests if "file:" not in u]


def test_a_lesson_page_shows_its_figures_formulas_and_next_link(browser, site, page):
    lessons = notebooks_in(NOTEBOOKS_DIR)
    index = [path.stem for path in lessons].index(LESSON)
    lesson, following = lessons[index], lessons[index + 1]
    open_page(page, site / "notebooks" / f"{LESSON}.html")
    assert page.locator("article h1").first.inner_text().strip() == title_of(lesson)
    figures = page.locator("article .cell_output img")
    assert figures.count() > 0, "the lesson's figures are not on the page"
    widths = figures.evaluate_all("images => images.map(img => img.naturalWidth)")
    assert all(width > 0 for width in widths), f"figures that did not load (width 0): {widths}"
    page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0", timeout=30_000)
    assert "Loading widget" not in page.locator("article").inner_text()
    next_link = page.locator(".prev-next-area a.right-next")
    assert title_of(following) in next_link.inner_text()
    SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS_DIR / f"site-{LESSON}.png")
    next_link.click()
    page.wait_for_load_state("load")
    assert page.locator("article h1").first.inner_text().strip() == title_of(following)
    assert all(url.startswith("file://") for url in page.requests), [u for u in page.requests if "file:" not in u]
