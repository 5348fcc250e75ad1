"""Before and after ``torch.compile``: the eager and the compiled step on one device's roofs,
and where each step's time goes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.analysis import Comparison
from roofline.presentation.plots._style import model_name, style
from roofline.presentation.plots.bars import time_breakdown
from roofline.presentation.plots.chart import roofline_chart

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def compile_chart(comparison: Comparison, group_by: str = "op", top: int = 4) -> Axes:
    """The roofline of the eager step beside the compiled step's (same device, same axes),
    and below them the time of each by bound and by category: the memory-bound mass that
    fusion removes.

    Parameters
    ----------
    comparison : Comparison
        ``roofline.compare(eager, compiled, device)``.
    group_by, top : as :func:`roofline_chart`.

    Returns
    -------
    matplotlib.axes.Axes
        The compiled step's roofline panel; the figure holds all three.

    Raises
    ------
    TypeError
        For anything but the comparison of an eager and a compiled trace.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    >>> x, kw = torch.randn(32, 64), dict(train=True, loss_fn=lambda y: y.sum())
    >>> c = roofline.compare(roofline.trace(model, x, fake=True, **kw),
    ...                      roofline.trace(model, x, compile=True, **kw), "h100")
    >>> ax = roofline.plot.compile_chart(c)
    >>> ax.get_title(loc="left").startswith("torch.compile:")
    True
    """
    if not isinstance(comparison, Comparison) or comparison.fusion is None:
        raise TypeError("compile_chart() takes roofline.compare(eager, compiled, device); "
                        "a device swap is drawn by roofline_chart()")
    import matplotlib.pyplot as plt

    with style():
        fig = plt.figure(figsize=(14.0, 9.0), layout="constrained")
        grid = fig.add_gridspec(2, 2, height_ratios=[1.55, 1.0])
        left, right = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
        bars = fig.add_subplot(grid[1, :])
    try:
        roofline_chart(comparison.src, ax=left, group_by=group_by, top=top)
        roofline_chart(comparison.dst, ax=right, group_by=group_by, top=top)
        _same_view(left, right)
        _one_legend(fig, left, right)
        src, dst = comparison.src, comparison.dst
        left.set_title(f"eager: {src.seconds * 1e3:.3g} ms, {_gb(src)} moved", loc="left")
        right.set_title(f"torch.compile: {dst.seconds * 1e3:.3g} ms, {_gb(dst)} moved",
                        loc="left")
        time_breakdown(comparison, ax=bars)
        bars.set_title(f"{model_name(src)} on {src.device.name}: torch.compile "
                       f"{comparison.speedup:.2f}x over eager", loc="left")
    except BaseException:
        plt.close(fig)
        raise
    return right


def _one_legend(fig: Any, *axes: Axes) -> None:
    """The panels' legends (the same bounds, sizes and roofs) as one, beside the figure:
    inside a panel it would cover points."""
    legends = [ax.get_legend() for ax in axes]
    kept = next((lg for lg in reversed(legends) if lg is not None), None)
    if kept is None:
        return
    handles, labels = kept.legend_handles, [t.get_text() for t in kept.get_texts()]
    for lg in legends:
        if lg is not None:
            lg.remove()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)


def _gb(a: Any) -> str:
    from roofline._si import si

    return si(a.trace.total_bytes, "B")


def _same_view(*axes: Axes) -> None:
    """The union of the panels' limits on each: a point's move between them is its own."""
    xs = [ax.get_xlim() for ax in axes]
    ys = [ax.get_ylim() for ax in axes]
    x = (min(lo for lo, _ in xs), max(hi for _, hi in xs))
    y = (min(lo for lo, _ in ys), max(hi for _, hi in ys))
    for ax in axes:
        ax.set_xlim(*x)
        ax.set_ylim(*y)
