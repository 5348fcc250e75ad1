"""The roofline chart: every op of a step at (FLOP/byte, attained FLOP/s) under the roofs.

Coordinates (the classic roofline, Williams, Waterman and Patterson, CACM 2009)::

    x = intensity = flops / bytes                       FLOP/byte
    y = attained  = flops / predicted seconds            FLOP/s

A compute-bound op sits on its engine's roof (``peak``; lower when a small GEMM cannot
fill the chip), a memory-bound one on the bandwidth slope ``y = bandwidth * x``, and an
overhead-bound one *below* both: its time is ``kernels x launch_overhead_seconds``, so it
attains ``flops / (kernels x L)`` whatever the roofs are. The overhead floor drawn is that
level for the median overhead-bound op (FLOPs per kernel / L); every grey point is on its
own floor, F / L, and gains nothing from more FLOP/s or bandwidth.

Ops with no FLOPs (copies, views, allocations) have no place on a FLOP/s axis (x and y are
both 0); the chart says how much of the step they hold instead of dropping it silently.
"""

from __future__ import annotations

import math
import textwrap
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline._si import si
from roofline.analysis import Analysis, Comparison
from roofline.analysis.rates import dtype_key
from roofline.analysis.timing import ALWAYS_SHOWN, ROOFS
from roofline.analysis.validate import check_same_ops
from roofline.hardware import DeviceSpec, get_device
from roofline.hardware.engines import Engine
from roofline.presentation.explain import CATEGORY_WORDS, MIN_SHARE
from roofline.presentation.groups import grouped
from roofline.presentation.plots._style import (
    BOUND_COLORS,
    analyses,
    drawing,
    inside,
    legend_spot,
    model_name,
    ms,
    plural,
    renderer,
    require_ops,
    settle,
    text_box,
)
from roofline.tracing.records import MATRIX_CATEGORIES

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from roofline.tracing.measure import Measurement

#: Marker area (points^2) of the op holding the most time; the others scale with time.
MAX_AREA = 420.0
MIN_AREA = 6.0
#: The view spans at most this many decades left of the lowest ridge point and below the
#: highest roof.
X_SPAN = 4
Y_SPAN = 6
#: Labels avoid covering the markers of this many points with the most time.
MARKERS_AVOIDED = 40
#: Colour of a Comparison's destination roofs.
DST_COLOR = "#7B3294"
# Axes -> scatter gid -> the roofline_data rows of its points, in drawing order
_DRAWN: weakref.WeakKeyDictionary[Any, dict[str, list[int]]] = weakref.WeakKeyDictionary()


def drawn_points(ax: Axes) -> dict[str, list[int]]:
    """The rows of :func:`roofline_data` each point collection of a roofline chart drew,
    by its gid (``"points"``, ``"points:unrated"``, ``"points:clipped"``,
    ``"points:dst"``), in drawing order: what an interactive page hangs tooltips on."""
    return dict(_DRAWN.get(ax, {}))


# --------------------------------------------------------------------------- data

def _attained(flops: float, seconds: float) -> float:
    return flops / seconds if seconds > 0 else 0.0


def roofline_data(analysis_or_comparison: Analysis | Comparison,
                  group_by: str = "op") -> Any:
    """The points of :func:`roofline_chart` as a pandas DataFrame, largest time first.

    Parameters
    ----------
    analysis_or_comparison : Analysis or Comparison
    group_by : {"op", "module", "category"}
        ``"op"`` merges calls of the same ATen op on the same shapes and dtype; ``"module"``
        merges by module path with repeated identical blocks folded (``GPT.h.*.attn``;
        see :mod:`roofline.presentation.groups`).

    Returns
    -------
    pandas.DataFrame
        One row per group: ``group``, ``label``, ``count`` (op calls), ``flops``, ``bytes``,
        ``intensity`` (FLOP/byte; NaN without bytes), ``engine`` (carrying most FLOPs) and
        ``rated`` (False if some FLOPs had no roof). For an Analysis: ``seconds``,
        ``share`` (of the step), ``attained_flops_per_s`` and ``bound`` (holding most of the
        group's time). For a Comparison the last four come as ``src_*`` and ``dst_*``.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> df = roofline.plot.roofline_data(roofline.analyze(t, "a100"))
    >>> df[["label", "count", "bound"]].to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'label': 'addmm 4096 8192x4096 4096x4096', 'count': 1, 'bound': 'compute'},
     {'label': 't 4096x4096', 'count': 1, 'bound': 'none'}]
    """
    import pandas as pd

    src, dst = analyses(analysis_or_comparison, "roofline_data")
    sides = [("", src)] if dst is None else [("src_", src), ("dst_", dst)]
    groups = {prefix: grouped(a, group_by) for prefix, a in sides}
    rows = []
    for key, g in groups[sides[0][0]].items():
        row: dict[str, Any] = {
            "group": key, "label": g.label, "count": g.count, "flops": g.flops,
            "bytes": g.bytes, "intensity": g.flops / g.bytes if g.bytes else math.nan,
            "engine": g.engine, "rated": g.rated}
        for prefix, a in sides:
            h = groups[prefix][key]
            row[f"{prefix}seconds"] = h.seconds
            row[f"{prefix}share"] = h.seconds / a.seconds if a.seconds else 0.0
            row[f"{prefix}attained_flops_per_s"] = _attained(h.flops, h.seconds)
            row[f"{prefix}bound"] = h.bound
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    first = sides[0][0]
    return df.sort_values(f"{first}seconds", ascending=False, kind="stable").reset_index(
        drop=True)


