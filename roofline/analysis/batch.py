"""The largest batch whose step fits a device, and samples per second at it.

:func:`max_batch` traces the step at a few batch sizes, fits each op's live bytes as
affine in the batch, and searches by tracing until a batch that fits and the next one
that does not are both traced: the answer is always a traced batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofline._checks import number, whole
from roofline._errors import RooflineWarning, warn
from roofline._si import si
from roofline.analysis.fit import (
    CUBLAS_WORKSPACE_BYTES,
    CUDA_CONTEXT_BYTES,
    Fit,
    _allocated,
    _capacity,
    _overheads,
    fits,
)
from roofline.analysis.memory import MemoryReport, memory
from roofline.analysis.parallel import step_cost
from roofline.hardware import DeviceSpec, get_device, list_devices
from roofline.tracing.records import Trace

#: Relative error of the affine fit's required bytes, at the check size, above which
#: :func:`max_batch` says the memory is not affine in the batch (and warns). 1%: a step
#: whose shapes all scale with the batch is affine to the byte at every op; the slack
#: covers the allocator's 512 B rounding of small tensors.
AFFINE_TOLERANCE = 0.01


@dataclass(frozen=True)
class Piece:
    """One line of :attr:`MaxBatch.pieces`: from batch ``start`` on, the step needs
    ``fixed_bytes + bytes_per_sample * batch`` (until the next piece starts)."""

    start: int
    bytes_per_sample: float
    fixed_bytes: float


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
    seconds : predicted step time at ``batch`` (:func:`roofline.analyze`; with its
        collectives costed, :func:`roofline.parallel`, for a parallel trace).
    bytes_per_sample, fixed_bytes : the affine fit ``required = fixed + per_sample *
        batch`` at the op that limits the batch (overheads included in ``fixed_bytes``).
    pieces : the fit over every batch up to ``batch + 1``: each op's live bytes are a line
        in the batch and the step needs their maximum, so the fit is the upper envelope
        of those lines, one :class:`Piece` per op that holds the peak somewhere (the
        optimizer's at small batches, backward's at large ones). It passes through the
        fit batches, and through the traced batches near the limit when ``affine``;
        :meth:`fit_bytes` evaluates it.
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
    pieces: tuple[Piece, ...] = field(default=(), repr=False)

    def fit_bytes(self, batch: float | np.ndarray) -> Any:
        """The fit's required bytes at ``batch`` (a number or an array): the largest of
        the pieces' lines, which is the envelope (each piece is one op's line)."""
        b = np.asarray(batch, dtype=np.float64)
        lines = [p.fixed_bytes + p.bytes_per_sample * b for p in self.pieces
                 or (Piece(1, self.bytes_per_sample, self.fixed_bytes),)]
        out = np.max(lines, axis=0)
        return float(out) if out.ndim == 0 else out

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
    ``lambda b: roofline.trace(model, torch.empty(b, 784, device="meta"), train=True,
    optimizer=opt, fake=True)`` (fake mode: a 7B step costs seconds and no memory; meta
    inputs cost nothing to make, where random ones of a large batch take seconds).

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

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> opt = torch.optim.AdamW(model.parameters())
    >>> def build(b):
    ...     x = torch.empty(b, 1024, device="meta")
    ...     return roofline.trace(model, x, train=True, optimizer=opt,
    ...                           loss_fn=lambda y: y.sum(), fake=True)
    >>> m = roofline.max_batch(build, "t4")
    >>> m.batch, m.affine
    (287561, True)
    """
    spec = get_device(device)
    tolerance = number("tolerance", tolerance, at_least=0)
    limit = whole("limit", limit, at_least=2)
    if not callable(build):
        raise TypeError(f"max_batch(build, device): build must be a function of the batch "
                        f"that returns a Trace, got {type(build).__name__}")
    context_bytes = whole("context_bytes", context_bytes, at_least=0)
    workspace_bytes = whole("workspace_bytes", workspace_bytes, at_least=0)
    if not isinstance(fit_batches, (tuple, list)) or len(fit_batches) != 2:
        raise ValueError(f"fit_batches must be two batch sizes (a, b), got {fit_batches!r}")
    b1, b2 = fit_batches
    if not (isinstance(b1, int) and isinstance(b2, int) and not isinstance(b1, bool)
            and not isinstance(b2, bool) and 1 <= b1 < b2 <= limit):
        raise ValueError(f"fit_batches must be two whole numbers 1 <= a < b <= limit, "
                         f"got {fit_batches!r}")
    search = _Search(_builds or _Builds(build), spec, limit, context_bytes, workspace_bytes)
    r1 = search.required(b1)
    if r1 > search.capacity:
        raise ValueError(_no_device_message(r1, search.builds.report(b1).peak_bytes, b1, spec,
                                            search.capacity))
    slope, intercept = search.line(b1, b2)
    if not (slope > 0).any():
        raise ValueError(f"the step's memory does not grow with the batch: build({b1}) and "
                         f"build({b2}) hold the same bytes at every op; does build pass the "
                         "batch size to the inputs it traces?")
    limiting, room = search.boundary(slope, intercept)
    predicted = int(min(math.floor(room), limit))
    check = min(max(predicted, b2 + 1), limit)
    predicted_at_check = float((intercept + slope * check).max())
    actual = search.required(check)
    fit_error = abs(predicted_at_check - actual) / actual
    affine = fit_error <= tolerance
    if not affine:
        warn(
            f"{spec.name}: the step's memory is not affine in the batch: the fit from "
            f"batches {b1} and {b2} predicts {si(predicted_at_check, 'B')} at batch {check}, "
            f"the trace needs {si(actual, 'B')} ({fit_error:.1%} off, tolerance "
            f"{tolerance:.1%}); the batch is found by tracing, not by the fit.",
            RooflineWarning)
    lo = search.bracket()
    builds = search.builds
    costs = {b: step_cost(builds.traces[b], spec, **options) for b in builds.reports}
    seconds = {b: a.seconds + communication for b, (a, communication) in costs.items()}
    traced = {b: (search.required(b), seconds[b]) for b in sorted(builds.reports)}
    fit = fits(builds.report(lo), spec, context_bytes=context_bytes,
               workspace_bytes=workspace_bytes)
    return MaxBatch(lo, spec.name, search.capacity, fit.required_bytes, fit, seconds[lo],
                    float(slope[limiting]), float(intercept[limiting]), predicted, check,
                    fit_error, affine, tolerance, traced, builds.report(lo),
                    _envelope(slope, intercept, b1, lo + 1))


