"""The memory charts draw what roofline.memory and roofline.max_batch compute: the stack sums
to the report's timeline, the parameters band is the hand-counted parameter bytes, the
capacity line is the registry's, the batch curve's points are the traced batches; bad
input is said clearly and no figure or rcParam is left behind.

An ``ax`` that is not an Axes is refused naming it (issue 22, item 10).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from conftest import (
    adamw_report,
    assert_refused_by_name,
    mlp_build,
    small_device,
)
from torch import nn

import roofline
from roofline.analysis.fit import CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES
from roofline.tracing.records import OpRecord, Trace

matplotlib.use("Agg")


IN, HIDDEN, OUT, BATCH = 64, 128, 10, 32


N_PARAMS = IN * HIDDEN + HIDDEN + HIDDEN * OUT + OUT  # two Linear layers' weights and biases


@pytest.fixture(autouse=True)
def _close() -> object:
    yield
    plt.close("all")


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))


@pytest.fixture(scope="module")
def step() -> Trace:
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters())
    return roofline.trace(model, torch.randn(BATCH, IN), train=True, optimizer=opt,
                          loss_fn=lambda o: o.sum(), fake=True)


def _line(ax: object, gid: str) -> object:
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == gid]  # type: ignore[attr-defined]
    return line


def _device(memory_bytes: int, vendor: str = "Other") -> roofline.DeviceSpec:
    return roofline.get_device("h100").model_copy(
        update={"memory_bytes": memory_bytes, "vendor": vendor, "name": f"test {vendor}"})


def test_the_stack_sums_to_the_timeline_and_parameters_are_hand_counted(step: Trace) -> None:
    report = roofline.memory(step)
    ax = roofline.plot.memory_timeline(report)
    tops = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("top:")]
    assert tops, "no band drawn"
    # the top edge of the last band is the total live bytes at each op
    assert np.array_equal(np.asarray(tops[-1].get_ydata()), np.asarray(report.timeline))
    # the bottom band: fp32 parameters, live the whole step, 4 bytes each
    assert tops[0].get_gid() == "top:parameter"
    assert np.all(np.asarray(tops[0].get_ydata()) == 4 * N_PARAMS)
    # the bands are stacked: each top edge at or above the one below it
    ys = np.array([ln.get_ydata() for ln in tops], dtype=float)
    assert np.all(np.diff(ys, axis=0) >= 0)
    # each band's polygon lies between the edge below it and its own
    bands = [c for c in ax.collections if (c.get_gid() or "").startswith("kind:")]
    assert [b.get_gid()[5:] for b in bands] == [t.get_gid()[4:] for t in tops]
    for band, hi in zip(bands, ys, strict=True):
        y = band.get_paths()[0].vertices[:, 1]
        assert y.min() >= 0 and y.max() <= hi.max()
    peak = _line(ax, "peak")
    assert peak.get_ydata()[0] == max(report.timeline)  # type: ignore[attr-defined]
    assert peak.get_xdata()[0] == report.timeline.index(max(report.timeline)) + 0.5  # type: ignore[attr-defined]
    assert not [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("phase:")]


def test_a_trace_marks_the_phase_boundaries(step: Trace) -> None:
    ax = roofline.plot.memory_timeline(step)
    phases = [op.phase for op in step.ops]
    starts = [i for i in range(1, len(phases)) if phases[i] != phases[i - 1]]
    assert starts == [phases.index("backward"), phases.index("optimizer")]
    drawn = sorted(ln.get_xdata()[0] for ln in ax.get_lines()
                   if (ln.get_gid() or "").startswith("phase:"))
    assert drawn == starts


def test_the_capacity_line_is_the_registrys_with_the_overheads_below_it(step: Trace) -> None:
    spec = roofline.get_device("rtx4090")
    ax = roofline.plot.memory_timeline(step, device="rtx4090")
    assert np.all(np.asarray(_line(ax, "capacity").get_ydata()) == spec.memory_bytes)  # type: ignore[attr-defined]
    (band,) = [p for p in ax.patches if p.get_gid() == "overheads"]
    y = band.get_path().transformed(band.get_patch_transform()).vertices[:, 1]
    # at least the assumed context and the cuBLAS workspace, ending at the capacity
    assert y.max() == pytest.approx(spec.memory_bytes)
    assert y.min() <= spec.memory_bytes - CUDA_CONTEXT_BYTES - CUBLAS_WORKSPACE_BYTES
    assert "fits" in ax.get_title(loc="left")
    # off NVIDIA no overheads are modelled: no band
    ax = roofline.plot.memory_timeline(step, device=_device(100_000))
    assert not [p for p in ax.patches if p.get_gid() == "overheads"]
    # 100 kB < the fp32 parameters, gradients and AdamW moments: 16 B x 9,610 = 154 kB
    assert 16 * N_PARAMS > 100_000
    assert "does NOT fit" in ax.get_title(loc="left")


W_IN, W_HID = 128, 256


def _build(batch: int) -> Trace:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(W_IN, W_HID), nn.ReLU(), nn.Linear(W_HID, W_IN))
    return roofline.trace(model, torch.randn(batch, W_IN), fake=True)


@pytest.fixture(scope="module")
def batch_result() -> roofline.MaxBatch:
    # parameters plus ~40 samples of activations: a boundary found by tracing
    return roofline.max_batch(_build, _device(4 * (2 * W_IN * W_HID) + 40 * 4 * 3 * W_HID))


def test_batch_curve_draws_the_traced_batches_and_the_capacity(
        batch_result: roofline.MaxBatch) -> None:
    m = batch_result
    ax = roofline.plot.batch_curve(m)
    traced = _line(ax, "traced")
    assert dict(zip(traced.get_xdata(), traced.get_ydata(), strict=True)) == {  # type: ignore[attr-defined]
        b: r for b, (r, _) in m.traced.items()}
    assert np.all(np.asarray(_line(ax, "capacity").get_ydata()) == m.capacity_bytes)  # type: ignore[attr-defined]
    assert np.all(np.asarray(_line(ax, "largest").get_xdata()) == m.batch)  # type: ignore[attr-defined]
    fit = _line(ax, "fit")
    x, y = np.asarray(fit.get_xdata()), np.asarray(fit.get_ydata())  # type: ignore[attr-defined]
    assert np.allclose(y, m.fit_bytes(x))
    # the fit passes through every traced batch (issue 24, item 8)
    assert all(m.fit_bytes(b) == pytest.approx(r) for b, (r, _) in m.traced.items())
    (twin,) = [a for a in ax.figure.get_axes() if a is not ax]
    (rate,) = [ln for ln in twin.get_lines() if ln.get_gid() == "throughput"]
    assert np.allclose(rate.get_ydata(), [b / s for b, (_, s) in sorted(m.traced.items())])
    # the largest batch fits and the next traced one does not
    assert m.traced[m.batch][0] <= m.capacity_bytes < m.traced[m.batch + 1][0]


def test_no_global_state_left_and_the_given_axes_used(step: Trace,
                                                      batch_result: roofline.MaxBatch) -> None:
    before = dict(matplotlib.rcParams)
    for call in (lambda ax: roofline.plot.memory_timeline(step, ax=ax, device="a100"),
                 lambda ax: roofline.plot.batch_curve(batch_result, ax=ax)):
        assert call(None).figure.get_axes()
        assert dict(matplotlib.rcParams) == before
        _, given = plt.subplots()
        assert call(given) is given
        assert dict(matplotlib.rcParams) == before


def test_bad_input_is_said_clearly(step: Trace, batch_result: roofline.MaxBatch) -> None:
    with pytest.raises(ValueError, match="no ops"):
        roofline.plot.memory_timeline(Trace([]))
    bare = Trace([OpRecord("aten.add.Tensor", "pointwise", "forward", "", "float32", 1, 8, 4)])
    with pytest.raises(ValueError, match="no storage table"):
        roofline.plot.memory_timeline(bare)
    report = roofline.memory(step)
    with pytest.raises(ValueError, match="no storage table"):
        roofline.plot.memory_timeline(dataclasses.replace(report, storages={}))
    with pytest.raises(ValueError, match="empty timeline"):
        roofline.plot.memory_timeline(dataclasses.replace(report, timeline=[]))
    with pytest.raises(TypeError, match="MemoryReport"):
        roofline.plot.memory_timeline(roofline.analyze(step, "a100"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MaxBatch"):
        roofline.plot.batch_curve(report)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no traced batches"):
        roofline.plot.batch_curve(dataclasses.replace(batch_result, traced={}))
    with pytest.raises(ValueError, match="memory_bytes"):
        roofline.plot.memory_timeline(step, device=_device(0))
    assert plt.get_fignums() == []  # bad input is refused before a figure is made


@pytest.mark.parametrize("which", ["timeline", "batch"])
def test_no_figure_is_left_open_after_an_error(step: Trace, batch_result: roofline.MaxBatch,
                                               monkeypatch: pytest.MonkeyPatch,
                                               which: str) -> None:
    from roofline.presentation.plots import memory as mod

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(mod, "_bytes_axis", boom)
    call = {"timeline": lambda ax: roofline.plot.memory_timeline(step, ax=ax),
            "batch": lambda ax: roofline.plot.batch_curve(batch_result, ax=ax)}[which]
    plt.close("all")
    with pytest.raises(RuntimeError, match="drawing failed"):
        call(None)
    assert plt.get_fignums() == []
    fig, given = plt.subplots()
    with pytest.raises(RuntimeError, match="drawing failed"):
        call(given)
    assert plt.get_fignums() == [fig.number]


# --------------------------------------- bad arguments, refused by name (issue 22, item 10)

@functools.cache
def _mlp_max_batch() -> roofline.MaxBatch:
    return roofline.max_batch(mlp_build, small_device())


# (id, call, the argument the error must name, may a warning do instead)
BAD_ARGUMENTS: list[tuple[str, Callable[[], Any], str, bool]] = [
    ("plot.memory_timeline-ax", lambda: roofline.plot.memory_timeline(adamw_report(), ax="x"),
     "ax", False),
    ("plot.batch_curve-ax", lambda: roofline.plot.batch_curve(_mlp_max_batch(), ax="x"), "ax",
     False),
]


@pytest.mark.parametrize(("call", "argument", "warning_will_do"),
                         [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_argument_is_refused_by_name(call: Callable[[], Any], argument: str,
                                           warning_will_do: bool) -> None:
    """A memory chart's ``ax`` that is not an Axes (issue 22, item 10)."""
    assert_refused_by_name(call, argument, warning_will_do)
