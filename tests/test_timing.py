"""``roofline.analyze`` (analysis/timing.py): which roof bounds each op, and how long
it takes.

Expected times are derived by hand from datasheet peaks (H100 SXM: 989.4 TFLOP/s dense
bf16, 3.35 TB/s; A100 SXM 80GB: 2.039 TB/s) and the formulas in the docstrings: the classic
roofline (the max of the roofs), then the additive overhead T = a + max(compute, memory)
(issue 15). Issue 13 (items 5, 12, 13): zero-size ops, every shipped device, wrong types.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from conftest import (
    CLASSIC,
    DATASHEET,
    H100_BANDWIDTH,
    H100_BF16,
    make_op,
    make_op_4096,
    make_split_op,
)
from torch import nn

import roofline
from roofline import RooflineWarning
from roofline.hardware.curves import MemoryPoint
from roofline.tracing import OpRecord, Trace
from roofline.zoo import get_model

# --- the roofs ----------------------------------------------------------------------------

def test_single_ops_follow_the_datasheet_roofs() -> None:
    h100 = roofline.get_device("h100")
    big_mm = make_op_4096("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    add = make_op_4096("pointwise", 10**8, 3 * 10**8 * 2)
    tiny = make_op_4096("pointwise", 10, 30)
    a = roofline.analyze(Trace([big_mm, add, tiny]), h100, **CLASSIC)
    assert a.bound == ["compute", "memory", "overhead"]
    assert a.op_seconds[0] == pytest.approx(big_mm.flops / 989.4e12)
    assert a.op_seconds[1] == pytest.approx(add.bytes / 3.35e12)
    assert a.op_seconds[2] == pytest.approx(h100.launch_overhead_seconds)
    # a matmul's ridge point is bf16 peak / bandwidth
    assert a.ridge_point[0] == pytest.approx(989.4e12 / 3.35e12)


def test_ridge_point_is_where_the_time_model_switches_bound() -> None:
    """An op above its reported ridge point is compute-bound, below it memory-bound, also
    on a calibrated memory curve where the flat bandwidth would give another ridge."""
    h100 = roofline.get_device("h100")
    curve = [MemoryPoint(bytes=2**k, bytes_per_s=bw) for k, bw in
             ((10, 1e10), (20, 5e11), (30, 3e12))]
    calibrated = h100.with_overrides(memory_curve=curve)
    ops = [make_op("matmul", f, b) for f in (10**6, 10**9, 10**12) for b in (2**12, 2**22, 2**28)]
    for spec in (h100, calibrated):
        a = roofline.analyze(Trace(ops), spec, overhead=False)
        for i, bound in enumerate(a.bound):
            if a.intensity[i] > a.ridge_point[i] * (1 + 1e-9):
                assert bound == "compute", (spec.name, i)
            elif a.intensity[i] < a.ridge_point[i] * (1 - 1e-9):
                assert bound == "memory", (spec.name, i)
    flat = roofline.analyze(Trace(ops), calibrated, overhead=False)
    assert flat.ridge_point[0] != pytest.approx(989.4e12 / 3.35e12)  # the curve's, not flat


def test_seconds_with_scales_named_roofs() -> None:
    t = Trace([make_op("matmul", 10**12, 10**6), make_op("pointwise", 10**3, 10**10)])
    a = roofline.analyze(t, "h100", overhead=False, peaks="datasheet")
    compute, memory = 10**12 / 989.4e12, 10**10 / 3.35e12  # H100 SXM datasheet
    assert a.seconds == pytest.approx(compute + memory)
    assert a.seconds_with(compute=2.0) == pytest.approx(compute / 2 + memory)
    assert a.seconds_with(memory=math.inf) == pytest.approx(compute)
    with pytest.raises(ValueError, match="unknown roof"):
        a.seconds_with(link=2.0)


def test_seconds_with_refuses_a_bool_factor() -> None:
    a = roofline.analyze(Trace([make_op("matmul", 10**12, 10**6)]), "a100")
    with pytest.raises(ValueError, match="compute factor"):
        a.seconds_with(compute=True)


def test_ops_that_take_no_time_have_no_bound() -> None:
    view = OpRecord("aten.t.default", "view", "forward", "", "float32", 0, 0, 0, kernels=0)
    mm = make_op("matmul", 2 * 64**3, 3 * 64 * 64 * 2)
    c = roofline.compare(Trace([view, mm]), "a100", "h100")
    assert c.src.bound[0] == "none"
    assert "none" not in c.src.by_bound()
    assert all("view" not in cats for cats in c.reasons().categories.values())


def test_uncounted_ops_are_costed_by_bytes_and_reported() -> None:
    t = Trace([OpRecord("aten.foo.default", "uncounted", "forward", "", "float32", 0, 10**9, 0,
                        counted=False)])
    a = roofline.analyze(t, "h100")
    assert a.bound == ["memory"]
    assert a.uncounted_share() == {"bytes": 1.0, "seconds": 1.0}
    assert any("no FLOP formula" in n for n in a.assumptions)


# --- the overhead (issue 15) --------------------------------------------------------------

def test_overhead_adds_to_the_slower_of_compute_and_memory() -> None:
    """T = a + max(flops / P, bytes / B): a 10 MB copy on an H100 takes its transfer
    (10e6 / 3.35e12 = 3.0 us) plus the launch constant, not the max of the two."""
    h100 = roofline.get_device("h100")
    a_s = h100.launch_overhead_seconds
    copy = make_split_op("pointwise", 0, 10_000_000)
    big = make_split_op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    add = roofline.analyze(Trace([copy, big]), h100, **DATASHEET)
    classic = roofline.analyze(Trace([copy, big]), h100, **DATASHEET, overhead_model="max")
    transfer = 10_000_000 / H100_BANDWIDTH
    assert add.op_seconds[0] == pytest.approx(a_s + transfer)
    assert classic.op_seconds[0] == pytest.approx(max(a_s, transfer))
    assert add.op_seconds[1] == pytest.approx(a_s + big.flops / H100_BF16)
    # a kernel whose transfer is comparable to its launch: additive is up to 2x slower
    assert 1 < add.op_seconds[0] / classic.op_seconds[0] <= 2
    # what-ifs scale the roofs and keep the form: infinite bandwidth leaves the launch
    assert add.seconds_with(memory=float("inf")) == pytest.approx(
        2 * a_s + big.flops / H100_BF16)


def test_overhead_bound_op_is_the_one_whose_overhead_exceeds_both_roofs() -> None:
    tiny = make_split_op("pointwise", 10, 30)
    a = roofline.analyze(Trace([tiny]), "h100", **DATASHEET)
    assert a.bound == ["overhead"]
    assert a.by_bound()["overhead"]["fraction"] == pytest.approx(1.0)


# --- zero-size ops (issue 13, item 5) -----------------------------------------------------

class _Experts(nn.Module):
    """Two experts; the second gets no tokens (an empty mixture-of-experts slice)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x).sum() + self.b(x[:0]).sum()