def _envelope(slope: Any, intercept: Any, start: int, stop: int) -> tuple[Piece, ...]:
    """The upper envelope of the lines ``intercept + slope * b`` over ``start <= b <=
    stop``: at each step the line on top, until a steeper one crosses it."""
    b = float(start)
    top = int(np.lexsort((slope, intercept + slope * b))[-1])  # ties: the steeper
    pieces = [Piece(start, float(slope[top]), float(intercept[top]))]
    while True:
        steeper = slope > slope[top]
        if not steeper.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = np.where(steeper, (intercept[top] - intercept)
                             / np.where(steeper, slope - slope[top], 1.0), np.inf)
        cross = np.where(cross >= b, cross, np.inf)
        b = float(cross.min())
        if not b <= stop:
            break
        at = np.flatnonzero(cross == b)
        top = int(at[np.argmax(slope[at])])
        first = max(math.ceil(b), start)
        if first == pieces[-1].start:
            pieces.pop()
        pieces.append(Piece(first, float(slope[top]), float(intercept[top])))
    return tuple(pieces)


class _Search:
    """The traced batches of a search, the bytes each requires, and the affine lines
    through them."""

    def __init__(self, builds: _Builds, spec: DeviceSpec, limit: int, context_bytes: int,
                 workspace_bytes: int) -> None:
        self.builds, self.spec, self.limit = builds, spec, limit
        self.capacity = _capacity(spec)
        self.block, fixed, _ = _overheads(spec, context_bytes, workspace_bytes)
        self.fixed_bytes = sum(fixed.values())

    def required(self, batch: int) -> int:
        """Bytes the step needs at ``batch``, as the allocator holds them."""
        return max(_allocated(self.builds.report(batch), self.block)) + self.fixed_bytes

    def line(self, ba: int, bb: int) -> tuple[Any, Any]:
        """Per op, the affine line through batches ``ba`` and ``bb`` (slope, intercept);
        a different op sequence at the two sizes (the structure depends on the batch)
        leaves only the peaks to fit."""
        ta = np.asarray(_allocated(self.builds.report(ba), self.block),
                        dtype=np.float64) + self.fixed_bytes
        tb = np.asarray(_allocated(self.builds.report(bb), self.block),
                        dtype=np.float64) + self.fixed_bytes
        if len(ta) != len(tb):
            ta, tb = np.array([ta.max()]), np.array([tb.max()])
        slope = (tb - ta) / (bb - ba)
        return slope, ta - slope * ba

    def boundary(self, slope: Any, intercept: Any) -> tuple[int, float]:
        """The op that limits the batch first, and the batch at which it fills the device."""
        growing = slope > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(growing, (self.capacity - intercept)
                            / np.where(growing, slope, 1.0), np.inf)
        at = int(np.argmin(room))
        return at, float(room[at])

    def bracket(self) -> int:
        """The largest batch that fits, with it and the next batch both traced.

        Brackets lo (fits) < hi (does not), both traced; each guess is the boundary of the
        lines through the two traced batches nearest it (a secant step: the allocator's
        rounding of small tensors makes the first fit a little off), kept strictly inside
        the bracket, with every third guess a bisection so the search always ends.
        """
        fitting = sorted(b for b in self.builds.reports if self.fits(b))
        over = [b for b in self.builds.reports if not self.fits(b)]
        lo, hi = fitting[-1], min(over) if over else None
        below = fitting[-2] if len(fitting) > 1 else None
        rounds = 0
        while hi is None or hi - lo > 1:
            if hi is None and lo >= self.limit:
                raise ValueError(f"the step still fits {self.spec.name} at batch "
                                 f"{self.limit}, the limit of the search (limit=)")
            rounds += 1
            b = self._guess(lo, hi, below)
            if hi is not None and rounds % 3 == 0:
                b = (lo + hi) // 2
            lo, hi, below = self._step(b, lo, hi, below)
        return lo

    def fits(self, batch: int) -> bool:
        return self.required(batch) <= self.capacity

    def _guess(self, lo: int, hi: int | None, below: int | None) -> int:
        """The boundary of the lines through ``lo`` and its nearest traced neighbour,
        strictly inside the bracket (doubling where the lines do not grow)."""
        near = hi if hi is not None else below
        guess = math.inf if near is None else self.boundary(
            *self.line(min(lo, near), max(lo, near)))[1]
        if not math.isfinite(guess):
            guess = 2 * lo
        top = self.limit if hi is None else hi - 1
        return int(min(max(math.floor(guess), lo + 1), top))

    def _step(self, b: int, lo: int, hi: int | None, below: int | None,
              ) -> tuple[int, int | None, int | None]:
        """Trace ``b`` and its neighbour on the far side; the narrowed bracket."""
        if self.fits(b):
            below, lo = lo, b
            if (hi is None or b + 1 < hi) and b + 1 <= self.limit:  # confirm it from above
                if not self.fits(b + 1):
                    hi = b + 1
                else:
                    below, lo = lo, b + 1
        else:
            hi = b
            if b - 1 > lo and self.fits(b - 1):
                below, lo = lo, b - 1
        return lo, hi, below


def compare_at_max_batch(build: Callable[[int], Trace], src: str | DeviceSpec,
                         dst: str | DeviceSpec, **options: Any) -> BatchComparison:
    """Two devices, each at its own largest batch: which trains more samples per second.

    The honest answer to "is the 80 GB card faster than the 24 GB card for my model": a
    device with more FLOP/s but the same memory runs the same batch, one with more memory
    a larger batch (higher arithmetic intensity, fewer steps per sample). Each device's
    batch is found by :func:`max_batch` (``options`` are its keywords and
    :func:`roofline.analyze`'s); a batch traced for one is reused for the other.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> def build(b):
    ...     return roofline.trace(model, torch.empty(b, 1024, device="meta"), fake=True)
    >>> c = roofline.compare_at_max_batch(build, "t4", "l4")
    >>> c.src.batch < c.dst.batch  # the L4 has 24 GB, the T4 16 GB
    True
    """
    builds = _Builds(build)
    return BatchComparison(max_batch(build, src, _builds=builds, **options),
                           max_batch(build, dst, _builds=builds, **options))
