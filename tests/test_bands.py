"""How sure a device swap is (issue 23, item 5): each comparison of registry devices reads
the band the published validation measured for pairs of its kind (analysis/bands.py,
data/bands.json written by ``benchmarks/published.py --write-bands``)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import roofline
from roofline.analysis.bands import BANDS_FILE, kind, measured_only
from roofline.presentation.cli import main

BANDS = json.loads(BANDS_FILE.read_text())


@pytest.fixture(scope="module")
def trace() -> roofline.Trace:
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return roofline.trace(model, torch.randn(4096, 1024), fake=True)


def test_the_band_holds_the_prediction_and_comes_from_the_file(trace: roofline.Trace) -> None:
    c = roofline.compare(trace, "a100", "h100")
    band = c.band
    assert band is not None
    row = BANDS["kinds"][band.kind]
    assert band.pairs == row["pairs"] > 0
    # predicted / measured lay between p10 and p90 for 80% of the pairs: measured between
    # predicted / p90 and predicted / p10
    assert band.low == pytest.approx(c.speedup / row["p90"])
    assert band.high == pytest.approx(c.speedup / row["p10"])
    assert band.low < c.speedup < band.high
    assert f"{band.low:.2f}-{band.high:.2f}x" in roofline.explain(c)


def test_the_kind_is_the_figures_and_the_bound(trace: roofline.Trace) -> None:
    """The A100 SXM 80GB and the H100 SXM have their bf16 matmul rate and bandwidths
    measured; the A10 (no bf16 measurement of its own) takes its class's."""
    a100, h100, a10 = (roofline.analyze(trace, d) for d in ("a100", "h100", "a10"))
    assert measured_only(a100) and measured_only(h100) and not measured_only(a10)
    bound = "compute" if a100.by_bound()["compute"]["seconds"] >= \
        a100.by_bound()["memory"]["seconds"] else "memory"
    assert kind(a100, h100) == f"measured, {bound}-bound"
    assert kind(a100, a10).startswith("class default, ")


def test_a_what_if_or_datasheet_device_has_no_band(trace: roofline.Trace) -> None:
    assert roofline.what_if(trace, "a100", flops=2).band is None
    mine = roofline.get_device("h100").with_overrides(name="H100 at 500 W")
    assert roofline.compare(trace, "a100", mine).band is None
    assert "published pairs" not in roofline.explain(roofline.what_if(trace, "a100", flops=2))


def test_the_cli_answer_gives_the_band(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "gpt2", "--device", "a100", "--compare", "h100", "--train",
                 "--dtype", "bf16", "--batch-size", "1", "--seq-len", "128"]) == 0
    swap = next(ln for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("A100 SXM 80GB -> H100 SXM: "))
    assert "published pairs of this kind" in swap
