"""The course's website (`python3 course.py site`): a page per notebook with its figures, navigation, a front page
from lesson 00's map, widgets shown as their static picture, and no broken link or missing image anywhere.

The course's site is built once per test session into a temporary folder (tests/conftest.py), by the site's own
environment ``.venv-site``; external links are never fetched, only compared with a short allowlist.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from site_build import build_site

from course_files import EXERCISES, LESSONS, SOLUTIONS
from course_tools import ROOT
from course_tools.notebook_files import clean_metadata, read_notebook, write_notebook

# Hosts a page may link to: Colab (open a notebook there), GitHub (the repository, issues cited), papers.
ALLOWED_HOSTS = ("colab.research.google.com", "github.com", "arxiv.org", "doi.org", "aclanthology.org",
                 "proceedings.neurips.cc", "papers.nips.cc")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_REPR = re.compile(r"\b[A-Z]\w*Widget\((children|value)=")  # a widget's text repr, e.g. LessonWidget(children=


class References(HTMLParser):
    """The URLs a page loads or links to (``href`` and ``src`` of every element), and the ids it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []  # (tag, url)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.urls.append((tag, value))
            elif name in ("id", "name") and value:
                self.ids.add(value)


def parse(page: Path) -> References:
    parser = References()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def broken_references(site: Path) -> list[str]:
    """Every link or image of every page of ``site`` that does not resolve: a missing file, a missing anchor on
    another page, or an external address outside ALLOWED_HOSTS. Each problem names its page."""
    # The themes also copy Jinja templates named *.html into _static/: those are not pages.
    pages = {page.resolve(): parse(page) for page in site.rglob("*.html") if "_static" not in page.parts}
    problems = []
    for page, refs in pages.items():
        where = page.relative_to(site.resolve())
        for tag, url in refs.urls:
            parts = urlsplit(url)
            if parts.scheme in ("http", "https"):
                host = parts.hostname or ""
                if not any(host == allowed or host.endswith(f".{allowed}") for allowed in ALLOWED_HOSTS):
                    problems.append(f"{where}: <{tag}> leaves the site for {url}")
                continue
            if parts.scheme == "data" or (not parts.scheme and not parts.path):  # inline data; "#anchor" on the page
                continue
            if parts.scheme or parts.netloc:
                problems.append(f"{where}: <{tag}> {url} is not a link within the site")
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if site.resolve() not in target.parents or not target.is_file():
                problems.append(f"{where}: <{tag}> {url} points to no file of the site")
            elif parts.fragment and target in pages and unquote(parts.fragment) not in pages[target].ids:
                problems.append(f"{where}: <{tag}> {url}: no anchor #{parts.fragment} on that page")
    return problems


@pytest.fixture
def site(course_site) -> Path:
    return course_site.path  # built once per session (tests/conftest.py)


def page_of(site: Path, notebook: Path) -> Path:
    return site / notebook.relative_to(ROOT).with_suffix(".html")


def test_every_link_and_image_resolves(site):
    assert broken_references(site) == []


def test_the_checker_reports_broken_links_and_missing_images(tmp_path):
    (tmp_path / "figure.png").write_bytes(b"\x89PNG")
    (tmp_path / "lesson.html").write_text('<h2 id="summary">Summary</h2>')
    (tmp_path / "index.html").write_text(
        '<a href="lesson.html#summary">fine</a> <img src="figure.png"> <a href="#top">on this page</a> '
        '<a href="https://colab.research.google.com/github/x/y">allowed</a> '
        '<a href="missing.html">a</a> <img src="gone.png"> <a href="lesson.html#nowhere">b</a> '
        '<script src="https://cdn.example.com/lib.js"></script>'
    )
    assert sorted(broken_references(tmp_path)) == [
        "index.html: <a> lesson.html#nowhere: no anchor #nowhere on that page",
        "index.html: <a> missing.html points to no file of the site",
        "index.html: <img> gone.png points to no file of the site",
        "index.html: <script> leaves the site for https://cdn.example.com/lib.js",
    ]


def test_a_page_per_notebook_and_lessons_linked_in_order(site):
    for notebook in LESSONS + EXERCISES + SOLUTIONS:
        assert page_of(site, notebook).is_file(), f"no page for {notebook.relative_to(ROOT)}"
    for lesson, following in itertools.pairwise(LESSONS):
        next_link = re.search(r'<link rel="next"[^>]*href="([^"]+)"', page_of(site, lesson).read_text("utf-8"))
        assert next_link and next_link[1] == f"{following.stem}.html", f"{lesson.stem}: no link to the next lesson"


