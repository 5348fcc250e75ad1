"""Matmul-class ops as GEMMs (analysis/gemm.py): the share of the chip their tiles fill,
zero-size GEMMs (issue 13, item 5) and depthwise convolutions on the vector units.

The fill is counted by hand in 128 x 128 output tiles and split-K chunks of 1024 over the
H100 SXM's 132 SMs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import make_op, make_op_4096

import roofline
from roofline.tracing import OpRecord, Trace


def test_small_matmul_cannot_fill_the_chip() -> None:
    h100 = roofline.get_device("h100")
    small = make_op_4096("matmul", 2 * 128 * 128 * 512, 10, out=(128, 128))  # one tile, short K
    # the tiles model (gemm_shapes=False; the fitted model's efficiency holds tile losses)
    a = roofline.analyze(Trace([small]), h100, overhead=False, gemm_shapes=False)
    assert a.fill[0] == pytest.approx(1 / h100.compute_units)
    # a long reduction is split (split-K): 64 chunks of 1024
    long_k = make_op_4096("matmul", 2 * 128 * 128 * 65536, 10, out=(128, 128))
    assert roofline.analyze(Trace([long_k]), h100, gemm_shapes=False).fill[0] == \
        pytest.approx(64 / 132)


def test_skinny_matmul_is_memory_bound() -> None:
    # decode-like (8 x 4096) @ (4096 x 4096) in bf16: the weights dominate the bytes
    m, k, n = 8, 4096, 4096
    op = make_op_4096("matmul", 2 * m * k * n, 2 * (m * k + k * n + m * n), out=(m, n))
    a = roofline.analyze(Trace([op]), "h100", overhead=False, gemm_shapes=False)
    # ceil(8/128) x ceil(4096/128) = 32 tiles x 4 split-K chunks = 128 of 132 units
    assert a.fill[0] == pytest.approx(128 / 132)
    assert a.bound == ["memory"]
    assert roofline.analyze(Trace([op]), "h100", overhead=False).bound == ["memory"]
    assert roofline.what_if(Trace([op]), "h100", flops=2.0, overhead=False).speedup == (
        pytest.approx(1.0))


# issue 13, item 5
def test_empty_gemm_costs_no_compute_time() -> None:
    # (0 x 1024) @ (1024 x 1024): no output tiles, no FLOPs, no compute time
    empty = make_op("matmul", 0, 4 * 1024 * 1024, shapes=((0, 1024),))
    a = roofline.analyze(Trace([empty]), "a100", overhead=False, peaks="datasheet")
    assert a.compute_seconds[0] == 0.0
    assert a.memory_seconds[0] == pytest.approx(4 * 1024 * 1024 / 2.039e12)  # A100 SXM 80GB


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
    # at the vector fp32 rate the A100 SXM 80GB was measured at: 19.18 TFLOPS (zzc-db fp32)
    assert fp32.op_seconds[0] == pytest.approx(10**12 / 19.18e12)
    # what-if devices scale it with the peaks; a new vector peak rescales it
    assert measured.scaled(flops_factor=2).depthwise_flops_per_s["bf16"] == pytest.approx(4e12)
    vector = dict(measured.vector_flops_per_s, bf16=2 * measured.vector_flops_per_s["bf16"])
    assert measured.with_overrides(vector_flops_per_s=vector).depthwise_flops_per_s["bf16"] == (
        pytest.approx(4e12))


def fp32_cuda_cores(ops: Trace, **options: object) -> roofline.Analysis:
    """fp32 convolutions on CUDA cores where no algorithm factor applies (an A100 with TF32
    off: compute capability 8.0, FP32_CONV_BEFORE_SM), so the gradients' multiples show
    alone."""
    return roofline.analyze(ops, "a100", overhead=False, tf32_conv=False, **options)


def test_convolution_weight_gradient_runs_slower_than_the_forward() -> None:
    """cuDNN's weight gradient takes WGRAD_ONE_TILE x tiles^WGRAD_TILE_EXPONENT the
    forward's time for its FLOPs, tiles the 128x128 tiles of its output; the input gradient
    runs at the forward's rate; a first layer (no input gradient) launches the weight
    gradient alone."""
    from roofline.analysis.gemm import (
        WGRAD_ONE_TILE,
        WGRAD_TILE_EXPONENT,
        weight_gradient_share,
    )

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, w, padding=1).sum()

    w = torch.empty(256, 128, 3, 3, device="meta", requires_grad=True)
    traces = {grad: roofline.trace(step, torch.empty(16, 128, 28, 28, device="meta",
                                                     requires_grad=grad), w,
                                   train=True, fake=True) for grad in (True, False)}
    forward, both = (op for op in traces[True].ops if op.category == "conv")
    (weight_only,) = (op for op in traces[False].ops if op.category == "conv"
                      and op.backward_kernel)
    assert [weight_gradient_share(op) for op in (forward, both, weight_only)] == [0, 0.5, 1]
    # 2 x (16*28*28) x 256 x (128*3*3) FLOPs per GEMM: the backward's are one per gradient
    gemm_flops = 2 * 16 * 28 * 28 * 256 * 128 * 9
    assert (forward.flops, both.flops, weight_only.flops) == (gemm_flops, 2 * gemm_flops,
                                                              gemm_flops)
    ops = Trace([forward, both, weight_only])
    a = fp32_cuda_cores(ops)
    plain = fp32_cuda_cores(ops, kernel_passes=False)
    # the weight gradient's output, 256 x (128*3*3): 2 x 9 tiles of 128x128
    slowdown = WGRAD_ONE_TILE * 18 ** WGRAD_TILE_EXPONENT
    assert slowdown == pytest.approx(1.36, abs=0.01)
    assert a.compute_seconds[0] == pytest.approx(plain.compute_seconds[0])
    assert a.compute_seconds[1] == pytest.approx(plain.compute_seconds[1] * (1 + slowdown) / 2)
    assert a.compute_seconds[2] == pytest.approx(plain.compute_seconds[2] * slowdown)
    assert any("weight gradient" in note for note in a.assumptions)
    assert not any("weight gradient" in note for note in plain.assumptions)
    # the measurement is cuDNN's: an AMD GPU and a CPU run both gradients at the forward's rate
    for other in ("mi300x", "Xeon Platinum 8480+"):
        assert roofline.analyze(ops, other, overhead=False).compute_seconds == pytest.approx(
            roofline.analyze(ops, other, overhead=False, kernel_passes=False).compute_seconds)
    # the device's rate as reached stays the forward's (the slowdown is the op's, not the chip's)
    assert a.achievable_flops_per_s == pytest.approx(plain.achievable_flops_per_s)


def test_frozen_convolution_weights_leave_the_input_gradient_at_the_forward_rate() -> None:
    from roofline.analysis.gemm import weight_gradient_share

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, w).sum()

    def backward(x: tuple[int, ...], w: tuple[int, ...]) -> OpRecord:
        t = roofline.trace(step, torch.empty(*x, device="meta", requires_grad=True),
                           torch.empty(*w, device="meta"), train=True, fake=True)
        (op,) = (op for op in t.ops if op.category == "conv" and op.backward_kernel)
        return op

    frozen = backward((16, 64, 28, 28), (128, 64, 1, 1))  # input gradient only
    assert weight_gradient_share(frozen) == 0
    ops = Trace([frozen])
    assert fp32_cuda_cores(ops).compute_seconds == pytest.approx(
        fp32_cuda_cores(ops, kernel_passes=False).compute_seconds)
    # an input shaped as the weight (an SE block's 1x1 conv on N x C x 1 x 1, N = C_out):
    # its lone gradient's shape names neither, so it counts half
    assert weight_gradient_share(backward((64, 64, 1, 1), (64, 64, 1, 1))) == 0.5


def test_strided_convolution_input_gradient_runs_at_the_measured_multiple() -> None:
    """A stride-2 convolution's input gradient takes DGRAD_STRIDED x its forward's time
    (DeepBench's stride-2 layers); stride 1, unpadded, keeps the forward's rate."""
    from roofline.analysis.gemm import (
        DGRAD_STRIDED,
        WGRAD_ONE_TILE,
        WGRAD_TILE_EXPONENT,
        conv_stride,
        gradient_slowdown,
    )

    def backward(x: tuple[int, ...], w: tuple[int, ...], stride: int, padding: int,
                 weight_grad: bool) -> OpRecord:
        def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.conv2d(x, w, stride=stride, padding=padding).sum()

        t = roofline.trace(step, torch.empty(*x, device="meta", requires_grad=True),
                           torch.empty(*w, device="meta", requires_grad=weight_grad),
                           train=True, fake=True)
        (op,) = (op for op in t.ops if op.category == "conv" and op.backward_kernel)
        return op

    down = backward((16, 256, 56, 56), (512, 256, 1, 1), 2, 0, True)  # ResNet's downsample
    frozen = backward((16, 256, 56, 56), (512, 256, 1, 1), 2, 0, False)
    three = backward((16, 128, 56, 56), (128, 128, 3, 3), 2, 1, False)  # 56 -> 28, padded
    valid = backward((16, 128, 30, 30), (128, 128, 3, 3), 1, 0, False)  # 30 -> 28, stride 1
    assert [conv_stride(op) for op in (down, frozen, three, valid)] == [2, 2, 2, 1]
    ops = Trace([down, frozen, three, valid])
    a = fp32_cuda_cores(ops)
    plain = fp32_cuda_cores(ops, kernel_passes=False)
    # the weight gradient's output, 512 x 256: 4 x 2 tiles
    wgrad = WGRAD_ONE_TILE * 8 ** WGRAD_TILE_EXPONENT
    assert a.compute_seconds == pytest.approx(plain.compute_seconds * np.array(
        [(DGRAD_STRIDED + wgrad) / 2, DGRAD_STRIDED, DGRAD_STRIDED, 1.0]))
    assert any("input gradient" in note for note in a.assumptions)
    # a bias gradient alone is a sum, not a GEMM: no factor, strided or not
    x, w = torch.empty(8, 64, 28, 28, device="meta"), torch.empty(64, 64, 1, 1, device="meta")
    t = roofline.trace(lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride=2).sum(), x, w,
                       torch.empty(64, device="meta", requires_grad=True), train=True, fake=True)
    (bias,) = (op for op in t.ops if op.category == "conv" and op.backward_kernel)
    assert bias.output_shapes == ((64,),)
    assert gradient_slowdown(bias, roofline.get_device("v100")) == 1.0


def test_tensor_core_convolutions_run_at_the_measured_multiple_of_their_flops_time() -> None:
    """A convolution on an NVIDIA GPU's tensor cores takes CONV_SLOWDOWN x the time of its
    FLOPs at the engine's rate (cuDNN's implicit GEMM: DeepBench's and the H200's tables),
    the large factor for a forward of >= 1e8 FLOPs per SM, the small one for <= 3e7; TF32
    no longer than the fp32 vector units would take (cuDNN runs its fastest algorithm); fp32
    on the vector units takes FP32_CONV_SLOWDOWN's before compute capability 8.0 (a 3x3
    stride-1 one Winograd's), its FLOPs' time from 8.0 on; another vendor's GPU keeps the
    FLOPs' time."""
    from roofline.analysis.gemm import (
        CONV_NOTE,
        CONV_SLOWDOWN,
        CONV_WORK_PER_UNIT,
        FP32_CONV_NOTE,
        FP32_CONV_SLOWDOWN,
    )
    from roofline.hardware.engines import Engine

    def conv(dtype: torch.dtype, batch: int = 64) -> Trace:
        x = torch.empty(batch, 256, 28, 28, dtype=dtype, device="meta").to(
            memory_format=torch.channels_last)
        w = torch.empty(256, 256, 3, 3, dtype=dtype, device="meta").to(
            memory_format=torch.channels_last)
        t = roofline.trace(lambda x, w: torch.nn.functional.conv2d(x, w, padding=1), x, w,
                           fake=True)
        return Trace([op for op in t.ops if op.category == "conv"])

    def factor(t: Trace, device: str, **options: object) -> float:
        a = roofline.analyze(t, device, overhead=False, **options)
        plain = roofline.analyze(t, device, overhead=False, kernel_passes=False, **options)
        noted = CONV_NOTE in a.assumptions or FP32_CONV_NOTE in a.assumptions
        assert noted == (float(a.compute_seconds[0]) != float(plain.compute_seconds[0]))
        return float(a.compute_seconds[0] / plain.compute_seconds[0])

    # the forward: 2 x 64 x 28 x 28 x 256 x 256 x 9 = 59.2 GFLOP, 548M per SM of the A100's
    # 108 and 449M of the H100 SXM's 132 (large); at batch 1, 8.6M per A100 SM (small)
    assert CONV_WORK_PER_UNIT[1] < 2 * 64 * 28 * 28 * 256 * 256 * 9 / 132
    assert CONV_WORK_PER_UNIT[0] > 2 * 1 * 28 * 28 * 256 * 256 * 9 / 108
    half, single = conv(torch.float16), conv(torch.float32)
    assert factor(half, "a100") == pytest.approx(CONV_SLOWDOWN["fp16"][1])
    assert factor(half, "h100") == pytest.approx(CONV_SLOWDOWN["fp16"][1])
    assert factor(conv(torch.float16, batch=1), "a100") == pytest.approx(CONV_SLOWDOWN["fp16"][0])
    assert CONV_SLOWDOWN["bf16"] == CONV_SLOWDOWN["fp16"]
    # TF32 (PyTorch's default for convolutions): the A100's TF32 rate is 8x its fp32
    # vector rate on the datasheet (156 / 19.5 TFLOP/s), so the full factor applies
    a = roofline.analyze(single, "a100")
    assert a.engine_flops_per_s(Engine("matrix", "tf32")) > CONV_SLOWDOWN["tf32"][0] * \
        a.engine_flops_per_s(Engine("vector", "fp32"))  # type: ignore[operator]
    assert factor(single, "a100") == pytest.approx(CONV_SLOWDOWN["tf32"][1])
    # an RTX 3090's TF32 peak is its fp32 vector peak (35.6 TFLOP/s each): the vector
    # units' time caps the factor
    g = roofline.analyze(single, "rtx 3090")
    tf32, simt = (g.engine_flops_per_s(Engine(kind, dtype))
                  for kind, dtype in (("matrix", "tf32"), ("vector", "fp32")))
    assert tf32 is not None and simt is not None and tf32 / simt < CONV_SLOWDOWN["tf32"][1]
    assert factor(single, "rtx 3090") == pytest.approx(max(1.0, tf32 / simt))
    # fp32 on the vector units: a V100 (sm_70, no TF32) runs this 3x3 stride-1 layer as
    # Winograd, 740M forward FLOPs per SM of its 80 (large); an A100 with TF32 off (sm_80)
    # keeps the FLOPs' time; another vendor too
    assert factor(single, "v100") == pytest.approx(FP32_CONV_SLOWDOWN["winograd"][1])
    assert factor(single, "a100", tf32_conv=False) == 1.0
    assert factor(half, "mi300x") == 1.0


