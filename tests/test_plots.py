"""The charts draw what the library computes: roofs at the datasheet peaks, points at each
op's intensity and attained FLOP/s, the speedup curve at what_if's speedups; no global
matplotlib state is left behind; bad input is said clearly.

The parallel charts (plots/parallel.py): the scaling curve against the ideal, the two
streams over time. An ``ax`` that is not an Axes is refused naming it (issue 22, item 10).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from conftest import assert_refused_by_name, small_mlp, sum_loss

import roofline
from roofline.tracing.records import OpRecord, Trace

matplotlib.use("Agg")


# A100 SXM 80GB datasheet (NVIDIA A100 datasheet): dense bf16 tensor 312 TFLOP/s, fp32
# 19.5 TFLOP/s, HBM2e 2,039 GB/s.
A100_BF16_MATRIX = 312e12


A100_FP32_VECTOR = 19.5e12


A100_BANDWIDTH = 2.039e12


H100_BF16_MATRIX = 989.4e12  # H100 SXM datasheet, dense


def _op(name: str, category: str, dtype: str, flops: int, nbytes: int,
        shapes: tuple[tuple[int, ...], ...] = ()) -> OpRecord:
    return OpRecord(name, category, "forward", "net.layer", dtype, flops, nbytes // 2,
                    nbytes - nbytes // 2, input_shapes=shapes)


N = 8192


MM = _op("aten.mm.default", "matmul", "bfloat16", 2 * N ** 3, 3 * N * N * 2,
         ((N, N), (N, N)))  # a square GEMM: intensity 2N/6 = 2731 FLOP/B, compute-bound


ADD = _op("aten.add.Tensor", "pointwise", "float32", 10 ** 8, 12 * 10 ** 8,
          ((10 ** 8,), (10 ** 8,)))  # 1 FLOP per 12 bytes: memory-bound


TINY = _op("aten.mul.Tensor", "pointwise", "float32", 10 ** 5, 12 * 10 ** 5,
           ((10 ** 5,), (10 ** 5,)))  # 0.6 us of bytes, under the 5 us launch: overhead


VIEW = OpRecord("aten.view.default", "view", "forward", "net.layer", "float32", 0, 0, 0,
                kernels=0)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return Trace([MM, ADD, TINY, VIEW], {"model": "toy"})


@pytest.fixture(autouse=True)
def _close() -> object:
    yield
    plt.close("all")


def _lines(ax: object, prefix: str) -> list[object]:
    return [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)]  # type: ignore[attr-defined]


def _scatter(ax: object, gid: str) -> np.ndarray:
    (coll,) = [c for c in ax.collections if c.get_gid() == gid]  # type: ignore[attr-defined]
    return np.asarray(coll.get_offsets())


def test_roofs_are_the_datasheet_peaks_and_the_slope_the_bandwidth(trace: Trace) -> None:
    ax = roofline.plot.roofline_chart(roofline.analyze(trace, "a100", peaks="datasheet"))
    roofs = {ln.get_gid(): ln for ln in _lines(ax, "roof:")}
    matrix = [ln for gid, ln in roofs.items() if "matrix bf16" in gid]
    vector = [ln for gid, ln in roofs.items() if "vector fp32" in gid]
    assert len(matrix) == 1 and len(vector) == 1  # the engines the trace uses, no others
    assert np.allclose(matrix[0].get_ydata(), A100_BF16_MATRIX)
    assert np.allclose(vector[0].get_ydata(), A100_FP32_VECTOR)
    # each roof starts at its ridge point: peak / bandwidth
    assert matrix[0].get_xdata()[0] == pytest.approx(A100_BF16_MATRIX / A100_BANDWIDTH)
    (slope,) = _lines(ax, "bandwidth:")
    x, y = np.asarray(slope.get_xdata()), np.asarray(slope.get_ydata())
    assert np.allclose(y / x, A100_BANDWIDTH)
    # the slope ends at the highest ridge, where it meets the highest roof
    assert y[-1] == pytest.approx(A100_BF16_MATRIX)
    # named in the legend with their values (issue 24, item 3), written on no line
    legend = [t.get_text().strip() for t in ax.get_legend().get_texts()]
    assert "matrix bf16: 312 TFLOP/s, ridge 153 FLOP/B" in legend  # 312e12 / 2.039e12
    assert "vector fp32: 19.5 TFLOP/s, ridge 9.56 FLOP/B" in legend
    assert "memory: 2.04 TB/s" in legend
    assert not [t for t in ax.texts if "FLOP/s" in t.get_text() or "TB/s" in t.get_text()]


def test_each_point_is_the_ops_intensity_and_attained_flops(trace: Trace) -> None:
    a = roofline.analyze(trace, "a100", peaks="datasheet", overhead_model="max")
    ax = roofline.plot.roofline_chart(a)
    points = [tuple(p) for p in _scatter(ax, "points")]
    for i, op in enumerate([MM, ADD, TINY]):
        x = op.flops / op.bytes  # FLOP per byte, from the record
        y = op.flops / a.op_seconds[i]  # FLOP/s the prediction attains
        assert any(math.isclose(px, x, rel_tol=1e-6) and math.isclose(py, y, rel_tol=1e-6)
                   for px, py in points), (op.name, x, y)
    # the compute-bound GEMM attains at most its roof; the memory-bound add sits on the
    # slope: bandwidth x intensity
    assert a.bound[:3] == ["compute", "memory", "overhead"]
    assert ADD.flops / a.op_seconds[1] == pytest.approx(A100_BANDWIDTH * ADD.flops / ADD.bytes)
    assert len(points) == 3  # the view has no FLOPs and takes no time: nowhere
    assert not [c for c in ax.collections if (c.get_gid() or "").startswith("strip:")]


def test_roofline_data_merges_identical_ops_and_keeps_their_totals(trace: Trace) -> None:
    doubled = Trace([MM, MM, ADD, TINY, VIEW])
    df = roofline.plot.roofline_data(roofline.analyze(doubled, "a100"))
    mm = df[df["label"].str.startswith("mm")].iloc[0]
    assert mm["count"] == 2 and mm["flops"] == 2 * MM.flops
    assert mm["intensity"] == pytest.approx(MM.flops / MM.bytes)
    by_cat = roofline.plot.roofline_data(roofline.analyze(doubled, "a100"), group_by="category")
    assert set(by_cat["group"]) == {"matmul", "pointwise", "view"}
    assert by_cat.loc[by_cat["group"] == "pointwise", "flops"].item() == ADD.flops + TINY.flops
    with pytest.raises(ValueError, match="group_by"):
        roofline.plot.roofline_data(roofline.analyze(trace, "a100"), group_by="layer")


def test_achievable_roofs_are_solid_and_the_datasheet_dotted(trace: Trace) -> None:
    """By default the roofs are the rates the analysis ran at: the H100 SXM's measured bf16
    matmul, 794.5 TFLOP/s (stas00/ml-engineering's MAMF table), under its 989.4 TFLOP/s
    datasheet roof, which stays on the chart, dotted."""
    ax = roofline.plot.roofline_chart(roofline.analyze(trace, "h100"))
    solid = [ln for ln in _lines(ax, "roof:H100") if "matrix bf16" in ln.get_gid()]
    sheet = [ln for ln in _lines(ax, "roof:datasheet") if "matrix bf16" in ln.get_gid()]
    assert len(solid) == len(sheet) == 1
    assert np.allclose(solid[0].get_ydata(), 794.5e12)
    assert np.allclose(sheet[0].get_ydata(), H100_BF16_MATRIX)
    assert sheet[0].get_linestyle() == ":"


def test_comparison_draws_both_roofs_and_each_move(trace: Trace) -> None:
    c = roofline.compare(trace, "a100", "h100", peaks="datasheet")
    ax = roofline.plot.roofline_chart(c)
    dst = [ln for ln in _lines(ax, "roof:H100") if "matrix bf16" in ln.get_gid()]
    assert len(dst) == 1 and dst[0].get_linestyle() == "--"
    assert np.allclose(dst[0].get_ydata(), H100_BF16_MATRIX)
    moved = _scatter(ax, "points:dst")
    src = _scatter(ax, "points")
    assert len(moved) == len(src) == 3
    # the GEMM's destination point is its H100 attained FLOP/s, at the same intensity
    assert any(math.isclose(y, MM.flops / c.dst.op_seconds[0], rel_tol=1e-6)
               for _, y in moved)


def test_calibrated_spec_shows_measured_and_datasheet_roofs(trace: Trace) -> None:
    measured = roofline.get_device("a100").with_overrides(
        measured=True, matrix_flops_per_s={"bf16": 250e12}, matrix_sparse_flops_per_s={})
    ax = roofline.plot.roofline_chart(roofline.analyze(trace, measured))
    own = [ln for ln in _lines(ax, "roof:A100") if "matrix bf16" in ln.get_gid()]
    sheet = [ln for ln in _lines(ax, "roof:datasheet") if "matrix bf16" in ln.get_gid()]
    assert np.allclose(own[0].get_ydata(), 250e12)
    assert np.allclose(sheet[0].get_ydata(), A100_BF16_MATRIX)


def test_speedup_curve_is_what_if_and_its_ceilings_are_amdahls(trace: Trace) -> None:
    ax = roofline.plot.speedup_curve(trace, "a100")
    (flops,) = _lines(ax, "flops")
    xs, ys = list(flops.get_xdata()), list(flops.get_ydata())
    assert ys[xs.index(2.0)] == pytest.approx(roofline.what_if(trace, "a100", flops=2).speedup)
    assert ys[xs.index(4.0)] == pytest.approx(roofline.what_if(trace, "a100", flops=4).speedup)
    (bw,) = _lines(ax, "bandwidth")
    bx, by = list(bw.get_xdata()), list(bw.get_ydata())
    assert by[bx.index(2.0)] == pytest.approx(
        roofline.what_if(trace, "a100", bandwidth=2).speedup)
    limits = roofline.compare(trace, "a100", "a100").speedup_limits()
    (ceiling,) = _lines(ax, "infinite_flops")
    assert ceiling.get_ydata()[0] == pytest.approx(limits["infinite_flops"])
    (ideal,) = _lines(ax, "ideal")
    assert list(ideal.get_xdata()) == list(ideal.get_ydata())  # y = x
    assert "2x FLOP/s -> " in " ".join(t.get_text() for t in ax.texts)


def test_time_breakdown_bars_sum_to_the_step(trace: Trace) -> None:
    c = roofline.compare(trace, "a100", "h100")
    ax = roofline.plot.time_breakdown(c)
    for gid, a in (("bound:0", c.src), ("bound:1", c.dst), ("category:0", c.src)):
        widths = [p.get_width() for p in ax.patches if (p.get_gid() or "").startswith(gid)]
        assert sum(widths) == pytest.approx(a.seconds * 1e3)


def test_compare_devices_sorted_and_split_by_bound(trace: Trace) -> None:
    devices = ["h100", "a100", "l4"]
    ax = roofline.plot.compare_devices(trace, devices)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    seconds = {roofline.get_device(d).name: roofline.analyze(trace, d).seconds for d in devices}
    assert labels == sorted(seconds, key=lambda n: -seconds[n])  # slowest at the bottom
    l4 = [p.get_width() for p in ax.patches if (p.get_gid() or "").startswith("device:L4")]
    assert sum(l4) == pytest.approx(seconds["L4"] * 1e3)
    with pytest.raises(ValueError, match="list of devices"):
        roofline.plot.compare_devices(trace, "a100")


def test_no_global_matplotlib_state_is_left(trace: Trace) -> None:
    before = dict(matplotlib.rcParams)
    a = roofline.analyze(trace, "a100")
    c = roofline.compare(trace, "a100", "h100")
    calls = [lambda: roofline.plot.roofline_chart(a), lambda: roofline.plot.roofline_chart(c),
             lambda: roofline.plot.speedup_curve(trace, "a100"),
             lambda: roofline.plot.time_breakdown(a),
             lambda: roofline.plot.compare_devices(trace, ["a100", "h100"])]
    for call in calls:
        ax = call()
        assert dict(matplotlib.rcParams) == before
        assert ax.figure.get_axes()  # drawn, and handed back
    _, given = plt.subplots()
    assert roofline.plot.roofline_chart(a, ax=given) is given  # draws into the given Axes


def test_bad_input_is_said_clearly(trace: Trace) -> None:
    empty = Trace([])
    for call in (lambda: roofline.plot.roofline_chart(roofline.analyze(empty, "a100")),
                 lambda: roofline.plot.time_breakdown(roofline.analyze(empty, "a100")),
                 lambda: roofline.plot.speedup_curve(empty, "a100"),
                 lambda: roofline.plot.compare_devices(empty, ["a100"])):
        with pytest.raises(ValueError, match="no ops"):
            call()
    with pytest.raises(TypeError, match="Analysis"):
        roofline.plot.roofline_chart(trace)  # type: ignore[arg-type]
    # only overhead-bound ops: the chart says more FLOP/s or bandwidth gains nothing
    ax = roofline.plot.roofline_chart(roofline.analyze(Trace([TINY, TINY]), "a100"))
    assert "overhead-bound" in ax.get_title(loc="left")
    # a device with no matrix units: matmuls on the vector roof, said in the title
    no_matrix = roofline.get_device("a100").with_overrides(
        matrix_flops_per_s={}, matrix_sparse_flops_per_s={})
    ax = roofline.plot.roofline_chart(roofline.analyze(trace, no_matrix))
    assert "no matrix units" in ax.get_title(loc="left")
    assert not [ln for ln in _lines(ax, "roof:") if "matrix" in ln.get_gid()]
    # a dtype with no roof at all: hollow points, named in the title
    no_vector = roofline.get_device("a100").with_overrides(vector_flops_per_s={})
    with pytest.warns(roofline.RooflineWarning):
        a = roofline.analyze(trace, no_vector)
    ax = roofline.plot.roofline_chart(a)
    assert "lists no compute rate for fp32" in ax.get_title(loc="left")
    assert len(_scatter(ax, "points:unrated")) == 2  # ADD and TINY
    with pytest.raises(ValueError, match="factors"):
        roofline.plot.speedup_curve(trace, "a100", flops=(1, -2))


# --------------------------------------------------------------------------- review fixes
MM32 = _op("aten.mm.default", "matmul", "float32", 2 * N ** 3, 3 * N * N * 4,
           ((N, N), (N, N)))  # the same GEMM in fp32


TPU_V4_BANDWIDTH = 1.2e12  # Google Cloud TPU v4 system architecture: 1,200 GB/s HBM


def _scatter_gid(ax: object, gid: str) -> list[object]:
    return [c for c in ax.collections if c.get_gid() == gid]  # type: ignore[attr-defined]


def _boxes(ax: object) -> list[object]:
    """Window boxes of every text of the axes, after a full draw."""
    from matplotlib.text import Text

    fig = ax.figure  # type: ignore[attr-defined]
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return [Text.get_window_extent(t, r) for t in ax.texts if t.get_text()]  # type: ignore[attr-defined]


def _line_pixels(ax: object, lines: list[object], n: int = 400) -> np.ndarray:
    """Points along each line's segments, densely, in pixels (linear axes)."""
    out = []
    for ln in lines:
        x, y = np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)  # type: ignore[attr-defined]
        if len(x) == 1:
            continue
        t = np.linspace(0, 1, n)
        for i in range(len(x) - 1):
            xs, ys = x[i] + t * (x[i + 1] - x[i]), y[i] + t * (y[i + 1] - y[i])
            out.append(ax.transData.transform(np.column_stack([xs, ys])))  # type: ignore[attr-defined]
    return np.concatenate(out)


