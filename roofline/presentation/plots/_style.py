"""What every chart shares: colours per bound, a private rc context, new axes, checks.

No chart touches matplotlib's global state: each draws inside :func:`style` (an
``rc_context``, restored on exit) and styles its artists explicitly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from roofline._si import si
from roofline.analysis import Analysis, Comparison

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: One colour per bound (Okabe-Ito, readable by colour-blind readers), and for host time.
BOUND_COLORS: dict[str, str] = {"compute": "#D55E00", "memory": "#0072B2",
                                "overhead": "#7A7A7A", "host": "#CC79A7",
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
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size, layout="constrained")
    return new


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
    """The traced model's name (``trace.meta['model']``), or "step" when not recorded."""
    return str(a.trace.meta.get("model") or "step")


def ms(seconds: float) -> str:
    """A time for a chart label (``11.6 ms``)."""
    return si(seconds, "s")
