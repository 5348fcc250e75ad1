"""Memory charts: live bytes over a step stacked by kind, and required bytes against batch.

The y data are bytes (ticks labelled with SI prefixes), so what is drawn can be read back
and compared with :class:`roofline.MemoryReport` and :class:`roofline.MaxBatch` exactly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from roofline._si import si
from roofline.analysis.batch import MaxBatch
from roofline.analysis.fit import Fit, fits
from roofline.analysis.memory import (
    MemoryReport,
    _timeline,  # the report's own liveness rule, so that the stack sums to its timeline
    memory,
)
from roofline.hardware import DeviceSpec, get_device
from roofline.presentation.plots._style import CATEGORY_COLORS, drawing, legend_spot
from roofline.tracing.records import STORAGE_KINDS, Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Legend words and colours per storage kind, in stacking order (bottom first): what
#: lives all step at the bottom, what comes and goes on top.
KIND_WORDS = {"parameter": "parameters", "buffer": "buffers", "gradient": "gradients",
              "optimizer_state": "optimizer state", "input": "inputs",
              "activation": "activations (saved for backward)", "temporary": "temporaries"}
KIND_COLORS = dict(zip(STORAGE_KINDS, CATEGORY_COLORS, strict=False))
CAPACITY_COLOR = "#D55E00"  # the compute-bound red: the wall not to cross
OVERHEAD_COLOR = "#E8A07A"


def _bytes_axis(ax: Axes, unit: str = "B") -> None:
    """y ticks as ``12 GB``: the data stay in bytes (or ``unit``)."""
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: si(v, unit) if v else "0"))


def _report(obj: MemoryReport | Trace) -> tuple[MemoryReport, Trace | None]:
    if isinstance(obj, Trace):
        return memory(obj), obj  # ValueError for no ops or no storage table
    if isinstance(obj, MemoryReport):
        if not obj.timeline:
            raise ValueError("memory_timeline(): the report has an empty timeline (no ops); "
                             "capture a step that runs at least one operator")
        if not obj.storages:
            raise ValueError("memory_timeline(): the report has no storage table, so its "
                             "live bytes cannot be split by kind; make it with "
                             "roofline.memory(trace) from a freshly captured trace")
        return obj, None
    raise TypeError(f"memory_timeline() takes a MemoryReport (roofline.memory) or a Trace, "
                    f"got {type(obj).__name__}")


def kind_timelines(report: MemoryReport) -> dict[str, list[int]]:
    """Live bytes during each op, per storage kind (they sum to ``report.timeline``)."""
    n = len(report.timeline)
    return {k: _timeline({i: s for i, s in report.storages.items() if s.kind == k}, n)
            for k in STORAGE_KINDS}


def _phases(trace: Trace) -> list[tuple[str, int, int]]:
    """Contiguous runs of one phase: (phase, first op, last op)."""
    runs: list[tuple[str, int, int]] = []
    for i, op in enumerate(trace.ops):
        if runs and runs[-1][0] == op.phase:
            runs[-1] = (op.phase, runs[-1][1], i)
        else:
            runs.append((op.phase, i, i))
    return runs


def memory_timeline(report_or_trace: MemoryReport | Trace, ax: Axes | None = None,
                    device: str | DeviceSpec | None = None) -> Axes:
    """Live bytes during each op of the step, stacked by storage kind.

    Parameters
    ----------
    report_or_trace : a :class:`MemoryReport` (:func:`roofline.memory`) or the Trace to
        make one from; only a Trace knows each op's phase, so only then are the phase
        boundaries (forward, backward, optimizer) marked.
    ax : draw into this Axes (else a new figure).
    device : registry name or spec: its capacity as a horizontal line, with the
        allocator overheads :func:`roofline.fits` assumes as a band below it (what is
        left under the band is for tensors).

    Returns
    -------
    matplotlib.axes.Axes
        x: op index; y: bytes. Each kind is a band with gid ``kind:<kind>`` and a step line
        on its top edge (``top:<kind>``, the cumulative bytes); the peak is ``peak``, the
        capacity ``capacity``, the overhead band ``overheads``.

    Raises
    ------
    ValueError
        An empty trace or report, or one without a storage table.
    TypeError
        Anything but a MemoryReport or a Trace.

    Examples
    --------
    >>> model = nn.Linear(1024, 1024)
    >>> opt = torch.optim.AdamW(model.parameters())
    >>> t = roofline.trace(model, torch.randn(8, 1024), train=True, optimizer=opt,
    ...                    loss_fn=lambda y: y.sum(), fake=True)
    >>> ax = roofline.plot.memory_timeline(t, device="rtx 4090")
    """
    report, trace = _report(report_or_trace)
    fit = fits(report, device) if device is not None else None
    spec = get_device(device) if device is not None else None
    per_kind = kind_timelines(report)
    n = len(report.timeline)
    with drawing(ax, (9.0, 4.2)) as out:
        given, ax = ax, out
        _stack(ax, per_kind, n)
        # the marker on the chart (named in the legend), its op in the title: words beside
        # a peak near the top would run into the legend of a caller's panel
        ax.plot([report.peak_op + 0.5], [report.peak_bytes], "v", color="black", ms=6,
                gid="peak", zorder=5, label="peak", linestyle="none")
        ymax = report.peak_bytes
        if fit is not None and spec is not None:
            ymax = max(ymax, _capacity_line(ax, fit, spec))
        if trace is not None:
            _phase_marks(ax, trace, n)
        ax.set_xlim(0, n)
        ax.set_ylim(0, ymax * 1.15)
        _bytes_axis(ax)
        ax.set_xlabel("op (in the order the step runs them)")
        ax.set_ylabel("live memory")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.legend(frameon=False, **legend_spot(ax, given))
        # room for the phase names above the axes
        ax.set_title(_timeline_title(report, trace, fit), loc="left",
                     pad=14 if trace is not None else 6)
    return ax


def _stack(ax: Axes, per_kind: dict[str, list[int]], n: int) -> None:
    """The live bytes of each kind, stacked in :data:`STORAGE_KINDS` order: a band per
    kind and a step line on its top edge (ops as unit-wide steps: op i spans [i, i + 1),
    so one op's peak is visible)."""
    import numpy as np

    x = np.arange(n + 1, dtype=float)
    base = np.zeros(n)
    for kind in STORAGE_KINDS:
        y = np.asarray(per_kind[kind], dtype=float)
        if not y.any():
            continue
        top = base + y
        ax.fill_between(x, np.append(base, base[-1]), np.append(top, top[-1]),
                        step="post", color=KIND_COLORS[kind], linewidth=0,
                        label=KIND_WORDS[kind], gid=f"kind:{kind}")
        ax.step(x[:-1], top, where="post", color=KIND_COLORS[kind], lw=0.6,
                gid=f"top:{kind}")
        base = top


def _capacity_line(ax: Axes, fit: Fit, spec: DeviceSpec) -> int:
    """The device's capacity as a line, with the assumed allocator overheads as a band
    below it; returns the capacity."""
    capacity = fit.capacity_bytes
    over = sum(fit.overheads.values())
    if over:
        ax.axhspan(capacity - over, capacity, color=OVERHEAD_COLOR, alpha=0.45,
                   linewidth=0, gid="overheads",
                   label=f"allocator overheads, assumed ({si(over, 'B')})")
    ax.axhline(capacity, color=CAPACITY_COLOR, lw=1.5, gid="capacity",
               label=f"{spec.name} capacity ({si(capacity, 'B')})")
    return capacity


def _phase_marks(ax: Axes, trace: Trace, n: int) -> None:
    """A dashed line where each phase starts, its name above the axes where it fits."""
    for i, (phase, first, last) in enumerate(_phases(trace)):
        if i:
            ax.axvline(first, color="#555555", lw=0.8, ls="--", gid=f"phase:{first}")
        if last + 1 - first >= 0.06 * n:  # a name only where it fits
            ax.text((first + last + 1) / 2, 1.0, phase, transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=7.5, color="#555555")


def _timeline_title(report: MemoryReport, trace: Trace | None, fit: Fit | None) -> str:
    """The model, the peak and where it is, and the fit when a device is given."""
    name = (trace.info.model or "step") if trace is not None else "step"
    title = (f"{name}: live memory by kind\npeak {si(report.peak_bytes, 'B')} during "
             f"{report.where}")
    if fit is not None:
        title += (f"\n{'fits' if fit.fits else 'does NOT fit'} {fit.device}: needs "
                  f"{si(fit.required_bytes, 'B')} with overheads, margin "
                  f"{si(fit.margin_bytes, 'B')} ({fit.margin_fraction:.0%})")
    return title


def batch_curve(max_batch_result: MaxBatch, ax: Axes | None = None) -> Axes:
    """Required bytes against batch with the capacity wall, and samples/s on a second axis.

    Parameters
    ----------
    max_batch_result : :func:`roofline.max_batch`'s result.
    ax : draw into this Axes (else a new figure); the throughput goes on ``ax.twinx()``.

    Returns
    -------
    matplotlib.axes.Axes
        The bytes axis: the traced batches (gid ``traced``, their required bytes), the
        affine fit at the limiting op (``fit``), the capacity (``capacity``) and the
        largest batch (``largest``). The twin axis holds ``throughput`` (samples/s at each
        traced batch).

    Raises
    ------
    TypeError
        Anything but a MaxBatch.
    ValueError
        A result with no traced batches.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> def build(b):
    ...     return roofline.trace(model, torch.empty(b, 1024, device="meta"), fake=True)
    >>> ax = roofline.plot.batch_curve(roofline.max_batch(build, "t4"))
    """
    import numpy as np

    m = max_batch_result
    if not isinstance(m, MaxBatch):
        raise TypeError(f"batch_curve() takes a MaxBatch (roofline.max_batch), got "
                        f"{type(m).__name__}")
    if not m.traced:
        raise ValueError("batch_curve(): the result has no traced batches, so there is "
                         "nothing to chart; use roofline.max_batch(build, device)")
    batches = np.array(sorted(m.traced), dtype=float)
    required = np.array([m.traced[int(b)][0] for b in batches], dtype=float)
    seconds = np.array([m.traced[int(b)][1] for b in batches], dtype=float)
    with np.errstate(divide="ignore"):
        rate = np.where(seconds > 0, batches / np.where(seconds > 0, seconds, 1.0), math.inf)
    xmax = max(batches.max(), m.batch) * 1.12
    with drawing(ax, (8.0, 4.2)) as out:
        given, ax = ax, out
        xs = np.unique(np.r_[np.linspace(0.0, xmax, 512), batches])  # the kinks, closely
        pieces = len(m.pieces)
        ax.plot(xs, m.fit_bytes(xs), "--", color="#332288", lw=1, gid="fit",
                label=(f"affine fit: {si(m.fixed_bytes, 'B')} + "
                       f"{si(m.bytes_per_sample, 'B')} per sample" if pieces <= 1 else
                       f"affine fit, {pieces} pieces (the op at the peak changes)")
                + ("" if m.affine else f" (NOT affine, {m.fit_error:.0%} off)"))
        ax.plot(batches, required, "o", color="#332288", ms=5, gid="traced",
                label="traced: required bytes")
        ax.axhline(m.capacity_bytes, color=CAPACITY_COLOR, lw=1.5, gid="capacity",
                   label=f"{m.device} capacity ({si(m.capacity_bytes, 'B')})")
        top = max(m.capacity_bytes, required.max()) * 1.15
        ax.axhspan(m.capacity_bytes, top, color=CAPACITY_COLOR, alpha=0.08, linewidth=0)
        ax.axvline(m.batch, color="#117733", lw=1, ls=":", gid="largest")
        ax.text(m.batch, 0.02, f" largest batch {m.batch}\n {si(m.samples_per_s, 'samples/s')}",
                transform=ax.get_xaxis_transform(), ha="left" if m.batch < 0.7 * xmax
                else "right", va="bottom", fontsize=7.5, color="#117733")
        ax.set_xlim(0, xmax)
        ax.set_ylim(0, top)
        _bytes_axis(ax)
        ax.set_xlabel("batch (samples)")
        ax.set_ylabel("required memory (tensors + overheads)")
        twin = ax.twinx()
        finite = np.isfinite(rate)
        twin.plot(batches[finite], rate[finite], "s-", color="#CC79A7", ms=4, lw=1,
                  gid="throughput", label="predicted samples/s")
        twin.set_ylim(0, (rate[finite].max() if finite.any() else 1.0) * 1.25)
        _bytes_axis(twin, "")
        twin.set_ylabel("predicted samples/s", color="#AA4499")
        for a in (ax, twin):
            a.spines["top"].set_visible(False)
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        # under the axes of the chart's own figure (the twin's ticks are on the right), in
        # a caller's panel where the rising fit and throughput leave room
        spot: dict[str, Any] = (
            {"loc": "upper center", "bbox_to_anchor": (0.5, -0.14), "ncol": 2}
            if given is None else {"loc": "center right", "framealpha": 0.85})
        ax.legend(handles=handles, frameon=False, **spot)
        verdict = "" if m.affine else "; memory NOT affine in the batch"
        ax.set_title(f"{m.device}: required memory and throughput against batch{verdict}",
                     loc="left")
    return ax
