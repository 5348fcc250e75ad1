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
    covers,
    drawing,
    inside,
    line_pixels,
    model_name,
    ms,
    renderer,
    require_ops,
    settle,
    text_box,
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

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> ax = roofline.plot.speedup_curve(t, "a100")
    >>> ax.figure.savefig("speedup.png")  # doctest: +SKIP
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
    with drawing(ax, (7.0, 4.6)) as out:
        _draw(out, a, p, fs, bs)
    return out


#: Offsets (points) tried in turn for the "2x FLOP/s" label: below right of its point (the
#: curves rise to the right of it), then above it, then ever further out; the first whose
#: text covers no line wins.
_TWO_OFFSETS = [(22, -38), (22, 34), *sorted(
    ((dx, dy) for dx in (30, 0, -30, 60, 90) for dy in (-60, -38, -20, 34, 60, 90, 120, 150)),
    key=lambda o: abs(o[0]) + abs(o[1]))]


def _draw(ax: Axes, a: Analysis, p: dict[str, Any], fs: list[float], bs: list[float]) -> None:
    """The curves, the ceilings and the 2x point, each label where no line or label is."""
    hi = max(fs + bs)
    ax.plot([1, hi], [1, hi], ls=":", color="#999999", lw=1.2, gid="ideal",
            label="ideal: speedup = multiplier")
    fx, fy = zip(*p["flops"], strict=True)
    ax.plot(fx, fy, "o-", color=BOUND_COLORS["compute"], lw=2, ms=5, gid="flops",
            label="FLOP/s x multiplier")
    by: tuple[float, ...] = ()
    if bs:
        bx, by = zip(*p["bandwidth"], strict=True)
        ax.plot(bx, by, "s-", color=BOUND_COLORS["memory"], lw=2, ms=5, gid="bandwidth",
                label="bandwidth x multiplier")
    ceilings = [("infinite_flops", "infinite FLOP/s", BOUND_COLORS["compute"])]
    if bs:
        ceilings.append(("infinite_bandwidth", "infinite bandwidth", BOUND_COLORS["memory"]))
    finite = [c for c in ceilings if math.isfinite(p[c[0]])]
    two = p["at_2x_flops"]
    # the view holds the curves and every finite ceiling, with room above for a label; the
    # ideal line may leave it through the top, which is the point
    top = max([2.0, two, *fy, *by, *(p[key] for key, _, _ in finite)])
    ax.set_xlim(0.8, hi * 1.05)
    ax.set_ylim(0.8, top * 1.15)
    for key, _, color in finite:
        ax.axhline(p[key], ls="--", lw=1, color=color, alpha=0.8, gid=key)
    ax.plot([SEED_FLOPS_FACTOR], [two], "o", ms=11, mfc="none", mec="black", mew=1.6,
            gid="at_2x")
    ax.set_xlabel("multiplier on the device's FLOP/s (or bandwidth)")
    ax.set_ylabel("predicted step speedup")
    ax.set_xticks(np.array(fs))
    ax.set_xticklabels([f"{f:g}x" for f in fs])
    ax.grid(True, lw=0.4, alpha=0.4)
    # inside the axes (a caller's panel has neighbours), where the fewest lines are
    legend = ax.legend(loc="best", framealpha=0.85)
    ax.set_title(f"Will {SEED_FLOPS_FACTOR:g}x FLOP/s give {SEED_FLOPS_FACTOR:g}x? "
                 f"{model_name(a)} on {a.device.name} ({ms(a.seconds)} per step)", loc="left")
    settle(ax)  # labels are placed in pixels: lay the figure out first
    rend = renderer(ax)
    placed = [legend.get_window_extent(rend)]
    lines = {ln.get_gid(): ln for ln in ax.get_lines()}
    for key, words, color in finite:
        level = p[key]
        others = line_pixels(ax, [ln for gid, ln in lines.items() if gid != key])
        spots = [(x, level, 0, dy, ha) for x, ha in ((hi, "right"), (1.0, "left"),
                                                      (math.sqrt(hi), "center"))
                 for dy in (3, -3)]
        _label(ax, f"{words}: at most {level:.2f}x", spots, others, placed, fontsize=8,
               color=color)
    spots = [(SEED_FLOPS_FACTOR, two, dx, dy,
              "left" if dx > 0 else "right" if dx < 0 else "center") for dx, dy in _TWO_OFFSETS]
    _label(ax, f"{SEED_FLOPS_FACTOR:g}x FLOP/s -> {two:.2f}x", spots,
           line_pixels(ax, list(lines.values())), placed, fontsize=10, fontweight="bold",
           arrowprops={"arrowstyle": "-", "lw": 0.8}, gid="at_2x_label")


def _label(ax: Axes, text: str, spots: Sequence[tuple[float, float, float, float, str]],
           lines: Any, placed: list[Any], **kw: Any) -> Any:
    """``text`` at the first (x, y, dx, dy points, ha) spot whose box is inside the axes and
    covers no point of ``lines`` (pixels) and no box in ``placed``; else the first spot
    inside the axes; else the first. Its box joins ``placed``."""
    rend = renderer(ax)
    frame = ax.get_window_extent(rend)

    def draw(spot: tuple[float, float, float, float, str]) -> Any:
        x, y, dx, dy, ha = spot
        return ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha,
                           va="bottom" if dy > 0 else "top", annotation_clip=True, **kw)

    best, fallback = None, None
    for spot in spots:
        artist = draw(spot)
        box = text_box(artist, rend)
        artist.remove()
        if not inside(box, frame):
            continue
        fallback = fallback or spot
        room = box.padded(3)  # a few pixels of air between text and line
        if not covers(room, lines) and not any(room.overlaps(b) for b in placed):
            best = spot
            break
    artist = draw(best or fallback or spots[0])
    placed.append(text_box(artist, rend))
    return artist
