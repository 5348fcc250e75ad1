"""Every notebook in ``notebooks/`` executes top to bottom on CPU, and its committed copy is small.

The notebooks run in a fresh Jupyter kernel (nbclient + ipykernel, from the ``test`` extra), so
``python -m pytest -q`` is the one command that checks the library and its notebooks. The
executed copy is discarded: the committed outputs are not rewritten by the test run.

Calibration results are cached in a folder of this test session only, so a notebook never
reuses a stale calibration of the user's cache, and the notebooks that calibrate share one
measurement.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # 4 notebooks in fresh kernels, one calibration: minutes

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # one cell; the slowest (a calibration) takes ~30 s on 2 cores
MAX_IMAGE_BYTES = 120_000  # committed PNG outputs stay small (a roofline chart: ~90 kB) ...
MAX_NOTEBOOK_BYTES = 400_000  # ... and so does each committed notebook


@pytest.fixture(scope="session")
def calibration_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("roofline-cache")


def test_notebooks_exist() -> None:
    names = {p.name for p in NOTEBOOKS}
    assert {"the_answer.ipynb", "roofline_chart.ipynb", "your_device.ipynb",
            "huge_models.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path, calibration_cache: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(calibration_cache))  # the kernel inherits it
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any exception
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", f"{path.name} cell {i}: {out.get('ename')}"
            if out["output_type"] == "stream":
                assert "Traceback (most recent call last)" not in out["text"], (
                    f"{path.name} cell {i} printed a traceback:\n{out['text']}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_small_and_clean(path: Path) -> None:
    assert path.stat().st_size < MAX_NOTEBOOK_BYTES, f"{path.name}: strip or shrink outputs"
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", f"{path.name} cell {i} was committed failing"
            png = out.get("data", {}).get("image/png")
            if png is not None:
                size = len(base64.b64decode("".join(png)))
                assert size < MAX_IMAGE_BYTES, f"{path.name} cell {i}: {size} byte PNG"
