"""Charts (matplotlib, imported only when a chart is drawn); ``roofline.plot`` is this module.

Every function draws into a given ``ax`` (or a new figure), returns the Axes, never calls
``plt.show()``, works headless, and leaves matplotlib's rcParams as it found them.

* :func:`roofline_chart` / :func:`roofline_data`: each op at (FLOP/byte, attained FLOP/s)
  under the device's roofs; for a Comparison, both devices and each op's move.
* :func:`speedup_curve`: "will 2x the FLOP/s give 2x?", with the Amdahl ceilings.
* :func:`time_breakdown`, :func:`compare_devices`: where the step time goes.
* :func:`validation_scatter`: predicted against measured op times.
* :func:`memory_timeline`, :func:`batch_curve`: live memory over a step by kind, and
  required memory and samples/s against batch with the capacity wall.
* :func:`serving_batch_curve`, :func:`serving_roofline`: an LLM's decode tokens/s against
  batch with the capacity wall; prefill and decode on one roofline, a point per op group.
* :func:`compile_chart`: the eager and the compiled step (``torch.compile``) on one
  device's roofs, and where each one's time goes.
* :func:`scaling_curve`, :func:`stream_timeline`: speedup against GPU count with the ideal
  line; a parallel step's compute and communication streams over time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline.analysis import Validation
from roofline.presentation.plots._style import drawing
from roofline.presentation.plots.bars import compare_devices, time_breakdown
from roofline.presentation.plots.chart import roofline_chart, roofline_data
from roofline.presentation.plots.compiled import compile_chart
from roofline.presentation.plots.memory import batch_curve, memory_timeline
from roofline.presentation.plots.parallel import scaling_curve, stream_timeline
from roofline.presentation.plots.serving import serving_batch_curve, serving_roofline
from roofline.presentation.plots.speedup import speedup_curve

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["batch_curve", "compare_devices", "compile_chart", "memory_timeline", "roofline_chart",
           "roofline_data", "scaling_curve", "serving_batch_curve", "serving_roofline",
           "speedup_curve", "stream_timeline",
           "time_breakdown", "validation_scatter"]


def validation_scatter(v: Validation, ax: Axes | None = None) -> Axes:
    """Log-log scatter of predicted against measured op times; returns the Axes.

    Draws into ``ax`` when given; never calls ``plt.show()``.

    Examples
    --------
    >>> model = nn.Linear(256, 256)
    >>> m = roofline.measure(model, torch.randn(64, 256), repeat=3)
    >>> v = roofline.validate(roofline.analyze(m.trace, "EPYC 7763"), m)
    >>> ax = roofline.plot.validation_scatter(v)
    """
    pred, meas = v.per_op()
    with drawing(ax, (5.0, 5.0)) as out:
        out.loglog(meas, pred, ".", alpha=0.5)
        lo = max(min(meas.min(initial=1e-7), pred.min(initial=1e-7)), 1e-9)
        hi = max(meas.max(initial=1e-3), pred.max(initial=1e-3))
        out.plot([lo, hi], [lo, hi], "k--", lw=1, label="predicted = measured")
        out.set_xlabel("measured seconds per op")
        out.set_ylabel("predicted seconds per op")
        out.set_title(f"{v.analysis.device.name}: step error {v.error:+.0%}", loc="left")
        out.legend(loc="upper left", frameon=False)
    return out
