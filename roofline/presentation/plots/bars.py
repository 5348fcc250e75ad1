"""Where the step time goes: stacked bars by bound and by category, and across devices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from roofline.analysis import Analysis, Comparison, analyze
from roofline.hardware import DeviceSpec
from roofline.presentation.explain import CATEGORY_WORDS
from roofline.presentation.plots._style import (
    BOUND_COLORS,
    CATEGORY_COLORS,
    LIGHT,
    analyses,
    drawing,
    legend_spot,
    model_name,
    ms,
    require_ops,
)
from roofline.tracing.records import Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Categories drawn on their own; the rest are one "other" segment.
TOP_CATEGORIES = len(CATEGORY_COLORS) - 1
#: A segment narrower than this share of the longest bar gets no text inside.
MIN_LABEL_SHARE = 0.10
#: x limit over the longest bar in a caller's panel, where the legend goes inside the axes
ROOM = 1.7


def _bar(ax: Axes, row: int, parts: list[tuple[str, float, str]], longest: float,
         gid: str, hatch: str | None = None) -> None:
    """One horizontal stacked bar of ``(name, seconds, colour)`` parts, names inside
    (``hatch`` over every part: a time that leaves some FLOPs uncosted)."""
    left = 0.0
    total = sum(s for _, s, _ in parts)
    for name, seconds, color in parts:
        if seconds <= 0:
            continue
        ax.barh(row, seconds * 1e3, left=left * 1e3, color=color, edgecolor="white",
                height=0.62, gid=f"{gid}:{name}", label=name, hatch=hatch)
        if seconds >= MIN_LABEL_SHARE * longest:
            ax.text((left + seconds / 2) * 1e3, row, f"{name}\n{seconds / total:.0%}",
                    ha="center", va="center", fontsize=7.5,
                    color="black" if color in LIGHT else "white")
        left += seconds
    ax.text(left * 1e3, row, f"  {ms(left)}", ha="left", va="center", fontsize=8.5)


def _legend(ax: Axes, parts: list[tuple[str, float, str]], given: Axes | None,
            extra: Sequence[Any] = ()) -> None:
    """One legend entry per segment name that has time (and ``extra`` handles), beside
    the axes of the chart's own figure, inside a caller's."""
    from matplotlib.patches import Patch

    seen = dict.fromkeys((name, color) for name, seconds, color in parts if seconds > 0)
    handles = [Patch(color=color, label=name) for name, color in seen] + list(extra)
    if given is None:
        ax.legend(handles=handles, frameon=False, **legend_spot(ax, given))
    else:  # a caller's panel: in the room right of the bars that the x limit leaves (ROOM)
        ax.legend(handles=handles, loc="upper right", fontsize=6.5, framealpha=0.85)


def _categories(a: Analysis, keep: list[str]) -> list[tuple[str, float, str]]:
    cats = a.by_category()
    parts = [(CATEGORY_WORDS.get(k, k), cats.get(k, {}).get("seconds", 0.0),
              CATEGORY_COLORS[i]) for i, k in enumerate(keep)]
    other = sum(v["seconds"] for k, v in cats.items() if k not in keep)
    if a.host_seconds:
        other += a.host_seconds
    parts.append(("other" if not a.host_seconds else "other + host", other,
                  CATEGORY_COLORS[-1] if other else "#FFFFFF"))
    return parts


def _bounds(a: Analysis) -> list[tuple[str, float, str]]:
    return [(k, v["seconds"], BOUND_COLORS.get(k, "#DDDDDD")) for k, v in a.by_bound().items()]


def time_breakdown(analysis_or_comparison: Analysis | Comparison,
                   ax: Axes | None = None) -> Axes:
    """Stacked bars of the step time by bound and by category (both devices of a Comparison).

    Returns
    -------
    matplotlib.axes.Axes
        One horizontal bar per (device, grouping), in milliseconds; each segment names its
        bound or category and its share of that device's step.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> ax = roofline.plot.time_breakdown(roofline.compare(t, "a100", "h100"))
    """
    src, dst = analyses(analysis_or_comparison, "time_breakdown")
    require_ops(src, "time_breakdown")
    sides = [src] if dst is None else [src, dst]
    keep = [k for k, v in src.by_category().items() if v["seconds"] > 0][:TOP_CATEGORIES]
    # two steps on one device (compare(eager, compiled, device)) are named by the step
    names = ([a.device.name for a in sides] if dst is None or dst.trace is src.trace
             else ["eager", "torch.compile"])
    rows: list[tuple[str, list[tuple[str, float, str]], str]] = []
    rows += [(f"{names[i]}\nby bound", _bounds(a), f"bound:{i}")
             for i, a in enumerate(sides)]
    rows += [(f"{names[i]}\nby category", _categories(a, keep), f"category:{i}")
             for i, a in enumerate(sides)]
    longest = max(a.seconds for a in sides)
    with drawing(ax, (9.0, 1.2 + 0.75 * len(rows))) as out:
        given, ax = ax, out
        for i, (_, parts, gid) in enumerate(rows):
            _bar(ax, len(rows) - 1 - i, parts, longest or 1.0, gid)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([label for label, _, _ in reversed(rows)])
        _time_axis(ax, longest, 1.15, given)
        _legend(ax, [p for _, parts, _ in rows for p in parts], given)
        if longest <= 0:
            ax.text(0.5, 0.5, "the trace predicts no device time (views only)",
                    transform=ax.transAxes, ha="center", va="center")
        title = f"{model_name(src)}: where the step time goes"
        if dst is not None:
            title += f" ({src.device.name} -> {dst.device.name}: " \
                     f"{src.seconds / dst.seconds if dst.seconds else float('inf'):.2f}x)"
        ax.set_title(title, loc="left")
    return ax


def _time_axis(ax: Axes, longest: float, room: float, given: Axes | None) -> None:
    """The x axis in milliseconds, ``room`` times the longest bar in the chart's own figure
    (:data:`ROOM` in a caller's panel, for the legend), no top or right spine."""
    ax.set_xlim(0, longest * 1e3 * (room if given is None else ROOM) if longest else 1.0)
    ax.set_xlabel("predicted step time (ms)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def compare_devices(trace: Trace, devices: Sequence[str | DeviceSpec], ax: Axes | None = None,
                    **options: Any) -> Axes:
    """Predicted step time of ``trace`` on each device, split by bound, fastest on top.

    Parameters
    ----------
    trace : Trace
    devices : sequence of str or DeviceSpec
        Registry names or specs; the speedups printed are over the first one.
    options
        Those of :func:`roofline.analyze`.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> ax = roofline.plot.compare_devices(t, ["a100", "h100", "mi300x"])
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"compare_devices() takes a Trace, got {type(trace).__name__}")
    if isinstance(devices, (str, DeviceSpec)) or not len(devices):
        raise ValueError("compare_devices(): give a list of devices, e.g. "
                         "['a100', 'h100', 'mi300x']")
    results = [analyze(trace, d, **options) for d in devices]
    require_ops(results[0], "compare_devices")
    base = results[0]
    order = sorted(results, key=lambda a: -a.seconds)  # barh draws from the bottom up
    longest = order[0].seconds
    # a device that lists no compute rate for some FLOPs (fp32 on a TPU) costs them by bytes
    # and overhead only: its time is a lower bound, and its rank may be too good. Its bar
    # stays, hatched and said so, rather than silently ranked or silently dropped.
    uncosted = {id(a) for a in results if a.unrated_flops_share > 0}
    with drawing(ax, (8.5, 1.0 + 0.5 * len(order))) as out:
        given, ax = ax, out
        for row, a in enumerate(order):
            _device_bar(ax, row, a, base, longest, id(a) in uncosted)
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([a.device.name + (" *" if id(a) in uncosted else "")
                            for a in order])
        ax.set_ylim(-0.7, len(order) - 0.45)  # room for the lowest bar's speedup note
        _time_axis(ax, longest, 1.25, given)
        from matplotlib.patches import Patch

        extra = [Patch(facecolor="white", edgecolor="#555555", hatch="//",
                       label="* FLOPs not costed")] if uncosted else []
        _legend(ax, [p for a in order for p in _bounds(a)], given, extra)
        title = f"{model_name(base)}: predicted step time per device, split by bound"
        if uncosted:
            title += ("\n* hatched: the device lists no compute rate for some of the step's "
                      "FLOPs; its time is a lower bound, not a ranking")
        ax.set_title(title, loc="left")
    return ax


def _device_bar(ax: Axes, row: int, a: Analysis, base: Analysis, longest: float,
                uncosted: bool) -> None:
    """One device's bar by bound (hatched when some FLOPs are not costed), with its speedup
    over ``base`` under it."""
    _bar(ax, row, _bounds(a), longest or 1.0, f"device:{a.device.name}",
         "//" if uncosted else None)
    speed = base.seconds / a.seconds if a.seconds else float("inf")
    note = f"  {speed:.2f}x vs {base.device.name}"
    if uncosted:
        note += (f"; {a.unrated_flops_share:.0%} of the FLOPs not costed (no "
                 "compute rate listed): a lower bound")
    # under the bar, from its end; right-aligned to it when the bar is long
    right = a.seconds > 0.6 * longest
    ax.text(a.seconds * 1e3, row - 0.42, note.strip() if right else note,
            ha="right" if right else "left", va="center", fontsize=7,
            color="#555555", clip_on=True)