def _hits(box: object, pts: np.ndarray) -> bool:
    return bool(((pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1)  # type: ignore[attr-defined]
                 & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)).any())  # type: ignore[attr-defined]


def test_speedup_view_holds_every_finite_ceiling() -> None:
    # GEMM compute 2N^3 / 312e12 = 3.5 ms at peak against the add's 1.2 GB / 2.039 TB/s =
    # 0.59 ms of memory: infinite FLOP/s leaves the add, a ceiling of several x (~7x at
    # datasheet peaks), above the largest multiplier drawn, 4x
    t = Trace([MM, ADD])
    ax = roofline.plot.speedup_curve(t, "a100", flops=(1, 2, 4))
    (ceiling,) = _lines(ax, "infinite_flops")
    level = ceiling.get_ydata()[0]
    assert level > 4  # the case the old view (top at 1.05 x the largest multiplier) cut off
    lo, hi = ax.get_ylim()
    assert lo < level < hi
    # and its label is drawn inside the axes
    frame = ax.get_window_extent()
    label = [b for t_, b in zip([t_ for t_ in ax.texts if t_.get_text()], _boxes(ax),
                                 strict=True) if "infinite FLOP/s" in t_.get_text()]
    assert label and frame.contains(label[0].x0, label[0].y0) and \
        frame.contains(label[0].x1, label[0].y1)


