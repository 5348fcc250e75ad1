"""What ``pip install -e .`` gives is enough for every command (issue 24, item 1): each
third-party module the package imports is one of its dependencies, or one of an extra of
its own name (``transformers``, for ``transformers:<Config>`` models)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import roofline

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(roofline.__file__).parent.parent
DISTRIBUTIONS = {"yaml": "pyyaml"}  # import name -> distribution name, where they differ


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _imported() -> dict[str, str]:
    """Top-level module -> one file:line that imports it, for every absolute import."""
    out: dict[str, str] = {}
    for path in (ROOT / "roofline").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                     and node.module else [])
            for name in names:
                out.setdefault(name.split(".")[0], f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def test_every_imported_package_is_a_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _names(project["dependencies"])
    extras = project.get("optional-dependencies", {})
    missing = {}
    for module, where in _imported().items():
        if module in sys.stdlib_module_names or module in ("roofline", "__future__"):
            continue
        dist = DISTRIBUTIONS.get(module, module).lower()
        if dist not in core and dist not in _names(extras.get(dist, [])):
            missing[dist] = where
    assert missing == {}
    assert "pandas" in core  # --plot and --html need it
