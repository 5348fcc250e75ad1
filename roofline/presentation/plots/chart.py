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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline._si import si
from roofline.analysis import Analysis, Comparison
from roofline.analysis.rates import dtype_key
from roofline.analysis.timing import ROOFS
from roofline.hardware import DeviceSpec, get_device
from roofline.hardware.engines import Engine
from roofline.presentation.groups import grouped
from roofline.presentation.plots._style import (
    BOUND_COLORS,
    analyses,
    covers,
    drawing,
    inside,
    legend_spot,
    line_pixels,
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
    ridge points (labelled by :func:`_label_roofs` once every line is drawn)."""
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


def _roof_lines(ax: Axes) -> list[Any]:
    """The drawn slopes, roofs and overhead floor: what a roof label must not sit on."""
    return [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(
        ("bandwidth:", "roof:", "overhead-floor"))]


def _label_roofs(ax: Axes, rs: list[Roof], x_hi: float, placed: list[Any],
                 avoid: list[Any], who: str) -> None:
    """A label per roof, ridge and slope, clear of earlier labels (kept in ``placed``), of
    the ``avoid`` markers and of every roof line of every device on the chart."""
    lines = _roof_lines(ax)
    near = line_pixels(ax, lines)
    for r in sorted(rs, key=lambda r: -r.flops_per_s):
        # right end of the roof; else above the roofline left of the ridge, where no op can
        # be (compute-bound ops sit on the roof itself); else anywhere along the roof
        spots = [(x_hi / 1.15, r.flops_per_s, 0, 2, "right")]
        spots += [(r.ridge_point, r.flops_per_s, -8, dy, "right") for dy in (11, 3, 19, 27)]
        spots += [(x, r.flops_per_s, 0, dy, ha) for x, ha in
                  ((x_hi / 1.15, "right"), (r.ridge_point * 1.2, "left"),
                   (math.sqrt(r.ridge_point * x_hi), "center"))
                  for dy in (-3, 9, -10, 16)]
        _place(ax, r.label, spots, placed, avoid, near, fontsize=7.5, color=r.color)
        # the ridge's value up and left of its dot: above the roofline, where no op can be
        spots = [(r.ridge_point, r.flops_per_s, dx, dy, "right") for dx, dy in
                 ((-4, 3), (-4, 11), (-14, 3), (-4, 19), (-24, 3), (-14, 19), (-4, 27))]
        _place(ax, f"ridge {r.ridge_point:.3g} FLOP/B", spots, placed, avoid, near,
               required=False, fontsize=7, color=r.color)
    # the slope's label runs along it, at its on-screen angle (its box, upright, holds the
    # slope itself: only the other lines count)
    slope = [ln for ln in lines if ln.get_gid() == f"bandwidth:{who}"]
    if not slope:
        return
    (x0, x1), (y0, y1) = slope[0].get_xdata(), slope[0].get_ydata()
    bw = y0 / x0
    spots = []
    # on the slope, else a little above it, clear of its points; the datasheet's slope
    # (beside the achievable one) also below, and left out where there is no room
    for dy in (3, 12) if who != "datasheet" else (3, 12, -10, -18):
        for frac in (0.55, 0.4, 0.7, 0.25, 0.85):
            x = x0 * (x1 / x0) ** frac
            spots.append((x, bw * x, 0, dy, "center"))
    (p0, q0), (p1, q1) = ax.transData.transform([(x0, y0), (x1, y1)])
    angle = math.degrees(math.atan2(q1 - q0, p1 - p0))
    color = slope[0].get_color()
    _place(ax, f"{'datasheet ' if who == 'datasheet' else ''}memory {si(bw, 'B/s')}", spots,
           placed, avoid, line_pixels(ax, [ln for ln in lines if ln is not slope[0]]),
           required=who != "datasheet", fontsize=7.5, color=color, rotation=angle,
           rotation_mode="anchor")


def _place(ax: Axes, text: str, spots: Sequence[tuple[float, float, float, float, str]],
           placed: list[Any], avoid: list[Any], lines: Any = (), required: bool = True,
           **kw: Any) -> Any:
    """``text`` at the first (x, y, dx, dy points, ha) spot inside the axes and clear of
    ``placed`` text, ``avoid`` markers and ``lines`` (pixel points along drawn lines); else
    the first clear of text only; else, if ``required``, the first spot (a roof keeps its
    label), and if not, no label (None)."""
    rend = renderer(ax)
    texts = [text_box(t, rend) for t in placed]
    frame = ax.get_window_extent(rend)

    def draw(spot: tuple[float, float, float, float, str]) -> Any:
        x, y, dx, dy, ha = spot
        return ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha,
                           va="bottom" if dy > 0 else "top", zorder=5, clip_on=True, **kw)

    fallback, clear = spots[0], False
    for spot in spots:
        artist = draw(spot)
        box = text_box(artist, rend)
        artist.remove()
        box = box.padded(2)  # a little air between neighbouring labels
        if not inside(box, frame) or any(box.overlaps(b) for b in texts):
            continue
        if not any(box.overlaps(b) for b in avoid) and not covers(box, np.asarray(lines)):
            fallback, clear = spot, True
            break
        if not clear:  # clear of text, over a marker or a line: second best
            fallback, clear = spot, True
    if not clear and not required:
        return None
    artist = draw(fallback)
    placed.append(artist)
    return artist


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
                 placed: list[Any], markers: list[Any] | None = None) -> list[Any]:
    """Greedy label placement: each label at the first offset whose box overlaps no
    earlier label, roof label, marker box (``markers``; a label may cover its own point's)
    or the axes' edge; a label with no free spot is left out."""
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
                               ha="left" if dx > 0 else "right", va="center", fontsize=7,
                               color="#111111", zorder=6, clip_on=True,
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
    return out


def _short(label: str, n: int = 38) -> str:
    return label if len(label) <= n else label[: n - 3] + "..."


# --------------------------------------------------------------------------- chart

def _area(seconds: np.ndarray, biggest: float) -> np.ndarray:
    """Marker area proportional to time (the op with the most time is MAX_AREA)."""
    return np.maximum(MIN_AREA, MAX_AREA * seconds / biggest) if biggest > 0 else \
        np.full(len(seconds), MIN_AREA)


def _notes(a: Analysis, df: Any, on: np.ndarray, prefix: str) -> list[str]:
    """What the chart cannot show, said in its title."""
    notes = [_off_note(a, df, on, prefix), _unrated_note(a, df), _matrix_note(a),
             _overhead_note(df, on, prefix)]
    return [n for n in notes if n is not None]


def _off_note(a: Analysis, df: Any, on: np.ndarray, prefix: str) -> str | None:
    """The op calls with no place on log axes (no FLOPs or no bytes), and their time."""
    off = ~on
    if not off.any():
        return None
    share = float(df.loc[off, f"{prefix}seconds"].sum() / a.seconds) if a.seconds else 0.0
    return (f"not on the chart: {plural(int(df.loc[off, 'count'].sum()), 'op call')} "
            f"with no FLOPs or bytes (copies, views), {share:.0%} of the step")


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


def _floor(ax: Axes, a: Analysis, x_lo: float, x_hi: float, y_lo: float,
           placed: list[Any], avoid: list[Any]) -> None:
    """The overhead floor of the median overhead-bound op, F/L, with the region below."""
    over = [op.flops / op.kernels for op, b in zip(a.trace.ops, a.bound, strict=True)
            if b == "overhead" and op.flops > 0 and op.kernels > 0]
    # no op with FLOPs is overhead-bound: no floor to draw (its level would be no op's)
    kernels = np.array([op.kernels for op in a.trace.ops], dtype=float)
    busy = kernels > 0
    # the per-kernel overhead the analysis charged (measured, class default or the spec's)
    latency = float((a.overhead_seconds[busy] / kernels[busy]).max()) if busy.any() else 0.0
    if not over or not latency or not a.options.overhead:
        return
    per_kernel = float(np.median(over))
    level = per_kernel / latency
    if level <= y_lo:
        return
    ax.fill_between([x_lo, x_hi], [y_lo] * 2, [level] * 2, color=BOUND_COLORS["overhead"],
                    alpha=0.10, lw=0, zorder=0)
    ax.plot([x_lo, x_hi], [level] * 2, ls=":", lw=1.2, color=BOUND_COLORS["overhead"],
            gid="overhead-floor")
    share = a.by_bound().get("overhead", {}).get("fraction", 0.0)
    text = (f"overhead floor: {si(per_kernel, 'FLOP')} per kernel / {ms(latency)} launch = "
            f"{si(level, 'FLOP/s')}\n(median of {plural(len(over), 'overhead-bound op')}, "
            f"{share:.0%} of the step)")
    spots = [(x_hi / 1.1, level, 0, -3, "right"), (x_lo * 1.1, level, 0, -3, "left"),
             (x_hi / 1.1, level, 0, 2, "right"), (x_lo * 1.1, level, 0, 2, "left")]
    _place(ax, text, spots, placed, avoid, fontsize=7, color="#444444")


def _shade(ax: Axes, r: Roof, x_lo: float, x_hi: float, y_lo: float,
           placed: list[Any]) -> None:
    """Memory region (under the slope, left of the top ridge) and compute region (right)."""
    ridge, bw = r.ridge_point, r.bandwidth_bytes_per_s
    xs = np.geomspace(x_lo, ridge, 32)
    ax.fill_between(xs, y_lo, bw * xs, color=BOUND_COLORS["memory"], alpha=0.07, lw=0,
                    zorder=0)
    ax.fill_between([ridge, x_hi], y_lo, r.flops_per_s, color=BOUND_COLORS["compute"],
                    alpha=0.07, lw=0, zorder=0)
    for words, x, ha in (("memory-bound region", x_lo * 1.15, "left"),
                         ("compute-bound region", x_hi / 1.15, "right")):
        name = words.split("-")[0]
        placed.append(ax.annotate(words, (x, y_lo), xytext=(0, 4), textcoords="offset points",
                                  ha=ha, va="bottom", fontsize=8, color=BOUND_COLORS[name]))


def _clip(values: np.ndarray, lo: float) -> np.ndarray:
    return np.maximum(values, lo)


def roofline_chart(analysis_or_comparison: Analysis | Comparison, ax: Axes | None = None,
                   group_by: str = "op", top: int = 8) -> Axes:
    """The roofline chart of a step; for a Comparison, both devices and each op's move.

    Parameters
    ----------
    analysis_or_comparison : Analysis or Comparison
        From :func:`roofline.analyze`, or :func:`roofline.compare` / ``what_if`` (the
        destination's roofs dashed, each point's move from source to destination drawn).
    ax : matplotlib Axes, optional
        Drawn into when given; else a new figure.
    group_by : {"op", "module", "category"}
        One point per (ATen op, shapes, dtype), per module (layer indices folded) or per
        category. :func:`roofline_data` returns the points as a DataFrame.
    top : int
        Label the ``top`` points with the most predicted time.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        For an empty trace or an unknown ``group_by``.
    TypeError
        For anything but an Analysis or a Comparison.

    Notes
    -----
    What the chart cannot show is said in its title, not raised: ops with no FLOPs, FLOPs
    the device lists no compute rate for (an fp32 step on a TPU: the bandwidth slope and
    the points are drawn, hollow, with no roof; their share of the FLOPs is given), a
    device without matrix units, a step that is all overhead.
    """
    src, dst = analyses(analysis_or_comparison, "roofline_chart")
    require_ops(src, "roofline_chart")
    df = roofline_data(analysis_or_comparison, group_by)
    with drawing(ax, (9.5, 6.0)) as out:
        _chart(out, src, dst, df, group_by, top, given=ax)
    return out


def _chart(ax: Axes, src: Analysis, dst: Analysis | None, df: Any, group_by: str, top: int,
           given: Axes | None) -> None:
    """The view, the legend and title, the regions, the roofs, each point's move, the
    points and their labels, in that order (text is placed clear of what is drawn)."""
    prefix = "" if dst is None else "src_"
    p = _points(df, dst, prefix)
    ax.set_xscale("log")
    ax.set_yscale("log")
    rs = _roof_sets(src, dst)
    bws = [src.stream_bytes_per_s()] + ([dst.stream_bytes_per_s()]
                                        if dst is not None else [])
    view = _view(p, rs.all, bws)
    ax.set_xlim(view.x_lo, view.x_hi)
    ax.set_ylim(view.y_lo, view.y_hi)
    seconds = df[f"{prefix}seconds"].to_numpy(float)
    biggest = float(seconds.max()) if len(seconds) else 0.0
    clipped = p.on & ((p.x < view.x_lo) | (p.y < view.y_lo))
    notes = _notes(src, df, p.on, prefix) + _view_notes(src, dst, df, clipped)
    _legend(ax, biggest, src, dst, rs.sheet if rs.sheet_roofs else None, given)
    _title(ax, src, dst, notes, group_by)
    settle(ax)  # text is placed in pixels: lay the figure out first
    placed: list[Any] = []
    area = _area(seconds, biggest)
    shown = p.on & ~clipped
    avoid = _avoided(ax, p, view, area, shown, dst is not None)
    if rs.all:
        _shade(ax, max(rs.main or rs.all, key=lambda r: r.flops_per_s), view.x_lo,
               view.x_hi, view.y_lo, placed)
    _floor(ax, src, view.x_lo, view.x_hi, view.y_lo, placed, avoid)
    _draw_roof_sets(ax, rs.named(src, dst), view, bws, src.device.name, placed, avoid)
    # points beyond the view on its edge
    px, py, pd_ = _clip(p.x, view.x_lo), _clip(p.y, view.y_lo), _clip(p.y_dst, view.y_lo)
    if dst is not None:
        _draw_moves(ax, df, p.on_dst, px, py, pd_, area, top)
    _draw_points(ax, df, p.on, clipped, px, py, area, prefix)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attained FLOP/s (op FLOPs / predicted op time)")
    ax.grid(True, which="major", lw=0.4, alpha=0.4)
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
    """The axes' limits (FLOP/byte, FLOP/s)."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float


def _view(p: _Points, all_roofs: list[Roof], bws: list[float]) -> _View:
    """The roofs and the points, but no more than X_SPAN decades left of the lowest ridge
    and Y_SPAN below the highest roof (a stray 1-FLOP op would squeeze the rest into a
    corner); points beyond are drawn on its edge as triangles."""
    x, y, ys_dst, on, d_on = p.x, p.y, p.y_dst, p.on, p.on_dst
    # with no roof (the device lists no rate for the trace's FLOPs) the points anchor the view
    ridges = [r.ridge_point for r in all_roofs] or [float(max(x[on], default=1.0))]
    peaks = [r.flops_per_s for r in all_roofs] or [
        float(max([*y[on], *ys_dst[d_on]], default=bws[0]))]
    x_lo = max(min([*x[on], *ridges]) / 2, min(ridges) / 10 ** X_SPAN)
    x_hi = max([*x[on], *ridges]) * 12  # room right of the top ridge for roof labels
    y_hi = max([*y[on], *ys_dst[d_on], *peaks]) * 3
    y_lo = max(min([*y[on], *ys_dst[d_on], x_lo * min(bws)]) / 2, max(peaks) / 10 ** Y_SPAN)
    return _View(x_lo, x_hi, y_lo, y_hi)


def _avoided(ax: Axes, p: _Points, view: _View, area: np.ndarray, shown: np.ndarray,
             moves: bool) -> list[Any]:
    """The boxes of the largest markers, which text keeps clear of: on the source and (for
    a comparison's ``moves``, hollow) on the destination."""
    big = np.flatnonzero(shown)[:MARKERS_AVOIDED]
    avoid = _marker_boxes(ax, np.maximum(p.x[big], view.x_lo), np.maximum(p.y[big], view.y_lo),
                          area[big])
    if moves:
        big_dst = big[p.on_dst[big]]
        avoid += _marker_boxes(ax, np.maximum(p.x[big_dst], view.x_lo),
                               np.maximum(p.y_dst[big_dst], view.y_lo), area[big_dst])
    return avoid


def _draw_roof_sets(ax: Axes, sets: list[tuple[list[Roof], str]], view: _View,
                    bws: list[float], src_name: str, placed: list[Any],
                    avoid: list[Any]) -> None:
    """Every set's lines (a device with no roof its bandwidth slope alone), then every
    label: each label then keeps clear of all of the lines."""
    for rs, who in sets:
        if rs:
            _draw_roofs(ax, rs, view.x_lo, view.x_hi, who)
        elif who != "datasheet":
            _draw_slope(ax, bws[0] if who == src_name else bws[-1], view.x_lo, view.x_hi,
                        who)
    for rs, who in sets:
        _label_roofs(ax, rs, view.x_hi, placed, avoid, who)


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


def _label_points(ax: Axes, df: Any, shown: np.ndarray, px: np.ndarray, py: np.ndarray,
                  top: int, placed: list[Any], avoid: list[Any]) -> None:
    """Labels on the ``top`` points shown with the most time (``df`` is sorted by time,
    largest first)."""
    order = np.flatnonzero(shown)[:max(top, 0)]
    labels = [_short(f"{df['label'][i]}" + (f" x{df['count'][i]}" if df["count"][i] > 1
                                             else "")) for i in order]
    place_labels(ax, px[order], py[order], labels, placed, avoid)


def _legend(ax: Axes, biggest: float, src: Analysis, dst: Analysis | None,
            sheet: DeviceSpec | None, given: Axes | None) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker="o", ms=7, color=BOUND_COLORS[b], label=f"{b}-bound")
               for b in ROOFS]
    if biggest > 0:  # size legend: marker areas of three times
        for share in (1.0, 0.1, 0.01):
            area = max(MIN_AREA, MAX_AREA * share)
            handles.append(Line2D([], [], ls="", marker="o", ms=math.sqrt(area),
                                  color="#BBBBBB", label=f"{ms(biggest * share)}"))
    measured = " (measured)" if src.device.measured and "measured" not in src.device.name \
        else ""
    handles.append(Line2D([], [], ls="-", color="#222222", label=f"{src.device.name}{measured}"))
    if sheet is not None:
        handles.append(Line2D([], [], ls=":", color="#8C8C8C", label=f"{sheet.name} datasheet"))
    if dst is not None:
        handles += [Line2D([], [], ls="--", color=DST_COLOR, label=f"{dst.device.name}"),
                    Line2D([], [], ls="-", marker="o", ms=6, mfc="#777777", color="#777777",
                           label="op on source"),
                    Line2D([], [], ls="", marker="o", ms=6, mfc="none", color="#777777",
                           label="same op on destination")]
    if given is None:  # a figure of its own: beside the axes, spaced for the size markers
        ax.legend(handles=handles, frameon=False, title="bound / time / roofs",
                  labelspacing=1.1, **legend_spot(ax, given))
    else:  # a caller's panel: inside it, compact, where the fewest points are
        ax.legend(handles=handles, fontsize=6.5, labelspacing=0.5, ncols=2,
                  **legend_spot(ax, given))


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