def test_speedup_labels_cover_no_line_when_bandwidth_is_flat() -> None:
    # a compute-only step: the bandwidth curve and its ceiling lie flat at 1.0x, where the
    # 2x label used to be printed
    ax = roofline.plot.speedup_curve(Trace([MM]), "a100")
    (bw,) = _lines(ax, "bandwidth")
    assert np.allclose(bw.get_ydata(), 1.0, atol=0.01)
    texts = [t for t in ax.texts if t.get_text()]
    boxes = _boxes(ax)
    by_gid = {ln.get_gid(): ln for ln in ax.get_lines()}
    for text, box in zip(texts, boxes, strict=True):
        own = {"infinite FLOP/s": "infinite_flops",
               "infinite bandwidth": "infinite_bandwidth"}.get(text.get_text().split(":")[0])
        others = [ln for gid, ln in by_gid.items() if gid != own]
        assert not _hits(box, _line_pixels(ax, others)), text.get_text()
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_chart_of_a_device_with_no_rate_for_the_dtype_draws_slope_and_points() -> None:
    with pytest.warns(roofline.RooflineWarning):
        a = roofline.analyze(Trace([ADD, TINY, MM32], {"model": "toy"}), "tpu v4")
    assert a.unrated_flops_share == pytest.approx(1.0)  # TPU v4 lists no fp32 rate
    ax = roofline.plot.roofline_chart(a)
    assert not _lines(ax, "roof:")
    (slope,) = _lines(ax, "bandwidth:")
    x, y = np.asarray(slope.get_xdata()), np.asarray(slope.get_ydata())
    assert np.allclose(y / x, TPU_V4_BANDWIDTH, rtol=0.03)
    drawn = [c for c in ax.collections if (c.get_gid() or "").startswith("points")]
    assert sum(len(c.get_offsets()) for c in drawn) == 3  # every op placed (some on the edge)
    assert _scatter(ax, "points:unrated").size and not _scatter_gid(ax, "points")
    title = ax.get_title(loc="left").replace("\n", " ")
    assert "lists no compute rate for fp32" in title and "100% of the FLOPs" in title
    assert "no matrix units" not in title  # the matmul has no rate at all, said above


