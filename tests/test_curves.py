"""Measured rate curves: interpolation, validation, what-ifs and their use in the analysis."""

from __future__ import annotations

import math

import numpy as np
import pytest

import roofline
from roofline.analysis.gemm import WGRAD_ONE_TILE, WGRAD_TILE_EXPONENT
from roofline.hardware import DeviceSpec
from roofline.hardware.curves import (
    MatmulPoint,
    MemoryPoint,
    interpolate_matmul,
    interpolate_memory,
)
from roofline.hardware.spec import DeviceSpecError
from roofline.tracing import OpRecord, Trace

SIZES = (32, 128, 512)


def _rate(m: int, n: int, k: int) -> float:
    """A rate that is log-linear in each size: 1 GFLOP/s x (m n k / 32^3)^(1/3)."""
    return 1e9 * (m * n * k / 32**3) ** (1 / 3)


def _grid() -> list[MatmulPoint]:
    return [MatmulPoint(m=m, n=n, k=k, flops_per_s=_rate(m, n, k))
            for m in SIZES for n in SIZES for k in SIZES]


MEMORY = [MemoryPoint(bytes=1 << 12, bytes_per_s=1e9), MemoryPoint(bytes=1 << 16, bytes_per_s=16e9),
          MemoryPoint(bytes=1 << 24, bytes_per_s=4e9)]


def _spec() -> DeviceSpec:
    """An A100 with an fp32 matrix peak and fp32 curves, as a calibration of it would have."""
    a100 = roofline.get_device("a100")
    return a100.with_overrides(
        name="curved", aliases=[], matrix_flops_per_s={**a100.matrix_flops_per_s, "fp32": 19.5e12},
        matmul_curve={"fp32": _grid()}, memory_curve=MEMORY)


def test_matmul_curve_returns_grid_points_and_log_linear_values_between() -> None:
    pts = _grid()
    m, n, k = (np.array([32, 128, 64, 256]), np.array([512, 32, 64, 128]),
               np.array([128, 512, 64, 300]))
    expected = [_rate(32, 512, 128), _rate(128, 32, 512), _rate(64, 64, 64), _rate(256, 128, 300)]
    assert interpolate_matmul(pts, m, n, k) == pytest.approx(expected, rel=1e-9)


def test_matmul_curve_is_clamped_at_its_edges() -> None:
    pts = _grid()
    got = interpolate_matmul(pts, np.array([1, 10**6]), np.array([1, 10**6]), np.array([1, 10**6]))
    assert got == pytest.approx([_rate(32, 32, 32), _rate(512, 512, 512)])


def test_memory_curve_interpolates_in_log_space_and_clamps() -> None:
    got = interpolate_memory(MEMORY, np.array([1 << 10, 1 << 12, 1 << 14, 1 << 20, 1 << 30]))
    # 2^14 is halfway (in log2) between 2^12 (1 GB/s) and 2^16 (16 GB/s): sqrt(16) = 4 GB/s
    assert got == pytest.approx([1e9, 1e9, 4e9, 8e9, 4e9])


def test_incomplete_or_duplicate_curves_are_rejected() -> None:
    a100 = roofline.get_device("a100")
    with pytest.raises(DeviceSpecError, match="full grid"):
        a100.with_overrides(matmul_curve={"fp32": _grid()[:-1]})
    with pytest.raises(DeviceSpecError, match="empty"):
        a100.with_overrides(matmul_curve={"fp32": []})
    with pytest.raises(DeviceSpecError, match="duplicate"):
        a100.with_overrides(memory_curve=[MEMORY[0], MEMORY[0]])
    with pytest.raises(DeviceSpecError, match="unknown dtype"):
        a100.with_overrides(matmul_curve={"fp33": _grid()})
    with pytest.raises(DeviceSpecError):
        a100.with_overrides(memory_curve=[{"bytes": 0, "bytes_per_s": 1e9}])


def test_curves_survive_json_and_scale_with_what_ifs() -> None:
    spec = _spec()
    assert DeviceSpec.model_validate_json(spec.model_dump_json()) == spec
    fast = spec.scaled(flops_factor=2, bandwidth_factor=3)
    assert [p.flops_per_s for p in fast.matmul_curve["fp32"]] == pytest.approx(
        [2 * p.flops_per_s for p in spec.matmul_curve["fp32"]])
    assert [p.bytes_per_s for p in fast.memory_curve] == pytest.approx([3e9, 48e9, 12e9])


def _op(category: str, flops: int, nbytes: int, out: tuple[int, ...],
        dtype: str = "float32") -> OpRecord:
    return OpRecord(name=f"aten.{category}.default", category=category, phase="forward",
                    module="", dtype=dtype, flops=flops, bytes_read=nbytes, bytes_written=0,
                    output_shapes=(out,))


def test_analysis_costs_ops_at_their_measured_rates() -> None:
    spec = _spec()
    mm = _op("matmul", 2 * 128 * 32 * 512, 1, out=(128, 32))  # (128 x 512) @ (512 x 32)
    bmm = _op("matmul", 2 * 4 * 32 * 32 * 128, 1, out=(4, 32, 32))  # 4 stacked: m = 128
    add = _op("pointwise", 1, 1 << 16, out=(1 << 14,))
    a = roofline.analyze(Trace([mm, bmm, add]), spec, overhead=False)
    assert a.op_seconds[0] == pytest.approx(mm.flops / _rate(128, 32, 512))
    assert a.op_seconds[1] == pytest.approx(bmm.flops / _rate(128, 32, 128))
    assert a.op_seconds[2] == pytest.approx((1 << 16) / 16e9)
    assert list(a.fill) == [1.0, 1.0, 1.0]  # the curve already holds what fill models
    # a dtype without a curve falls back to peak x fill
    bf16 = _op("matmul", 2 * 4096**3, 1, out=(4096, 4096), dtype="bfloat16")
    assert roofline.analyze(Trace([bf16]), spec, overhead=False, peaks="datasheet"
                            ).op_seconds[0] == pytest.approx(bf16.flops / 312e12)


