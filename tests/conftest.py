"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roofline.hardware import registry as registry_module


@pytest.fixture
def isolated_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The shipped registry alone: no user device folder, and a fresh registry after."""
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(tmp_path / "no-user-devices"))
    registry_module._reset()
    yield
    registry_module._reset()
