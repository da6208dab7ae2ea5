"""`course.py site`: the course as a static website, rendered from the stored outputs of the executed notebooks.

It runs in ``.venv-site`` (Sphinx, myst-nb and a theme, pinned in requirements-site.txt; course.py makes it), never
executes a notebook, and writes only under the output folder and its sibling ``<out>-source/``: by default the pages
go to ``build/site/`` and the sources Sphinx reads (copies of the notebooks and a generated front page) to
``build/site-source/``. Sphinx's configuration is ``course_tools/site_config/conf.py``.
"""

from __future__ import annotations

import argparse
import posixpath
import re
import sys
import time
from pathlib import Path

from . import ROOT
from .notebook_files import notebook_text, notebooks_in, read_notebook

SITE_TITLE = "The Transformer, from first principles"
SITE_DIR = ROOT / "build" / "site"
CONFIG_DIR = Path(__file__).resolve().parent / "site_config"
SECTIONS = {"Lessons": "notebooks", "Exercises": "exercises", "Solutions": "solutions"}  # caption: folder
FRONT_PAGE_LESSON = "notebooks/00_start_here.ipynb"  # its map becomes the front page
MAP_HEADING = "## The map"
SOLVED = ("solutions", " (solved)")  # their titles are the exercise notebooks': the site tells them apart
MARKDOWN_LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s]+)\)")  # a relative link target: not http:, not #anchor


def source_dir_for(site_dir: Path) -> Path:
    return site_dir.with_name(f"{site_dir.name}-source")


def lesson_map(lesson: Path, folder: str) -> str:
    """The markdown cell of ``lesson`` (stored in ``folder``) that holds the course's map, its links made relative
    to the site's root (``01_similarity.ipynb`` → ``notebooks/01_similarity.ipynb``)."""
    cells = read_notebook(lesson).cells
    found = [cell.source for cell in cells if cell.cell_type == "markdown" and cell.source.startswith(MAP_HEADING)]
    if len(found) != 1:
        raise ValueError(f"{lesson.name}: expected one markdown cell starting with {MAP_HEADING!r}, found {len(found)}")
    return MARKDOWN_LINK.sub(lambda link: f"]({posixpath.normpath(posixpath.join(folder, link[1]))})", found[0])


def front_page(course_root: Path, notebooks: dict[str, list[str]]) -> str:
    """The site's index: the title, lesson 00's map and every section's table of contents (hidden on the page: the
    sidebar and the previous / next links show it). ``notebooks`` maps a caption to document names."""
    tables = [f"```{{toctree}}\n:caption: {caption}\n:hidden:\n\n" + "\n".join(names) + "\n```"
              for caption, names in notebooks.items()]
    lesson_folder = posixpath.dirname(FRONT_PAGE_LESSON)
    return "\n\n".join([
        f"# {SITE_TITLE}",
        "These pages show every lesson, exercise and solution notebook of the course with the outputs of its last "
        "run, as the repository stores them. To run and change the code, clone the repository and start with "
        "`python3 course.py lab`.",
        lesson_map(course_root / FRONT_PAGE_LESSON, lesson_folder),
        *tables,
    ]) + "\n"


def write_if_changed(text: str, target: Path) -> None:
    """Write only when the content differs, so that Sphinx rebuilds only the pages whose notebook changed."""
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")


def page_source(notebook: Path) -> str:
    """The notebook as the site reads it: its code highlighted as IPython, as a kernel would record it (the
    repository's copies drop that metadata, and some cells hold IPython's ``%magics`` and ``!shell`` lines), and a
    solved notebook's title marked as solved."""
    nb = read_notebook(notebook)
    nb.metadata.setdefault("language_info", {})["pygments_lexer"] = "ipython3"
    folder, mark = SOLVED
    if notebook.parent.name == folder and nb.cells and nb.cells[0].source.startswith("# "):
        title = nb.cells[0].source.split("\n", 1)[0]
        nb.cells[0].source = title + mark + nb.cells[0].source[len(title):]
    return notebook_text(nb)


def stage_sources(course_root: Path, source_dir: Path) -> None:
    """Mirror the course's notebooks into ``source_dir`` (copies no longer in the course are removed), and write the
    front page ``index.md``."""
    found = {caption: notebooks_in(course_root / folder) for caption, folder in SECTIONS.items()}
    wanted = {source_dir / path.relative_to(course_root): path for paths in found.values() for path in paths}
    for folder in SECTIONS.values():
        for stale in set((source_dir / folder).glob("*.ipynb")) - set(wanted):
            stale.unlink()
    for target, source in wanted.items():
        write_if_changed(page_source(source), target)
    names = {caption: [path.relative_to(course_root).with_suffix("").as_posix() for path in paths]
             for caption, paths in found.items()}
    write_if_changed(front_page(course_root, names), source_dir / "index.md")


def build(site_dir: Path, course_root: Path = ROOT, verbose: bool = False) -> int:
    """Stage the sources, then run Sphinx's html builder on them; returns Sphinx's exit status, which is non-zero on
    any warning (a link to a page that does not exist, say)."""
    from sphinx.cmd.build import build_main

    source_dir = source_dir_for(site_dir)
    source_dir.mkdir(parents=True, exist_ok=True)
    stage_sources(course_root, source_dir)
    options = ["-b", "html", "-c", str(CONFIG_DIR), "-d", str(source_dir / ".doctrees"), "-W", "--keep-going"]
    return build_main([*options, *([] if verbose else ["-q"]), str(source_dir), str(site_dir)])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="course.py site",
        description="Build the course's website from the stored outputs of the lesson, exercise and solution "
                    "notebooks (nothing is executed): one page per notebook, with previous / next links and a "
                    "table of contents; open build/site/index.html.",
    )
    parser.add_argument("--out", type=Path, default=SITE_DIR, help="where the site goes (default: build/site)")
    parser.add_argument("--course", type=Path, default=ROOT, help=argparse.SUPPRESS)  # tests: another course copy
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    parser.add_argument("--prepare", action="store_true",
                        help="build nothing: only let course.py make or update .venv-site (`course.py test` does)")
    args = parser.parse_args(argv)
    if args.prepare:
        return 0
    site_dir = args.out.resolve()
    started = time.perf_counter()
    if build(site_dir, args.course.resolve(), args.verbose) != 0:
        print("[course] the site build failed: read Sphinx's messages above.", file=sys.stderr)
        return 1
    print(f"[course] site built in {time.perf_counter() - started:.0f} s: open {site_dir / 'index.html'}")
    return 0
