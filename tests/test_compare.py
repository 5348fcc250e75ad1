"""Predictions (analysis/compare.py, analysis/reasons.py): ``compare``, ``what_if``,
``sweep``, their reasons and limits, the runtime method.

Expected speedups are derived by hand (Amdahl's law for host time; a memory-bound op gains
nothing from FLOP/s; the clock scales compute, not DRAM) or are properties every prediction
must have (more of a roof is never slower; scaling every roof by k gives at most k).
Issue 13 (items 6, 11): factors not given stay 1; empty traces answer plainly. Issue 15:
clock and core what-ifs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import (
    CLASSIC,
    H100_BANDWIDTH,
    H100_BF16,
    make_op,
    make_op_4096,
    make_split_op,
    timed_mlp,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline
from roofline.tracing import OpRecord, Trace
from roofline.tracing.measure import measure
from roofline.zoo import get_model

# --- compare and what_if ------------------------------------------------------------------

def test_host_time_is_fixed_across_devices() -> None:
    op = make_op_4096("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    t = Trace([op])
    c = roofline.compare(t, "a100", "h100", host_fraction=0.5)
    assert c.src.host_seconds == pytest.approx(c.src.device_seconds)
    assert c.dst.host_seconds == pytest.approx(c.src.host_seconds)
    pure = roofline.compare(t, "a100", "h100")
    # Amdahl: half the step cannot speed up
    s = pure.speedup
    assert c.speedup == pytest.approx(2 / (1 + 1 / s))


def test_what_if_on_a_memory_bound_trace_gains_nothing_from_flops() -> None:
    add = make_op_4096("pointwise", 10**8, 3 * 10**9)
    c = roofline.what_if(Trace([add]), "a100", flops=2.0)
    assert c.speedup == pytest.approx(1.0)
    # on the classic roofline (no launch overhead or DRAM latency, which do not halve)
    c = roofline.what_if(Trace([add]), "a100", flops=1.0, bandwidth=2.0, overhead=False,
                         **CLASSIC)
    assert c.speedup == pytest.approx(2.0)


@pytest.fixture(scope="module")
def gpt2_trace() -> Trace:
    zm = get_model("gpt2", batch_size=2, seq_len=128)
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)


def test_gpt2_answer_is_below_the_flops_ratio(gpt2_trace: Trace) -> None:
    c = roofline.what_if(gpt2_trace, "a100", flops=2.0)
    assert 1.0 < c.speedup < 2.0
    swap = roofline.compare(gpt2_trace, "a100", "h100")
    assert 1.0 < swap.speedup < swap.flops_ratio
    text = roofline.explain(swap)
    assert "memory-bound" in text and f"{swap.speedup:.2f}x" in text
    lim = c.speedup_limits()
    assert lim["infinite_flops"] > 1 and lim["infinite_bandwidth"] > 1
    grid = roofline.sweep(gpt2_trace, "a100", flops=[1, 2], bandwidth=[1, 2])
    assert grid.loc[(grid.flops == 2) & (grid.bandwidth == 1), "speedup"].item() == (
        pytest.approx(c.speedup))
    assert grid.loc[(grid.flops == 1) & (grid.bandwidth == 1), "speedup"].item() == 1.0


def test_resnet50_answer_has_both_limits() -> None:
    zm = get_model("resnet50", batch_size=8)
    opt = torch.optim.SGD(zm.model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    flops2 = roofline.what_if(t, "a100", flops=2.0)
    bw2 = roofline.what_if(t, "a100", flops=1.0, bandwidth=2.0)
    # each roof alone gives less than its factor; both together give exactly 2x minus overhead
    assert 1.0 < flops2.speedup < 2.0 and 1.0 < bw2.speedup < 2.0
    both = roofline.what_if(t, "a100", flops=2.0, bandwidth=2.0)
    assert max(flops2.speedup, bw2.speedup) < both.speedup <= 2.0
    swap = roofline.compare(t, "a100", "h100")
    assert 1.0 < swap.speedup < swap.flops_ratio


factors = st.floats(min_value=0.1, max_value=20, allow_nan=False, allow_infinity=False)


op_strategy = st.builds(
    lambda cat, f, b, k: OpRecord(f"aten.{cat}.default", cat, "forward", "", "bfloat16",
                                  f, b, 0, kernels=k, output_shapes=((1024, 1024),)),
    st.sampled_from(["matmul", "pointwise", "softmax", "attention"]),
    st.integers(0, 10**13), st.integers(0, 10**10), st.integers(0, 2))


@settings(max_examples=60, deadline=None)
@given(st.lists(op_strategy, min_size=1, max_size=20), factors, factors, factors)
def test_prediction_properties(ops: list[OpRecord], f: float, b: float, k: float) -> None:
    t = Trace(ops)
    a100 = roofline.get_device("a100")
    base = roofline.analyze(t, a100)
    assert roofline.compare(t, a100, a100).speedup == pytest.approx(1.0)
    more = roofline.what_if(t, a100, flops=max(f, 1), bandwidth=max(b, 1))
    assert more.speedup >= 1 - 1e-9  # more of either roof is never slower
    scaled = roofline.what_if(t, a100, flops=k, bandwidth=k)
    if k >= 1:
        assert scaled.speedup <= k * (1 + 1e-9)  # scaling every roof by k gives at most k
    # predicted time is never below either floor
    assert base.seconds >= t.total_flops / 312e12 * (1 - 1e-9) - 1e-18
    assert base.seconds >= t.total_bytes / a100.bandwidth_bytes_per_s * (1 - 1e-9)


# --- what-if factors (issue 13, item 6) ---------------------------------------------------

def test_a_factor_not_given_stays_one() -> None:
    t = Trace([make_op("matmul", 10**12, 10**9), make_op("pointwise", 10**6, 10**9)])
    a100 = roofline.get_device("a100")
    bw = roofline.what_if(t, a100, bandwidth=2.0)
    assert bw.dst.device.matrix_flops_per_s == a100.matrix_flops_per_s
    assert bw.dst.device.bandwidth_bytes_per_s == 2 * a100.bandwidth_bytes_per_s
    fl = roofline.what_if(t, a100, flops=3.0)
    assert fl.dst.device.bandwidth_bytes_per_s == a100.bandwidth_bytes_per_s
    assert fl.dst.device.matrix_flops_per_s["bf16"] == 3 * 312e12  # A100 bf16 dense peak
    seed = roofline.what_if(t, a100)  # no factor at all: the seed question, 2x FLOP/s
    assert seed.dst.device.matrix_flops_per_s["bf16"] == 2 * 312e12
    assert seed.dst.device.bandwidth_bytes_per_s == a100.bandwidth_bytes_per_s


@pytest.mark.parametrize("bad", [0, -2, math.nan, math.inf, True])
def test_bad_factors_are_refused(bad: object) -> None:
    t = Trace([make_op("pointwise", 10, 10)])
    with pytest.raises(ValueError, match="factor"):
        roofline.what_if(t, "a100", flops=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan])
def test_what_if_refuses_bad_factors(bad: float) -> None:
    with pytest.raises(ValueError):
        roofline.what_if(Trace([]), "a100", flops=bad)


# --- empty traces (issue 13, item 11) -----------------------------------------------------

@pytest.mark.parametrize("ops", [[], [OpRecord("aten.view.default", "view", "forward", "",
                                                "float32", 0, 0, 0, kernels=0)]])
def test_empty_and_views_only_traces_answer_plainly(ops: list[OpRecord]) -> None:
    t = Trace(ops)
    c = roofline.compare(t, "a100", "h100")
    assert c.speedup == 1.0
    assert c.speedup_limits() == {"infinite_flops": 1.0, "infinite_bandwidth": 1.0}
    assert "nothing to speed up" in roofline.explain(c)
    grid = roofline.sweep(t, "a100", flops=[1, 2], bandwidth=[1, 2])
    assert (grid.speedup == 1.0).all()
    assert roofline.what_if(t, "a100").speedup == 1.0
    a = roofline.analyze(t, "a100")
    assert a.seconds == 0 and a.mfu == 0 and a.achieved_flops_per_s == 0
    assert all(v["fraction"] == 0 for v in a.by_bound().values())


# --- clock and cores (issue 15) -----------------------------------------------------------

def test_clock_what_if_speeds_compute_not_bandwidth() -> None:
    """Peak = units x FLOP/clock/unit x clock: 1.5x the clock gives a compute-bound GEMM
    1.5x on its compute time and a streaming copy nothing (DRAM has its own clock)."""
    big = make_split_op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    copy = make_split_op("pointwise", 0, 10**9)
    for op in (big, copy):
        c = roofline.what_if(Trace([op]), "h100", clock=1.5, overhead=False)
        expected = 1.5 if op is big else 1.0
        assert c.speedup == pytest.approx(expected), op.category
    h100 = roofline.get_device("h100")
    faster = h100.scaled(clock_factor=1.5)
    assert faster.peak_flops_per_s("bf16") == pytest.approx(1.5 * H100_BF16)
    assert faster.bandwidth_bytes_per_s == H100_BANDWIDTH
    assert faster.boost_clock_hz == pytest.approx(1.5 * 1980e6)  # H100 SXM max boost


def test_cores_what_if_helps_only_ops_that_fill_the_chip() -> None:
    """A 128 x 128 output with K = 512 is one 128x128 tile: one of the H100's 132 SMs
    works, so 264 SMs leave it as slow; a square 8192 GEMM (4096 tiles) gains 2x."""
    tiny = OpRecord(name="aten.mm.default", category="matmul", phase="forward", module="",
                    dtype="bfloat16", flops=2 * 128 * 128 * 512, bytes_read=10,
                    bytes_written=0, input_shapes=((128, 512), (512, 128)),
                    output_shapes=((128, 128),))
    big = make_split_op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    small = roofline.what_if(Trace([tiny]), "h100", cores=2, overhead=False)
    assert small.speedup == pytest.approx(1.0)
    large = roofline.what_if(Trace([big]), "h100", cores=2, overhead=False)
    assert large.speedup == pytest.approx(2.0, rel=0.02)  # 4096 tiles over 264 SMs: 16 waves
    assert roofline.get_device("h100").scaled(cores_factor=2).compute_units == 264


def test_what_if_clock_and_cores_refuse_bad_factors() -> None:
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="clock"):
            roofline.what_if(Trace([]), "h100", clock=bad)
        with pytest.raises(ValueError, match="cores"):
            roofline.what_if(Trace([]), "h100", cores=bad)


# --- the runtime method -------------------------------------------------------------------

def test_runtime_method_scales_measured_ops() -> None:
    model, x = timed_mlp()
    m = measure(model, x, repeat=3)
    src = roofline.get_device("a100")
    same = roofline.compare(m.trace, src, src, method="runtime", measurement=m)
    assert same.speedup == pytest.approx(1.0)
    assert same.src.seconds == pytest.approx(
        np.nansum(m.op_seconds) + m.host_seconds, rel=1e-6)
    faster = roofline.compare(m.trace, src, src.scaled(flops_factor=2, bandwidth_factor=2),
                              method="runtime", measurement=m)
    # every measured op halves except overhead-bound ones; host time stays
    assert 1.0 <= faster.speedup <= 2.0 + 1e-9
    with pytest.raises(ValueError, match="measurement"):
        roofline.compare(m.trace, src, src, method="runtime")
