"""Errors and warnings (roofline/_errors.py): every warning points at the user's line
(issue 24, item 8), whichever layer gives it and however deep the call."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import roofline
from roofline._errors import warn

PACKAGE = Path(roofline.__file__).parent


def test_the_library_warns_only_through_warn() -> None:
    """A fixed stacklevel points into the library when the call path changes: every
    warning goes through ``warn``, which finds the user's frame."""
    direct = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "warn" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "warnings"):
                direct.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert direct == []


class _Zeta(nn.Module):
    """An op with no FLOP formula: the capture warns about it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.zeta(x, x)


@pytest.mark.filterwarnings("default")
@pytest.mark.parametrize("fake", [False, True])
def test_a_capture_warning_points_at_the_call(fake: bool) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        roofline.trace(_Zeta(), torch.ones(3), fake=fake)
    (w,) = [w for w in caught if issubclass(w.category, roofline.RooflineWarning)]
    assert "without a FLOP formula" in str(w.message)
    assert w.filename == __file__


@pytest.mark.filterwarnings("default")
def test_an_analysis_warning_points_at_the_call() -> None:
    t = roofline.trace(nn.Linear(4, 4), torch.ones(2, 4))
    with pytest.warns(roofline.RooflineWarning, match="CUDA's overheads") as caught:
        roofline.fits(t, roofline.get_device("mi300x"), context_bytes=1)
    assert caught[0].filename == __file__


def test_warn_outside_the_library_points_at_its_caller() -> None:
    with pytest.warns(roofline.RooflineWarning) as caught:
        warn("from a test")
    assert caught[0].filename == __file__