def test_fp32_matmul_on_a_tf32_device_names_the_flag() -> None:
    ax = roofline.plot.roofline_chart(roofline.analyze(Trace([MM32, ADD]), "a100"))
    title = ax.get_title(loc="left").replace("\n", " ")
    assert "TF32 off" in title and "tf32_matmul=True" in title
    assert "no matrix units" not in title
    ax = roofline.plot.roofline_chart(roofline.analyze(Trace([MM32, ADD]), "a100",
                                                       tf32_matmul=True))
    assert "TF32 off" not in ax.get_title(loc="left")


def test_compare_devices_marks_devices_with_uncosted_flops() -> None:
    t = Trace([MM32, ADD], {"model": "toy"})
    with pytest.warns(roofline.RooflineWarning):
        ax = roofline.plot.compare_devices(t, ["a100", "tpu v4"])
    hatched = {p.get_gid().split(":")[1] for p in ax.patches
               if (p.get_gid() or "").startswith("device:") and p.get_hatch()}
    assert hatched == {"TPU v4"}
    assert "TPU v4 *" in [t_.get_text() for t_ in ax.get_yticklabels()]
    assert "lower bound" in ax.get_title(loc="left")


@pytest.mark.parametrize("target", ["chart._legend", "speedup._draw", "bars._bar"])
def test_no_figure_is_left_open_after_an_error(trace: Trace, monkeypatch: pytest.MonkeyPatch,
                                               target: str) -> None:
    import importlib

    module, name = target.split(".")
    mod = importlib.import_module(f"roofline.presentation.plots.{module}")

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(mod, name, boom)
    call = {"chart": lambda ax: roofline.plot.roofline_chart(roofline.analyze(trace, "a100"),
                                                             ax=ax),
            "speedup": lambda ax: roofline.plot.speedup_curve(trace, "a100", ax=ax),
            "bars": lambda ax: roofline.plot.compare_devices(trace, ["a100"], ax=ax)}[module]
    plt.close("all")
    with pytest.raises(RuntimeError, match="drawing failed"):
        call(None)
    assert plt.get_fignums() == []  # the figure the chart made is closed again
    fig, given = plt.subplots()
    with pytest.raises(RuntimeError, match="drawing failed"):
        call(given)
    assert plt.get_fignums() == [fig.number]  # the caller's figure is the caller's