# --------------------------------------------------------------------------- roofs

@dataclass(frozen=True)
class Roof:
    """One horizontal compute roof (FLOP/s) and the bandwidth slope it meets."""

    label: str
    flops_per_s: float
    bandwidth_bytes_per_s: float
    linestyle: str
    color: str
    engine: Engine | None = None

    @property
    def ridge_point(self) -> float:
        """FLOP/byte where the slope meets the roof."""
        return self.flops_per_s / self.bandwidth_bytes_per_s


_ENGINE_COLORS = {"matrix": "#222222", "vector": "#555555"}


def _engines(a: Analysis) -> list[Engine]:
    """The engines the analysis ran FLOPs on, fastest first; engines of the same peak
    (an MI300X's fp32 matrix and vector units) matrix first, then by dtype, so that the
    order, and the chart, do not follow the set's hash order (``PYTHONHASHSEED``)."""
    used = {e for e in a.engine if e is not None}
    return sorted(used, key=lambda e: (-(a.device.peak_flops_per_s(None, e) or 0.0),
                                       e.kind, e.dtype, e.accumulate))


def roofs(spec: DeviceSpec, engines: list[Engine], linestyle: str = "-",
          tag: str = "", color: str | None = None, analysis: Analysis | None = None,
          ) -> list[Roof]:
    """The roofs of ``spec`` for ``engines`` (engines it has no peak for are skipped): its
    datasheet peaks, or with ``analysis`` the rates that analysis ran them at."""
    out = []
    bandwidth = (analysis.stream_bytes_per_s() if analysis is not None
                 else spec.bandwidth_bytes_per_s)
    for e in engines:
        peak = (analysis.engine_flops_per_s(e) if analysis is not None
                else spec.peak_flops_per_s(None, e))
        if peak:
            out.append(Roof(f"{tag}{e}: {si(peak, 'FLOP/s')}", peak, bandwidth,
                            linestyle, color or _ENGINE_COLORS[e.kind], e))
    return out


def _datasheet(spec: DeviceSpec) -> DeviceSpec | None:
    """The registry's datasheet spec of a calibrated device, when its name resolves."""
    if not spec.measured:
        return None
    try:
        return get_device(spec.name)
    except (LookupError, ValueError):  # UnknownDeviceError, AmbiguousDeviceError
        return None


def _draw_roofs(ax: Axes, rs: list[Roof], x_lo: float, x_hi: float, who: str) -> None:
    """The bandwidth slope up to the highest ridge, each roof from its ridge on, and the
    ridge points (their values are in the legend)."""
    if not rs:
        return
    bw, color, style_ = rs[0].bandwidth_bytes_per_s, rs[0].color, rs[0].linestyle
    top = max(r.ridge_point for r in rs)
    ax.plot([x_lo, top], [bw * x_lo, bw * top], color=color, lw=1.6, ls=style_,
            gid=f"bandwidth:{who}")
    for r in sorted(rs, key=lambda r: -r.flops_per_s):
        ax.plot([r.ridge_point, x_hi], [r.flops_per_s] * 2, color=r.color, lw=1.6,
                ls=r.linestyle, gid=f"roof:{who}:{r.label}")
        ax.plot([r.ridge_point], [r.flops_per_s], "o", ms=4, color=r.color,
                gid=f"ridge:{who}:{r.label}")


def _draw_slope(ax: Axes, bw: float, x_lo: float, x_hi: float, who: str) -> None:
    """The bandwidth slope alone, across the view: a device with no compute roof for the
    trace's FLOPs still bounds every op by its bytes."""
    ax.plot([x_lo, x_hi], [bw * x_lo, bw * x_hi], color="#222222", lw=1.6,
            gid=f"bandwidth:{who}")


# --------------------------------------------------------------------------- labels

# offsets (points) tried in turn: beside the marker, then further out on a leader line
_OFFSETS = [(d * sx, d * sy * 0.8 + (2 if sy > 0 else -2)) for d in (9, 18, 30, 45, 62, 82, 105)
            for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0))]


def _marker_boxes(ax: Axes, xs: np.ndarray, ys: np.ndarray, areas: np.ndarray) -> list[Any]:
    """Pixel boxes of scatter markers at (xs, ys) with ``areas`` (points^2)."""
    from matplotlib.transforms import Bbox

    if not len(xs):
        return []
    centres = ax.transData.transform(np.column_stack([xs, ys]))
    scale = ax.figure.dpi / 72.0
    return [Bbox.from_extents(cx - r, cy - r, cx + r, cy + r)
            for (cx, cy), r in zip(centres, 0.5 * np.sqrt(areas) * scale, strict=True)]


