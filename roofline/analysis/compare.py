"""Predictions: the speedup from a device swap or a what-if device, with the reason."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from roofline.analysis.roofline import BOUNDS, Analysis, Options, analyze
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing.measure import Measurement
from roofline.tracing.records import Trace

_CATEGORY_WORDS = {
    "normalization": "norms", "softmax": "softmax", "optimizer": "optimizer",
    "pointwise": "elementwise", "memory": "copies", "reduction": "reductions",
    "embedding": "embeddings", "loss": "loss", "pooling": "pooling", "dropout": "dropout",
    "matmul": "matmuls", "conv": "convolutions", "attention": "attention",
    "upsample": "upsampling", "uncounted": "uncounted ops",
}


@dataclass
class Comparison:
    """Predicted speedup of ``dst`` over ``src`` for one trace.

    Attributes
    ----------
    src, dst : the two analyses.
    speedup : ``src.seconds / dst.seconds`` (>1: ``dst`` is faster).
    """

    src: Analysis
    dst: Analysis
    label: str = ""

    @property
    def speedup(self) -> float:
        if not self.dst.seconds:
            return 1.0 if not self.src.seconds else math.inf
        return self.src.seconds / self.dst.seconds

    @property
    def flops_ratio(self) -> float:
        """Ratio of the peaks that carry most of the FLOPs (dst over src)."""
        a, b = self.src.peak_flops_per_s, self.dst.peak_flops_per_s
        return b / a if a else math.nan

    @property
    def bandwidth_ratio(self) -> float:
        return self.dst.device.bandwidth_bytes_per_s / self.src.device.bandwidth_bytes_per_s

    def speedup_limits(self) -> dict[str, float]:
        """Speedup on ``src`` with infinite FLOP/s, and with infinite bandwidth."""
        base = self.src.seconds
        return {"infinite_flops": base / self.src.seconds_with(flops=math.inf),
                "infinite_bandwidth": base / self.src.seconds_with(bandwidth=math.inf)}

    def _grouped(self, src: dict[str, dict[str, float]], dst: dict[str, dict[str, float]],
                 ) -> dict[str, dict[str, float]]:
        out = {}
        for k in dict.fromkeys([*src, *dst]):
            s = src.get(k, {}).get("seconds", 0.0)
            d = dst.get(k, {}).get("seconds", 0.0)
            out[k] = {"src_seconds": s, "dst_seconds": d,
                      "speedup": s / d if d else (1.0 if not s else math.inf),
                      "saved_fraction": (s - d) / self.src.seconds if self.src.seconds else 0.0}
        return out

    def by_category(self) -> dict[str, dict[str, float]]:
        return self._grouped(self.src.by_category(), self.dst.by_category())

    def by_bound(self) -> dict[str, dict[str, float]]:
        """Per bound *on the source device*: where the source's time goes and how it shrinks."""
        bounds = self.src.bound
        dst_s = self.dst.op_seconds
        src_s = self.src.op_seconds
        out = {}
        for b in BOUNDS:
            mask = np.array([x == b for x in bounds], dtype=bool)
            s, d = float(src_s[mask].sum()), float(dst_s[mask].sum())
            out[b] = {"src_seconds": s, "dst_seconds": d,
                      "speedup": s / d if d else (1.0 if not s else math.inf),
                      "saved_fraction": (s - d) / self.src.seconds if self.src.seconds else 0.0}
        if self.src.host_seconds:
            h = self.src.host_seconds
            out["host"] = {"src_seconds": h, "dst_seconds": self.dst.host_seconds,
                           "speedup": h / self.dst.host_seconds if self.dst.host_seconds
                           else math.inf, "saved_fraction": 0.0}
        return out

    def by_op(self) -> Any:
        """Per-op predicted times on both devices (a pandas DataFrame)."""
        df = self.src.trace.to_dataframe()[["name", "category", "phase", "module", "flops",
                                            "bytes"]]
        df["src_seconds"] = self.src.op_seconds
        df["dst_seconds"] = self.dst.op_seconds
        df["src_bound"] = self.src.bound
        df["dst_bound"] = self.dst.bound
        return df

    def explain(self) -> str:
        """A short paragraph: the speedup and why it is not the FLOP/s ratio."""
        src, dst = self.src, self.dst
        bound = src.by_bound()
        parts = []
        mem_cats = _top_categories(src, "memory")
        if bound["memory"]["fraction"] >= 0.01:
            parts.append(f"{bound['memory']['fraction']:.0%} of the {src.device.name} step is "
                         f"memory-bound ({mem_cats})")
        if bound["overhead"]["fraction"] >= 0.01:
            parts.append(f"{bound['overhead']['fraction']:.0%} is launch overhead")
        if bound.get("host", {}).get("fraction", 0) >= 0.01:
            parts.append(f"{bound['host']['fraction']:.0%} is spent off the device")
        compute_share = bound["compute"]["fraction"]
        fr, br = self.flops_ratio, self.bandwidth_ratio
        head = (f"{dst.device.name} vs {src.device.name}: {fr:.2g}x the FLOP/s and "
                f"{br:.2g}x the bandwidth give {self.speedup:.2f}x")
        if parts:
            text = f"{head}, because " + ", ".join(parts[:-1]) + (
                " and " if len(parts) > 1 else "") + parts[-1] + "."
        else:
            text = f"{head}: {compute_share:.0%} of the step is compute-bound."
        lim = self.speedup_limits()
        text += (f" On {src.device.name}, infinite FLOP/s would give at most "
                 f"{lim['infinite_flops']:.2f}x, infinite bandwidth "
                 f"{lim['infinite_bandwidth']:.2f}x.")
        notes = list(dict.fromkeys(src.assumptions + dst.assumptions))
        if notes:
            text += " Assumptions: " + "; ".join(notes) + "."
        return text

    def __repr__(self) -> str:
        return (f"Comparison({self.src.device.name} -> {self.dst.device.name}: "
                f"{self.speedup:.2f}x, {self.src.seconds * 1e3:.3f} ms -> "
                f"{self.dst.seconds * 1e3:.3f} ms)")


