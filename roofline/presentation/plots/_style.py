"""What every chart shares: colours per bound, a private rc context, new axes, checks.

No chart touches matplotlib's global state: each draws inside :func:`style` (an
``rc_context``, restored on exit) and styles its artists explicitly.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from roofline._si import si
from roofline.analysis import Analysis, Comparison
from roofline.presentation.explain import describe

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: One colour per bound (Okabe-Ito, readable by colour-blind readers), and for host time.
BOUND_COLORS: dict[str, str] = {"compute": "#D55E00", "memory": "#0072B2",
                                "latency": "#56B4E9", "overhead": "#7A7A7A",
                                "host": "#CC79A7",
                                "none": "#DDDDDD"}
#: Categories (Paul Tol's muted palette: none is a bound's colour, so the two bars of a
#: device are not read as one legend).
CATEGORY_COLORS = ("#332288", "#44AA99", "#117733", "#DDCC77", "#88CCEE", "#CC6677",
                   "#AA4499", "#999933", "#BBBBBB")
#: Colours light enough for black text on them.
LIGHT = frozenset({"#DDCC77", "#88CCEE", "#BBBBBB", "#999933", "#44AA99", "#DDDDDD",
                   "#CC79A7", "#CC6677"})
_RC: dict[str, Any] = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
                       "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The charts' font sizes, for the duration of one call only (those rcParams restored).

    Only the keys set here are put back: ``plt.rc_context`` restores every rcParam, which
    turns matplotlib's interactive mode off again when a notebook's first figure is made
    inside it, so that no later figure shows.
    """
    import matplotlib as mpl

    rc: Any = mpl.rcParams  # RcParams' keys are typed as Literal names
    saved = {key: rc[key] for key in _RC}
    rc.update(_RC)
    try:
        yield
    finally:
        rc.update(saved)


def axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    """``ax``, or the Axes of a new figure of ``size`` inches (constrained layout)."""
    if ax is not None:
        from matplotlib.axes import Axes

        if not isinstance(ax, Axes):
            raise TypeError(f"ax must be a matplotlib Axes (or None for a new figure), got "
                            f"{type(ax).__name__}")
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size, layout="constrained")
    return new


@contextlib.contextmanager
def drawing(ax: Axes | None, size: tuple[float, float]) -> Iterator[Axes]:
    """:func:`style` and :func:`axes` together; a figure made here is closed again if the
    chart raises (pyplot would hold it open until the process ends), a caller's never."""
    with style():
        new = axes(ax, size)
        try:
            yield new
        except BaseException:
            if ax is None:
                import matplotlib.pyplot as plt

                plt.close(new.get_figure(root=True))
            raise


def legend_spot(ax: Axes, given: Axes | None) -> dict[str, Any]:
    """Where a chart's legend goes: beside the axes of a figure the chart made, inside the
    axes (``loc="best"``) of a caller's, whose neighbour panels a legend outside would cover."""
    if given is None:
        return {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
    return {"loc": "best", "framealpha": 0.85}


def plural(n: int, word: str) -> str:
    """``1 op call``, ``2 op calls``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def analyses(obj: Analysis | Comparison, caller: str) -> tuple[Analysis, Analysis | None]:
    """(src, dst) of a Comparison, (analysis, None) of an Analysis; TypeError otherwise."""
    if isinstance(obj, Comparison):
        return obj.src, obj.dst
    if isinstance(obj, Analysis):
        return obj, None
    raise TypeError(f"{caller}() takes an Analysis (roofline.analyze) or a Comparison "
                    f"(roofline.compare / what_if), got {type(obj).__name__}")


def require_ops(a: Analysis, caller: str) -> None:
    """ValueError for an empty trace: there is nothing to draw."""
    if not a.trace.ops:
        raise ValueError(f"{caller}(): the trace has no ops, so there is nothing to chart; "
                         "trace a step that runs at least one operator "
                         "(roofline.trace(model, *inputs))")


def model_name(a: Analysis) -> str:
    """What was traced, for a chart's title: the model's name (``trace.info.model``:
    ``roofline.trace`` records the module's class there; set a better one, e.g. ``"GPT-2
    124M"``) with its batch, dtype and phase (:func:`roofline.presentation.explain.
    describe`)."""
    return describe(a)


def ms(seconds: float) -> str:
    """A time for a chart label (``11.6 ms``)."""
    return si(seconds, "s")


def line_pixels(ax: Axes, lines: list[Any], step_px: float = 2.0) -> Any:
    """Points every ``step_px`` pixels along the drawn ``lines`` (Line2D), in display
    coordinates: what a label placed in pixels must not cover."""
    import numpy as np

    out = [np.empty((0, 2))]
    for line in lines:
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
        with np.errstate(all="ignore"):  # a log axis maps values <= 0 to no pixel
            px = ax.transData.transform(xy)
        px = px[np.isfinite(px).all(axis=1)]
        out.append(px)
        for (x0, y0), (x1, y1) in itertools.pairwise(px):
            n = int(math.hypot(x1 - x0, y1 - y0) / step_px)
            if n > 1:
                t = np.linspace(0, 1, n)[:, None]
                out.append(np.column_stack([x0 + t[:, 0] * (x1 - x0), y0 + t[:, 0] * (y1 - y0)]))
    return np.concatenate(out)


def covers(box: Any, points: Any) -> bool:
    """Whether the pixel ``box`` (a Bbox) holds any of ``points`` (N x 2 pixels)."""
    if not len(points):
        return False
    x, y = points[:, 0], points[:, 1]
    return bool(((x >= box.x0) & (x <= box.x1) & (y >= box.y0) & (y <= box.y1)).any())


def renderer(ax: Axes) -> Any:
    """The figure's renderer, for text extents before the figure is drawn."""
    fig = ax.figure
    get = getattr(fig.canvas, "get_renderer", None)
    return get() if get is not None else fig._get_renderer()  # type: ignore[union-attr]


def settle(ax: Axes) -> None:
    """Run the figure's layout engine now, so that pixel positions are final."""
    fig = ax.get_figure(root=True)
    engine = fig.get_layout_engine() if fig is not None else None
    if fig is not None and engine is not None:
        engine.execute(fig)


def text_box(artist: Any, renderer: Any) -> Any:
    """The box of a text, or of an annotation's text alone (its own extent includes the
    leader line)."""
    from matplotlib.text import Text

    if hasattr(artist, "update_positions"):  # an annotation: where its text goes
        artist.update_positions(renderer)
    return Text.get_window_extent(artist, renderer)


def inside(box: Any, frame: Any) -> bool:
    """Whether pixel box ``box`` lies within ``frame`` (the axes' box)."""
    return bool(box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0
                and box.y1 <= frame.y1)
