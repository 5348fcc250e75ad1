"""Charts (matplotlib, imported only when a chart is drawn)."""

from __future__ import annotations

from typing import Any

from roofline.analysis import Validation


def validation_scatter(v: Validation, ax: Any = None) -> Any:
    """Log-log scatter of predicted against measured op times; returns the Axes.

    Draws into ``ax`` when given; never calls ``plt.show()``.
    """
    import matplotlib.pyplot as plt

    pred, meas = v.per_op()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 5))
    ax.loglog(meas, pred, ".", alpha=0.5)
    lo = max(min(meas.min(initial=1e-7), pred.min(initial=1e-7)), 1e-9)
    hi = max(meas.max(initial=1e-3), pred.max(initial=1e-3))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="predicted = measured")
    ax.set_xlabel("measured seconds per op")
    ax.set_ylabel("predicted seconds per op")
    ax.set_title(f"{v.analysis.device.name}: step error {v.error:+.0%}")
    return ax