def place_labels(ax: Axes, xs: np.ndarray, ys: np.ndarray, labels: list[str],
                 placed: list[Any], markers: list[Any] | None = None, fontsize: float = 7,
                 color: str = "#111111") -> list[Any]:
    """Greedy label placement: each label at the first offset whose box overlaps no
    earlier label (``placed``), marker box (``markers``; a label may cover its own
    point's) or the axes' edge; a label with no free spot is left out. The labels placed
    are added to ``placed``."""
    rend = renderer(ax)
    boxes = [text_box(t, rend).expanded(1.02, 1.1) for t in placed]
    markers = markers or []
    frame = ax.get_window_extent(rend)
    out = []
    for x, y, label in zip(xs, ys, labels, strict=True):
        (cx, cy), = ax.transData.transform([(x, y)])
        for dx, dy in _OFFSETS:
            far = math.hypot(dx, dy) > 12
            text = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points",
                               ha="left" if dx > 0 else "right", va="center",
                               fontsize=fontsize, color=color, zorder=6, clip_on=True,
                               arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#666666",
                                           "shrinkA": 0, "shrinkB": 3} if far else None,
                               bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                                     "alpha": 0.8})
            box = text_box(text, rend)
            hits = any(box.overlaps(b) for b in boxes) or any(
                box.overlaps(m) and not m.contains(cx, cy) for m in markers)
            if inside(box, frame) and not hits:
                boxes.append(box)
                out.append(text)
                break
            text.remove()
    placed.extend(out)
    return out


def _short(label: str, n: int = 38) -> str:
    return label if len(label) <= n else label[: n - 3] + "..."


# --------------------------------------------------------------------------- chart

def _area(seconds: np.ndarray, biggest: float) -> np.ndarray:
    """Marker area proportional to time (the op with the most time is MAX_AREA)."""
    return np.maximum(MIN_AREA, MAX_AREA * seconds / biggest) if biggest > 0 else \
        np.full(len(seconds), MIN_AREA)


def _notes(a: Analysis, df: Any, on: np.ndarray, prefix: str) -> list[str]:
    """What the chart cannot show, said in its title (ops with no FLOPs are in the strip
    at its left edge)."""
    notes = [_unrated_note(a, df), _matrix_note(a), _overhead_note(df, on, prefix)]
    return [n for n in notes if n is not None]


def _unrated_note(a: Analysis, df: Any) -> str | None:
    """The dtypes the device lists no compute rate for: hollow points."""
    unrated = ~df["rated"].to_numpy(bool)
    if not unrated.any():
        return None
    dtypes = sorted({dtype_key(op.dtype) or op.dtype for op, e in
                     zip(a.trace.ops, a.engine, strict=True) if e is None and op.flops > 0})
    return (f"{a.device.name} lists no compute rate for {'/'.join(dtypes)} ops "
            f"({a.unrated_flops_share:.0%} of the FLOPs, "
            f"{plural(int(df.loc[unrated, 'count'].sum()), 'op call')}): hollow "
            "points, costed by bytes and overhead only (their time a lower bound)")


def _matrix_note(a: Analysis) -> str | None:
    """Matmuls the device rates, none on a matrix engine (unrated ones are said by
    :func:`_unrated_note`): TF32 left off, or no matrix units for their dtypes."""
    matrix_ops = any(op.category in MATRIX_CATEGORIES and op.flops > 0 and e is not None
                     for op, e in zip(a.trace.ops, a.engine, strict=True))
    if not matrix_ops or any(e is not None and e.matrix for e in a.engine):
        return None
    fp32 = {dtype_key(op.dtype) for op, e in zip(a.trace.ops, a.engine, strict=True)
            if op.category in MATRIX_CATEGORIES and e is not None} == {"fp32"}
    if fp32 and a.device.peak_flops_per_s("tf32", "matrix") and not a.options.tf32_matmul:
        return ("fp32 matmuls run on the vector units with TF32 off (PyTorch's "
                f"default; tf32_matmul=True costs them on {a.device.name}'s TF32 "
                "matrix units)")
    return (f"{a.device.name} has no matrix units for these dtypes: matmuls run "
            "on the vector roof")


def _overhead_note(df: Any, on: np.ndarray, prefix: str) -> str | None:
    bounds = set(df.loc[on, f"{prefix}bound"]) if on.any() else set()
    if bounds == {"overhead"}:
        return "every op shown is overhead-bound: more FLOP/s or bandwidth gains nothing"
    return None


def _view_notes(src: Analysis, dst: Analysis | None, df: Any, clipped: np.ndarray,
                ) -> list[str]:
    """What the view leaves out: a destination's uncosted FLOPs, points beyond the view."""
    notes = []
    if dst is not None and dst.unrated_flops_share > 0 and not src.unrated_flops_share:
        notes.append(f"{dst.device.name} lists no compute rate for "
                     f"{dst.unrated_flops_share:.0%} of the FLOPs: its points are costed by "
                     "bytes and overhead only")
    if clipped.any():
        notes.append(f"{plural(int(df.loc[clipped, 'count'].sum()), 'op call')} beyond the "
                     "view, drawn on its edge (triangles)")
    return notes


