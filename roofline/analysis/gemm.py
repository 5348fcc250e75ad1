"""Matmul-class ops as GEMMs: their shape, the share of the chip they fill, depthwise convs.

``fill`` is the share of the chip a matmul-class op can occupy: its output tiles
(128x128 per compute unit, as cuBLAS/CUTLASS tile it; a convolution as its implicit
GEMM; attention: one 128-row block per batch x head), times the split-K chunks of 1024
its reduction allows, over the device's compute units, at most 1. Tile shapes and
split-K heuristics of real libraries vary; skinny GEMMs are the least certain.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from roofline.hardware import DeviceSpec
from roofline.hardware.curves import interpolate_matmul
from roofline.hardware.engines import Engine
from roofline.tracing.records import OpRecord

Gemm = tuple[int, int, int, float]  # (batch, rows, cols, reduction length k)

TILE_SIDE = 128  # cuBLAS/CUTLASS-style 128x128 output tile per compute unit
SPLIT_K = 1024  # reduction length per split-K chunk
#: How much longer cuDNN's weight gradient of a convolution takes than its forward, for the
#: same FLOPs, against the 128x128 tiles of its output (C_out x C_in*R*S / groups):
#: ratio = WGRAD_ONE_TILE * tiles ** WGRAD_TILE_EXPONENT, a least-squares line in logs
#: through the layers of DeepBench's nine NVIDIA training tables (Maxwell, Pascal, Volta,
#: Turing; fp32, and fp16 on the tensor cores; cuDNN 5-7.6; ``benchmarks/kernels.py``).
#: The weight gradient reduces over the long N*H*W side into that small output: few tiles
#: leave the chip to a split reduction, whose partial sums cost a second pass (2.1x the
#: forward's time at one tile, 1.4x at 16, 1.0x at 140); the batch does not enter (-0.01
#: per e-fold of N*H*W when added to the fit). Each table's own slope, the others held
#: out, is -0.144 to -0.160. The input gradient: :data:`DGRAD_STRIDED`.
WGRAD_ONE_TILE = 2.11
WGRAD_TILE_EXPONENT = -0.152
#: How much longer the input gradient of a strided convolution takes than its forward, for
#: the same FLOPs: the median over the same nine tables of dgrad / forward on their
#: stride-2 layers (1.53-2.21 per table, held out each within 35% of the others' median,
#: 12% at the median). It scatters into s^2 times the positions the forward gathers from;
#: at stride 1 the input gradient ran at the forward's rate (0.97-1.07 per table; the
#: V100's fp16, 1.22, aside). Only stride 2 was measured; larger strides take it too.
DGRAD_STRIDED = 2.02
#: How much longer cuDNN's convolution forward takes on the tensor cores than the model's
#: roofline of its FLOPs at the engine's rate (its compute time; bytes and overhead
#: unchanged), per engine dtype: (small, large), for a convolution whose forward does at most
#: ``CONV_WORK_PER_UNIT[0]`` FLOPs per compute unit and one that does at least
#: ``CONV_WORK_PER_UNIT[1]``; in between, log-linear in that work. Each is the factor that
#: brings the median of measured over predicted to 1 over those layers (>= 16 input channels)
#: of each table, the median over the tables that measured the dtype: DeepBench's V100 and T4
#: (cuDNN 7.6) and this project's H200 (cuDNN 9 under torch 2.11, timed in CUDA graphs) in 16
#: bits, small 1.85, 1.99, 2.38 and large 1.16, 1.29, 1.36; the H200's alone in TF32, 3.77
#: and 1.79 (``benchmarks/kernels.py``). One factor over all layers (1.70 and 3.18, before)
#: left the large layers, where a training batch puts a network's convolutions, 1.2-1.8x too
#: slow on every table. An implicit GEMM walks its reduction one filter tap and one slice of
#: channels at a time (CUTLASS ``media/docs/implicit_gemm_convolution.md``), forming its
#: operand tiles on the fly from the activations: work a GEMM of the same FLOPs does not do,
#: and a small one (few tiles per compute unit, each a short main loop) pays its fixed costs
#: on less. The gradients' multiples (:data:`WGRAD_ONE_TILE`) are of this time.
CONV_SLOWDOWN: dict[str, tuple[float, float]] = {
    "fp16": (1.99, 1.29), "bf16": (1.99, 1.29), "tf32": (3.77, 1.79)}
#: Forward FLOPs per compute unit at or below which a convolution takes the small factor, and
#: at or above which the large (the tables' layers run from 2e6 to 1e9 per SM). Above 1e8 the
#: large factor holds, beyond the tables' largest too; the larger half of each table's large
#: layers ran 2-14% faster than it at the median (a further fall that is not modelled).
CONV_WORK_PER_UNIT = (3e7, 1e8)
#: fp32 convolutions on the CUDA cores of NVIDIA GPUs before compute capability 8.0 (the
#: generations measured: Maxwell to Turing), (small, large) as above, by the algorithm cuDNN
#: runs: "winograd" for a 3x3 kernel at stride 1 (WINOGRAD and WINOGRAD_NONFUSED, which do
#: 2.25x to 4x fewer multiplies than the direct product; cuDNN takes them for such layers
#: where it picks its fastest), "gemm" for the rest. Each is the median over DeepBench's seven
#: fp32 tables (cuDNN 5-7.6, its chosen algorithm per layer) of the factor fitted to that
#: table's layers of the kind and size (``benchmarks/kernels.py``; Winograd's small one over the
#: four tables that have such layers: 0.73-1.25). The H200's fp32 table
#: (cuDNN 9, TF32 off) ran its 3x3 layers at 1.5x their FLOPs' time, no faster than its
#: others, so from 8.0 on fp32 convolutions keep their FLOPs' time (TF32 is the default there).
FP32_CONV_SLOWDOWN: dict[str, tuple[float, float]] = {
    "winograd": (0.98, 0.60), "gemm": (1.49, 1.17)}
#: The compute capability from which fp32 convolutions keep their FLOPs' time.
FP32_CONV_BEFORE_SM = 80


def wgrad_tiles(weight: tuple[int, ...]) -> int:
    """128x128 tiles of the weight gradient's output, (C_out, C_in / groups * kernel), of a
    convolution whose weight has this shape (C_out, C_in / groups, *kernel)."""
    return -(-weight[0] // TILE_SIDE) * -(-math.prod(weight[1:]) // TILE_SIDE)


def wgrad_tile_ratio(tiles: int) -> float:
    """Weight-gradient time over forward time, for the same FLOPs, of a weight gradient
    whose output has this many 128x128 tiles."""
    return WGRAD_ONE_TILE * max(tiles, 1) ** WGRAD_TILE_EXPONENT


def wgrad_ratio(weight: tuple[int, ...]) -> float:
    """:func:`wgrad_tile_ratio` of a convolution whose weight has this shape."""
    return wgrad_tile_ratio(wgrad_tiles(weight))


#: The assumption an analysis states when :func:`gradient_slowdown` applies.
GRADIENT_NOTE = (
    "a convolution's weight gradient takes its forward's time for the same FLOPs times "
    f"{WGRAD_ONE_TILE} x (its output's 128x128 tiles)^{WGRAD_TILE_EXPONENT} "
    f"({wgrad_tile_ratio(1):.1f}x at one tile, {wgrad_tile_ratio(16):.1f}x at 16, "
    f"{wgrad_tile_ratio(140):.1f}x at 140: cuDNN's split reduction), a strided one's input "
    f"gradient {DGRAD_STRIDED}x (measured: DeepBench da81ba7, nine tables of cuDNN 5-7.6; "
    "roofline.analysis.gemm)")


def gemm(op: OpRecord) -> Gemm | None:
    """(batch, rows, cols, k) of a matmul-class op as a GEMM, from its shapes and FLOPs."""
    if not op.output_shapes or not op.output_shapes[0]:
        return None
    out = op.output_shapes[0]
    grads = 1  # GEMMs of the same shape the FLOPs count
    if op.category == "conv" and op.backward_kernel and op.input_shapes:
        # the forward's implicit GEMM, from grad_output; the FLOPs hold one GEMM per
        # gradient computed (input and weight are 3-D or more, a bias gradient is 1-D)
        out = op.input_shapes[0]
        grads = max(1, sum(len(shape) >= 3 for shape in op.output_shapes))
    if op.category == "attention" and len(out) == 4:  # per (batch, head): (s x d) @ (d x s)
        b, h, s, d = out
        return b * h, s, s, float(d)
    if op.category == "conv" and len(out) >= 3:  # implicit GEMM: rows N*H*W, columns C_out
        rows, cols, batch = int(np.prod(out)) // max(out[1], 1), out[1], 1
    else:
        rows, cols = (out[-2], out[-1]) if len(out) >= 2 else (1, out[-1])
        batch = int(np.prod(out[:-2])) if len(out) > 2 else 1
    # the reduction length, derived from the FLOPs: 2 x outputs x K per GEMM
    return batch, rows, cols, op.flops / max(2 * int(np.prod(out)) * grads, 1)


def _gradients(op: OpRecord) -> list[tuple[int, ...]] | None:
    """The gradients (3-D or more: a bias gradient is a 1-D sum) a convolution backward
    computes as GEMMs; None for any other op, a depthwise one (no GEMM) or a bias gradient
    alone."""
    if op.category != "conv" or not op.backward_kernel or len(op.input_shapes) < 3 \
            or is_depthwise(op):
        return None
    return [shape for shape in op.output_shapes if len(shape) >= 3] or None


def weight_gradient_share(op: OpRecord) -> float:
    """Share of a convolution backward's FLOPs that is the weight gradient (0 for any
    other op, and for a depthwise one, which runs no GEMM): its gradients are (input,
    weight), each one forward's FLOPs, and a backward whose input (or weight) needs none
    computes the other alone. A lone gradient whose shape is both the input's and the
    weight's cannot be told apart from its shape: half."""
    grads = _gradients(op)
    if grads is None:
        return 0.0
    if len(grads) >= 2:
        return 1 / len(grads)
    x, w = op.input_shapes[1], op.input_shapes[2]
    return 0.5 if x == w else float(grads[0] == w)


