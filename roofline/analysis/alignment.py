"""GEMMs whose stored rows are not whole multiples of 16 bytes, on Hopper's tensor cores.

A tensor-core GEMM loads its operands 16 bytes at a time (NVIDIA's Matrix Multiplication
Background User's Guide, "Tensor Core Requirements": dimensions aligned to 16 bytes run
best); on Hopper the bulk tensor copy engine (TMA) takes global strides in multiples of 16
bytes only (CUDA Driver API, ``cuTensorMapEncodeTiled``). A row length (leading dimension)
of an operand or of the output off that multiple sends cuBLAS to slower kernels. Measured
on the lent H200 (cuBLAS under torch 2.11.0+cu130, ``benchmarks/gpu_kernels.py``, the
``alignment`` tables; ``benchmarks/lent_h200.py`` prints them): a 4096^3 GEMM with n or k
moved off 16 bytes ran at 0.33-0.36 of the aligned one's rate when its rows were multiples
of 8 or 4 bytes (bf16 and TF32 alike), and at 0.12-0.18 when only of 2 (an odd bf16 row);
GPT-2's LM head, 8192 x 768 x 50257 in bf16, at 0.13-0.21 of its padded 50304 twin, as
nanoGPT pads it. Moving m, a row count and never a leading dimension here, cost 3%.

The share slows the kernel as a whole, its operands' streaming as well as its math: it is
the 16-byte loads that rows off 16 bytes lose, so a GEMM bound by its bytes slows too (the
measured share is of a compute-bound one; that it carries to the bytes is the assumption).
Held out on the small GEMMs of the same run's per-shape tables (under 10 GFLOP, rows off 16
bytes, mostly bound by their bytes and their floor): slowing the math alone left them
predicted twice as fast (bf16 109% median error, fp16 96%, TF32 99% on 99, 99 and 92
shapes); slowing the bytes too, 55%, 31% and 51%.

Only Hopper (``isa`` sm_90) was measured, where misaligned rows also lose the TMA and
wgmma path. The 16-byte rule is NVIDIA's for every part with tensor cores (and nanoGPT
pads GPT-2's vocabulary to 50304 "for efficiency", ``model.py``'s ``GPTConfig``), but the
share other parts keep is not known: they are costed as aligned, and the assumptions say
that such a GEMM will run slower than predicted there. fp32 on the CUDA cores moved by 10-20%
only, fp8 was not measured: both keep the aligned rate.
"""

from __future__ import annotations

from roofline.hardware import DeviceSpec
from roofline.hardware.engines import Engine
from roofline.tracing.records import OpRecord, Trace

ALIGNED_BYTES = 16
#: The share of the aligned rate by the bytes a row length is a multiple of (the medians of
#: the measured shares above).
MISALIGNED_SHARE = {8: 0.35, 4: 0.35, 2: 0.17, 1: 0.17}
#: Element bytes of the tensor-core dtypes measured (TF32 reads fp32 storage).
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4}
MEASURED_ISAS = ("sm_90",)
MATMULS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm")
NOTE = ("tensor-core GEMMs with a stored row length (leading dimension) off a multiple of 16 "
        "bytes run at 0.35 of the aligned speed (rows a multiple of 8 or 4 bytes) or 0.17 "
        "(of 2), their math and their bytes alike, as measured on an H200 (sm_90, cuBLAS "
        "under torch 2.11)")
OFF_HOPPER = ("tensor-core GEMMs with a stored row length (leading dimension) off a multiple "
              "of 16 bytes are costed as aligned ones, though they run slower (NVIDIA's "
              "16-byte rule): the share they keep was measured on Hopper (sm_90) only, "
              "0.17-0.35 there")


def applies(spec: DeviceSpec) -> bool:
    """Whether the GEMMs of ``spec`` are checked for their rows (any NVIDIA GPU)."""
    return spec.kind == "gpu" and spec.vendor == "NVIDIA"


def measured(spec: DeviceSpec) -> bool:
    """Whether ``spec`` is of the architecture the shares were measured on."""
    return spec.isa in MEASURED_ISAS


def note(spec: DeviceSpec) -> str:
    return NOTE if measured(spec) else OFF_HOPPER


def first_shapes(trace: Trace) -> dict[int, tuple[int, ...]]:
    """Each storage's shape where it first appears (an op's inputs before its outputs): the
    layout it was written in, before any view of it."""
    first: dict[int, tuple[int, ...]] = {}
    for op in trace.ops:
        for shapes, ids in ((op.input_shapes, op.input_ids), (op.output_shapes, op.output_ids)):
            for shape, sid in zip(shapes, ids, strict=False):
                if shape and sid >= 0:
                    first.setdefault(sid, tuple(shape))
    return first


def row_length(shape: tuple[int, ...], first: tuple[int, ...] | None) -> int:
    """The stored row length, in elements, of a 2-D or batched GEMM operand of ``shape`` on a
    storage first seen as ``first``: a transposed view (its rows the source's last dimension,
    its columns not) keeps the source's rows; anything else (the tensor itself, a reshape
    such as a flatten) is read as contiguous, its own last dimension."""
    if first and len(shape) >= 2 and shape[-2] == first[-1] != shape[-1]:
        return int(first[-1])
    return int(shape[-1])


def _multiple(nbytes: int) -> int:
    """The largest power of two up to 16 that ``nbytes`` is a multiple of."""
    return min(nbytes & -nbytes, ALIGNED_BYTES) if nbytes else ALIGNED_BYTES


def share(op: OpRecord, engine: Engine, first: dict[int, tuple[int, ...]]) -> float:
    """The share of the aligned rate the GEMM ``op`` reaches: 1 unless a row of its two
    operands or its output is off a multiple of 16 bytes."""
    size = ELEMENT_BYTES.get(engine.dtype)
    if size is None or engine.kind != "matrix" or not op.name.startswith(MATMULS) \
            or len(op.input_ids) < 2 or not op.output_shapes or not op.output_shapes[0]:
        return 1.0
    operands = zip(op.input_shapes[-2:], op.input_ids[-2:], strict=False)
    lengths = [row_length(shape, first.get(sid)) for shape, sid in operands] + \
        [int(op.output_shapes[0][-1])]
    worst = min(_multiple(n * size) for n in lengths if n)
    return MISALIGNED_SHARE.get(worst, 1.0)
