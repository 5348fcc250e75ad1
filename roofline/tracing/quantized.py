"""A traced serving step with its KV cache or its matmul weights in a narrower dtype.

A CPU cannot run an fp8 KV cache through attention (SDPA wants one dtype for query, key
and value) nor an fp8 GEMM, so the step is traced in the model's dtype and its records are
rewritten with the bytes the narrower dtype moves:

* ``kv_dtype``: the KV cache is the step's floating-point inputs (the tensors that existed
  before the step and are no parameter or buffer: a decode step's cache). An op that
  writes into it (the new token's ``index_copy_`` or ``copy_``) writes
  ``itemsize(kv_dtype) / itemsize(cache)`` of its bytes; an op that reads it (attention)
  reads that share of the cache's bytes. FLOPs do not change: fp8-KV attention kernels
  dequantise in registers.
* ``weight_dtype`` fp8: every matmul that reads a parameter reads its operands at the fp8
  itemsize and runs on the device's fp8 matrix rate, as FP8 (W8A8) serving runs its GEMMs;
  its output stays in the model's dtype. The parameters so used shrink alike in the storage
  table, for the memory analyses. Embeddings and norms keep their dtype.
* ``weight_dtype`` ``"nvfp4"`` (W4A4, NVIDIA's NVFP4: e2m1 values two to a byte and an e4m3
  scale for every 16, 0.5625 bytes an element): such a matmul reads its weight at that
  size and runs on the fp4 matrix rate; its activation is quantized to NVFP4 first, by a
  kernel that reads it and writes the fp4 copy the GEMM reads, so the activation costs
  its own size plus twice 0.5625 bytes an element. The quantization is no op of its own:
  the measured NVFP4 GEMM tables time it with the GEMM (``benchmarks/fit_gemm.py``), and
  their fitted floor covers both launches.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from roofline.tracing.records import OpRecord, Storage, Trace

#: The 8-bit floating-point dtypes ``weight_dtype`` takes (W8A8 serving).
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
#: NVFP4 weights and activations (W4A4), as records name the dtype, and its bytes an
#: element: half a byte, and a 1-byte scale for each block of 16.
NVFP4, NVFP4_BYTES = "nvfp4", 0.5 + 1 / 16
#: What ``weight_dtype`` takes: an fp8 dtype, or NVFP4 by name.
WeightDtype = torch.dtype | str
_NAMES: dict[str, torch.dtype] = {
    "fp8": torch.float8_e4m3fn, "float8": torch.float8_e4m3fn, "e4m3": torch.float8_e4m3fn,
    "float8_e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
    "float8_e5m2": torch.float8_e5m2, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
}


def parse_dtype(name: str, value: torch.dtype | str) -> torch.dtype:
    """A floating-point ``torch.dtype`` from a dtype or its name (``"fp8"``, ``"bf16"``)."""
    if isinstance(value, str):
        found = _NAMES.get(value.lower().removeprefix("torch."))
        if found is None:
            raise ValueError(f"{name}={value!r} is not a floating-point dtype; use one of "
                             f"{', '.join(sorted(_NAMES))} or a torch.dtype")
        return found
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"{name} must be a floating-point torch.dtype or its name, got "
                         f"{value!r}")
    return value


def parse_weight_dtype(value: torch.dtype | str) -> WeightDtype:
    """An fp8 dtype, or :data:`NVFP4` for ``"nvfp4"`` / ``"fp4"``: the matmul weights'
    format for ``requantize`` (W8A8 or W4A4 serving)."""
    if isinstance(value, str) and value.lower() in ("nvfp4", "fp4"):
        return NVFP4
    dtype = parse_dtype("weight_dtype", value)
    if dtype not in FP8:
        raise ValueError(f"weight_dtype={value!r}: only fp8 weights (float8_e4m3fn, "
                         "float8_e5m2) and nvfp4 are modelled; for other dtypes serve the "
                         "model in that dtype (dtype=)")
    return dtype


def dtype_name(dtype: WeightDtype) -> str:
    """``"bfloat16"``: the dtype as trace records spell it."""
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")


def element_bytes(dtype: WeightDtype) -> float:
    """Bytes an element of ``dtype`` takes (NVFP4's with its block scales)."""
    if isinstance(dtype, torch.dtype):
        return float(dtype.itemsize)
    return NVFP4_BYTES if dtype == NVFP4 else 0.0


def itemsize(name: str) -> int:
    """Bytes per element of a dtype as records spell it (0: not a torch dtype)."""
    dtype = getattr(torch, name, None)
    return dtype.itemsize if isinstance(dtype, torch.dtype) else 0


def is_kv(s: Storage) -> bool:
    """A KV-cache storage of a decode step: a floating-point input (it existed before the
    step and is no parameter, buffer or optimizer state)."""
    return s.kind == "input" and getattr(torch, s.dtype, torch.int64).is_floating_point


def kv_bytes(trace: Trace) -> int:
    """Bytes of the step's KV cache (its floating-point inputs)."""
    return sum(s.bytes for s in trace.storages.values() if is_kv(s))


def requantize(trace: Trace, *, kv_dtype: torch.dtype | None = None,
               weight_dtype: WeightDtype | None = None) -> Trace:
    """``trace`` with its KV cache in ``kv_dtype`` and its matmul weights in
    ``weight_dtype`` (see the module's docstring); the same trace when neither changes a
    byte."""
    storages = dict(trace.storages)
    kv = _narrowed({sid: s for sid, s in storages.items() if is_kv(s)}, kv_dtype)
    params = {sid for sid, s in storages.items() if s.kind == "parameter"}
    ops, used = [], set()
    for op in trace.ops:
        new = _kv_op(op, kv, storages) if kv else op
        if weight_dtype is not None and op.category == "matmul":
            new, read = _matmul_op(new, weight_dtype, params)
            used |= read
        ops.append(new)
    weights = _narrowed({sid: storages[sid] for sid in used}, weight_dtype)
    for sid, r in {**kv, **weights}.items():
        to = kv_dtype if sid in kv else weight_dtype
        storages[sid] = replace(storages[sid], bytes=round(storages[sid].bytes * r),
                                dtype=dtype_name(to) if to is not None else storages[sid].dtype)
    if not kv and not weights:
        return trace
    return Trace(ops, dict(trace.meta), storages, replace(trace.info))


def _matmul_op(op: OpRecord, dtype: WeightDtype, params: set[int]) -> tuple[OpRecord, set[int]]:
    """A matmul with its weights in ``dtype``, and the parameters whose storage shrinks
    (none: it reads no parameter)."""
    read = params & set(op.input_ids)
    if not read:
        return op, read
    if isinstance(dtype, torch.dtype):
        return _weight_op(op, dtype), read
    return _nvfp4_op(op, params)


def _narrowed(storages: dict[int, Storage], to: WeightDtype | None) -> dict[int, float]:
    """Storage id -> the ratio of its bytes in ``to``, for those that ``to`` changes."""
    if to is None:
        return {}
    ratios = {sid: _ratio(s.dtype, to) for sid, s in storages.items()}
    return {sid: r for sid, r in ratios.items() if r != 1.0}


def _ratio(dtype: str, to: WeightDtype | None) -> float:
    size = itemsize(dtype)
    return element_bytes(to) / size if to is not None and size else 1.0


def _kv_op(op: OpRecord, kv: dict[int, float], storages: dict[int, Storage]) -> OpRecord:
    """An op's bytes with the cache it writes or reads at the KV dtype."""
    written = [kv[s] for s in op.output_ids if s in kv]
    read_saved = 0.0
    seen: set[int] = set()
    for i, sid in enumerate(op.input_ids):
        if sid not in kv or sid in op.output_ids or sid in seen or i >= len(op.input_shapes):
            continue
        seen.add(sid)
        nbytes = min(math.prod(op.input_shapes[i]) * itemsize(storages[sid].dtype),
                     storages[sid].bytes)
        read_saved += nbytes * (1.0 - kv[sid])
    if not written and not read_saved:
        return op
    bytes_written = round(op.bytes_written * written[0]) if written else op.bytes_written
    return replace(op, bytes_read=max(0, round(op.bytes_read - read_saved)),
                   bytes_written=bytes_written)


def _nvfp4_op(op: OpRecord, params: set[int]) -> tuple[OpRecord, set[int]]:
    """A W4A4 matmul: its weights read at NVFP4's size; its activations read, quantized
    (an fp4 copy written) and the copy read; on the fp4 rate. NVFP4 packs matrices: a
    bias keeps its dtype. Also the parameters so packed."""
    size = itemsize(op.dtype)
    if not size or size <= NVFP4_BYTES:
        return op, set()
    matrices: set[int] = set()
    weights = activations = 0
    for sid, shape in zip(op.input_ids, op.input_shapes, strict=False):
        if sid not in params:
            activations += math.prod(shape)
        elif len(shape) >= 2:
            weights += math.prod(shape)
            matrices.add(sid)
    read = weights * NVFP4_BYTES + activations * (size + NVFP4_BYTES)
    return replace(op, bytes_read=max(0, round(op.bytes_read - (weights + activations) * size
                                               + read)),
                   bytes_written=op.bytes_written + round(activations * NVFP4_BYTES),
                   dtype=NVFP4), matrices


def _weight_op(op: OpRecord, dtype: torch.dtype) -> OpRecord:
    """A matmul reading its operands at ``dtype`` and running at its rate."""
    r = _ratio(op.dtype, dtype)
    if r >= 1.0:
        return op
    return replace(op, bytes_read=round(op.bytes_read * r), dtype=dtype_name(dtype))