def test_what_if_on_a_curved_spec_scales_every_op() -> None:
    spec = _spec()
    ops = [_op("matmul", 2 * 128**3, 1, out=(128, 128)),
           _op("pointwise", 1, 1 << 20, out=(1 << 18,))]
    assert roofline.what_if(Trace(ops[:1]), spec, flops=2, overhead=False).speedup == \
        pytest.approx(2.0)
    assert roofline.what_if(Trace(ops[1:]), spec, bandwidth=2, overhead=False).speedup == \
        pytest.approx(2.0)
    assert math.isclose(roofline.what_if(Trace(ops), spec, flops=2, bandwidth=2,
                                         overhead=False).speedup, 2.0)


def test_overriding_a_plateau_rescales_its_curve() -> None:
    spec = _spec()
    faster = spec.with_overrides(bandwidth_bytes_per_s=2 * spec.bandwidth_bytes_per_s,
                                 matrix_flops_per_s={**spec.matrix_flops_per_s, "fp32": 39e12})
    assert [p.bytes_per_s for p in faster.memory_curve] == pytest.approx([2e9, 32e9, 8e9])
    assert [p.flops_per_s for p in faster.matmul_curve["fp32"]] == pytest.approx(
        [2 * p.flops_per_s for p in spec.matmul_curve["fp32"]])


def test_only_ops_in_the_curves_dtype_with_a_shape_use_it() -> None:
    spec = _spec().with_overrides(matrix_flops_per_s={"fp32": 19.5e12})  # no 16-bit units
    half = _op("matmul", 2 * 4096**3, 1, out=(4096, 4096), dtype="float16")  # fills the chip
    scalar = OpRecord(name="aten.dot.default", category="matmul", phase="forward", module="",
                      dtype="float32", flops=2 * 4096, bytes_read=0, bytes_written=0,
                      output_shapes=((),))
    a = roofline.analyze(Trace([half, scalar]), spec, overhead=False)
    # fp16 falls back to the fp16 vector rate, not to the fp32 torch.mm curve
    assert str(a.engine[0]) == "vector fp16"
    assert a.op_seconds[0] == pytest.approx(half.flops / spec.peak_flops_per_s("fp16", "vector"))
    # no output shape, no GEMM shape: the plateau, not the curve's smallest point
    assert a.op_seconds[1] == pytest.approx(scalar.flops / 19.5e12)


def test_convolution_backward_is_costed_as_its_forward_gemm() -> None:
    """Both gradients at the rate the curve gives the forward's GEMM shape, and the weight
    gradient's FLOPs slower by cuDNN's factor for its output's tiles (kernel_passes=False:
    not)."""
    spec = _spec()
    # forward (8, 16, 32, 32) -> (8, 128, 32, 32), 3x3: GEMM m = 8*32*32, n = 128, k = 144
    m, n, k = 8 * 32 * 32, 128, 16 * 9
    both = OpRecord(name="aten.convolution_backward.default", category="conv",
                    backward_kernel=True, phase="backward", module="", dtype="float32",
                    flops=2 * 2 * m * n * k, bytes_read=1, bytes_written=0,
                    input_shapes=((8, 128, 32, 32), (8, 16, 32, 32), (128, 16, 3, 3)),
                    output_shapes=((8, 16, 32, 32), (128, 16, 3, 3)))
    weight_only = OpRecord(name=both.name, category="conv", backward_kernel=True,
                           phase="backward", module="", dtype="float32", flops=2 * m * n * k,
                           bytes_read=1, bytes_written=0,
                           input_shapes=both.input_shapes, output_shapes=((128, 16, 3, 3),))
    a = roofline.analyze(Trace([both, weight_only]), spec, overhead=False, tf32_conv=False,
                         kernel_passes=False)
    rate = float(interpolate_matmul(_grid(), np.array([m]), np.array([n]), np.array([k]))[0])
    assert a.flops_per_s == pytest.approx([rate, rate])
    slow = roofline.analyze(Trace([both, weight_only]), spec, overhead=False, tf32_conv=False)
    wgrad = WGRAD_ONE_TILE * 2 ** WGRAD_TILE_EXPONENT  # output 128 x 144: 1 x 2 tiles
    assert slow.flops_per_s == pytest.approx([rate / ((1 + wgrad) / 2), rate / wgrad])


def test_cores_what_if_on_a_curve_gains_as_the_tiles_fill_the_new_chip() -> None:
    """The A100 has 108 SMs. A (128 x 512) @ (512 x 32) matmul is one 128x128 tile (K 512
    splits no further): twice the SMs leave it as it was. A 4096 x 4096 output is 1024
    tiles, 9.48 waves on 108 SMs (fill 1024 / (10 x 108)) and 4.74 on 216 (fill
    1024 / (5 x 216)): 2x the units, the same fill, 2x the rate."""
    spec = _spec()
    one_tile = _op("matmul", 2 * 128 * 32 * 512, 1, out=(128, 32))
    c = roofline.what_if(Trace([one_tile]), spec, cores=2, overhead=False)
    assert c.speedup == pytest.approx(1.0)
    big = _op("matmul", 2 * 4096 * 4096 * 512, 1, out=(4096, 4096))
    assert roofline.what_if(Trace([big]), spec, cores=2, overhead=False).speedup == \
        pytest.approx(2.0)
    assert spec.scaled(cores_factor=2).matmul_curve_units == 108