def _conv_operands(op: OpRecord,
                   ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(input, weight, output) shapes of a convolution's forward, read from the forward
    (input, weight, ...) -> output or from its backward (grad_output, input, weight, ...);
    None for another op or a record without them."""
    if op.category != "conv":
        return None
    backward = op.backward_kernel
    x, w = (1, 2) if backward else (0, 1)
    shapes = op.input_shapes
    if len(shapes) <= w:
        return None
    out = shapes[0] if backward else (op.output_shapes[0] if op.output_shapes else ())
    return tuple(shapes[x]), tuple(shapes[w]), tuple(out)


def conv_stride(op: OpRecord) -> int:
    """The largest stride of a convolution (forward or backward), from its input's spatial
    size over its output's (1 when its shapes do not say)."""
    operands = _conv_operands(op)
    if operands is None:
        return 1
    x, _, out = operands
    if len(out) < 3 or len(x) != len(out):
        return 1
    return max(1, *(round(i / max(o, 1)) for i, o in zip(x[2:], out[2:], strict=True)))


#: The assumption an analysis states when :func:`conv_slowdown` applies.
CONV_NOTE = (
    "a convolution on the tensor cores takes its FLOPs' time at the engine's rate times "
    f"{CONV_SLOWDOWN['fp16'][0]:.2f} in 16 bits and {CONV_SLOWDOWN['tf32'][0]:.2f} in TF32 up "
    f"to {CONV_WORK_PER_UNIT[0] / 1e6:.0f}M forward FLOPs per compute unit, "
    f"{CONV_SLOWDOWN['fp16'][1]:.2f} and {CONV_SLOWDOWN['tf32'][1]:.2f} from "
    f"{CONV_WORK_PER_UNIT[1] / 1e6:.0f}M, log-linear between (cuDNN's implicit GEMM, measured: "
    "DeepBench da81ba7's V100 and T4 tables and the lent H200's; TF32 on the H200 alone; "
    "roofline.analysis.gemm)")


#: The assumption an analysis states when :data:`FP32_CONV_SLOWDOWN` applies.
FP32_CONV_NOTE = (
    "an fp32 convolution on the CUDA cores (compute capability below "
    f"{FP32_CONV_BEFORE_SM / 10:.1f}) takes its FLOPs' time at the vector rate times "
    f"{FP32_CONV_SLOWDOWN['winograd'][0]:.2f} up to {CONV_WORK_PER_UNIT[0] / 1e6:.0f}M forward "
    f"FLOPs per compute unit and {FP32_CONV_SLOWDOWN['winograd'][1]:.2f} from "
    f"{CONV_WORK_PER_UNIT[1] / 1e6:.0f}M for a 3x3 kernel at stride 1 (cuDNN's Winograd), "
    f"{FP32_CONV_SLOWDOWN['gemm'][0]:.2f} and {FP32_CONV_SLOWDOWN['gemm'][1]:.2f} for the rest "
    "(measured: DeepBench da81ba7's seven fp32 tables, Maxwell to Turing; roofline.analysis.gemm)")


def _ramp(factors: tuple[float, float], flops_per_unit: float) -> float:
    """The small factor up to CONV_WORK_PER_UNIT[0], the large one from [1], log-linear in
    the work between."""
    small, large = factors
    low, high = CONV_WORK_PER_UNIT
    t = min(max(math.log(max(flops_per_unit, low) / low) / math.log(high / low), 0.0), 1.0)
    return small ** (1 - t) * large ** t


def conv_factor(dtype: str, flops_per_unit: float) -> float:
    """:data:`CONV_SLOWDOWN` of an engine dtype for a convolution whose forward does this
    many FLOPs per compute unit (1 for a dtype not measured)."""
    if dtype not in CONV_SLOWDOWN:
        return 1.0
    return _ramp(CONV_SLOWDOWN[dtype], flops_per_unit)


def forward_flops(op: OpRecord) -> float:
    """FLOPs of a convolution's forward, from the forward or its backward (one GEMM of the
    forward's per gradient the backward computes)."""
    shape = gemm(op)
    if shape is None:
        return float(op.flops)
    batch, rows, cols, k = shape
    return 2.0 * batch * rows * cols * k


def winograd(op: OpRecord) -> bool:
    """Whether cuDNN can run a convolution (forward or backward) as Winograd: 2-D, a 3x3
    kernel, stride 1 (from its input's size over its output's), one group. Its dilation is
    not in the shapes: a dilated 3x3 convolution is taken as eligible."""
    operands = _conv_operands(op)
    if operands is None:
        return False
    x, weight, out = operands
    if len(weight) != 4 or len(x) != 4 or len(out) != 4 \
            or any(o > i for i, o in zip(x[2:], out[2:], strict=True)):
        return False  # not 2-D, or an output larger than the input: a transposed one
    return weight[2:] == (3, 3) and conv_stride(op) == 1 and weight[1] == x[1]


def conv_slowdown(op: OpRecord, spec: DeviceSpec, engine: Engine) -> float:
    """Factor on a convolution's compute time for cuDNN's algorithms: on the tensor cores its
    implicit GEMM's (:func:`conv_factor` of its forward's FLOPs per compute unit), in fp32 on
    the CUDA cores before compute capability 8.0 Winograd's or the rest's
    (:data:`FP32_CONV_SLOWDOWN`, fp32 data only); 1 for any other op or engine, a depthwise
    convolution, a GPU of unknown compute capability. NVIDIA GPUs only, where the
    measurements are from."""
    if op.category != "conv" or spec.kind != "gpu" or spec.vendor != "NVIDIA" \
            or is_depthwise(op):
        return 1.0
    work = forward_flops(op) / max(spec.compute_units or 1, 1)
    if engine.kind == "matrix":
        return conv_factor(engine.dtype, work)
    sm = spec.compute_capability
    if engine.dtype != "fp32" or op.dtype != "float32" or sm is None \
            or sm >= FP32_CONV_BEFORE_SM:
        return 1.0  # fp16 data on fp32 units (Pascal's pseudo-half) was not measured
    return _ramp(FP32_CONV_SLOWDOWN["winograd" if winograd(op) else "gemm"], work)


def gradient_slowdown(op: OpRecord, spec: DeviceSpec) -> float:
    """Factor on a convolution backward's compute time for cuDNN's gradients (1: none): the
    weight gradient's :func:`wgrad_ratio`, a strided input gradient's
    :data:`DGRAD_STRIDED`. NVIDIA GPUs only, where the measurement is from."""
    if spec.kind != "gpu" or spec.vendor != "NVIDIA" or _gradients(op) is None:
        return 1.0
    share = weight_gradient_share(op)
    dgrad = DGRAD_STRIDED if conv_stride(op) > 1 else 1.0
    return (1 - share) * dgrad + share * wgrad_ratio(op.input_shapes[2])


def fill(op: OpRecord, compute_units: int | None) -> float:
    """Share of the chip a matmul-class op can occupy (1 when unknown).

    An op with no output tiles (an empty batch, an expert that got no tokens) has no
    FLOPs either; it is given fill 1, so that 0 FLOPs cost 0 seconds rather than 0/0.
    """
    shape = gemm(op)
    if not compute_units or shape is None:
        return 1.0
    batch, rows, cols, k = shape
    if op.category == "attention":
        tiles = batch * -(-rows // TILE_SIDE)
        split = 1
    else:
        tiles = batch * -(-rows // TILE_SIDE) * -(-cols // TILE_SIDE)
        # too few tiles: cuBLAS-style split-K spreads the reduction dimension over more
        # compute units, in chunks of SPLIT_K
        split = max(1, int(k // SPLIT_K))
    if tiles <= 0:
        return 1.0
    return min(1.0, tiles * split / compute_units)


def is_depthwise(op: OpRecord) -> bool:
    """A convolution with one input channel per group (and more than one group)."""
    operands = _conv_operands(op)
    if operands is None:
        return False
    x, weight, out = operands
    if len(weight) < 3 or len(x) < 3:
        return False
    # weight (C_out, C_in / groups, ...) with C_out the output's channels: not a transposed
    # convolution, whose weight is (C_in, C_out / groups, ...)
    return weight[1] == 1 and x[1] > 1 and len(out) >= 2 and out[1] == weight[0]


def depthwise_rate(spec: DeviceSpec, op: OpRecord, engine: Engine) -> float | None:
    """Calibrated FLOP/s of a depthwise convolution on the vector ``engine`` it runs on
    (the forward's for a backward not measured)."""
    forward = spec.depthwise_flops_per_s.get(engine.dtype)
    if op.backward_kernel:
        return spec.depthwise_backward_flops_per_s.get(engine.dtype, forward)
    return forward


def curve_rates(gemms: list[Gemm], points: list[Any]) -> np.ndarray:
    """Measured FLOP/s of each GEMM shape (batches stacked as rows)."""
    dims = np.array([(b * r, c, max(k, 1.0)) for b, r, c, k in gemms],
                    dtype=float).reshape(-1, 3)
    return interpolate_matmul(points, dims[:, 0], dims[:, 1], dims[:, 2])
