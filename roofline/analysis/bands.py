"""How sure a device-swap speedup is: the spread of the published validation's residuals
for pairs of its kind (issue 23, item 5).

``benchmarks/published.py --write-bands`` sets each predicted speedup of
``../shared/validation/published_throughput.csv`` against the measured one and writes, per
kind of pair, the 10th and 90th percentiles of ``predicted / measured`` to
``data/bands.json``. A comparison of the same kind reads its band from there: the measured
speedup of 80% of those pairs lay within ``predicted / p90 ... predicted / p10``.

A pair's kind (:func:`kind`): whether both devices' main figures were measured on them
(the rate of the engine carrying most FLOPs and the access-pattern bandwidths; else a class
default or the datasheet) and whether the source step is compute- or memory-bound (the
larger of the two shares).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from roofline.analysis.timing import Analysis
from roofline.hardware import get_device
from roofline.hardware.measured import AccessPattern

BANDS_FILE = Path(__file__).parent / "data" / "bands.json"

__all__ = ["BANDS_FILE", "Band", "band", "kind", "measured_only"]


def measured_only(a: Analysis) -> bool:
    """The figures that set most of the step were measured on the device itself: the rate
    of the engine carrying most FLOPs and every access-pattern bandwidth the analysis used
    (a class default or the datasheet for either: False)."""
    if a.options.peaks != "achievable" or a.device.measured:
        return False
    flops: dict[str, int] = {}
    for op, engine in zip(a.trace.ops, a.engine, strict=True):
        if engine is not None:
            name = f"{engine.kind} {engine.dtype}"
            flops[name] = flops.get(name, 0) + op.flops
    # the streams of the access patterns, not one kernel's own figure (layer norm's)
    keys = [f"{p} bandwidth" for p in get_args(AccessPattern) if f"{p} bandwidth" in a.figures]
    if flops:
        keys.append(max(flops, key=flops.__getitem__))
    return bool(keys) and all(k in a.figures and a.figures[k].origin == "measured"
                              for k in keys)


def kind(src: Analysis, dst: Analysis) -> str:
    """``"measured, compute-bound"``, ``"class default, memory-bound"``...: the kind of a
    device pair for its error band."""
    figures = "measured" if measured_only(src) and measured_only(dst) else "class default"
    bounds = src.by_bound()
    compute = bounds.get("compute", {}).get("seconds", 0.0)
    memory = sum(bounds.get(b, {}).get("seconds", 0.0) for b in ("memory", "latency"))
    return f"{figures}, {'compute' if compute >= memory else 'memory'}-bound"


@dataclass(frozen=True)
class Band:
    """The measured speedup's likely range: ``low``-``high`` held 80% of ``pairs``
    published pairs of ``kind`` (their 10th-90th percentile of predicted / measured)."""

    kind: str
    low: float
    high: float
    pairs: int
    source: str

    def __str__(self) -> str:
        return (f"validated: {self.low:.2f}-{self.high:.2f}x on {self.pairs} published "
                f"pairs of this kind ({self.kind})")


@functools.cache
def _bands(path: Path = BANDS_FILE) -> dict[str, Any]:
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def band(src: Analysis, dst: Analysis, speedup: float) -> Band | None:
    """The band of a predicted ``speedup`` from ``src`` to ``dst``; None for a device the
    registry does not hold as it is (a what-if or calibrated device has no published pair)
    or a kind with no residuals."""
    for a in (src, dst):
        try:
            if get_device(a.device.name) != a.device:
                return None
        except LookupError:
            return None
    data = _bands()
    row = data.get("kinds", {}).get(kind(src, dst))
    if row is None or not math.isfinite(speedup):
        return None
    return Band(kind(src, dst), speedup / row["p90"], speedup / row["p10"], int(row["pairs"]),
                data.get("source", ""))
