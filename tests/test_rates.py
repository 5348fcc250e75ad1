"""Which engine runs each op, at what rate (analysis/rates.py): TF32 only when asked,
GeForce fp16 accumulation only when asked, fallbacks for dtypes without matrix units, and
FLOPs a device lists no rate for (issue 13, item 12).

Expected times are derived by hand from datasheet peaks (A100: 19.5 TFLOP/s fp32, 156
TF32, 312 bf16; RTX 4090: 165.2 TFLOP/s fp16, 330.3 with fp16 accumulation; V100: 125
fp16; H100 SXM: 989.4 bf16).
"""

from __future__ import annotations

import pytest
from conftest import CLASSIC, make_op, make_op_4096

import roofline
from roofline import RooflineWarning
from roofline.tracing import Trace


def test_fp32_matmul_uses_tf32_only_when_asked() -> None:
    op = make_op_4096("matmul", 2 * 8192**3, 3 * 8192**2 * 4, dtype="float32")
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
    op = make_op_4096("matmul", 2 * 8192**3, 3 * 8192**2 * 2, dtype="float16")
    bf16 = make_op_4096("matmul", 2 * 8192**3, 3 * 8192**2 * 2, dtype="bfloat16")
    # cuDNN: fp32 accumulate
    conv = make_op_4096("conv", 2 * 8192**3, 3 * 8192**2 * 2, dtype="float16")
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


def test_fallback_for_a_dtype_without_matrix_units_is_reported() -> None:
    op = make_op_4096("matmul", 10**12, 10**6, dtype="float8_e4m3fn")
    a = roofline.analyze(Trace([op]), "v100", **CLASSIC)
    assert any("fp8" in note for note in a.assumptions)
    assert a.op_seconds[0] == pytest.approx(10**12 / 125e12)


# issue 13, item 12
def test_a_device_without_a_vector_rate_says_which_flops_it_did_not_cost() -> None:
    h100 = roofline.get_device("h100")
    no_vector = h100.with_overrides(name="matrix only", vector_flops_per_s={})
    t = Trace([make_op("pointwise", 10**9, 10**6), make_op("matmul", 10**12, 10**6)])
    with pytest.warns(RooflineWarning, match="no compute rate for bfloat16"):
        a = roofline.analyze(t, no_vector, overhead=False, peaks="datasheet")
    assert a.compute_seconds[0] == 0 and a.engine[0] is None
    assert a.unrated_flops_share == pytest.approx(10**9 / (10**9 + 10**12))
    assert a.compute_seconds[1] == pytest.approx(10**12 / 989.4e12)  # H100 SXM bf16
    assert any("no compute rate for bfloat16" in n and "0.1% of FLOPs" in n
               for n in a.assumptions)
