"""Kernels measured slower than the analysis costs them, and not modelled: said, not hidden.

The zoo's training steps on a lent H200 (torch 2.11, bf16 autocast; ``benchmarks/data/steps``,
``benchmarks/lent_h200.py``'s table of where the steps' time goes missing) set each op
against its profiler-measured kernel time. Four kinds of kernel ran far slower than they are
costed, in every transformer step, for reasons the time model does not capture yet. Three
are a predicate on an op record each, registered with what was measured: the lowest and
highest ratio of costed to measured time over the steps that had them, each step's calls
together. The fourth, attention with dropout, is known from the trace's capture record
(which calls had dropout), not from an op. A fifth comes from the H200's row-wise kernel
table (``benchmarks/data/kernels``): 16-bit softmax over rows PyTorch's kernel caches in
shared memory, its ratio over the table's shapes of 2^22 elements and more, and the same
kind on two more GPUs in published tables. An analysis on an NVIDIA GPU names the kinds its
trace holds and how many calls (:func:`note`); the numbers it predicts are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from roofline.analysis.passes import LAYER_NORM_BACKWARD, cached_rows
from roofline.hardware import DeviceSpec
from roofline.tracing.records import Category, OpRecord, Trace

#: ``LaunchGammaBetaBackwardCUDAKernel`` (pytorch/pytorch#148605, ``layer_norm_kernel.cu``)
#: splits the rows over blocks only beyond this many rows; below, one block per 32 columns.
GAMMA_BETA_SPLIT_ROWS = 64 * 1024
GAMMA_BETA_COLUMNS = 32


@dataclass(frozen=True)
class Gap:
    """A kind of kernel measured slower than costed: what it is, and the measured ratio of
    costed to measured time (low, high) on the lent H200."""

    kind: str
    ratio: tuple[float, float]
    why: str
    matches: Callable[[OpRecord, DeviceSpec], bool]


GAPS: list[Gap] = []


def register(kind: str, ratio: tuple[float, float], why: str,
             ) -> Callable[[Callable[[OpRecord, DeviceSpec], bool]],
                           Callable[[OpRecord, DeviceSpec], bool]]:
    """Register a predicate for one kind of under-costed kernel."""
    def wrap(fn: Callable[[OpRecord, DeviceSpec], bool]) -> Callable[[OpRecord, DeviceSpec], bool]:
        GAPS.append(Gap(kind, ratio, why, fn))
        return fn
    return wrap


@register("column sums (the gradients of biases and of broadcast weights, every dimension "
          "but the last summed)", (0.11, 0.42),
          "a reduction over the rows into one short row leaves few blocks to fill the chip")
def _column_sum(op: OpRecord, spec: DeviceSpec) -> bool:
    # (rows..., features) -> (1..., features): every dimension but the last reduced; a sum
    # that keeps more than the last dimension (over the batch only) ran at its costed speed
    if op.name != "aten.sum.dim_IntList" or not op.input_shapes or not op.output_shapes:
        return False
    x, out = op.input_shapes[0], op.output_shapes[0]
    return len(x) >= 2 and bool(out) and math.prod(x[:-1]) > 1 and out[-1] == x[-1] > 1 \
        and math.prod(out) == x[-1]


@register("embedding gradients", (0.03, 0.09),
          "a sorted scatter-add whose time depends on how often each index repeats, "
          "which a trace does not record")
def _embedding_gradient(op: OpRecord, spec: DeviceSpec) -> bool:
    return op.name == "aten.embedding_dense_backward.default"


@register("layer-norm backwards with weight gradients", (0.63, 0.70),
          f"the weight and bias gradients take one block per {GAMMA_BETA_COLUMNS} features "
          f"over every row up to {GAMMA_BETA_SPLIT_ROWS:,} rows (pytorch/pytorch#148605), "
          "fewer blocks than the chip has SMs")
def _layer_norm_weight_gradient(op: OpRecord, spec: DeviceSpec) -> bool:
    if op.name not in LAYER_NORM_BACKWARD or len(op.input_shapes) < 3 \
            or len(op.output_shapes) < 2 or not op.output_shapes[1]:
        return False  # no weight gradient asked for
    features = math.prod(op.output_shapes[1])
    rows = math.prod(op.input_shapes[0]) // max(features, 1)
    blocks = -(-features // GAMMA_BETA_COLUMNS)
    split = rows > GAMMA_BETA_SPLIT_ROWS and 2 * blocks < (spec.compute_units or 0)
    return not split and blocks < (spec.compute_units or 0)


@register("16-bit softmax over rows of 1,025 elements up to what a block caches in shared "
          "memory", (0.34, 0.71),
          "PyTorch's cached kernel, cunn_SoftMaxForwardSmem, one 1,024-thread block per row, "
          "takes about as long per element in 16 bits as in fp32, whose bytes are twice as "
          "many; 0.56-0.57 on LLMCompass's A100 rows, 0.37-0.63 on Liger-Kernel's RTX 3090")
def _cached_softmax(op: OpRecord, spec: DeviceSpec) -> bool:
    return op.dtype in ("bfloat16", "float16") and cached_rows(op)


def _fused_attention_with_dropout(trace: Trace) -> int:
    """16-bit attention calls with dropout traced as one fused kernel each (CUDA's): cuDNN's
    and flash attention's kernels take 16-bit inputs only; fp32 attention runs otherwise."""
    info = trace.info
    if info.attention != "fused" or not info.attention_calls:
        return 0
    # the fused attention forwards (the CPU's stand-in for CUDA's kernel, or CUDA's own)
    sixteen = sum(op.category == Category.ATTENTION and not op.backward_kernel
                  and op.dtype in ("bfloat16", "float16") for op in trace.ops)
    return min(info.attention_calls, sixteen)


def note(trace: Trace, spec: DeviceSpec) -> list[str]:
    """One assumption naming the kinds of under-costed kernel the trace holds, on an NVIDIA
    GPU (where they were measured); nothing otherwise."""
    if spec.kind != "gpu" or spec.vendor != "NVIDIA":
        return []
    parts = []
    for gap in GAPS:
        calls = sum(gap.matches(op, spec) for op in trace.ops if op.kernels > 0)
        if calls:
            parts.append(f"{gap.kind}, {calls} calls, at {gap.ratio[0]:.2f}-{gap.ratio[1]:.2f} "
                         f"({gap.why})")
    if calls := _fused_attention_with_dropout(trace):
        parts.append(f"fused attention with dropout, {calls} calls, at 0.14-0.38 (torch 2.11 "
                     "ran it on cuDNN's kernels, which were within 10-14% without dropout)")
    if not parts:
        return []
    return ["kernels of these kinds ran at a fraction of their costed speed on a lent H200 "
            "(torch 2.11; docs/validation.md, 'On a GPU') and are not modelled, so the "
            "predicted step is short by the difference: " + "; ".join(parts)]
