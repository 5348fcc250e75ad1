"""``benchmarks/gpu_kernels.py``'s attention table, dry-run on the CPU (a lent GPU runs it)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

# loaded from its file: putting benchmarks/ on sys.path would shadow installed packages
# (its kernels.py is also the name of Hugging Face's kernels package, which transformers tries)
_SPEC = importlib.util.spec_from_file_location(
    "gpu_kernels", Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_kernels.py")
assert _SPEC is not None and _SPEC.loader is not None
gpu_kernels = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gpu_kernels)


def test_the_sdpa_table_times_each_backend_or_says_why_it_could_not() -> None:
    timer = gpu_kernels.Timer("cpu", calls=1, replays=1)
    rows = gpu_kernels.sdpa_table("cpu", timer, quick=True)
    # head dims x sequences x masks x backends x (forward, with backward)
    assert len(rows) == 2 * 2 * 2 * len(gpu_kernels.SDPA_BACKENDS) * 2
    for row in rows:
        assert row["batch"] * row["heads"] * row["seq"] == 2**10  # the dry run's query rows
        if math.isnan(row["seconds"]):
            assert row["note"]  # a backend that does not take the shapes, and why
        else:
            assert row["seconds"] > 0
    # PyTorch's own choice always runs
    assert all(r["seconds"] > 0 for r in rows if r["backend"] == "default")