@pytest.mark.parametrize("build", [
    lambda: (_Experts(), torch.randn(8, 16)),
    lambda: (nn.Linear(16, 16), torch.randn(0, 16)),
    lambda: (nn.Conv2d(3, 8, 3), torch.randn(0, 3, 16, 16)),
])
def test_zero_size_matmuls_and_convs_give_finite_times(build) -> None:  # type: ignore[no-untyped-def]
    model, x = build()
    t = roofline.trace(model, x)
    for device in ("a100", "h100", "t4"):
        a = roofline.analyze(t, device)
        assert np.isfinite(a.op_seconds).all() and math.isfinite(a.seconds)
    c = roofline.compare(t, "a100", "h100")
    assert math.isfinite(c.speedup) and c.speedup > 0
    assert "nan" not in roofline.explain(c)


# --- every device (issue 13, item 12) -----------------------------------------------------

_FAMILIES = {  # the zoo's families at their smallest useful sizes
    "mlp": {}, "resnet50": {"batch_size": 1, "image_size": 64},
    "mobilenet": {"batch_size": 1, "image_size": 64}, "gpt2": {"batch_size": 1, "seq_len": 32},
    "bert-base": {"batch_size": 1, "seq_len": 32}, "vit-b16": {"batch_size": 1},
    "llama-tiny": {"batch_size": 1, "seq_len": 32},
    "transformer": {"batch_size": 1, "seq_len": 16},
}