def test_in_a_callers_grid_legends_and_text_stay_inside_each_panel(trace: Trace) -> None:
    a = roofline.analyze(trace, "a100")
    fig, axs = plt.subplots(2, 2, figsize=(12, 8))
    roofline.plot.roofline_chart(a, ax=axs[0, 0])
    roofline.plot.speedup_curve(trace, "a100", ax=axs[0, 1])
    roofline.plot.time_breakdown(a, ax=axs[1, 0])
    roofline.plot.compare_devices(trace, ["a100", "h100"], ax=axs[1, 1])
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    for ax in axs.flat:
        frame = ax.get_window_extent(r).padded(1)
        legend = ax.get_legend().get_window_extent(r)
        assert frame.contains(legend.x0, legend.y0) and frame.contains(legend.x1, legend.y1)


@pytest.mark.parametrize("which", ["analysis", "comparison"])
def test_roofline_chart_text_does_not_overlap(trace: Trace, which: str) -> None:
    obj = (roofline.analyze(trace, "a100") if which == "analysis"
           else roofline.compare(trace, "a100", "h100"))
    ax = roofline.plot.roofline_chart(obj)
    boxes = _boxes(ax)
    overlaps = [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes)
                if i < j and a.overlaps(b)]
    assert not overlaps, [(ax.texts[i].get_text(), ax.texts[j].get_text()) for i, j in overlaps]


