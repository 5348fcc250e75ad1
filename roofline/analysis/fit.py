"""Whether a step fits a device's memory: the peak plus the CUDA allocator's overheads.

The peak is :func:`roofline.memory`'s; on an NVIDIA GPU the caching allocator's block
rounding, the CUDA context and the cuBLAS workspace are added, each a cited (or stated)
assumption of :class:`Fit`.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline._checks import whole
from roofline._errors import RooflineWarning, warn
from roofline._si import si
from roofline.analysis.memory import MemoryReport, _timeline, memory
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing.records import Trace

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


def _overheads(spec: DeviceSpec, context_bytes: int, workspace_bytes: int,
               ) -> tuple[int | None, dict[str, int], list[str]]:
    """The allocator's block size (None: no rounding), fixed overheads and their sources."""
    if spec.vendor.lower() != "nvidia":
        return None, {}, [f"no allocator overheads modelled for {spec.vendor} devices: "
                          "tensor bytes only"]
    block = CUDA_BLOCK_BYTES
    fixed = {"cuda context": int(context_bytes), "cublas workspace": int(workspace_bytes)}
    return block, fixed, [
        f"block rounding: every storage rounded up to {block} B (kMinBlockSize, "
        "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp); segment sizes and "
        "fragmentation (reserved minus allocated) are not modelled",
        f"cuda context: {si(context_bytes, 'B')} assumed (driver- and GPU-dependent, "
        "no documented figure; pass context_bytes= measured with nvidia-smi)",
        f"cublas workspace: {si(workspace_bytes, 'B')} (PyTorch's sm90 default, "
        "aten/src/ATen/cuda/CublasHandlePool.cpp; 8 MiB + 128 KiB before sm90)",
    ]


def _allocated(report: MemoryReport, block: int | None) -> list[int]:
    """Live bytes per op as the allocator holds them (each storage rounded to ``block``)."""
    if block is None:
        return report.timeline
    return _timeline(report.storages, len(report.timeline), lambda s: -(-s.bytes // block) * block)


def _capacity(spec: DeviceSpec) -> int:
    if not spec.memory_bytes:
        raise ValueError(f"{spec.name} has no memory_bytes in the registry, so a fit cannot "
                         "be checked; register a DeviceSpec with memory_bytes set.")
    return int(spec.memory_bytes)


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

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(1024, 1024), torch.randn(8, 1024), fake=True)
    >>> f = roofline.fits(t, "rtx 4090")
    >>> f.fits, f.capacity_bytes
    (True, 24000000000)
    """
    if not isinstance(trace, (Trace, MemoryReport)):
        raise TypeError(f"fits(trace, device): trace must be a Trace or its roofline.memory() "
                        f"report, got {type(trace).__name__}" + (
                            " (pass analysis.trace)" if hasattr(trace, "trace") else ""))
    context_bytes = whole("context_bytes", context_bytes, at_least=0)
    workspace_bytes = whole("workspace_bytes", workspace_bytes, at_least=0)
    spec = get_device(device)
    capacity = _capacity(spec)
    if spec.vendor.lower() != "nvidia" and (context_bytes, workspace_bytes) != (
            CUDA_CONTEXT_BYTES, CUBLAS_WORKSPACE_BYTES):
        warn(f"context_bytes and workspace_bytes are CUDA's overheads: {spec.name} "
                      f"is a {spec.vendor} device, and they are not added",
                      RooflineWarning)
    report = trace if isinstance(trace, MemoryReport) else memory(trace)
    block, fixed, assumptions = _overheads(spec, context_bytes, workspace_bytes)
    overheads: dict[str, int] = {}
    if block is not None:
        overheads["block rounding"] = max(_allocated(report, block)) - report.peak_bytes
    overheads.update(fixed)
    required = report.peak_bytes + sum(overheads.values())
    margin = capacity - required
    return Fit(required <= capacity, spec.name, capacity, report.peak_bytes, overheads,
               assumptions, required, margin, margin / capacity)
