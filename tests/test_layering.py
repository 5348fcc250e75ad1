"""The layers only import downwards, no module imports itself round a circle, and plots stay
in the presentation layer."""

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


def _imports(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[str]:
    """Every module name ``path`` imports, anywhere in the file (a function-level import
    counts: it is how a circle is dodged), relative imports resolved."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: against the package, one level up per extra dot
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            # "from pkg import name": the submodule pkg.name where one exists, else pkg
            names += [f"{base}.{a.name}" for a in node.names] or [base]
    return names


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name that is not a module resolves to
    the longest module prefix: ``roofline.tracing.trace`` is ``roofline.tracing``)."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    top = root.name
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {resolve(n) for n in _imports(path, root) if n.split(".")[0] == top}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


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


def test_no_module_imports_itself_round_a_circle() -> None:
    """Inside a package too: two modules that import each other (even one of them inside a
    function, or under TYPE_CHECKING) are one module in two files."""
    assert _circles(_graph()) == []


def test_every_package_is_covered() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)


def test_the_checker_sees_a_violation(tmp_path: pathlib.Path) -> None:
    """The rules are not vacuous: an upward import and a circle are found by the same
    parser."""
    bad = tmp_path / "bad.py"
    bad.write_text("from roofline.analysis import analyze\nimport matplotlib.pyplot\n")
    assert _imports(bad, tmp_path) == ["roofline.analysis.analyze", "matplotlib.pyplot"]
    pkg = tmp_path / "roofline" / "inner"
    pkg.mkdir(parents=True)
    (tmp_path / "roofline" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from roofline.inner.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from roofline.inner import a\n")
    assert _circles(_graph(tmp_path / "roofline")) == [["roofline.inner.a", "roofline.inner.b"]]