@pytest.fixture(scope="module")
def bf16_steps() -> dict[str, Trace]:
    out = {}
    for name, kw in _FAMILIES.items():
        zm = get_model(name, **kw)
        opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
        with warnings.catch_warnings(), torch.autocast("cpu", dtype=torch.bfloat16):
            warnings.simplefilter("ignore")
            out[name] = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                                       fake=True)
    return out


@pytest.mark.parametrize("device", [d.name for d in roofline.list_devices()])
def test_every_shipped_device_analyses_the_zoo_bf16_training_steps(
        device: str, bf16_steps: dict[str, Trace]) -> None:
    for name, t in bf16_steps.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = roofline.analyze(t, device)
        assert math.isfinite(a.seconds) and a.seconds > 0, (name, device)
        # a device with a gap in its peaks says so, in the result and as a warning
        gaps = [str(w.message) for w in caught if issubclass(w.category, RooflineWarning)]
        assert (a.unrated_flops_share > 0) == bool(gaps), (name, device)
        assert all(g in a.assumptions for g in gaps)
        # the step is at least as long as its bytes at the datasheet bandwidth
        assert a.seconds >= t.total_bytes / a.device.bandwidth_bytes_per_s * (1 - 1e-9)


# --- wrong input (issue 13, item 13) ------------------------------------------------------

def test_analyze_a_model_says_trace_it_first() -> None:
    with pytest.raises(TypeError, match=r"roofline\.trace"):
        roofline.analyze(nn.Linear(2, 2), "a100")  # type: ignore[arg-type]


def test_unknown_device_suggests_names() -> None:
    with pytest.raises(LookupError, match="H100"):
        roofline.analyze(Trace([]), "h1000")


# --- end to end ---------------------------------------------------------------------------

def test_mlp_train_analysis_runs_end_to_end() -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 8))
    t = roofline.trace(model, torch.randn(16, 64), train=True, loss_fn=lambda o: o.sum())
    a = roofline.analyze(t, "l4")
    df = a.to_dataframe()
    assert len(df) == len(t) and set(df["bound"]) <= {"compute", "memory", "overhead", "none"}
    # "none" is the bound of exactly the ops that take no time (views)
    assert ((df["bound"] == "none") == (df["seconds"] == 0)).all()
    assert sum(v["fraction"] for v in a.by_bound().values()) == pytest.approx(1.0)
    assert "ms/step" in repr(a)


# --- issue 23, item 4: an input pipeline's ceiling in samples per second --------------------

def _batch_trace(batch: int) -> Trace:
    t = roofline.trace(nn.Linear(1024, 1024), torch.randn(batch, 1024), fake=True)
    assert t.info.batch == batch
    return t


def test_host_samples_per_s_holds_a_fast_step_to_the_pipeline() -> None:
    t = _batch_trace(256)
    free = roofline.analyze(t, "h100")
    held = roofline.analyze(t, "h100", host_samples_per_s=1000)
    assert free.seconds < 0.256  # the device alone would take well under 256 ms
    assert held.seconds == pytest.approx(256 / 1000)
    assert held.input_wait_seconds == pytest.approx(0.256 - free.seconds)
    assert held.by_bound()["input"]["seconds"] == pytest.approx(held.input_wait_seconds)
    # Amdahl: a faster device, 2x FLOP/s or bandwidth do not beat the pipeline
    assert roofline.compare(t, "h100", "b200", host_samples_per_s=1000).speedup == 1.0
    assert held.seconds_with(compute=2, memory=2) == pytest.approx(0.256)
    assert any("host_samples_per_s" in n and "holds the step" in n for n in held.assumptions)


