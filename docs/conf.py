"""Sphinx configuration of evald's documentation site (``make docs`` → build/docs/).

The pages are MyST Markdown, readable as plain files. ``make docs`` builds with
``-W --keep-going -n`` into a fresh build/docs/: any warning — a broken link
between pages, a missing heading anchor, a page in no toctree — fails the build, in
CI too (``make test`` builds the docs).
"""

project = "evald"
author = "the evald authors"
copyright = "the evald authors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns: list[str] = []

# Headings down to ### get anchors, so [text](page.md#a-heading) links are checked.
myst_heading_anchors = 3

html_theme = "furo"
html_title = "evald"
html_static_path: list[str] = []
