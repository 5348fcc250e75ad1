"""The passes PyTorch's GPU kernels make over their rows, beyond reading each input once.

The trace counts an op's compulsory bytes: each input read once, each output written once
(:mod:`roofline.tracing.ops`). PyTorch's CUDA kernels (the same sources build the ROCm
ones) for softmax and layer norm read more where a row does not fit on the chip, or split
the op into more kernels. From ``aten/src/ATen/native/cuda/SoftMax.cu``
(pytorch/pytorch@000cace5a401) and ``layer_norm_kernel.cu`` (@0005c538e468):

* ``_softmax`` / ``_log_softmax`` over the last dimension: rows of at most 1,024 elements
  and 4,096 bytes run the persistent warp kernel, one read; longer rows that fit the 48 KiB
  of shared memory a block may use (and a multiple of 16 bytes) are read once into it
  (``cunn_SoftMaxForwardSmem``); other rows are read three times, for the max, the sum of
  exponentials and the output (``cunn_SoftMaxForward``).
* ``_softmax_backward_data`` first multiplies the gradient by the output in a kernel of its
  own (``Tensor tmp = grad * output``: two reads and a write), then reduces ``tmp`` (read
  twice where the row is longer than the persistent kernel takes, ``cunn_SoftMaxBackward``).
  ``_log_softmax_backward_data`` reads the gradient twice on such rows.
* ``native_layer_norm_backward`` with a weight: besides the input-gradient kernel, the
  weight and bias gradients are a column reduction in a kernel of its own that reads the
  output gradient and the input again.
* RMS norm (``_fused_rms_norm`` and ``_fused_rms_norm_backward``): "RMSNorm is implemented
  by reusing layer_norm's kernels" (``_fused_rms_norm_cuda``): ``RmsNormKernelImpl`` runs
  ``vectorized_layer_norm_kernel<T, T_ACC, rms_norm=true>`` with layer norm's launch, and
  ``RMSNormBackwardKernelImpl`` layer norm's backward, whose weight gradient is the same
  column reduction (``layer_norm_kernel.cu`` at cyyever/pytorch@0660972b2e90, a fork
  of pytorch/pytorch's main branch; the indexed pytorch/pytorch snapshots predate RMS norm).
  So each follows its layer-norm kernel here.

Reductions over an inner dimension (not the last) use the spatial kernels, which read each
element once per pass too; they are left at one pass.

Beyond its bytes, one kernel streams slower than its access pattern:
``native_layer_norm``'s forward (and RMS norm's) launches one block of 128 threads per row
(``vectorized_layer_norm_kernel``: ``num_threads()`` is four warps, ``thread_constants.h``),
which reads its row, reduces it block-wide, then reads it again and writes. Measured, it
moves its compulsory bytes at 56-73% of the copy stream (vidur's phi-2 profiles on the
A100, H100 and A40, fp16 rows 2,560 wide; applied to every dtype and width): :func:`pattern`
sends it to the ``layer_norm`` bandwidth figure
(:meth:`roofline.hardware.achievable.Figures.bandwidth`). Its backward (the same block per
row for the input gradient) is not measured and keeps the pattern of its bytes. RMS norm
is fused this way only where the trace records ``_fused_rms_norm``
(:mod:`roofline.tracing.norms`); a hand-written RMS norm (Meta's reference, Hugging Face's
``LlamaRMSNorm``) stays the elementwise ops it calls. On Hopper and Blackwell with the CuTe
DSL installed, torch 2.13 routes RMS norm to quack's kernels instead, which are not
modelled. Rows too few to hide the latency of layer norm's loads are
:mod:`roofline.analysis.inflight`'s (dependent loads).
"""

from __future__ import annotations

import math
from typing import Literal

from roofline.tracing.records import OpRecord

#: Shared memory a CUDA block may use without opting in, bytes (every architecture since
#: Kepler: ``sharedMemPerBlock``); SoftMax.cu sizes its row cache with it.
SHARED_MEMORY_PER_BLOCK = 48 * 1024
#: The persistent softmax kernel's limits: elements and bytes per row.
PERSISTENT_ELEMENTS, PERSISTENT_BYTES = 1024, 4096

