"""The "2x GFLOPS" curve: predicted speedup against a FLOP/s (and a bandwidth) multiplier.

One analysis, no re-tracing: :meth:`Analysis.seconds_with` scales the compute (or memory)
roof of every op, which is what ``what_if(trace, device, flops=f)`` predicts. The Amdahl
ceilings are the same call with a roof removed (``compute=inf``, ``memory=inf``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.analysis import analyze
from roofline.analysis.compare import SEED_FLOPS_FACTOR
from roofline.analysis.timing import Analysis, ratio
from roofline.hardware import DeviceSpec
from roofline.presentation.plots._style import (
    BOUND_COLORS,
    axes,
    model_name,
    ms,
    require_ops,
    style,
)
from roofline.tracing.records import Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _factors(values: Sequence[float], name: str) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v)
                                       and v > 0):
            raise ValueError(f"speedup_curve(): {name} factors must be finite numbers > 0, "
                             f"got {v!r}")
        out.append(float(v))
    if not out:
        raise ValueError(f"speedup_curve(): give at least one {name} factor")
    return sorted(set(out))


def speedup_points(a: Analysis, flops: Sequence[float], bandwidth: Sequence[float],
                   ) -> dict[str, Any]:
    """Speedups of ``a`` at each FLOP/s and bandwidth factor, and the two Amdahl ceilings."""
    base = a.seconds
    return {
        "flops": [(f, ratio(base, a.seconds_with(compute=f))) for f in flops],
        "bandwidth": [(b, ratio(base, a.seconds_with(memory=b))) for b in bandwidth],
        "infinite_flops": ratio(base, a.seconds_with(compute=math.inf)),
        "infinite_bandwidth": ratio(base, a.seconds_with(memory=math.inf)),
        "at_2x_flops": ratio(base, a.seconds_with(compute=SEED_FLOPS_FACTOR)),
    }


def speedup_curve(trace: Trace, device: str | DeviceSpec,
                  flops: Sequence[float] = (1, 1.5, 2, 3, 4, 6, 8),
                  bandwidth: bool | Sequence[float] = True, ax: Axes | None = None,
                  **options: Any) -> Axes:
    """Speedup of ``trace`` on ``device`` with ``f`` x its FLOP/s (and ``f`` x its bandwidth).

    Parameters
    ----------
    trace : Trace
    device : str or DeviceSpec
    flops : sequence of float
        FLOP/s multipliers on the x axis (the 2x point is always computed and marked).
    bandwidth : bool or sequence of float
        ``True``: a second line, the same multipliers applied to bandwidth; a sequence:
        those bandwidth multipliers; ``False``: no bandwidth line.
    ax : matplotlib Axes, optional
    options
        Those of :func:`roofline.analyze`.

    Returns
    -------
    matplotlib.axes.Axes
        Lines: the FLOP/s speedup, the bandwidth speedup, ideal ``y = x`` and the Amdahl
        ceilings (infinite FLOP/s, infinite bandwidth) as horizontal lines.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"speedup_curve() takes a Trace, got {type(trace).__name__}")
    fs = _factors(flops, "flops")
    if bandwidth is True:
        bs = fs
    elif bandwidth is False:
        bs = []
    else:
        bs = _factors(bandwidth, "bandwidth")
    a = analyze(trace, device, **options)
    require_ops(a, "speedup_curve")
    if a.seconds <= 0:
        raise ValueError("speedup_curve(): the trace predicts no time on "
                         f"{a.device.name} (views only), so there is nothing to speed up")
    p = speedup_points(a, fs, bs)
    with style():
        ax = axes(ax, (7.0, 4.6))
        hi = max(fs + bs)
        ax.plot([1, hi], [1, hi], ls=":", color="#999999", lw=1.2, gid="ideal",
                label="ideal: speedup = multiplier")
        fx, fy = zip(*p["flops"], strict=True)
        ax.plot(fx, fy, "o-", color=BOUND_COLORS["compute"], lw=2, ms=5, gid="flops",
                label="FLOP/s x multiplier")
        if bs:
            bx, by = zip(*p["bandwidth"], strict=True)
            ax.plot(bx, by, "s-", color=BOUND_COLORS["memory"], lw=2, ms=5, gid="bandwidth",
                    label="bandwidth x multiplier")
        ceilings = [("infinite_flops", "infinite FLOP/s", BOUND_COLORS["compute"])]
        if bs:
            ceilings.append(("infinite_bandwidth", "infinite bandwidth", BOUND_COLORS["memory"]))
        # the higher ceiling is labelled above its line and the lower one below, so that two
        # close ceilings never print over each other
        finite = sorted((c for c in ceilings if math.isfinite(p[c[0]])), key=lambda c: p[c[0]])
        for rank, (key, words, color) in enumerate(finite):
            level = p[key]
            above = rank == len(finite) - 1
            ax.axhline(level, ls="--", lw=1, color=color, alpha=0.8, gid=key)
            ax.annotate(f"{words}: at most {level:.2f}x", (hi, level),
                        xytext=(-2, 3 if above else -3), textcoords="offset points",
                        ha="right", va="bottom" if above else "top", fontsize=8, color=color)
        two = p["at_2x_flops"]
        ax.plot([SEED_FLOPS_FACTOR], [two], "o", ms=11, mfc="none", mec="black", mew=1.6,
                gid="at_2x")
        ax.annotate(f"{SEED_FLOPS_FACTOR:g}x FLOP/s -> {two:.2f}x", (SEED_FLOPS_FACTOR, two),
                    xytext=(22, -38),  # below the curves, which rise to the right of it
                    textcoords="offset points", fontsize=10, fontweight="bold",
                    arrowprops={"arrowstyle": "-", "lw": 0.8})
        # the view holds the curves and the ceilings with room above for the labels; the ideal
        # line leaves it through the top, which is the point
        top = max([2.0, max(fy), max(p["bandwidth"], default=(1, 1))[1],
                   *(v for v in (p["infinite_flops"], p["infinite_bandwidth"])
                     if math.isfinite(v))])
        ax.set_xlim(0.8, hi * 1.05)
        ax.set_ylim(0.8, min(top * 1.3, hi * 1.05))
        ax.set_xlabel("multiplier on the device's FLOP/s (or bandwidth)")
        ax.set_ylabel("predicted step speedup")
        ax.set_xticks(np.array(fs))
        ax.set_xticklabels([f"{f:g}x" for f in fs])
        ax.grid(True, lw=0.4, alpha=0.4)
        ax.legend(loc="upper left", frameon=False)
        ax.set_title(f"Will {SEED_FLOPS_FACTOR:g}x FLOP/s give {SEED_FLOPS_FACTOR:g}x? "
                     f"{model_name(a)} on {a.device.name} ({ms(a.seconds)} per step)",
                     loc="left")
    return ax
