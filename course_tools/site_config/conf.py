"""Sphinx's configuration for the course's website (`python3 course.py site`, which stages the pages it reads).

The notebooks are rendered as they are stored, executed by `python3 course.py execute`: nothing runs here.
"""

from course_tools.site import SITE_TITLE

project = SITE_TITLE
html_title = SITE_TITLE

extensions = [
    "myst_nb",  # notebooks and Markdown pages
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax copied into the site instead of loaded from a CDN
]
root_doc = "index"
exclude_patterns = [".doctrees"]  # Sphinx's own cache, kept beside the staged pages

nb_execution_mode = "off"  # the stored outputs are shown; no kernel is started
# A widget needs a kernel: on a page its output shows the next richest type it carries (the static PNG of the
# widget's first state, else its text), and no widget JavaScript is loaded.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js = {}
myst_enable_extensions = ["dollarmath"]  # $...$ and $$...$$ formulas, as JupyterLab reads them

html_theme = "sphinx_book_theme"
html_theme_options = {"home_page_in_toc": True, "footer_content_items": []}  # no author line
html_copy_source = True  # the page's download button offers the notebook itself
html_sourcelink_suffix = ""