def test_titles_grammar_and_views_only() -> None:
    ax = roofline.plot.roofline_chart(roofline.analyze(Trace([VIEW], {"model": "toy"}), "a100"))
    title = ax.get_title(loc="left")
    assert "()" not in title and "no predicted time (views only)" in title


def test_roofs_of_the_same_peak_come_in_a_fixed_order() -> None:
    """MI300X's fp32 matrix and vector peaks are equal (163.4 TFLOP/s): the matrix roof is
    drawn and listed first whatever the hash seed (the engines are a set)."""
    from roofline.presentation.plots.chart import _engines

    a = roofline.analyze(Trace([MM32, ADD], {"model": "toy"}), "mi300x")
    engines = _engines(a)
    assert [e.kind for e in engines] == ["matrix", "vector"]
    assert {a.device.peak_flops_per_s(None, e) for e in engines} == {163.4e12}
    ax = roofline.plot.roofline_chart(a)
    (slope,) = _lines(ax, "bandwidth:")
    assert slope.get_color() == "#222222"  # the matrix roof's colour, not the vector's


# ------------------------------------------------------ parallel charts (plots/parallel.py)

@pytest.mark.usefixtures("quiet")
def test_charts_draw_headless() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = roofline.scaling(small_mlp(), (torch.randn(8, 64),), "rtx 4090", gpus=(1, 2, 4),
                         loss_fn=sum_loss)
    ax = roofline.plot.scaling_curve(s)
    ideal = ax.get_lines()[0]
    assert list(ideal.get_xdata()) == [1, 2, 4] == list(ideal.get_ydata())
    ax2 = roofline.plot.stream_timeline(s.points[4])
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["communication", "compute"]
    with pytest.raises(TypeError, match="ParallelAnalysis"):
        roofline.plot.stream_timeline(s)  # type: ignore[arg-type]
    plt.close("all")


# --------------------------------------- bad arguments, refused by name (issue 22, item 10)

@functools.cache
def _ddp() -> roofline.Trace:
    return roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                          parallel="ddp", gpus=2)


