"""The README as a user reads it (issue 24, items 1 and 2): its commands are what
``.ci/readme.py`` runs in a fresh venv, and the output it shows is what they print."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pytest

import roofline
from roofline.presentation.cli import main

ROOT = Path(roofline.__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _ci() -> object:
    spec = importlib.util.spec_from_file_location("ci_readme", ROOT / ".ci" / "readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_has_one_test_command_and_shows_the_quick_starts_output() -> None:
    ci = _ci()
    blocks = ci.blocks(README)  # type: ignore[attr-defined]
    tests = [code for lang, code, _ in blocks if ci.TESTS.search(code)]  # type: ignore[attr-defined]
    assert tests == ['pip install -c constraints-cpu.txt -e ".[test]" && python -m pytest -q\n']
    first = blocks[0]
    assert first[0] == "bash" and "pip install -c constraints-cpu.txt -e .\n" in first[1]
    assert first[2] is not None  # its output follows it


def test_matching_is_in_order_with_gaps() -> None:
    ci = _ci()
    printed = "a\nb\nc\nd\n"
    assert ci.matches("a\nc\n", printed) is None  # type: ignore[attr-defined]
    assert ci.matches("a\n...\nd\n", printed) is None  # type: ignore[attr-defined]
    assert ci.matches("c\na\n", printed) == "a"  # type: ignore[attr-defined]
    assert ci.matches("e\n", printed) == "e"  # type: ignore[attr-defined]


def test_the_quick_start_prints_what_the_readme_shows(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ci = _ci()
    _, code, expected = ci.blocks(README)[0]  # type: ignore[attr-defined]
    (command,) = [ln for ln in code.splitlines() if ln.startswith("roofline ")]
    monkeypatch.chdir(tmp_path)  # its chart lands here
    assert main(shlex.split(command)[1:]) == 0
    printed = capsys.readouterr().out
    assert ci.matches(expected, printed) is None, printed  # type: ignore[attr-defined]
    assert (tmp_path / "gpt2.png").stat().st_size > 0
