"""Sphinx configuration of the roofline documentation site.

Build: ``nox -s docs`` or ``sphinx-build -W --keep-going -b html docs docs/_build/html``.

* Markdown pages and notebooks are read by myst-nb; the theme is pydata-sphinx-theme.
* The API reference (``docs/api/``) is rendered from the numpydoc docstrings by autodoc and
  napoleon (numpy style), with autosummary tables at the top of each page.
* Notebooks live in ``notebooks/`` at the repository root. Sphinx only reads sources below
  ``docs/``, so each build copies them into ``docs/_notebooks/`` (gitignored) and the
  "Notebooks" toctree lists that folder with a glob: a new notebook appears in the site
  without editing any page. No symlinks, so it works the same on every file system.
* Notebooks are executed into the pages at every build (``nb_execution_mode = "force"``),
  so a page never shows outputs older than the code it documents; the test suite executes
  them too (``tests/test_notebooks.py``), and a failing cell fails the build (``-W``).
* So are the Markdown pages that show outputs: they are MyST-NB text notebooks (a
  ``file_format: mystnb`` header and ``{code-cell}`` blocks; ``!roofline ...`` runs the
  command line: not ``%%bash``, whose partial-line chunks myst-nb's stream merging splits
  into lines), and numbers in their prose are pasted from executed cells with the
  ``{glue:text}`` role, never typed. Executing notebooks and pages adds a few minutes to a
  build on 2 cores.
* No intersphinx: CI builds offline, and a failed inventory download would be a warning,
  which ``-W`` turns into a failed build.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path

import roofline

DOCS = Path(__file__).resolve().parent
NOTEBOOKS_SRC = DOCS.parent / "notebooks"
NOTEBOOKS_DST = DOCS / "_notebooks"


def _stored_copy(src: Path) -> bytes:
    """The notebook's bytes, marked for execution when it has no stored output at all.

    A notebook committed with its outputs stripped would render as code without results,
    so its copy gets ``"mystnb": {"execution_mode": "force"}`` and myst-nb runs it during
    the build (slower; logged). Notebooks with stored outputs are copied byte for byte.
    """
    data = src.read_bytes()
    nb = json.loads(data)
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if not code or any(c.get("outputs") for c in code):
        return data
    print(f"roofline docs: {src.name} has no stored outputs; it is executed for the site")
    nb.setdefault("metadata", {})["mystnb"] = {"execution_mode": "force"}
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()


def _copy_notebooks() -> None:
    """Mirror ``notebooks/*.ipynb`` into ``docs/_notebooks/``.

    Files are rewritten only when their bytes differ, so an unchanged notebook keeps its
    modification time and Sphinx's incremental build does not re-read it; a notebook deleted
    from ``notebooks/`` is deleted from the copy too, so the site never shows a stale one.
    """
    NOTEBOOKS_DST.mkdir(exist_ok=True)
    wanted = {p.name: p for p in sorted(NOTEBOOKS_SRC.glob("*.ipynb"))}
    for stale in NOTEBOOKS_DST.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for name, src in wanted.items():
        dst = NOTEBOOKS_DST / name
        data = _stored_copy(src)
        if not dst.exists() or dst.read_bytes() != data:
            dst.write_bytes(data)


_copy_notebooks()

# Pages run the command line as ``!roofline ...`` in their kernels, which inherit this
# environment: put the console scripts next to this interpreter first on the PATH, so the
# ``roofline`` of this environment runs even when its ``bin/`` was never activated.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable),
                                      os.environ.get("PATH", "")])

# -- Docstring conventions ------------------------------------------------------------------
# The library's docstrings are numpydoc, with two plain-text habits that reST reads otherwise:
# a parameter line may be "name : what it is" (a description where numpydoc puts a type),
# and prose writes "``flops``x" and "|error|". Napoleon would render the description as a
# type and docutils would warn (an error under -W). The handler below runs before napoleon
# (priority 400 < napoleon's 500) and rewrites only those forms, plus a paragraph of prose
# after a parameter list, which numpydoc would read as more parameters; docstrings are not
# edited.

_SECTIONS = {"parameters", "other parameters", "attributes", "keyword arguments"}
_TYPE_WORDS = {"or", "of", "optional", "default", "none", "str", "int", "float", "bool",
               "dict", "list", "tuple", "set", "mapping", "sequence", "callable", "iterable",
               "array", "ndarray", "path", "pathlike", "object", "any", "matplotlib", "axes",
               "figure", "dataframe", "array-like", "true", "false"}
_DESCRIPTORS = (property, functools.cached_property, classmethod, staticmethod)
_ITEM = re.compile(r"^(?P<name>\*{0,2}[A-Za-z_][\w, *]*?) : (?P<rest>.+)$")
_WORD = re.compile(r"[A-Za-z_][\w.\-]*")


def _looks_like_type(text: str) -> bool:
    """True for "str", "float or dict, optional", "{'op', 'module'}", "dict[str, float]"."""
    if text.startswith("{"):
        return True
    if "`" in text or text.rstrip().endswith("."):
        return False
    return all(w.lower() in _TYPE_WORDS or w[0].isupper() or "." in w
               for w in _WORD.findall(text))


def _escape_prose(line: str) -> str:
    """Join "``x``y" with an escaped space and escape "|x|" outside inline literals."""
    parts = line.split("``")
    for i in range(0, len(parts), 2):  # even parts are outside ``...``
        parts[i] = re.sub(r"(?<!\\)\|(?=[^|\s])([^|]*?[^|\s])\|", r"\\|\1\\|", parts[i])
        if i + 1 < len(parts) and i + 2 < len(parts):
            parts[i + 2] = re.sub(r"^(?=\w)", r"\\ ", parts[i + 2])
    return "``".join(parts)


def _numpydoc_house_style(app, what, name, obj, options, lines: list[str]) -> None:
    section = None
    out: list[str] = []
    for k, line in enumerate(lines):
        nxt = lines[k + 1] if k + 1 < len(lines) else ""
        if nxt.strip() and set(nxt.strip()) == {"-"} and line.strip():
            section = line.strip().lower()
        elif section in _SECTIONS and line.strip() and not line.startswith(" "):
            m = _ITEM.match(line)
            if m and not _looks_like_type(m["rest"]):
                out += [m["name"], "    " + _escape_prose(m["rest"])]
                continue
            if not m and k and not lines[k - 1].strip() and re.search(r"[^,]\s", line):
                # Prose after the parameter list ends it (numpydoc would read it as more
                # parameters); a Notes heading says so to napoleon.
                out += ["Notes", "-----"]
                section = "notes"
        out.append(_escape_prose(line))
    lines[:] = out


def _skip_data_members(app, what, name, obj, skip, options) -> bool | None:
    """Leave a class's data fields to its docstring's Attributes section.

    The classes are dataclasses and pydantic models whose fields carry no docstrings of
    their own; autodoc would list each as an empty entry. Methods and properties stay.
    """
    if what == "class" and not (callable(obj) or isinstance(obj, _DESCRIPTORS)):
        return True
    return None


def _no_class_signature(app, what, name, obj, options, signature, return_annotation):
    """Classes are shown without their constructor signature.

    Every public class is built by a function (``trace`` returns a Trace, ``analyze`` an
    Analysis, ``load_device`` a DeviceSpec) or takes keywords of one (Options), and their
    generated ``__init__`` signatures list every field, dozens for DeviceSpec.
    """
    if what == "class":
        return "", return_annotation
    return None


def setup(app) -> None:
    app.connect("autodoc-process-docstring", _numpydoc_house_style, priority=400)
    app.connect("autodoc-skip-member", _skip_data_members)
    app.connect("autodoc-process-signature", _no_class_signature)

project = "roofline"
author = "roofline contributors"
copyright = "roofline contributors"
release = roofline.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "gen_devices.py", "conf.py"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}

# -- MyST / myst-nb -----------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3  # "[text](model.md#bytes)" links resolve to headings
nb_execution_mode = "force"  # the pages show what the code prints today
nb_execution_timeout = 300  # per cell
nb_execution_raise_on_error = True  # a failing cell fails the build
nb_merge_streams = True  # one block per cell for interleaved stdout/stderr

# -- API reference ------------------------------------------------------------------------
autosummary_generate = False  # the pages in docs/api/ are written by hand, not generated
autodoc_default_options = {"members": True}  # a flag present here is on, whatever its value
autodoc_member_order = "bysource"
autodoc_typehints = "description"  # signatures stay short; types go into the field list
autodoc_class_signature = "mixed"  # and emptied by _no_class_signature
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes" as a field list: dataclass fields are not described twice
napoleon_preprocess_types = True

# -- HTML -----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"roofline {release}"
html_static_path = ["_static"] if (DOCS / "_static").is_dir() else []
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 9,  # all nine top-level pages in the header
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}
html_show_sourcelink = False
# Pages without children would show an empty "Section Navigation"; the wide tables of the
# device table and the validation page get that width instead.
html_sidebars: dict[str, list[str]] = {"getting-started": [], "devices": [], "validation": [],
                                        "gallery": [], "tools": []}
