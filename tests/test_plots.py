"""The charts draw what the library computes: roofs at the datasheet peaks, points at each
op's intensity and attained FLOP/s, the speedup curve at what_if's speedups; no global
matplotlib state is left behind; bad input is said clearly."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

import roofline
from roofline.tracing.records import OpRecord, Trace

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
    ax = roofline.plot.roofline_chart(roofline.analyze(trace, "a100"))
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
    assert _lines(ax, "overhead-floor")  # TINY is overhead-bound: the floor is drawn


def test_each_point_is_the_ops_intensity_and_attained_flops(trace: Trace) -> None:
    a = roofline.analyze(trace, "a100")
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
    assert len(points) == 3  # the view has no FLOPs: off the chart, and said so
    assert "no FLOPs" in ax.get_title(loc="left")


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


def test_comparison_draws_both_roofs_and_each_move(trace: Trace) -> None:
    c = roofline.compare(trace, "a100", "h100")
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
    assert "no roof" in ax.get_title(loc="left")
    assert len(_scatter(ax, "points:unrated")) == 2  # ADD and TINY
    with pytest.raises(ValueError, match="factors"):
        roofline.plot.speedup_curve(trace, "a100", flops=(1, -2))
