"""Why a speedup is what it is, as data: shares per bound, the categories behind them,
the Amdahl limits and the assumptions. ``roofline.explain`` puts them in words."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from roofline.analysis.bands import Band
from roofline.analysis.timing import Analysis

#: Categories named per bound in the reasons.
TOP_CATEGORIES = 3


@dataclass(frozen=True)
class Reasons:
    """The structured reasons of a :class:`~roofline.analysis.compare.Comparison`.

    Attributes
    ----------
    src, dst : str
        Device names.
    speedup : float
        Predicted speedup.
    flops_ratio : float
        Ratio of the dominant engines' peaks (dst over src).
    bandwidth_ratio : float
        Ratio of the bandwidths (dst over src).
    shares : dict[str, float]
        Fraction of the source step per bound (``compute``, ``memory``, ``overhead``) and
        ``host`` (time off the device).
    categories : dict[str, list[str]]
        Per bound, the op categories with the most source time under it, largest first.
    limits : dict[str, float]
        Speedup on the source with infinite FLOP/s (``infinite_flops``) and with infinite
        bandwidth (``infinite_bandwidth``).
    assumptions : list[str]
        Both analyses' assumptions, each once.
    empty : bool
        The trace predicts no time at all (no ops, or views only).
    flops : int
        The trace's FLOPs (0: nothing for a FLOP/s ratio to act on).
    band : Band or None
        The published validation's range for pairs of this kind (None: a what-if device,
        or no pairs of its kind).
    fusion : dict[str, tuple[int, int]] or None
        Of an eager step against its compiled step: bytes per op family, eager and
        compiled (see ``Comparison.fusion``); None for a device swap.
    achievable_flops_ratio : float
        The same engines' rates at the shares of their peaks the devices reach (dst over
        src; NaN when not known).
    misaligned : dict[str, float]
        Per device whose step has them, the share of its step in GEMMs slowed for rows off
        a multiple of 16 bytes (``Analysis.misaligned_share``).
    """

    src: str
    dst: str
    speedup: float
    flops_ratio: float
    bandwidth_ratio: float
    shares: dict[str, float]
    categories: dict[str, list[str]]
    limits: dict[str, float]
    assumptions: list[str] = field(default_factory=list)
    empty: bool = False
    flops: int = 0
    band: Band | None = None
    fusion: dict[str, tuple[int, int]] | None = None
    achievable_flops_ratio: float = math.nan
    misaligned: dict[str, float] = field(default_factory=dict)


def top_categories(a: Analysis, bound: str, n: int = TOP_CATEGORIES) -> list[str]:
    """The ``n`` categories with the most time under ``bound``, largest first."""
    seconds: dict[str, float] = {}
    for op, b, s in zip(a.trace.ops, a.bound, a.op_seconds, strict=True):
        if b == bound and s > 0:
            seconds[str(op.category)] = seconds.get(str(op.category), 0.0) + float(s)
    return sorted(seconds, key=lambda c: -seconds[c])[:n]