def _floor(ax: Axes, a: Analysis, x_lo: float, x_hi: float, y_lo: float) -> str | None:
    """The overhead floor of the median overhead-bound op, F/L, with the region below;
    returns its legend label (None: not drawn, when overhead-bound ops hold under
    :data:`MIN_SHARE` of the step or their floor is below the view)."""
    over = [op.flops / op.kernels for op, b in zip(a.trace.ops, a.bound, strict=True)
            if b == "overhead" and op.flops > 0 and op.kernels > 0]
    kernels = np.array([op.kernels for op in a.trace.ops], dtype=float)
    busy = kernels > 0
    # the per-kernel overhead the analysis charged (measured, class default or the spec's)
    latency = float((a.overhead_seconds[busy] / kernels[busy]).max()) if busy.any() else 0.0
    share = a.by_bound().get("overhead", {}).get("fraction", 0.0)
    if not over or not latency or not a.options.overhead or share < MIN_SHARE:
        return None
    per_kernel = float(np.median(over))
    level = per_kernel / latency
    if level <= y_lo:
        return None
    ax.fill_between([x_lo, x_hi], [y_lo] * 2, [level] * 2, color=BOUND_COLORS["overhead"],
                    alpha=0.10, lw=0, zorder=0)
    ax.plot([x_lo, x_hi], [level] * 2, ls=":", lw=1.2, color=BOUND_COLORS["overhead"],
            gid="overhead-floor")
    return (f"overhead floor {si(level, 'FLOP/s')}: {si(per_kernel, 'FLOP')}/kernel over "
            f"{ms(latency)} ({share:.0%} of the step)")


def _shade(ax: Axes, r: Roof, view: _View) -> None:
    """Memory region (under the slope, left of the top ridge) and compute region (right)."""
    ridge, bw = r.ridge_point, r.bandwidth_bytes_per_s
    x_lo, x_hi, y_lo = view.x_data, view.x_hi, view.y_lo
    xs = np.geomspace(x_lo, ridge, 32)
    ax.fill_between(xs, y_lo, bw * xs, color=BOUND_COLORS["memory"], alpha=0.07, lw=0,
                    zorder=0)
    ax.fill_between([ridge, x_hi], y_lo, r.flops_per_s, color=BOUND_COLORS["compute"],
                    alpha=0.07, lw=0, zorder=0)
    for words, x, ha in (("memory-bound region", x_lo * 1.15, "left"),
                         ("compute-bound region", x_hi / 1.15, "right")):
        name = words.split("-")[0]
        ax.annotate(words, (x, y_lo), xytext=(0, 4), textcoords="offset points", ha=ha,
                    va="bottom", fontsize=8, color=BOUND_COLORS[name])


def _clip(values: np.ndarray, lo: float) -> np.ndarray:
    return np.maximum(values, lo)


def roofline_chart(analysis_or_comparison: Analysis | Comparison, ax: Axes | None = None,
                   group_by: str = "op", top: int = 8,
                   measurement: Measurement | None = None) -> Axes:
    """The roofline chart of a step; for a Comparison, both devices and each op's move.

    Parameters
    ----------
    analysis_or_comparison : Analysis or Comparison
        From :func:`roofline.analyze`, or :func:`roofline.compare` / ``what_if`` (the
        destination's roofs dashed, each point's move from source to destination drawn).
    ax : matplotlib Axes, optional
        Drawn into when given; else a new figure.
    group_by : {"op", "module", "category"}
        One point per (ATen op, shapes, dtype), per module (repeated blocks folded) or per
        category. :func:`roofline_data` returns the points as a DataFrame.
    top : int
        Label the ``top`` points with the most predicted time.
    measurement : Measurement, optional
        A :func:`roofline.measure` of the same step on the analysed device: each group's
        measured point (a black diamond) beside its predicted one, joined by a line, the
        largest labelled with the share of its roof it reached (as Nsight Compute shows).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        For an empty trace, an unknown ``group_by``, or a measurement of other ops.
    TypeError
        For anything but an Analysis or a Comparison.

    Notes
    -----
    Roofs, ridge points and the bandwidth slope are named in the legend (no label sits on
    another). Ops with no FLOPs (copies, views, layout transposes) have no place on a
    FLOP/s axis: a strip at the left edge holds them, its height their share of the step
    time, the largest named. FLOPs the device lists no compute rate for are hollow points
    with no roof, their share given in the title.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> ax = roofline.plot.roofline_chart(roofline.analyze(t, "a100"))
    >>> ax.figure.savefig("roofline.png")  # doctest: +SKIP
    >>> ax = roofline.plot.roofline_chart(roofline.compare(t, "a100", "h100"),
    ...                                   group_by="module")
    """
    src, dst = analyses(analysis_or_comparison, "roofline_chart")
    require_ops(src, "roofline_chart")
    if dst is not None and dst.trace is not src.trace:
        raise ValueError("roofline_chart() of compare(eager, compiled, device) would draw two "
                         "steps as one: roofline.plot.compile_chart(comparison) draws them "
                         "side by side")
    if measurement is not None:
        if dst is not None:
            raise ValueError("roofline_chart(measurement=...) draws a measurement beside one "
                             "analysis of the device it was taken on, not a comparison")
        check_same_ops(src, measurement)
    df = roofline_data(analysis_or_comparison, group_by)
    with drawing(ax, (10.5, 6.2)) as out:
        _chart(out, src, dst, df, group_by, top, given=ax, measurement=measurement)
    return out


