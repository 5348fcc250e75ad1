"""Memory of a step: what is live when, the peak, and whether it fits a device.

Built on the storage table of the capture (:attr:`Trace.storages`): every storage the
step touched, with its bytes, the ops that first and last used it, and what it holds.
Liveness is by use, as an eager step with a caching allocator frees a tensor when its
last reference goes:

* parameters, buffers, optimizer state and inputs are live for the whole step (they
  existed before it; optimizer state a first step creates, from its creation on);
* a gradient from the op that makes it to the end of the step (the optimizer reads it,
  and nothing frees it within the step);
* activations (made in forward, last used in backward: saved for backward) and
  temporaries from their first write to their last use.

A storage is live during its first and last op, so an op's inputs and outputs coexist,
as they do when the kernel runs. What the model misses: Python references that outlive
the last use (an output the caller holds), kernels' internal workspaces, and allocator
overheads; :func:`fits` adds the allocator's, as separate, cited assumptions.

Why roofline tracks storages itself rather than using
``torch.distributed._tools.mem_tracker.MemTracker``: see ``tests/test_memory.py``
(``test_memtracker_*``) for what it does on the same fake step; it needs the model and
optimizer up front (a plain :func:`roofline.capture` block has neither), counts a
storage by its owner at registration rather than by its lifetime in the op stream, and
does not give the op, module and phase of the peak, which the capture has per op anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofline._si import si
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing import Trace
from roofline.tracing.records import STORAGE_KINDS, Storage

# Kinds live from the start (or their creation) to the end of the step.
_KEPT = frozenset({"parameter", "buffer", "optimizer_state", "input", "gradient"})


def _interval(s: Storage, n_ops: int) -> tuple[int, int]:
    """The op range ``[start, end]`` in which ``s`` is live."""
    # from the start when it existed before the step (or no op used it)
    start = 0 if s.first < 0 or not s.created else s.first
    end = n_ops - 1 if s.kind in _KEPT or s.first < 0 else s.last
    return start, end


def _timeline(storages: dict[int, Storage], n: int, size: Any = None) -> list[int]:
    """Live bytes during each of ``n`` ops (``size(storage)`` instead of its bytes if given)."""
    delta = [0] * (n + 1)
    for s in storages.values():
        start, end = _interval(s, n)
        b = s.bytes if size is None else size(s)
        delta[start] += b
        delta[end + 1] -= b
    live, total = [], 0
    for d in delta[:n]:
        total += d
        live.append(total)
    return live


@dataclass
class MemoryReport:
    """Bytes a step holds, by kind, and live bytes over the step.

    Attributes
    ----------
    bytes_by_kind : bytes of all storages of each kind (:data:`STORAGE_KINDS`), whether
        or not they are live at the same time.
    peak_bytes : the most bytes live during one op.
    peak_op : index (in ``trace.ops``) of the first op at the peak; ``peak_name``,
        ``peak_module``, ``peak_phase`` say which op that is.
    peak_by_kind : the live bytes at the peak, by kind.
    timeline : live bytes during each op, in op order.
    by_module : module (cut to ``depth`` components) -> kind -> bytes of the storages
        first used by that module's ops (parameters where first read, activations where
        made).
    """

    bytes_by_kind: dict[str, int]
    peak_bytes: int
    peak_op: int
    peak_name: str
    peak_module: str
    peak_phase: str
    peak_by_kind: dict[str, int]
    timeline: list[int] = field(repr=False)
    by_module: dict[str, dict[str, int]] = field(repr=False)
    storages: dict[int, Storage] = field(repr=False, default_factory=dict)

    @property
    def parameters_bytes(self) -> int:
        return self.bytes_by_kind["parameter"]

    @property
    def gradients_bytes(self) -> int:
        return self.bytes_by_kind["gradient"]

    @property
    def optimizer_state_bytes(self) -> int:
        return self.bytes_by_kind["optimizer_state"]

    @property
    def buffers_bytes(self) -> int:
        return self.bytes_by_kind["buffer"]

    @property
    def inputs_bytes(self) -> int:
        return self.bytes_by_kind["input"]

    @property
    def activations_bytes(self) -> int:
        """Bytes made in forward and used in backward: saved for backward."""
        return self.bytes_by_kind["activation"]

    @property
    def temporaries_bytes(self) -> int:
        return self.bytes_by_kind["temporary"]

    def __repr__(self) -> str:
        kinds = "\n".join(f"  {k:<16} {si(self.bytes_by_kind[k], 'B'):>9}   at peak "
                          f"{si(self.peak_by_kind[k], 'B'):>9}" for k in STORAGE_KINDS)
        where = f"{self.peak_name} (op {self.peak_op}, {self.peak_phase}"
        where += f", {self.peak_module})" if self.peak_module else ")"
        return f"MemoryReport(peak {si(self.peak_bytes, 'B')} at {where}\n{kinds}\n)"


def memory(trace: Trace, depth: int | None = 2) -> MemoryReport:
    """The memory of a captured step: bytes by kind, the peak and where it is, a timeline.

    Parameters
    ----------
    trace : a trace from :func:`roofline.trace` or :func:`roofline.capture` (fake or real).
    depth : module paths in ``by_module`` are cut to this many components (None: full).

    Raises
    ------
    ValueError
        When the trace has no storage table (saved by an older roofline, or made by
        :meth:`Trace.filter`): capture the step again.
    """
    if not trace.ops or not trace.storages:
        what = "no ops" if not trace.ops else "no storage table (an older trace file, or a " \
            "Trace.filter result, whose op indices no longer match)"
        raise ValueError(f"roofline.memory needs a captured step, but the trace has {what}; "
                         "capture the step again with roofline.trace or roofline.capture.")
    by_kind = dict.fromkeys(STORAGE_KINDS, 0)
    by_module: dict[str, dict[str, int]] = {}
    for s in trace.storages.values():
        by_kind[s.kind] += s.bytes
        module = trace.ops[s.first].module if s.first >= 0 else ""
        if depth is not None:
            module = ".".join(module.split(".")[:depth])
        row = by_module.setdefault(module, dict.fromkeys(STORAGE_KINDS, 0))
        row[s.kind] += s.bytes
    live = _timeline(trace.storages, len(trace.ops))
    peak = max(range(len(live)), key=live.__getitem__)
    at_peak = dict.fromkeys(STORAGE_KINDS, 0)
    for s in trace.storages.values():
        start, end = _interval(s, len(trace.ops))
        if start <= peak <= end:
            at_peak[s.kind] += s.bytes
    op = trace.ops[peak]
    return MemoryReport(by_kind, live[peak], peak, op.name, op.module, op.phase, at_peak,
                        live, by_module, dict(trace.storages))


# --- fit against a device ------------------------------------------------------------

#: The CUDA caching allocator rounds every block up to a multiple of 512 bytes:
#: ``constexpr size_t kMinBlockSize = 512; // all sizes are rounded to at least 512 bytes``
#: (pytorch/pytorch, c10/cuda/CUDACachingAllocator.cpp, ``round_size``).
CUDA_BLOCK_BYTES = 512
#: cuBLAS workspace per handle and stream: PyTorch's default is ``4096 * 8 * 1024`` bytes
#: (32 MiB) on sm90 and ``4096 * 1024 * 2 + 16 * 1024 * 8`` (8 MiB + 128 KiB) before it
#: (pytorch/pytorch, aten/src/ATen/cuda/CublasHandlePool.cpp, ``parseChosenWorkspaceSize``;
#: ``CUBLAS_WORKSPACE_CONFIG`` overrides it). The larger is assumed: one stream.
CUBLAS_WORKSPACE_BYTES = 32 * 1024 * 1024
#: The CUDA context (driver state, loaded kernels) is not tensor memory and no PyTorch
#: document gives its size: it depends on the driver, the GPU and lazy module loading
#: (``CUDA_MODULE_LOADING=LAZY``, the default since CUDA 11.7). An ASSUMPTION of
#: 512 MiB, the order commonly seen with ``nvidia-smi`` for a PyTorch process; pass
#: ``context_bytes=`` to :func:`fits` with the figure measured on your system.
CUDA_CONTEXT_BYTES = 512 * 1024 * 1024


@dataclass
class Fit:
    """Whether a step's peak fits a device's memory, with the allocator's overheads apart.

    Attributes
    ----------
    fits : ``required_bytes <= capacity_bytes``.
    device : the device's name.
    capacity_bytes : the device's memory (``DeviceSpec.memory_bytes``).
    tensor_bytes : the step's peak live tensor bytes (:func:`memory`).
    overheads : what is added on top, by name: ``"block rounding"`` (the peak of the
        timeline with every storage rounded up to the allocator's block, minus
        ``tensor_bytes``), ``"cuda context"``, ``"cublas workspace"``; empty off NVIDIA.
    assumptions : one sentence per overhead, saying where its figure comes from.
    required_bytes : ``tensor_bytes`` plus the overheads.
    margin_bytes : ``capacity_bytes - required_bytes`` (negative: short by that much).
    margin_fraction : ``margin_bytes / capacity_bytes``.
    """

    fits: bool
    device: str
    capacity_bytes: int
    tensor_bytes: int
    overheads: dict[str, int]
    assumptions: list[str]
    required_bytes: int
    margin_bytes: int
    margin_fraction: float

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does NOT fit"
        extra = ", ".join(f"{k} {si(v, 'B')}" for k, v in self.overheads.items()) or "none"
        return (f"Fit({verdict} on {self.device}: needs {si(self.required_bytes, 'B')} "
                f"(tensors {si(self.tensor_bytes, 'B')}; {extra}) of "
                f"{si(self.capacity_bytes, 'B')}, margin {si(self.margin_bytes, 'B')} "
                f"= {self.margin_fraction:.1%})")


def fits(trace: Trace | MemoryReport, device: str | DeviceSpec, *,
         context_bytes: int = CUDA_CONTEXT_BYTES,
         workspace_bytes: int = CUBLAS_WORKSPACE_BYTES) -> Fit:
    """Whether the step's peak memory fits ``device``, and by what margin.

    On an NVIDIA GPU the CUDA caching allocator's overheads are added, each stated in
    ``Fit.assumptions``: block rounding (512 B), the CUDA context (``context_bytes``, an
    assumption) and the cuBLAS workspace (``workspace_bytes``). Segment sizes (2 MiB
    small-pool segments, 20 MiB for 1-10 MiB requests) and fragmentation, the gap between
    reserved and allocated memory, are not modelled: the margin must cover them.

    Raises
    ------
    ValueError
        When the device has no ``memory_bytes`` in the registry.
    """
    spec = get_device(device)
    if not spec.memory_bytes:
        raise ValueError(f"{spec.name} has no memory_bytes in the registry, so a fit cannot "
                         "be checked; register a DeviceSpec with memory_bytes set.")
    report = trace if isinstance(trace, MemoryReport) else memory(trace)
    n = len(report.timeline)
    capacity = int(spec.memory_bytes)
    overheads: dict[str, int] = {}
    assumptions: list[str] = []
    if spec.vendor.lower() == "nvidia":
        block = CUDA_BLOCK_BYTES
        rounded = _timeline(report.storages, n, lambda s: -(-s.bytes // block) * block)
        overheads["block rounding"] = max(rounded) - report.peak_bytes
        overheads["cuda context"] = int(context_bytes)
        overheads["cublas workspace"] = int(workspace_bytes)
        assumptions += [
            f"block rounding: every storage rounded up to {block} B (kMinBlockSize, "
            "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp); segment sizes and "
            "fragmentation (reserved minus allocated) are not modelled",
            f"cuda context: {si(context_bytes, 'B')} assumed (driver- and GPU-dependent, "
            "no documented figure; pass context_bytes= measured with nvidia-smi)",
            f"cublas workspace: {si(workspace_bytes, 'B')} (PyTorch's sm90 default, "
            "aten/src/ATen/cuda/CublasHandlePool.cpp; 8 MiB + 128 KiB before sm90)",
        ]
    else:
        assumptions.append(f"no allocator overheads modelled for {spec.vendor} devices: "
                           "tensor bytes only")
    required = report.peak_bytes + sum(overheads.values())
    margin = capacity - required
    return Fit(required <= capacity, spec.name, capacity, report.peak_bytes, overheads,
               assumptions, required, margin, margin / capacity)
