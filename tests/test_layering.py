"""The layers only import downwards, and plots stay in the presentation layer."""

from __future__ import annotations

import ast
import pathlib

import pytest

import roofline

ROOT = pathlib.Path(roofline.__file__).parent
# package -> the roofline packages it may import (besides itself and roofline._* helpers)
ALLOWED = {
    "zoo": set(),  # reference models in plain torch
    "tracing": set(),  # capture and hardware are siblings: neither imports the other
    "hardware": set(),
    "analysis": {"tracing", "hardware"},
    "presentation": {"tracing", "hardware", "analysis", "zoo"},
}
# third-party packages that belong to the presentation layer only
PRESENTATION_ONLY = ("matplotlib",)


def _imports(path: pathlib.Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
        elif isinstance(node, ast.ImportFrom):  # relative: resolve against the package
            names.append("roofline." + path.relative_to(ROOT).parts[0]
                         if node.level == 1 and len(path.relative_to(ROOT).parts) > 1
                         else "roofline")
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, package
    for path in files:
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "roofline" and len(parts) > 1 and not parts[1].startswith("_"):
                assert parts[1] == package or parts[1] in ALLOWED[package], (
                    f"{path.relative_to(ROOT)} imports {name}")
            if package != "presentation":
                assert not name.startswith(PRESENTATION_ONLY), (
                    f"{path.relative_to(ROOT)} imports {name}: charts belong in presentation/")


def test_every_package_is_covered() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)


def test_the_checker_sees_a_violation(tmp_path: pathlib.Path) -> None:
    """The rule is not vacuous: an upward import is found by the same parser."""
    bad = tmp_path / "bad.py"
    bad.write_text("from roofline.analysis import analyze\nimport matplotlib.pyplot\n")
    assert _imports(bad) == ["roofline.analysis", "matplotlib.pyplot"]