def _chart(ax: Axes, src: Analysis, dst: Analysis | None, df: Any, group_by: str, top: int,
           given: Axes | None, measurement: Measurement | None = None) -> None:
    """The view, the regions, the roofs, each point's move, the points, the strip of ops
    with no FLOPs, the legend and title, and the labels, in that order (text is placed
    clear of what is drawn)."""
    prefix = "" if dst is None else "src_"
    p = _points(df, dst, prefix)
    ax.set_xscale("log")
    ax.set_yscale("log")
    rs = _roof_sets(src, dst)
    bws = [src.stream_bytes_per_s()] + ([dst.stream_bytes_per_s()]
                                        if dst is not None else [])
    view = _view(p, rs.all, bws, strip=bool((~p.on & (df[f"{prefix}seconds"] > 0)).any()))
    ax.set_xlim(view.x_lo, view.x_hi)
    ax.set_ylim(view.y_lo, view.y_hi)
    seconds = df[f"{prefix}seconds"].to_numpy(float)
    biggest = float(seconds.max()) if len(seconds) else 0.0
    clipped = p.on & ((p.x < view.x_data) | (p.y < view.y_lo))
    notes = _notes(src, df, p.on, prefix) + _view_notes(src, dst, df, clipped)
    if rs.all:
        _shade(ax, max(rs.main or rs.all, key=lambda r: r.flops_per_s), view)
    floor = _floor(ax, src, view.x_data, view.x_hi, view.y_lo)
    _draw_roof_sets(ax, rs.named(src, dst), view, bws, src.device.name)
    area = _area(seconds, biggest)
    # points beyond the view on its edge
    px, py, pd_ = _clip(p.x, view.x_data), _clip(p.y, view.y_lo), _clip(p.y_dst, view.y_lo)
    if dst is not None:
        _draw_moves(ax, df, p.on_dst, px, py, pd_, area, top)
    _draw_points(ax, df, p.on, clipped, px, py, area, prefix)
    _strip(ax, src, df, view, prefix)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attained FLOP/s (op FLOPs / predicted op time)")
    ax.grid(True, which="major", lw=0.4, alpha=0.4)
    measured = (_draw_measured(ax, src, df, p, view, measurement, group_by)
                if measurement is not None else None)
    _legend(ax, biggest, rs, src, dst, floor, given, measured is not None)
    _title(ax, src, dst, notes, group_by)
    settle(ax)  # text is placed in pixels: lay the figure out first
    placed: list[Any] = list(ax.texts)
    shown = p.on & ~clipped
    avoid = _avoided(ax, p, view, area, shown, dst is not None)
    if measured is not None:
        _label_measured(ax, measured, top, placed, avoid)
    _label_points(ax, df, shown, px, py, top, placed, avoid)


@dataclass(frozen=True)
class _Points:
    """Each point's place: ``x`` (FLOP/byte), ``y`` (attained FLOP/s on the source) and
    ``y_dst`` (on the destination; ``y`` again without one); ``on``: it has a place on log
    axes, ``on_dst``: its destination point too."""

    x: np.ndarray
    y: np.ndarray
    y_dst: np.ndarray
    on: np.ndarray
    on_dst: np.ndarray


def _points(df: Any, dst: Analysis | None, prefix: str) -> _Points:
    x = df["intensity"].to_numpy(float)
    y = df[f"{prefix}attained_flops_per_s"].to_numpy(float)
    on = np.isfinite(x) & (x > 0) & (y > 0)
    y_dst = df["dst_attained_flops_per_s"].to_numpy(float) if dst is not None else y
    return _Points(x, y, y_dst, on, on & (y_dst > 0))


@dataclass(frozen=True)
class _RoofSets:
    """The roofs drawn: the source's at the rates it ran at (solid), the destination's
    (dashed), and the datasheet's (dotted) where the source ran below them; ``sheet`` is
    the spec the datasheet roofs are of."""

    main: list[Roof]
    other: list[Roof]
    sheet_roofs: list[Roof]
    sheet: DeviceSpec | None

    @property
    def all(self) -> list[Roof]:
        return self.main + self.other + self.sheet_roofs

    def named(self, src: Analysis, dst: Analysis | None) -> list[tuple[list[Roof], str]]:
        """Each set with whose it is: the source's, the destination's device, "datasheet"."""
        sets = [(self.main, src.device.name)]
        if dst is not None:
            sets.append((self.other, dst.device.name))
        if self.sheet_roofs:
            sets.append((self.sheet_roofs, "datasheet"))
        return sets


def _roof_sets(src: Analysis, dst: Analysis | None) -> _RoofSets:
    """The roofs of the engines either analysis ran FLOPs on (the fp32 vector roof if none)."""
    engines = list(dict.fromkeys(_engines(src) + (_engines(dst) if dst else [])))
    if not engines:  # no op ran FLOPs on an engine: show the device's fp32 vector roof
        engines = [Engine("vector", "fp32")]
    main = roofs(src.device, engines, analysis=src)
    other = (roofs(dst.device, engines, "--", color=DST_COLOR, analysis=dst)
             if dst is not None else [])
    # the datasheet's roofs, dotted, when the analysis ran at other rates
    sheet = _datasheet(src.device) or (src.device if src.options.peaks == "achievable"
                                       else None)
    sheet_roofs = roofs(sheet, engines, ":", "datasheet ", "#8C8C8C") if sheet else []
    # a datasheet roof the analysis reached in full is the solid one already
    ran = {r.engine: r.flops_per_s for r in main}
    sheet_roofs = [r for r in sheet_roofs if not math.isclose(
        ran.get(r.engine, 0.0), r.flops_per_s, rel_tol=5e-3)]
    return _RoofSets(main, other, sheet_roofs, sheet)


