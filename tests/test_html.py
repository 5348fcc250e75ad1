"""HTML renderings say what the text says: ``_repr_html_`` tables carry the numbers of the
text reprs, and the CLI's page holds the charts, tables, explanation and assumptions."""

from __future__ import annotations

import base64
import json
import re
from html import unescape

import matplotlib

matplotlib.use("Agg")

import pytest

import roofline
from roofline.presentation.cli import main
from roofline.presentation.html import page
from roofline.presentation.tables import seconds
from roofline.tracing.records import OpRecord, Trace


def _op(name: str, category: str, dtype: str, flops: int, nbytes: int, phase: str,
        ) -> OpRecord:
    return OpRecord(name, category, phase, "net.fc", dtype, flops, nbytes // 2,
                    nbytes - nbytes // 2)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return Trace([_op("aten.mm.default", "matmul", "bfloat16", 2 * 4096 ** 3,
                      3 * 4096 ** 2 * 2, "forward"),
                  _op("aten.add.Tensor", "pointwise", "float32", 10 ** 7, 12 * 10 ** 7,
                      "backward"),
                  _op("aten.mul.Tensor", "pointwise", "float32", 10 ** 3, 12 * 10 ** 3,
                      "optimizer")], {"model": "toy"})


def _cells(html: str) -> list[str]:
    return [unescape(c) for c in re.findall(r"<t[dh](?:\s[^>]*)?>(.*?)</t[dh]>", html)]


def _numbers(text: str) -> list[str]:
    """The numbers of a text (``1.23``, ``45``, ``7%``), in order."""
    return re.findall(r"\d+(?:\.\d+)?", text)


def test_trace_and_breakdown_html_hold_the_repr_numbers(trace: Trace) -> None:
    cells = _cells(trace._repr_html_())
    assert _numbers(repr(trace)) == _numbers(" ".join(cells))
    for breakdown in (trace.by_phase(), trace.by_category()):
        html_cells = _cells(breakdown._repr_html_())
        assert _numbers(repr(breakdown)) == _numbers(" ".join(html_cells[4:]))  # past header
        assert set(breakdown) <= set(html_cells)


def test_analysis_and_comparison_html_hold_the_repr_numbers(trace: Trace) -> None:
    a = roofline.analyze(trace, "a100")
    cells = " ".join(_cells(a._repr_html_()))
    assert set(_numbers(repr(a))) == set(_numbers(cells))
    c = roofline.compare(trace, "a100", "h100")
    cells = " ".join(_cells(c._repr_html_()))
    assert set(_numbers(repr(c))) == set(_numbers(cells))  # names repeat in the table


def test_html_escapes_what_it_shows() -> None:
    t = Trace([OpRecord("aten.mm.default", "matmul", "forward", "<script>", "float32", 2, 1,
                        1)])
    assert "<script>" not in t.by_module()._repr_html_()


def test_page_has_charts_tables_explanation_and_assumptions(trace: Trace) -> None:
    c = roofline.compare(trace, "a100", "h100")
    html = page(c)
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 2  # speedup curve, time breakdown
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    # the roofline chart inline, as SVG, its points' tooltips beside it (issue 24, item 7)
    assert html.count("<svg") == 1 and '<g id="points">' in html
    tips = json.loads(re.search(r'id="tips">(.*?)</script>', html, re.S)[1])
    points = {t["label"]: t for gid in ("points", "points:clipped") for t in tips.get(gid, [])}
    assert set(points) == {"mm", "add.Tensor", "mul.Tensor"}  # no shapes recorded
    assert points["mm"]["FLOPs"] == "137 GFLOP"  # 2 x 4096^3
    assert points["mm"]["bytes"] == "101 MB"  # three 4096^2 bf16 matrices
    text = unescape(html)
    assert roofline.explain(c, assumptions=False) in text
    assert f"{c.speedup:.2f}x" in text
    assert seconds(c.src.seconds) in text and seconds(c.dst.seconds) in text
    for note in c.src.assumptions:
        assert note in text
    # self-contained: no stylesheet, script or image to fetch (the SVG's xmlns URIs are
    # names, never fetched)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "<link" not in html and "<script src" not in html


def test_cli_writes_plot_and_html(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    png, html = tmp_path / "chart.png", tmp_path / "page.html"  # type: ignore[operator]
    assert main(["analyze", "mlp", "--device", "a100", "--plot", str(png),
                 "--html", str(html)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "data:image/png;base64," in html.read_text()
    err = capsys.readouterr().err
    assert f"wrote {png}" in err and f"wrote {html}" in err  # progress on stderr
    curve = tmp_path / "speedup.png"  # type: ignore[operator]
    assert main(["what-if", "mlp", "--device", "a100", "--plot", str(curve)]) == 0
    assert curve.read_bytes().startswith(b"\x89PNG")


def test_analysis_and_comparison_breakdowns_render_as_tables() -> None:
    from roofline.tracing.records import OpRecord, Trace

    mm = OpRecord("aten.mm.default", "matmul", "forward", "", "bfloat16", 10**12, 10**8, 0,
                  output_shapes=((1024, 1024),))
    c = roofline.compare(Trace([mm]), "a100", "h100", overhead=False, peaks="datasheet")
    for rows in (c.src.by_bound(), c.src.by_category(), c.by_bound(), c.by_category()):
        html = rows._repr_html_()
        assert html.startswith("<table") and all(f">{k}<" in html for k in rows)
        assert rows == dict(rows)  # still the plain dict it was
    # the A100's compute time of 1 TFLOP at 312 TFLOP/s, as the table prints it
    assert "3.205 ms" in c.src.by_bound()._repr_html_()