def test_host_samples_per_s_above_the_device_changes_nothing() -> None:
    t = _batch_trace(8)
    a = roofline.analyze(t, "h100", host_samples_per_s=1e12)
    assert a.seconds == roofline.analyze(t, "h100").seconds and a.input_wait_seconds == 0
    assert "input" not in a.by_bound()


@pytest.mark.parametrize("bad", [0, -5, float("inf"), float("nan"), True, "1000"])
def test_host_samples_per_s_must_be_a_positive_rate(bad: object) -> None:
    with pytest.raises(ValueError, match="host_samples_per_s"):
        roofline.analyze(_batch_trace(8), "h100", host_samples_per_s=bad)


def test_host_samples_per_s_needs_a_batch() -> None:
    with roofline.capture() as t:
        nn.Linear(8, 8)(torch.randn(4, 8))
    with pytest.raises(ValueError, match=r"trace\.info\.batch"):
        roofline.analyze(t, "h100", host_samples_per_s=10)


def test_flash_attention_runs_at_the_rate_it_was_measured_to_reach() -> None:
    """A causal prefill attention of 4 x 32 heads x 4,096 tokens x 128 in bf16: 4 x 4 x 32 x
    128 x 4096 x 4097 / 2 = 550 GFLOP, compute-bound. On an H100 SXM it runs at the 416.4
    TFLOP/s flash attention reached in AIConfigurator's table, not at the GEMMs' 794.5; a
    what-if with 2x the FLOP/s doubles that rate too."""
    q = torch.empty(4, 32, 4096, 128, dtype=torch.bfloat16, device="meta")
    t = roofline.trace(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True), q, q, q, fake=True)
    flops = 4 * 4 * 32 * 128 * 4096 * 4097 // 2
    assert t.total_flops == flops
    a = roofline.analyze(t, "H100 SXM", overhead=False)
    assert a.seconds == pytest.approx(flops / 416.4e12, rel=0.01)
    assert "attention bf16" in a.figures
    assert a.figures["attention bf16"].origin == "measured"
    doubled = roofline.what_if(t, "H100 SXM", flops=2.0, overhead=False)
    assert doubled.speedup == pytest.approx(2.0, rel=0.01)
    # no measurement and no measured class member: the matrix figure, as before
    rtx = roofline.analyze(t, "RTX 4090", overhead=False)
    assert "attention bf16" not in rtx.figures


def test_a_step_of_short_gpu_kernels_is_said_to_be_likely_host_bound() -> None:
    from roofline.analysis.timing import HOST_BOUND_SECONDS_PER_KERNEL

    def host_notes(a: roofline.Analysis) -> list[str]:
        return [n for n in a.assumptions if "bound by the host instead" in n]

    tiny = roofline.trace(nn.Linear(16, 16), torch.randn(4, 16), fake=True)
    small = roofline.analyze(tiny, "h100")
    assert small.device_seconds / sum(op.kernels for op in tiny.ops) \
        < HOST_BOUND_SECONDS_PER_KERNEL
    assert len(host_notes(small)) == 1
    assert not host_notes(roofline.analyze(tiny, "h100", host_seconds=1e-3))  # stated
    assert not host_notes(roofline.analyze(tiny, "EPYC 7763"))  # a CPU: its own host
    big = roofline.trace(nn.Linear(8192, 8192), torch.randn(8192, 8192), fake=True)
    assert not host_notes(roofline.analyze(big, "h100"))  # milliseconds per kernel