def test_fp32_convolutions_take_winograds_factor_where_cudnn_can_run_it() -> None:
    """Before compute capability 8.0, an fp32 convolution on the CUDA cores takes Winograd's
    factor when it is 2-D, 3x3, stride 1 and ungrouped (forward and backward alike), the
    other factor otherwise (1x1, stride 2, grouped): the large ones at >= 1e8 forward FLOPs
    per SM, the small ones at <= 3e7."""
    from roofline.analysis.gemm import FP32_CONV_SLOWDOWN, conv_slowdown, winograd
    from roofline.hardware.engines import Engine

    def ops(kernel: int, stride: int, groups: int = 1, batch: int = 64) -> list[OpRecord]:
        x = torch.empty(batch, 256, 28, 28, device="meta", requires_grad=True)
        w = torch.empty(256, 256 // groups, kernel, kernel, device="meta", requires_grad=True)
        t = roofline.trace(lambda x, w: torch.nn.functional.conv2d(
            x, w, stride=stride, padding=kernel // 2, groups=groups).sum(), x, w,
            train=True, fake=True)
        convs = [op for op in t.ops if op.category == "conv"]
        assert {op.phase for op in convs} == {"forward", "backward"}
        return convs

    v100, vector = roofline.get_device("v100"), Engine("vector", "fp32")
    for op in ops(3, 1):  # 2 x 64 x 28^2 x 256^2 x 9 / 80 SMs = 740M per SM: large
        assert winograd(op)
        assert conv_slowdown(op, v100, vector) == pytest.approx(FP32_CONV_SLOWDOWN["winograd"][1])
    for op in ops(3, 1, batch=1):  # 11.6M per SM: small
        assert conv_slowdown(op, v100, vector) == pytest.approx(FP32_CONV_SLOWDOWN["winograd"][0])
    for op in ops(1, 1) + ops(3, 2) + ops(3, 1, groups=2):  # 82M, 185M and 370M per SM
        assert not winograd(op)
        work = op.flops / (2 if op.backward_kernel else 1) / 80  # the forward's FLOPs
        assert conv_slowdown(op, v100, vector) == pytest.approx(
            FP32_CONV_SLOWDOWN["gemm"][1] if work >= 1e8 else
            FP32_CONV_SLOWDOWN["gemm"][0] ** (1 - (t := np.log(work / 3e7) / np.log(1e8 / 3e7)))
            * FP32_CONV_SLOWDOWN["gemm"][1] ** t)
    # compute capability 8.0 on, the tensor cores' dtypes, and fp16 data on fp32 units (a
    # Pascal part's pseudo-half, not measured) are not these factors
    assert conv_slowdown(ops(3, 1)[0], roofline.get_device("a100"), vector) == 1.0
    assert conv_slowdown(ops(3, 1)[0], v100, Engine("vector", "fp16")) == 1.0
    half = replace(ops(3, 1)[0], dtype="float16")
    assert conv_slowdown(half, roofline.get_device("titan xp"), vector) == 1.0
    # a transposed 3x3 convolution at stride 2 (its output larger than its input) is not one
    x = torch.empty(8, 64, 14, 14, device="meta")
    up = roofline.trace(lambda x, w: torch.nn.functional.conv_transpose2d(
        x, w, stride=2, padding=1, output_padding=1), x,
        torch.empty(64, 64, 3, 3, device="meta"), fake=True)
    (transposed,) = (op for op in up.ops if op.category == "conv")
    assert transposed.output_shapes[0] == (8, 64, 28, 28) and not winograd(transposed)


def test_the_convolution_factor_falls_log_linearly_with_the_work_per_compute_unit() -> None:
    """Between the two sizes the factor is log-linear in the forward's FLOPs per unit (at
    their geometric mean, the geometric mean of the factors), and a larger convolution
    never takes less time: work x factor grows with the work."""
    from roofline.analysis.gemm import CONV_SLOWDOWN, CONV_WORK_PER_UNIT, conv_factor

    low, high = CONV_WORK_PER_UNIT
    for dtype in ("fp16", "bf16", "tf32"):
        small, large = CONV_SLOWDOWN[dtype]
        assert large < small
        assert conv_factor(dtype, low / 10) == conv_factor(dtype, low) == small
        assert conv_factor(dtype, high * 10) == conv_factor(dtype, high) == large
        assert conv_factor(dtype, (low * high) ** 0.5) == pytest.approx((small * large) ** 0.5)
        work = np.geomspace(low / 4, high * 4, 200)
        factors = np.array([conv_factor(dtype, w) for w in work])
        assert np.all(np.diff(factors) <= 0) and np.all(np.diff(work * factors) > 0)
    assert conv_factor("fp32", low) == conv_factor("int8", high) == 1.0


def test_the_convolution_factors_are_the_medians_the_tables_give() -> None:
    """CONV_SLOWDOWN's factors are the medians over the tensor-core convolution tables
    (DeepBench's V100 and T4, the lent H200's) of each table's factor fitted to its small and
    to its large layers, and FP32_CONV_SLOWDOWN's over DeepBench's seven fp32 tables per
    algorithm, as ``benchmarks/kernels.py`` fits them (run apart: that script puts
    benchmarks/ on sys.path)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from roofline.analysis.gemm import CONV_SLOWDOWN, FP32_CONV_SLOWDOWN

    code = (
        "import json, sys, numpy as np; sys.path.insert(0, 'benchmarks'); import kernels as K\n"
        "t = K._tensor_core_convs(); own = [K._own_factors(x) for x in t]\n"
        "f = {d: [float(np.median([o[i] for o, x in zip(own, t) if x[1] == d]))\n"
        "         for i in (0, 1)] for d in ('fp16', 'tf32')}\n"
        "f.update(K._fp32_medians([K._fp32_own(x) for x in K._fp32_convs()]))\n"
        "print(json.dumps(f))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1])
    fitted = json.loads(out.stdout.strip().splitlines()[-1])
    library = {**CONV_SLOWDOWN, **FP32_CONV_SLOWDOWN}
    for kind, (small, large) in fitted.items():
        assert library[kind] == pytest.approx((small, large), abs=0.005)
        assert small > large


def test_a_convolution_backward_is_sized_by_its_forward() -> None:
    """The factor's work is the forward's FLOPs, for the backward too, which computes one
    GEMM of the forward's per gradient (input and weight: twice its FLOPs)."""
    from roofline.analysis.gemm import forward_flops

    x = torch.empty(8, 64, 28, 28, device="meta", requires_grad=True)
    w = torch.empty(128, 64, 3, 3, device="meta", requires_grad=True)
    t = roofline.trace(lambda x, w: torch.nn.functional.conv2d(x, w, padding=1).sum(), x, w,
                       train=True, fake=True)
    fwd, bwd = (next(op for op in t.ops if op.category == "conv" and op.phase == phase)
                for phase in ("forward", "backward"))
    flops = 2 * 8 * 28 * 28 * 128 * 64 * 9  # outputs x reduction (C_in x R x S), two per MAC
    assert fwd.flops == flops and bwd.flops == 2 * flops
    assert forward_flops(fwd) == pytest.approx(flops)
    assert forward_flops(bwd) == pytest.approx(flops)