def test_the_front_page_is_lesson_00s_map_with_working_links(site):
    front = parse(site / "index.html")
    linked = {(site / urlsplit(url).path).resolve() for tag, url in front.urls if tag == "a"}
    for notebook in LESSONS + EXERCISES + SOLUTIONS:
        assert page_of(site, notebook).resolve() in linked, f"the front page does not link to {notebook.name}"
    assert "The map" in (site / "index.html").read_text(encoding="utf-8")


def stored_pngs(notebook: Path) -> list[bytes]:
    return [base64.b64decode(output["data"]["image/png"]) for cell in read_notebook(notebook).cells
            if cell.cell_type == "code" for output in cell.outputs if "image/png" in output.get("data", {})]


def shown_images(site: Path, page: Path) -> set[str]:
    """The SHA-256 of every image file the page shows."""
    sources = [url for tag, url in parse(page).urls if tag == "img" and not urlsplit(url).scheme]
    return {hashlib.sha256((page.parent / unquote(url)).read_bytes()).hexdigest() for url in sources}


def test_every_stored_figure_is_on_its_page(site):
    """Every PNG output a lesson or solution stores (figures, and the widgets' static pictures) is shown."""
    for notebook in LESSONS + SOLUTIONS:
        shown = shown_images(site, page_of(site, notebook))
        missing = [index for index, png in enumerate(stored_pngs(notebook))
                   if hashlib.sha256(png).hexdigest() not in shown]
        assert missing == [], f"{notebook.name}: PNG outputs number {missing} are not on its page"


def test_no_widget_scripts_on_any_page(site):
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "widget-state+json" not in text and WIDGET_MIME not in text, f"{page.name} embeds widget state"
        assert "Loading widget" not in text and "@jupyter-widgets" not in text, f"{page.name} loads widget code"


def small_course(folder: Path, png: bytes) -> Path:
    """A course of two lessons: 00 with its map, and 01 with a cell of IPython's magics and shell lines (as the
    Colab setup cell has) and a widget's display bundle carrying a static picture beside the widget view (as
    LessonWidget displays it)."""
    for section in ("notebooks", "exercises", "solutions"):
        (folder / section).mkdir(parents=True)
    start = [nbformat.v4.new_markdown_cell("# 00 · Start here"),
             nbformat.v4.new_markdown_cell("## The map\n\n| lesson |\n|---|\n| [01 · A widget](01_widget.ipynb) |")]
    widget = nbformat.v4.new_code_cell("slider_widget()", execution_count=1)
    widget.outputs = [nbformat.v4.new_output("display_data", data={
        WIDGET_MIME: {"model_id": "0123", "version_major": 2, "version_minor": 0},
        "image/png": base64.b64encode(png).decode(),
        "text/plain": "LessonWidget(children=(FloatSlider(value=1.0),))",
    })]
    magics = nbformat.v4.new_code_cell("if True:\n    !ls\n    %pip install --quiet --no-deps .", execution_count=2)
    lesson = [nbformat.v4.new_markdown_cell("# 01 · A widget"), widget, magics]
    write_notebook(clean_metadata(nbformat.v4.new_notebook(cells=start)), folder / "notebooks" / "00_start_here.ipynb")
    write_notebook(clean_metadata(nbformat.v4.new_notebook(cells=lesson)), folder / "notebooks" / "01_widget.ipynb")
    return folder


def test_a_widget_shows_its_static_picture_and_ipython_code_builds(tmp_path):
    png = (ROOT / "docs" / "screenshots" / "03_queries_keys_values-widget.png").read_bytes()
    site = build_site(tmp_path / "site", small_course(tmp_path / "course", png))
    page = site / "notebooks" / "01_widget.html"
    assert shown_images(site, page) == {hashlib.sha256(png).hexdigest()}
    assert not WIDGET_REPR.search(page.read_text(encoding="utf-8")), "the widget's text is shown beside its picture"
    assert broken_references(site) == []


def test_building_leaves_the_checkout_as_it_was(course_site):
    if course_site.git_status_before is None:
        pytest.skip("not a git checkout")
    assert course_site.git_status_after == course_site.git_status_before
    # where `python3 course.py site` writes by default, and its environment, are ignored by git
    default_outputs = ["build/site/index.html", "build/site-source/index.md", ".venv-site/"]
    ignored = subprocess.run(["git", "check-ignore", *default_outputs], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == default_outputs
