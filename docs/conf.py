# Sphinx configuration of gpuleak's documentation site, built by scripts/docs.sh.
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
# The Python API page documents the package from its docstrings; importing it needs no build.
sys.path.insert(0, os.path.join(here, "..", "python"))

project = "gpuleak"
author = "the gpuleak developers"
copyright = "2026, the gpuleak developers"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
# Pages link to each other's sections by their titles' slugs (`page.md#a-section`).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]
exclude_patterns = ["_build", "README.md"]
# Every reference must resolve: scripts/docs.sh builds with -n -W.
nitpicky = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "furo"
html_title = "gpuleak"
html_static_path = []
