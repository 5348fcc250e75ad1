"""Charts of a parallel step: speedup against GPU count, and the two streams over time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline.analysis.parallel import ParallelAnalysis, Scaling, parallel
from roofline.presentation.plots._style import BOUND_COLORS, drawing

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Colours of the two streams and of a wait.
STREAM_COLORS = {"compute": BOUND_COLORS["compute"], "communication": "#009E73",
                 "wait": "#CC79A7"}


def _points(s: Scaling | ParallelAnalysis) -> tuple[str, dict[int, float]]:
    if isinstance(s, Scaling):
        return f"{s.device} ({s.parallel})", s.speedups()
    if not isinstance(s, ParallelAnalysis):
        raise TypeError(f"scaling_curve() takes a Scaling or a ParallelAnalysis, got "
                        f"{type(s).__name__}")
    if s.one_gpu_seconds is None:
        raise ValueError("scaling_curve(): the ParallelAnalysis has no single-GPU step to "
                         "compare with; pass one_gpu= to roofline.parallel")
    speedups = {1: 1.0}
    recostable = s.strategy is not None and s.strategy.recostable
    counts = [n for n in (2, 4, 8, 16, 32, 64) if n <= s.gpus] if recostable else [s.gpus]
    for n in sorted({*counts, s.gpus}):  # a DDP trace is re-costed for each count
        per_node = s.topology.gpus_per_node
        # the same network and analysis options as the analysis given
        p = s if n == s.gpus else parallel(
            s.trace, s.device, gpus=n, nodes=max(1, -(-n // per_node)) if n > per_node
            else 1, one_gpu=s.one_gpu_seconds, one_gpu_batch=s.one_gpu_batch, **s.settings)
        if (v := p.speedup_vs_one_gpu) is not None:
            speedups[n] = v
    return f"{s.device.name} ({s.parallel})", speedups


def scaling_curve(s: Scaling | ParallelAnalysis, ax: Axes | None = None) -> Axes:
    """Predicted speedup over one GPU against the GPU count, with the ideal line.

    A :class:`~roofline.analysis.parallel.Scaling`, or one ParallelAnalysis (a DDP one is
    re-costed for 2, 4, 8... GPUs up to its own count). Returns the Axes.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> s = roofline.scaling(model, (torch.randn(64, 1024),), device="h100", gpus=(1, 2, 4),
    ...                      loss_fn=lambda y: y.sum())
    >>> ax = roofline.plot.scaling_curve(s)
    """
    label, points = _points(s)
    counts = sorted(points)
    with drawing(ax, (5.0, 3.6)) as out:
        out.plot(counts, counts, "k--", lw=1, label="ideal (N GPUs, N x)")
        out.plot(counts, [points[n] for n in counts], "o-", color=STREAM_COLORS["compute"],
                 label="predicted")
        for n in counts:
            out.annotate(f"{points[n]:.2f}x", (n, points[n]), textcoords="offset points",
                         xytext=(4, -12), fontsize=8)
        out.set_xscale("log", base=2)
        out.set_yscale("log", base=2)
        out.set_xticks(counts, [str(n) for n in counts])
        out.set_yticks(counts, [str(n) for n in counts])
        out.margins(x=0.08, y=0.15)  # room for the labels below the points
        out.set_xlabel("GPUs")
        out.set_ylabel("speedup over one GPU")
        out.set_title(f"{label}: are N GPUs N times as fast?", loc="left")
        out.legend(loc="upper left", frameon=False)
    return out


def stream_timeline(p: ParallelAnalysis, ax: Axes | None = None) -> Axes:
    """The step's two streams over time: compute ops, collectives, and the compute
    stream's waits for communication (the exposed part). Returns the Axes.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> t = roofline.trace(model, torch.randn(64, 1024), train=True, loss_fn=lambda y: y.sum(),
    ...                    parallel="ddp", gpus=8)
    >>> ax = roofline.plot.stream_timeline(roofline.parallel(t, "h100"))
    """
    if not isinstance(p, ParallelAnalysis):
        raise TypeError(f"stream_timeline() takes a ParallelAnalysis, got {type(p).__name__}")
    scale = 1e3  # ms
    compute, comm, waits = [], [], []
    prev_end = 0.0
    for i, op in enumerate(p.trace.ops):
        s, e = p.start[i] * scale, p.end[i] * scale
        if op.collective is not None and op.collective.kind != "wait":
            if e > s:
                comm.append((s, e - s))
            continue
        if s > prev_end + 1e-12:
            waits.append((prev_end, s - prev_end))
        if e > s:
            compute.append((s, e - s))
        prev_end = max(prev_end, e)
    end = max(p.end.max(initial=0.0) * scale, prev_end)
    if end > prev_end:  # communication after the last compute op
        waits.append((prev_end, end - prev_end))
    with drawing(ax, (8.0, 2.4)) as out:
        out.broken_barh(compute, (1.1, 0.8), facecolors=STREAM_COLORS["compute"],
                        label="compute")
        out.broken_barh(waits, (1.1, 0.8), facecolors=STREAM_COLORS["wait"], alpha=0.8,
                        label="waiting for communication")
        out.broken_barh(comm, (0.1, 0.8), facecolors=STREAM_COLORS["communication"],
                        edgecolors="white", linewidth=0.3, label="collectives")
        out.set_yticks([0.5, 1.5], ["communication", "compute"])
        out.set_xlim(0, end * 1.01 if end else 1)
        out.set_ylim(0, 2.6)
        out.set_xlabel("ms from the start of the step")
        out.set_title(f"{p.gpus}x {p.device.name} ({p.parallel}): step "
                      f"{p.seconds * 1e3:.3g} ms, {p.exposed_share:.0%} waiting for "
                      "communication", loc="left")
        out.legend(loc="upper right", ncols=3, frameon=False)
    return out
