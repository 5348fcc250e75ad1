"""Analysis and prediction: analytic cases and properties of the time model."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import roofline
from roofline.tracing import OpRecord, Trace
from roofline.zoo import get_model


def _op(category: str, flops: int, nbytes: int, dtype: str = "bfloat16",
        out: tuple[int, ...] = (4096, 4096)) -> OpRecord:
    return OpRecord(name=f"aten.{category}.default", category=category, phase="forward",
                    module="", dtype=dtype, flops=flops, bytes_read=nbytes, bytes_written=0,
                    output_shapes=(out,))


#: The classic roofline on datasheet peaks: the time of an op is the max of its roofs.
CLASSIC = {"peaks": "datasheet", "overhead_model": "max"}


def test_single_ops_follow_the_datasheet_roofs() -> None:
    h100 = roofline.get_device("h100")
    big_mm = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    add = _op("pointwise", 10**8, 3 * 10**8 * 2)
    tiny = _op("pointwise", 10, 30)
    a = roofline.analyze(Trace([big_mm, add, tiny]), h100, **CLASSIC)
    assert a.bound == ["compute", "memory", "overhead"]
    assert a.op_seconds[0] == pytest.approx(big_mm.flops / 989.4e12)
    assert a.op_seconds[1] == pytest.approx(add.bytes / 3.35e12)
    assert a.op_seconds[2] == pytest.approx(h100.launch_overhead_seconds)
    # a matmul's ridge point is bf16 peak / bandwidth
    assert a.ridge_point[0] == pytest.approx(989.4e12 / 3.35e12)


def test_fp32_matmul_uses_tf32_only_when_asked() -> None:
    op = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 4, dtype="float32")
    a100 = roofline.get_device("a100")
    plain = roofline.analyze(Trace([op]), a100, **CLASSIC)
    tf32 = roofline.analyze(Trace([op]), a100, tf32_matmul=True, **CLASSIC)
    assert plain.op_seconds[0] == pytest.approx(op.flops / 19.5e12)
    assert tf32.op_seconds[0] == pytest.approx(op.flops / 156e12)
    # the A100 has TF32 units: the note says TF32 is off, not that the units are missing
    assert any("TF32 off (tf32_matmul=False" in n for n in plain.assumptions)
    assert not any("no fp32 matrix units" in n for n in plain.assumptions)
    assert not any("TF32" in n or "fp32" in n for n in tf32.assumptions)
    # the V100 has none: there, fp32 matmuls fall back to the vector units either way
    v100 = roofline.analyze(Trace([op]), "v100", tf32_matmul=True)
    assert any("has no fp32 matrix units" in n for n in v100.assumptions)


def test_fp16_accumulate_uses_the_geforce_rate_only_when_asked() -> None:
    op = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2, dtype="float16")
    bf16 = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2, dtype="bfloat16")
    conv = _op("conv", 2 * 8192**3, 3 * 8192**2 * 2, dtype="float16")  # cuDNN: fp32 accumulate
    t = Trace([op, bf16, conv])
    plain = roofline.analyze(t, "RTX 4090", overhead=False, peaks="datasheet")
    fast = roofline.analyze(t, "RTX 4090", overhead=False, fp16_accumulate=True,
                            peaks="datasheet")
    assert plain.op_seconds[0] == pytest.approx(op.flops / 165.2e12)
    assert fast.op_seconds[0] == pytest.approx(op.flops / 330.3e12)
    assert fast.op_seconds[1:] == pytest.approx(plain.op_seconds[1:])  # bf16, conv: fp32
    assert fast.peak_flops_per_s == 330.3e12 and plain.peak_flops_per_s == 165.2e12
    # a card that runs fp32 accumulation at full rate gains nothing
    a100 = roofline.analyze(t, "A100 SXM 80GB", overhead=False, fp16_accumulate=True,
                            peaks="datasheet")
    assert a100.op_seconds[0] == pytest.approx(op.flops / 312e12)


def test_small_matmul_cannot_fill_the_chip() -> None:
    h100 = roofline.get_device("h100")
    small = _op("matmul", 2 * 128 * 128 * 512, 10, out=(128, 128))  # one tile, short K
    a = roofline.analyze(Trace([small]), h100, overhead=False)
    assert a.fill[0] == pytest.approx(1 / h100.compute_units)
    # a long reduction is split (split-K): 64 chunks of 1024
    long_k = _op("matmul", 2 * 128 * 128 * 65536, 10, out=(128, 128))
    assert roofline.analyze(Trace([long_k]), h100).fill[0] == pytest.approx(64 / 132)


def test_skinny_matmul_is_memory_bound() -> None:
    # decode-like (8 x 4096) @ (4096 x 4096) in bf16: the weights dominate the bytes
    m, k, n = 8, 4096, 4096
    op = _op("matmul", 2 * m * k * n, 2 * (m * k + k * n + m * n), out=(m, n))
    a = roofline.analyze(Trace([op]), "h100", overhead=False)
    # ceil(8/128) x ceil(4096/128) = 32 tiles x 4 split-K chunks = 128 of 132 units
    assert a.fill[0] == pytest.approx(128 / 132)
    assert a.bound == ["memory"]
    assert roofline.what_if(Trace([op]), "h100", flops=2.0, overhead=False).speedup == (
        pytest.approx(1.0))


def test_fallback_for_a_dtype_without_matrix_units_is_reported() -> None:
    op = _op("matmul", 10**12, 10**6, dtype="float8_e4m3fn")
    a = roofline.analyze(Trace([op]), "v100", **CLASSIC)
    assert any("fp8" in note for note in a.assumptions)
    assert a.op_seconds[0] == pytest.approx(10**12 / 125e12)


def test_host_time_is_fixed_across_devices() -> None:
    op = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    t = Trace([op])
    c = roofline.compare(t, "a100", "h100", host_fraction=0.5)
    assert c.src.host_seconds == pytest.approx(c.src.device_seconds)
    assert c.dst.host_seconds == pytest.approx(c.src.host_seconds)
    pure = roofline.compare(t, "a100", "h100")
    # Amdahl: half the step cannot speed up
    s = pure.speedup
    assert c.speedup == pytest.approx(2 / (1 + 1 / s))


def test_what_if_on_a_memory_bound_trace_gains_nothing_from_flops() -> None:
    add = _op("pointwise", 10**8, 3 * 10**9)
    c = roofline.what_if(Trace([add]), "a100", flops=2.0)
    assert c.speedup == pytest.approx(1.0)
    # on the classic roofline (no launch overhead or DRAM latency, which do not halve)
    c = roofline.what_if(Trace([add]), "a100", flops=1.0, bandwidth=2.0, overhead=False,
                         **CLASSIC)
    assert c.speedup == pytest.approx(2.0)


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan])
def test_what_if_refuses_bad_factors(bad: float) -> None:
    with pytest.raises(ValueError):
        roofline.what_if(Trace([]), "a100", flops=bad)


def test_unknown_device_suggests_names() -> None:
    with pytest.raises(LookupError, match="H100"):
        roofline.analyze(Trace([]), "h1000")


def test_uncounted_ops_are_costed_by_bytes_and_reported() -> None:
    t = Trace([OpRecord("aten.foo.default", "uncounted", "forward", "", "float32", 0, 10**9, 0,
                        counted=False)])
    a = roofline.analyze(t, "h100")
    assert a.bound == ["memory"]
    assert a.uncounted_share() == {"bytes": 1.0, "seconds": 1.0}
    assert any("no FLOP formula" in n for n in a.assumptions)


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


def test_depthwise_convolution_runs_on_the_vector_units() -> None:
    a100 = roofline.get_device("a100")

    def conv(weight: tuple[int, ...], x: tuple[int, ...], backward: bool = False) -> OpRecord:
        shapes = ((8, 64, 56, 56), x, weight) if backward else (x, weight)
        return OpRecord(name=f"aten.convolution{'_backward' if backward else ''}.default",
                        category="conv", phase="forward", module="", dtype="bfloat16",
                        flops=10**12, bytes_read=1, bytes_written=0, input_shapes=shapes,
                        output_shapes=((8, 64, 56, 56),), backward_kernel=backward)

    depthwise = conv((64, 1, 3, 3), (8, 64, 56, 56))
    depthwise_bwd = conv((64, 1, 3, 3), (8, 64, 56, 56), backward=True)
    grayscale = conv((64, 1, 3, 3), (8, 1, 56, 56))  # one input channel, one group: a GEMM
    dense = conv((64, 64, 3, 3), (8, 64, 56, 56))
    # ConvTranspose2d(64, 1, 3): weight (C_in, C_out / groups, 3, 3) = (64, 1, 3, 3), 1 output
    transposed = OpRecord(name="aten.convolution.default", category="conv", phase="forward",
                          module="", dtype="bfloat16", flops=10**12, bytes_read=1,
                          bytes_written=0, input_shapes=((8, 64, 56, 56), (64, 1, 3, 3)),
                          output_shapes=((8, 1, 58, 58),))
    a = roofline.analyze(Trace([depthwise, depthwise_bwd, grayscale, dense, transposed]), a100,
                         overhead=False)
    assert [str(e) for e in a.engine] == ["vector bf16", "vector bf16", "matrix bf16",
                                          "matrix bf16", "matrix bf16"]
    assert a.op_seconds[0] == pytest.approx(10**12 / a100.peak_flops_per_s("bf16", "vector"))
    assert any("depthwise" in note for note in a.assumptions)
    # a calibrated depthwise rate replaces the vector peak for its own dtype only
    measured = a100.with_overrides(depthwise_flops_per_s={"bf16": 2e12})
    b = roofline.analyze(Trace([depthwise, depthwise_bwd, dense]), measured, overhead=False)
    assert b.op_seconds[:2] == pytest.approx([0.5, 0.5])  # backward at the forward's rate
    both = measured.with_overrides(depthwise_backward_flops_per_s={"bf16": 4e12})
    c = roofline.analyze(Trace([depthwise, depthwise_bwd]), both, overhead=False)
    assert c.op_seconds == pytest.approx([0.5, 0.25])
    assert b.op_seconds[2] == pytest.approx(a.op_seconds[3])
    assert any("calibrated depthwise rate" in note for note in b.assumptions)
    fp32 = roofline.analyze(Trace([replace(depthwise, dtype="float32")]), measured,
                            overhead=False)
    assert fp32.op_seconds[0] == pytest.approx(10**12 / a100.peak_flops_per_s("fp32", "vector"))
    # what-if devices scale it with the peaks; a new vector peak rescales it
    assert measured.scaled(flops_factor=2).depthwise_flops_per_s["bf16"] == pytest.approx(4e12)
    vector = dict(measured.vector_flops_per_s, bf16=2 * measured.vector_flops_per_s["bf16"])
    assert measured.with_overrides(vector_flops_per_s=vector).depthwise_flops_per_s["bf16"] == (
        pytest.approx(4e12))
