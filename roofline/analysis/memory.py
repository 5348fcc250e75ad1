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
  temporaries from their first write to their last use, or to ``Storage.held_to``
  when something outside the ops held them longer: autocast's cast cache keeps the
  low-precision copy of each parameter until the autocast region exits. A
  ``with torch.autocast(...)`` around :func:`roofline.trace` exits after the optimizer
  step, so the copies are live to the end of the step; one inside the model's forward
  exits before backward, and they die there (the capture sees when, see
  ``_Recorder._note_casts``).

Activation checkpointing (``torch.utils.checkpoint``) is seen as it runs: forward keeps
no activations of the checkpointed function (its outputs die at their last forward use),
and backward reruns it, ops flagged ``OpRecord.recompute``, whose outputs are then
backward's temporaries; :attr:`MemoryReport.recompute_flops` sums the rerun.

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

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofline._si import si
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing import RooflineWarning, Trace
from roofline.tracing.records import STORAGE_KINDS, Storage

# Kinds live from the start (or their creation) to the end of the step.
_KEPT = frozenset({"parameter", "buffer", "optimizer_state", "input", "gradient"})


def _interval(s: Storage, n_ops: int) -> tuple[int, int]:
    """The op range ``[start, end]`` in which ``s`` is live."""
    # from the start when it existed before the step (or no op used it)
    start = 0 if s.first < 0 or not s.created else s.first
    end = n_ops - 1 if s.kind in _KEPT or s.first < 0 else max(s.last, s.held_to)
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
    held_bytes : bytes of the storages held past their last use (``Storage.held_to``:
        autocast's cached parameter copies, or a saved copy until its autograd node has
        run); ``peak_held_bytes`` those live at the peak.
    recompute_flops : FLOPs of the ops activation checkpointing reran in backward
        (``OpRecord.recompute``), included in the trace's backward FLOPs.
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
    held_bytes: int = 0
    peak_held_bytes: int = 0
    recompute_flops: int = 0

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
    held = held_at_peak = 0
    for s in trace.storages.values():
        start, end = _interval(s, len(trace.ops))
        if start <= peak <= end:
            at_peak[s.kind] += s.bytes
        if s.held_to > s.last:
            held += s.bytes
            held_at_peak += s.bytes if start <= peak <= end else 0
    op = trace.ops[peak]
    recompute = sum(o.flops for o in trace.ops if o.recompute)
    return MemoryReport(by_kind, live[peak], peak, op.name, op.module, op.phase, at_peak,
                        live, by_module, dict(trace.storages), held, held_at_peak, recompute)


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
    """
    spec = get_device(device)
    capacity = _capacity(spec)
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


# --- the largest batch that fits ------------------------------------------------------

#: Relative error of the affine fit's required bytes, at the check size, above which
#: :func:`max_batch` says the memory is not affine in the batch (and warns). 1%: a step
#: whose shapes all scale with the batch is affine to the byte at every op; the slack
#: covers the allocator's 512 B rounding of small tensors.
AFFINE_TOLERANCE = 0.01


@dataclass
class MaxBatch:
    """The largest batch whose step fits a device, and the throughput at it.

    Attributes
    ----------
    batch : the largest batch that fits (traced, not extrapolated).
    device : the device's name.
    capacity_bytes : the device's memory.
    required_bytes : the step's requirement at ``batch`` (``fit.required_bytes``).
    fit : :class:`Fit` of the step at ``batch``: margin, overheads, assumptions.
    seconds : predicted step time at ``batch`` (:func:`roofline.analyze`).
    bytes_per_sample, fixed_bytes : the affine fit ``required = fixed + per_sample *
        batch`` at the op that limits the batch (overheads included in ``fixed_bytes``).
    predicted_batch : the largest batch the affine fit alone predicts.
    check_batch, fit_error : the size the fit was checked on, and the relative error of
        its predicted required bytes there.
    affine : ``fit_error <= tolerance``; when False the search still traced its way to
        ``batch``, but the memory does not grow affinely in the batch.
    traced : every batch traced -> (required bytes, predicted seconds).
    memory : the :class:`MemoryReport` at ``batch``.
    """

    batch: int
    device: str
    capacity_bytes: int
    required_bytes: int
    fit: Fit
    seconds: float
    bytes_per_sample: float
    fixed_bytes: float
    predicted_batch: int
    check_batch: int
    fit_error: float
    affine: bool
    tolerance: float
    traced: dict[int, tuple[int, float]] = field(repr=False)
    memory: MemoryReport = field(repr=False)

    @property
    def samples_per_s(self) -> float:
        """``batch / seconds``: samples (the unit of ``build``'s batch) per second."""
        return self.batch / self.seconds if self.seconds > 0 else math.inf

    def __repr__(self) -> str:
        affine = "affine" if self.affine else f"NOT affine ({self.fit_error:.1%} off)"
        return (f"MaxBatch({self.device}: batch {self.batch} fits, needs "
                f"{si(self.required_bytes, 'B')} of {si(self.capacity_bytes, 'B')}; "
                f"{self.samples_per_s:.4g} samples/s; memory {affine}, "
                f"{si(self.bytes_per_sample, 'B')}/sample + {si(self.fixed_bytes, 'B')})")


@dataclass
class BatchComparison:
    """Two devices, each at its own largest batch: ``speedup`` in samples per second."""

    src: MaxBatch
    dst: MaxBatch

    @property
    def speedup(self) -> float:
        """``dst.samples_per_s / src.samples_per_s`` (>1: ``dst`` trains faster)."""
        return self.dst.samples_per_s / self.src.samples_per_s

    def __repr__(self) -> str:
        return (f"BatchComparison({self.src.device} batch {self.src.batch} "
                f"{self.src.samples_per_s:.4g} samples/s -> {self.dst.device} batch "
                f"{self.dst.batch} {self.dst.samples_per_s:.4g} samples/s: "
                f"{self.speedup:.2f}x)")


class _Builds:
    """``build(batch)`` called once per batch, its failures and results checked."""

    def __init__(self, build: Callable[[int], Trace]) -> None:
        self.build = build
        self.traces: dict[int, Trace] = {}
        self.reports: dict[int, MemoryReport] = {}

    def report(self, batch: int) -> MemoryReport:
        if batch not in self.reports:
            try:
                t = self.build(batch)
            except Exception as e:
                raise ValueError(f"build({batch}) failed while searching for the largest "
                                 f"batch: {type(e).__name__}: {e}") from e
            if not isinstance(t, Trace):
                raise TypeError(f"build({batch}) returned a {type(t).__name__}; build must "
                                "return a roofline.Trace, e.g. lambda b: roofline.trace("
                                "model, make_inputs(b), train=True, optimizer=opt, fake=True)")
            self.traces[batch] = t
            self.reports[batch] = memory(t)
        return self.reports[batch]


def _no_device_message(required: int, tensor_bytes: int, batch: int, spec: DeviceSpec,
                       capacity: int) -> str:
    from roofline.hardware import list_devices

    roomy = sorted((d for d in list_devices()
                    if d.memory_bytes and d.memory_bytes >= tensor_bytes),
                   key=lambda d: d.memory_bytes or 0)
    if roomy:
        names = ", ".join(f"{d.name} ({si(d.memory_bytes or 0, 'B')})" for d in roomy[:5])
        where = (f"listed devices with memory for its tensors: {names}"
                 + (f" and {len(roomy) - 5} more" if len(roomy) > 5 else ""))
    else:
        where = ("no listed device has memory for its tensors alone; shrink the model, keep "
                 "weights or optimizer state in 16 bits, or shard the step")
    return (f"the step does not fit {spec.name} even at batch {batch}: it needs "
            f"{si(required, 'B')} ({si(tensor_bytes, 'B')} of tensors, the rest allocator "
            f"overheads) of {si(capacity, 'B')}; {where}.")


def max_batch(build: Callable[[int], Trace], device: str | DeviceSpec, *,
              fit_batches: tuple[int, int] = (1, 2), tolerance: float = AFFINE_TOLERANCE,
              limit: int = 1 << 24, context_bytes: int = CUDA_CONTEXT_BYTES,
              workspace_bytes: int = CUBLAS_WORKSPACE_BYTES, _builds: _Builds | None = None,
              **options: Any) -> MaxBatch:
    """The largest batch whose step fits ``device``, and the samples/s at that batch.

    ``build(batch)`` returns the :class:`Trace` of one step at that batch, e.g.
    ``lambda b: roofline.trace(model, torch.randn(b, 784), train=True, optimizer=opt,
    fake=True)`` (fake mode: a 7B step costs seconds and no memory).

    The search: trace at the two ``fit_batches``; fit every op's live bytes (as the
    allocator holds them, :func:`fits`) as affine in the batch, so that the predicted
    peak is the max over ops of those lines (a step whose peak is the optimizer's at a
    small batch and backward's at a large one is two lines, not one); predict the largest
    batch; trace there (the check size, or ``fit_batches[1] + 1`` if larger) and compare;
    then trace next to it, refitting the lines through the traced batches nearest the
    boundary (secant steps, every third a bisection), until a batch that fits and the
    next one that does not are both traced. The answer is always a traced
    batch; the fit only decides where to look, and ``affine``/``fit_error`` say how
    good it was (a :class:`RooflineWarning` when the error is over ``tolerance``).
    Assumes memory does not shrink as the batch grows.

    Parameters
    ----------
    fit_batches : the two sizes of the fit (raise the first if batch 1 is special,
        e.g. batch norm in training refuses one sample).
    limit : the largest batch searched.
    context_bytes, workspace_bytes : as in :func:`fits`.
    options : those of :func:`roofline.analyze`, for the step time at each batch.

    Raises
    ------
    ValueError
        When the step does not fit at ``fit_batches[0]`` (the message lists the
        registry's devices that have room, or says none has); when ``build`` fails at a
        batch (the message names it); when memory does not grow with the batch; when
        the step still fits at ``limit``.
    TypeError
        When ``build`` returns something other than a :class:`Trace`.
    """
    from roofline.analysis.timing import analyze

    spec = get_device(device)
    capacity = _capacity(spec)
    b1, b2 = fit_batches
    if not (isinstance(b1, int) and isinstance(b2, int) and 1 <= b1 < b2 <= limit):
        raise ValueError(f"fit_batches must be two whole numbers 1 <= a < b <= limit, "
                         f"got {fit_batches!r}")
    builds = _builds or _Builds(build)
    block, fixed, _ = _overheads(spec, context_bytes, workspace_bytes)
    fixed_bytes = sum(fixed.values())

    def required(batch: int) -> int:
        return max(_allocated(builds.report(batch), block)) + fixed_bytes

    r1 = required(b1)
    if r1 > capacity:
        raise ValueError(_no_device_message(r1, builds.report(b1).peak_bytes, b1, spec,
                                            capacity))
    def line(ba: int, bb: int) -> tuple[Any, Any]:
        """Per op, the affine line through batches ``ba`` and ``bb`` (slope, intercept);
        a different op sequence at the two sizes (the structure depends on the batch)
        leaves only the peaks to fit."""
        ta = np.asarray(_allocated(builds.report(ba), block), dtype=np.float64) + fixed_bytes
        tb = np.asarray(_allocated(builds.report(bb), block), dtype=np.float64) + fixed_bytes
        if len(ta) != len(tb):
            ta, tb = np.array([ta.max()]), np.array([tb.max()])
        slope = (tb - ta) / (bb - ba)
        return slope, ta - slope * ba

    def boundary(slope: Any, intercept: Any) -> tuple[int, float]:
        """The op that limits the batch first, and the batch at which it fills the device."""
        growing = slope > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(growing, (capacity - intercept) / np.where(growing, slope, 1.0),
                            np.inf)
        at = int(np.argmin(room))
        return at, float(room[at])

    slope, intercept = line(b1, b2)
    if not (slope > 0).any():
        raise ValueError(f"the step's memory does not grow with the batch: build({b1}) and "
                         f"build({b2}) hold the same bytes at every op; does build pass the "
                         "batch size to the inputs it traces?")
    limiting, room = boundary(slope, intercept)
    predicted = int(min(math.floor(room), limit))
    check = min(max(predicted, b2 + 1), limit)
    predicted_at_check = float((intercept + slope * check).max())
    actual = required(check)
    fit_error = abs(predicted_at_check - actual) / actual
    affine = fit_error <= tolerance
    if not affine:
        warnings.warn(
            f"{spec.name}: the step's memory is not affine in the batch: the fit from "
            f"batches {b1} and {b2} predicts {si(predicted_at_check, 'B')} at batch {check}, "
            f"the trace needs {si(actual, 'B')} ({fit_error:.1%} off, tolerance "
            f"{tolerance:.1%}); the batch is found by tracing, not by the fit.",
            RooflineWarning, stacklevel=2)
    # bracket lo (fits) < hi (does not), both traced; each guess is the boundary of the
    # lines through the two traced batches nearest it (a secant step: the allocator's
    # rounding of small tensors makes the first fit a little off), kept strictly inside
    # the bracket, with every third guess a bisection so the search always ends
    fitting = sorted(b for b in builds.reports if required(b) <= capacity)
    over = [b for b in builds.reports if required(b) > capacity]
    lo, hi = fitting[-1], min(over) if over else None
    below = fitting[-2] if len(fitting) > 1 else None
    rounds = 0
    while hi is None or hi - lo > 1:
        if hi is None and lo >= limit:
            raise ValueError(f"the step still fits {spec.name} at batch {limit}, the limit "
                             "of the search (limit=)")
        rounds += 1
        near = hi if hi is not None else below
        guess = math.inf if near is None else boundary(*line(min(lo, near), max(lo, near)))[1]
        if not math.isfinite(guess):  # the lines do not grow there: double
            guess = 2 * lo
        top = limit if hi is None else hi - 1
        b = int(min(max(math.floor(guess), lo + 1), top))
        if hi is not None and rounds % 3 == 0:
            b = (lo + hi) // 2
        if required(b) <= capacity:
            below, lo = lo, b
            if (hi is None or b + 1 < hi) and b + 1 <= limit:  # confirm it from above
                if required(b + 1) > capacity:
                    hi = b + 1
                else:
                    below, lo = lo, b + 1
        else:
            hi = b
            if b - 1 > lo and required(b - 1) <= capacity:
                below, lo = lo, b - 1
    seconds = {b: analyze(builds.traces[b], spec, **options).seconds for b in builds.reports}
    traced = {b: (required(b), seconds[b]) for b in sorted(builds.reports)}
    fit = fits(builds.report(lo), spec, context_bytes=context_bytes,
               workspace_bytes=workspace_bytes)
    return MaxBatch(lo, spec.name, capacity, fit.required_bytes, fit, seconds[lo],
                    float(slope[limiting]), float(intercept[limiting]), predicted, check,
                    fit_error, affine, tolerance, traced, builds.report(lo))


def compare_at_max_batch(build: Callable[[int], Trace], src: str | DeviceSpec,
                         dst: str | DeviceSpec, **options: Any) -> BatchComparison:
    """Two devices, each at its own largest batch: which trains more samples per second.

    The honest answer to "is the 80 GB card faster than the 24 GB card for my model": a
    device with more FLOP/s but the same memory runs the same batch, one with more memory
    a larger batch (higher arithmetic intensity, fewer steps per sample). Each device's
    batch is found by :func:`max_batch` (``options`` are its keywords and
    :func:`roofline.analyze`'s); a batch traced for one is reused for the other.
    """
    builds = _Builds(build)
    return BatchComparison(max_batch(build, src, _builds=builds, **options),
                           max_batch(build, dst, _builds=builds, **options))