# (id, call, the argument the error must name, may a warning do instead)
BAD_ARGUMENTS: list[tuple[str, Callable[[], Any], str, bool]] = [
    ("plot.stream_timeline-ax",
     lambda: roofline.plot.stream_timeline(roofline.parallel(_ddp(), "h100", one_gpu=1e-3),
                                           ax="x"), "ax", False),
]


@pytest.mark.parametrize(("call", "argument", "warning_will_do"),
                         [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_argument_is_refused_by_name(call: Callable[[], Any], argument: str,
                                           warning_will_do: bool) -> None:
    """A chart's ``ax`` that is not an Axes (issue 22, item 10)."""
    assert_refused_by_name(call, argument, warning_will_do)


# --- issue 24, item 3: a chart that shows all the time ------------------------------------

COPY = _op("aten._to_copy.default", "copy", "bfloat16", 0, 6 * 10 ** 8, ((3 * 10 ** 8,),))


def _strip(ax: Any) -> dict[str, float]:
    """Category -> height (axes fraction) of each bar of the strip."""
    out = {}
    for c in ax.collections:
        if (c.get_gid() or "").startswith("strip:"):
            ys = c.get_paths()[0].vertices[:, 1]
            out[c.get_gid().removeprefix("strip:")] = float(ys.max() - ys.min())
    return out


def test_ops_without_flops_fill_a_strip_by_their_share_of_the_step() -> None:
    """A copy moving 600 MB takes 600 MB / bandwidth and no FLOPs: its bar's height is
    that time over the step's (the chart's y axis has no place for it)."""
    a = roofline.analyze(Trace([MM, ADD, COPY], {"model": "toy"}), "a100", peaks="datasheet",
                         overhead=False)
    share = (6e8 / A100_BANDWIDTH) / a.seconds
    assert 0.01 < share < 0.5
    ax = roofline.plot.roofline_chart(a)
    assert _strip(ax) == {"copy": pytest.approx(share, rel=1e-6)}
    assert any(f"{share:.0%} of\nthe step" in t.get_text() for t in ax.texts)


@pytest.mark.parametrize("launches", [1, 5000])
def test_the_overhead_band_needs_one_percent_of_the_step(launches: int) -> None:
    """One 5-us launch beside a 3.5 ms GEMM is 0.1% of the step: no band; 5000 are most
    of it."""
    tiny = [TINY] * launches
    a = roofline.analyze(Trace([MM, *tiny], {"model": "toy"}), "a100")
    share = a.by_bound()["overhead"]["fraction"]
    assert (share < 0.01) == (launches == 1)
    ax = roofline.plot.roofline_chart(a)
    assert bool(_lines(ax, "overhead-floor")) == (share >= 0.01)
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert ("overhead floor" in legend) == (share >= 0.01)


def test_a_measurement_is_drawn_beside_the_prediction_with_its_share_of_the_roof() -> None:
    """Measured at twice the predicted time, a point on its roof reached half of it."""
    from roofline.tracing.measure import Measurement

    t = Trace([MM, ADD], {"model": "toy"})
    a = roofline.analyze(t, "a100", peaks="datasheet", overhead=False)
    m = Measurement(t, 2 * a.op_seconds, 2 * a.seconds, [2 * a.seconds], "cuda:0", 1)
    ax = roofline.plot.roofline_chart(a, measurement=m)
    (diamonds,) = [c for c in ax.collections if c.get_gid() == "points:measured"]
    xy = {tuple(p) for p in np.asarray(diamonds.get_offsets())}
    for i, op in enumerate((MM, ADD)):
        want = (op.flops / op.bytes, op.flops / (2 * a.op_seconds[i]))
        assert any(math.isclose(x, want[0]) and math.isclose(y, want[1]) for x, y in xy)
    assert sum(t.get_text() == "50% of roof" for t in ax.texts) == 2


def test_chart_title_says_model_batch_dtype_and_phase() -> None:
    model = small_mlp()
    t = roofline.trace(model, torch.randn(32, 64), train=True, loss_fn=sum_loss, fake=True)
    title = roofline.plot.roofline_chart(roofline.analyze(t, "a100")).get_title(loc="left")
    assert title.startswith("Sequential (batch 32, fp32, training step) on A100 SXM 80GB")