_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
_FORWARD = {"aten._softmax.default", "aten._log_softmax.default"}
_BACKWARD = {"aten._softmax_backward_data.default": "softmax",
             "aten._log_softmax_backward_data.default": "log_softmax"}
#: The forward and backward ops of each norm that runs layer_norm_kernel.cu's kernels.
LAYER_NORM_FORWARD = ("aten.native_layer_norm.default", "aten._fused_rms_norm.default")
LAYER_NORM_BACKWARD = ("aten.native_layer_norm_backward.default",
                       "aten._fused_rms_norm_backward.default")


def pattern(op: OpRecord) -> Literal["layer_norm"] | None:
    """The measured bandwidth figure the op's PyTorch GPU kernel streams at, where its
    bytes' access pattern does not say it: ``"layer_norm"`` for layer norm's forward and
    RMS norm's (the same kernel)."""
    return "layer_norm" if op.name in LAYER_NORM_FORWARD else None


def _row(op: OpRecord, dim_arg: int) -> tuple[int, int, int] | None:
    """(rows, row length, element bytes) of a softmax over the last dimension; None for
    another dimension or an unknown dtype."""
    shapes = op.input_shapes
    if not shapes or not shapes[0] or op.dtype not in _SIZE:
        return None
    shape = shapes[dim_arg] if len(shapes) > dim_arg and shapes[dim_arg] else shapes[0]
    n = shape[-1]
    return math.prod(shape) // max(n, 1), n, _SIZE[op.dtype]


def _persistent(n: int, size: int) -> bool:
    return n <= PERSISTENT_ELEMENTS and n * size <= PERSISTENT_BYTES


def _in_shared_memory(n: int, size: int) -> bool:
    # the row and one accumulator per warp of a 1,024-thread block; rows a whole number of
    # 16-byte vectors (dim_size % ILP == 0)
    warps = min(n, 1024) // 32 or 1
    return n * size < SHARED_MEMORY_PER_BLOCK - warps * 4 and (n * size) % 16 == 0


def cached_rows(op: OpRecord) -> bool:
    """Whether a softmax or log-softmax forward runs PyTorch's shared-memory kernel
    (``cunn_SoftMaxForwardSmem``): rows longer than the persistent kernel takes that a
    block can cache."""
    row = _row(op, 0) if op.name in _FORWARD else None
    return row is not None and not _persistent(row[1], row[2]) \
        and _in_shared_memory(row[1], row[2])


def input_gradient(op: OpRecord) -> bool:
    """Whether a layer- or RMS-norm backward computes the input's gradient (output 0, the
    shape of input 1): outputs not asked for are not traced, and without it only the
    weight gradients' column reduction runs."""
    shapes, inputs = op.output_shapes, op.input_shapes
    return bool(shapes) and len(inputs) > 1 and shapes[0] == inputs[1]


def extra(op: OpRecord) -> tuple[int, int]:
    """(bytes, kernels) the op's PyTorch GPU kernels move and launch beyond the trace's
    count of it: (0, 0) for every other op."""
    if op.name in _FORWARD:
        row = _row(op, 0)
        if row is None or row[2] == 0:
            return 0, 0
        rows, n, size = row
        if _persistent(n, size) or _in_shared_memory(n, size):
            return 0, 0
        return 2 * rows * n * size, 0  # max and sum-of-exponentials passes: two more reads
    kind = _BACKWARD.get(op.name)
    if kind is not None:
        row = _row(op, 0)
        if row is None:
            return 0, 0
        rows, n, size = row
        elements = rows * n
        long_rows = not _persistent(n, size)
        if kind == "softmax":  # tmp = grad * output: 2 reads, 1 write, then tmp is read
            return 3 * elements * size + (elements * size if long_rows else 0), 1
        return (elements * size if long_rows else 0), 0
    if op.name in LAYER_NORM_BACKWARD and input_gradient(op) and len(op.output_shapes) > 1 \
            and op.output_shapes[1] and op.dtype in _SIZE:
        # the weight (and bias) gradients read grad_out and input again, after the input
        # gradient's kernel has read them
        return 2 * math.prod(op.input_shapes[0]) * _SIZE[op.dtype], 1
    return 0, 0