@dataclass(frozen=True)
class _View:
    """The axes' limits (FLOP/byte, FLOP/s); ``x_data`` is where the data begins, right of
    the strip of ops with no FLOPs (``x_lo`` itself without one)."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    x_data: float


#: Decades of the x axis the strip of ops with no FLOPs takes, left of the data.
STRIP_DECADES = 0.9


def _view(p: _Points, all_roofs: list[Roof], bws: list[float], strip: bool = False) -> _View:
    """The roofs and the points, but no more than X_SPAN decades left of the lowest ridge
    and Y_SPAN below the highest roof (a stray 1-FLOP op would squeeze the rest into a
    corner); points beyond are drawn on its edge as triangles. With ``strip``, room at the
    left for the ops with no FLOPs."""
    x, y, ys_dst, on, d_on = p.x, p.y, p.y_dst, p.on, p.on_dst
    # with no roof (the device lists no rate for the trace's FLOPs) the points anchor the view
    ridges = [r.ridge_point for r in all_roofs] or [float(max(x[on], default=1.0))]
    peaks = [r.flops_per_s for r in all_roofs] or [
        float(max([*y[on], *ys_dst[d_on]], default=bws[0]))]
    x_data = max(min([*x[on], *ridges]) / 2, min(ridges) / 10 ** X_SPAN)
    x_hi = max([*x[on], *ridges]) * 4
    y_hi = max([*y[on], *ys_dst[d_on], *peaks]) * 3
    y_lo = max(min([*y[on], *ys_dst[d_on], x_data * min(bws)]) / 2,
               max(peaks) / 10 ** Y_SPAN)
    x_lo = x_data / 10 ** STRIP_DECADES if strip else x_data
    return _View(x_lo, x_hi, y_lo, y_hi, x_data)


def _avoided(ax: Axes, p: _Points, view: _View, area: np.ndarray, shown: np.ndarray,
             moves: bool) -> list[Any]:
    """The boxes of the largest markers, which text keeps clear of: on the source and (for
    a comparison's ``moves``, hollow) on the destination."""
    big = np.flatnonzero(shown)[:MARKERS_AVOIDED]
    avoid = _marker_boxes(ax, np.maximum(p.x[big], view.x_data),
                          np.maximum(p.y[big], view.y_lo), area[big])
    if moves:
        big_dst = big[p.on_dst[big]]
        avoid += _marker_boxes(ax, np.maximum(p.x[big_dst], view.x_data),
                               np.maximum(p.y_dst[big_dst], view.y_lo), area[big_dst])
    return avoid


def _draw_roof_sets(ax: Axes, sets: list[tuple[list[Roof], str]], view: _View,
                    bws: list[float], src_name: str) -> None:
    """Every set's lines (a device with no roof its bandwidth slope alone); their values
    are in the legend."""
    for rs, who in sets:
        if rs:
            _draw_roofs(ax, rs, view.x_data, view.x_hi, who)
        elif who != "datasheet":
            _draw_slope(ax, bws[0] if who == src_name else bws[-1], view.x_data, view.x_hi,
                        who)


def _strip(ax: Axes, a: Analysis, df: Any, view: _View, prefix: str) -> None:
    """The ops with no place on the axes (no FLOPs, or no bytes), left of the data: a bar
    whose height is their share of the step time, split by category, the largest named."""
    if view.x_data == view.x_lo or not a.seconds:
        return
    off: dict[str, float] = {}  # category -> seconds
    by_bound: dict[str, dict[str, float]] = {}  # category -> bound -> seconds
    for op, s, b in zip(a.trace.ops, a.op_seconds, a.bound, strict=True):
        if s > 0 and (op.flops <= 0 or op.bytes <= 0):
            key = str(op.category)
            off[key] = off.get(key, 0.0) + float(s)
            bounds = by_bound.setdefault(key, {})
            bounds[b] = bounds.get(b, 0.0) + float(s)
    bound = {k: max(v, key=v.__getitem__) for k, v in by_bound.items()}
    total = sum(off.values()) / a.seconds
    if not off:
        return
    left, right = view.x_lo * 10 ** (0.12 * STRIP_DECADES), view.x_data / 10 ** (
        0.12 * STRIP_DECADES)
    band = ax.get_xaxis_transform()  # x in data, y in axes fraction
    ax.axvspan(view.x_lo, view.x_data, color="#F2F2F2", zorder=0, lw=0)
    bottom = 0.0
    for key, s in sorted(off.items(), key=lambda kv: -kv[1]):
        height = s / a.seconds
        ax.fill_between([left, right], bottom, bottom + height, transform=band,
                        color=BOUND_COLORS.get(bound[key], "#999999"), alpha=0.75,
                        lw=0.5, edgecolor="white", zorder=3, gid=f"strip:{key}")
        if height >= 0.04:
            words = textwrap.fill(CATEGORY_WORDS.get(key, key), 8, break_long_words=False)
            ax.text(math.sqrt(left * right), bottom + height / 2, f"{words}\n{height:.0%}",
                    transform=band, ha="center", va="center", fontsize=6, color="white",
                    zorder=4, linespacing=1.0)
        bottom += height
    ax.text(math.sqrt(view.x_lo * view.x_data), min(bottom, 0.93) + 0.01,
            f"no FLOPs:\n{total:.0%} of\nthe step", transform=band, ha="center",
            va="bottom", fontsize=7, color="#444444", zorder=4)


@dataclass(frozen=True)
class _Measured:
    """Each group's measured point: x, attained FLOP/s and the share of its roof."""

    x: np.ndarray
    y: np.ndarray
    share: np.ndarray
    on: np.ndarray


def _draw_measured(ax: Axes, a: Analysis, df: Any, p: _Points, view: _View,
                   m: Measurement, group_by: str) -> _Measured:
    """Measured points (black diamonds) joined to the predicted ones."""
    from matplotlib.collections import LineCollection

    groups = grouped(a, group_by)
    measured = np.array([np.nansum(m.op_seconds[groups[k].ops]) for k in df["group"]])
    flops = df["flops"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(measured > 0, flops / measured, 0.0)
    bw = a.stream_bytes_per_s()
    rates = np.array([a.engine_flops_per_s(_engine_of(e)) or 0.0 if e else 0.0
                      for e in df["engine"]])
    roof = np.where(rates > 0, np.minimum(rates, bw * p.x), bw * p.x)
    on = p.on & (y > 0) & (p.x >= view.x_data) & (y >= view.y_lo)
    ax.add_collection(LineCollection(
        [[(p.x[i], p.y[i]), (p.x[i], y[i])] for i in np.flatnonzero(on)], colors="#111111",
        linewidths=0.6, alpha=0.5, linestyles=":", zorder=4))
    ax.scatter(p.x[on], y[on], marker="D", s=18, facecolors="#111111", edgecolors="white",
               linewidths=0.4, zorder=5, gid="points:measured")
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(roof > 0, y / roof, np.nan)
    return _Measured(p.x, y, share, on)


def _engine_of(label: str) -> Engine:
    """The Engine of its ``str()`` (``"matrix bf16"``, ``"matrix fp16 (fp16 accumulate)"``)."""
    kind, dtype, *rest = label.split(" ")
    return Engine(kind, dtype, "fp16" if rest else "fp32")  # type: ignore[arg-type]


def _label_measured(ax: Axes, m: _Measured, top: int, placed: list[Any],
                    avoid: list[Any]) -> None:
    """The share of its roof each of the ``top`` measured points reached."""
    order = np.flatnonzero(m.on)[:max(top, 0)]
    labels = [f"{m.share[i]:.0%} of roof" for i in order]
    place_labels(ax, m.x[order], m.y[order], labels, placed, avoid, fontsize=6.5,
                 color="#111111")


def _draw_moves(ax: Axes, df: Any, on_dst: np.ndarray, px: np.ndarray, py: np.ndarray,
                pd_: np.ndarray, area: np.ndarray, top: int) -> None:
    """Each point's move: a line from source to destination, the destination hollow, and
    arrow heads on the ``top`` largest moves."""
    from matplotlib.collections import LineCollection

    segs = [[(px[i], py[i]), (px[i], pd_[i])] for i in np.flatnonzero(on_dst)]
    ax.add_collection(LineCollection(segs, colors="#555555", linewidths=0.7,
                                     alpha=0.5, zorder=2))
    dst_colors = np.array([BOUND_COLORS[b] for b in df["dst_bound"]], dtype=object)
    ax.scatter(px[on_dst], pd_[on_dst], s=area[on_dst], facecolors="none",
               edgecolors=list(dst_colors[on_dst]), linewidths=1.0, zorder=3,
               gid="points:dst")
    _DRAWN.setdefault(ax, {})["points:dst"] = [int(i) for i in np.flatnonzero(on_dst)]
    for i in np.flatnonzero(on_dst)[:top]:  # arrow heads on the largest moves
        if abs(math.log(pd_[i] / py[i])) > 0.05:
            ax.annotate("", (px[i], pd_[i]), (px[i], py[i]), zorder=3,
                        arrowprops={"arrowstyle": "-|>", "lw": 0.9,
                                    "color": "#333333", "shrinkA": 0, "shrinkB": 0})


def _draw_points(ax: Axes, df: Any, on: np.ndarray, clipped: np.ndarray, px: np.ndarray,
                 py: np.ndarray, area: np.ndarray, prefix: str) -> None:
    """The points coloured by bound: filled, hollow where some FLOPs have no rate, and
    triangles on the view's edge for those beyond it."""
    bounds = df[f"{prefix}bound"].to_numpy(object)
    rated = df["rated"].to_numpy(bool)
    colors = np.array([BOUND_COLORS[b] for b in bounds], dtype=object)
    for mask, gid, hollow in ((on & rated & ~clipped, "points", False),
                              (on & ~rated & ~clipped, "points:unrated", True),
                              (clipped, "points:clipped", False)):
        if not mask.any():
            continue
        kw: dict[str, Any] = ({"facecolors": "none", "edgecolors": list(colors[mask]),
                               "linewidths": 1.2} if hollow else
                              {"c": list(colors[mask]), "edgecolors": "white",
                               "linewidths": 0.4, "alpha": 0.75})
        ax.scatter(px[mask], py[mask], s=area[mask], zorder=4, gid=gid,
                   marker="<" if gid == "points:clipped" else "o", **kw)
        _DRAWN.setdefault(ax, {})[gid] = [int(i) for i in np.flatnonzero(mask)]


def _label_points(ax: Axes, df: Any, shown: np.ndarray, px: np.ndarray, py: np.ndarray,
                  top: int, placed: list[Any], avoid: list[Any]) -> None:
    """Labels on the ``top`` points shown with the most time (``df`` is sorted by time,
    largest first)."""
    order = np.flatnonzero(shown)[:max(top, 0)]
    labels = [_short(f"{df['label'][i]}" + (f" x{df['count'][i]}" if df["count"][i] > 1
                                             else "")) for i in order]
    place_labels(ax, px[order], py[order], labels, placed, avoid)


def _legend(ax: Axes, biggest: float, rs: _RoofSets, src: Analysis, dst: Analysis | None,
            floor: str | None, given: Axes | None, measured: bool) -> None:
    """Bounds, sizes, and every line on the chart with its value: each device's roofs
    (engine, rate, ridge point) and bandwidth slope, the datasheet's, the overhead floor."""
    from matplotlib.lines import Line2D

    present = set(src.bound) | (set(dst.bound) if dst is not None else set())
    handles = [Line2D([], [], ls="", marker="o", ms=7, color=BOUND_COLORS[b], label=f"{b}-bound")
               for b in ROOFS if b in ALWAYS_SHOWN or b in present]
    if biggest > 0:  # size legend: marker areas of three times
        for share in (1.0, 0.1, 0.01):
            area = max(MIN_AREA, MAX_AREA * share)
            handles.append(Line2D([], [], ls="", marker="o", ms=math.sqrt(area),
                                  color="#BBBBBB", label=f"{ms(biggest * share)}"))
    if measured:
        handles.append(Line2D([], [], ls="", marker="D", ms=5, color="#111111",
                              label="measured (share of its roof)"))
    for roofs_, who in rs.named(src, dst):
        handles += _roof_handles(roofs_, who, src, dst)
    if floor is not None:
        handles.append(Line2D([], [], ls=":", color=BOUND_COLORS["overhead"], label=floor))
    if dst is not None:
        handles += [Line2D([], [], ls="-", marker="o", ms=6, mfc="#777777", color="#777777",
                           label="op on source"),
                    Line2D([], [], ls="", marker="o", ms=6, mfc="none", color="#777777",
                           label="same op on destination")]
    if given is None:  # a figure of its own: beside the axes, spaced for the size markers
        ax.legend(handles=handles, frameon=False, title="bound / time / roofs",
                  labelspacing=0.9, fontsize=8, **legend_spot(ax, given))
    else:  # a caller's panel: inside it, compact, where the fewest points are
        ax.legend(handles=handles, fontsize=6, labelspacing=0.4, ncols=2,
                  **legend_spot(ax, given))


def _roof_handles(rs: list[Roof], who: str, src: Analysis, dst: Analysis | None) -> list[Any]:
    """Legend entries of one device's lines: a heading, then each roof and the slope."""
    from matplotlib.lines import Line2D

    if not rs:
        return []
    analysis = src if who == src.device.name else dst
    measured = " (measured)" if analysis is not None and analysis.device.measured and \
        "measured" not in who else ""
    heading = "datasheet" if who == "datasheet" else f"{who}{measured}"
    out = [Line2D([], [], ls="", label=heading)]
    for r in sorted(rs, key=lambda r: -r.flops_per_s):
        engine = str(r.engine) if r.engine is not None else r.label
        out.append(Line2D([], [], ls=r.linestyle, color=r.color, marker="o", ms=3,
                          label=f"  {engine}: {si(r.flops_per_s, 'FLOP/s')}, ridge "
                                f"{r.ridge_point:.3g} FLOP/B"))
    out.append(Line2D([], [], ls=rs[0].linestyle, color=rs[0].color,
                      label=f"  memory: {si(rs[0].bandwidth_bytes_per_s, 'B/s')}"))
    return out


def _title(ax: Axes, src: Analysis, dst: Analysis | None, notes: list[str],
           group_by: str) -> None:
    shares = ", ".join(f"{b} {v['fraction']:.0%}" for b, v in src.by_bound().items()
                       if v["seconds"])
    if dst is None and not src.seconds:
        head = f"{model_name(src)} on {src.device.name}: no predicted time (views only)"
    elif dst is None:
        head = f"{model_name(src)} on {src.device.name}: {ms(src.seconds)} per step ({shares})"
    else:
        speedup = src.seconds / dst.seconds if dst.seconds else math.inf
        head = (f"{model_name(src)}: {src.device.name} -> {dst.device.name}, "
                f"{ms(src.seconds)} -> {ms(dst.seconds)} ({speedup:.2f}x)")
    lines = [head, f"one point per {group_by}, area ~ predicted time", *notes]
    # wrapped to the axes' width (a caller's grid panel is narrow): ~0.55 em per character
    fig = ax.get_figure(root=True)
    width_in = ax.get_position().width * (fig.get_figwidth() if fig is not None else 9.0)
    chars = max(40, int(width_in * 72 / (9 * 0.55)))
    ax.set_title("\n".join(textwrap.fill(line, chars, subsequent_indent="  ")
                           for line in lines), fontsize=9, loc="left")