def _top_categories(a: Analysis, bound: str, n: int = 3) -> str:
    seconds: dict[str, float] = {}
    for op, b, s in zip(a.trace.ops, a.bound, a.op_seconds, strict=True):
        if b == bound:
            seconds[op.category] = seconds.get(op.category, 0.0) + float(s)
    top = sorted(seconds, key=lambda c: -seconds[c])[:n]
    return ", ".join(_CATEGORY_WORDS.get(c, c) for c in top)


def _pair(trace: Trace, src: DeviceSpec, dst: DeviceSpec, options: dict[str, Any],
          ) -> tuple[Analysis, Analysis]:
    a = analyze(trace, src, **options)
    if options.get("host_fraction"):
        # the host time is measured on the source and stays fixed on the destination
        options = {**options, "host_fraction": None, "host_seconds": a.host_seconds}
    return a, analyze(trace, dst, **options)


def compare(trace: Trace, src: str | DeviceSpec, dst: str | DeviceSpec,
            method: str = "roofline", measurement: Measurement | None = None,
            **options: Any) -> Comparison:
    """Predict the speedup of ``dst`` over ``src`` for ``trace``.

    Parameters
    ----------
    method : ``"roofline"`` predicts both devices from their specs; ``"runtime"``
        starts from ``measurement`` (taken on ``src``) and scales each measured op by
        the ratio of its predicted times on ``dst`` and ``src``.
    options : those of :func:`roofline.analyze`; ``host_fraction`` is taken on ``src``
        and the resulting host seconds are kept on ``dst``.
    """
    if method not in ("roofline", "runtime"):
        raise ValueError(f"method must be 'roofline' or 'runtime', got {method!r}")
    a, b = _pair(trace, get_device(src), get_device(dst), options)
    if method == "roofline":
        if measurement is not None:
            raise ValueError("measurement= is used by method='runtime' only")
        return Comparison(a, b)
    if measurement is None:
        raise ValueError("method='runtime' needs measurement=roofline.measure(...) on src")
    a.against(measurement)  # same ops, or a clear error
    # scale every roof of an op by measured / predicted-on-src: the src op then takes its
    # measured time, the dst op that time x (predicted dst / predicted src), bounds unchanged
    measured = measurement.op_seconds
    predicted = a.op_seconds
    usable = np.isfinite(measured) & (predicted > 0)
    factor = np.where(usable, measured / np.where(usable, predicted, 1.0), 1.0)
    # measured time of ops the model predicts as free (views: dispatch cost) stays fixed
    unscalable = np.isfinite(measured) & (predicted <= 0)
    host = measurement.host_seconds + a.host_seconds + float(measured[unscalable].sum())

    def scaled(x: Analysis) -> Analysis:
        return replace(x, compute_seconds=x.compute_seconds * factor,
                       memory_seconds=x.memory_seconds * factor,
                       overhead_seconds=x.overhead_seconds * factor, host_seconds=host)

    return Comparison(scaled(a), scaled(b), label="runtime")


def what_if(trace: Trace, device: str | DeviceSpec, flops: float = 2.0,
            bandwidth: float = 1.0, **options: Any) -> Comparison:
    """Speedup if ``device`` had ``flops``x its FLOP/s and ``bandwidth``x its bandwidth."""
    spec = get_device(device)
    _check_factor("flops", flops)
    _check_factor("bandwidth", bandwidth)
    return compare(trace, spec, spec.scaled(flops=flops, bandwidth=bandwidth), **options)


def sweep(trace: Trace, device: str | DeviceSpec, flops: Sequence[float] = (1, 2, 4, 8),
          bandwidth: Sequence[float] = (1, 2, 4, 8), **options: Any) -> Any:
    """Speedup over a grid of FLOP/s and bandwidth factors (a pandas DataFrame).

    Rows are one (flops, bandwidth) pair each, with columns ``flops``, ``bandwidth``,
    ``seconds`` and ``speedup``.
    """
    import pandas as pd

    for f in flops:
        _check_factor("flops", f)
    for b in bandwidth:
        _check_factor("bandwidth", b)
    a = analyze(trace, device, **Options(**options).__dict__)
    rows = [{"flops": f, "bandwidth": b, "seconds": a.seconds_with(f, b),
             "speedup": a.seconds / a.seconds_with(f, b)} for f in flops for b in bandwidth]
    return pd.DataFrame(rows)


def _check_factor(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} factor must be a finite number > 0, got {value!r}")
