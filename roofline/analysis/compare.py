"""Predictions: the speedup from a device swap or a what-if device, with its reasons."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, overload

import numpy as np

from roofline._table import Rows
from roofline.analysis.bands import Band, band
from roofline.analysis.reasons import Reasons, top_categories
from roofline.analysis.serving import Serving
from roofline.analysis.serving_compare import (
    ServingComparison,
    compare_serving,
    what_if_serving,
)
from roofline.analysis.timing import ALWAYS_SHOWN, LIMITS, ROOFS, Analysis, analyze, ratio
from roofline.analysis.validate import check_same_ops
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing.measure import Measurement
from roofline.tracing.records import Trace
from roofline.tracing.serving import ServingTrace

#: What ``what_if`` asks when given no factor: the seed question, "2x the FLOP/s".
SEED_FLOPS_FACTOR = 2.0


@dataclass
class Comparison:
    """Predicted speedup of ``dst`` over ``src`` for one trace.

    Attributes
    ----------
    src, dst : Analysis
        The two analyses.
    label : str
        ``"runtime"`` for a prediction rescaled from a measurement, else ``""``.
    """

    src: Analysis
    dst: Analysis
    label: str = ""

    @property
    def speedup(self) -> float:
        """``src.seconds / dst.seconds`` (>1: ``dst`` is faster; 1 for an empty trace)."""
        return ratio(self.src.seconds, self.dst.seconds)

    @property
    def band(self) -> Band | None:
        """The range the published validation's pairs of this kind put the measured
        speedup in (:mod:`roofline.analysis.bands`); None for a what-if device, or for two
        traces on one device."""
        if self.src.trace is not self.dst.trace:
            return None
        return band(self.src, self.dst, self.speedup)

    @property
    def fusion(self) -> dict[str, tuple[int, int]] | None:
        """Of an eager trace against its compiled trace (``compare(eager, compiled,
        device)``): bytes per op family, eager and compiled, largest saving first (a fused
        kernel counts under its most specific op's family); None otherwise."""
        eager, compiled = self.src.trace, self.dst.trace
        if eager is compiled or not compiled.info.compiled:
            return None
        before, after = eager.by_category(), compiled.by_category()
        rows = {str(k): (before[k].bytes if k in before else 0,
                         after[k].bytes if k in after else 0)
                for k in dict.fromkeys([*before, *after])}
        return dict(sorted(rows.items(), key=lambda kv: kv[1][1] - kv[1][0]))

    @property
    def flops_ratio(self) -> float:
        """Ratio of the peaks that carry most of the FLOPs (dst over src)."""
        a, b = self.src.peak_flops_per_s, self.dst.peak_flops_per_s
        return b / a if a else math.nan

    @property
    def achievable_flops_ratio(self) -> float:
        """Ratio of the rates those engines run at, each at the share of its peak the device
        reaches (dst over src; equal to ``flops_ratio`` with ``peaks="datasheet"``)."""
        a, b = self.src.achievable_flops_per_s, self.dst.achievable_flops_per_s
        return b / a if a else math.nan

    @property
    def bandwidth_ratio(self) -> float:
        return self.dst.device.bandwidth_bytes_per_s / self.src.device.bandwidth_bytes_per_s

    def speedup_limits(self) -> dict[str, float]:
        """Speedup on ``src`` with infinite FLOP/s, and with infinite bandwidth."""
        base = self.src.seconds
        return {name: ratio(base, self.src.seconds_with(**{roof: math.inf}))
                for roof, name in LIMITS.items()}

    def _row(self, s: float, d: float) -> dict[str, float]:
        return {"src_seconds": s, "dst_seconds": d, "speedup": ratio(s, d),
                "saved_fraction": (s - d) / self.src.seconds if self.src.seconds else 0.0}

    def by_category(self) -> dict[str, dict[str, float]]:
        src, dst = self.src.by_category(), self.dst.by_category()
        return Rows({k: self._row(src.get(k, {}).get("seconds", 0.0),
                                  dst.get(k, {}).get("seconds", 0.0))
                     for k in dict.fromkeys([*src, *dst])})

    def by_bound(self) -> dict[str, dict[str, float]]:
        """Per bound *on the source device*: where the source's time goes and how it shrinks."""
        bounds = np.array(self.src.bound, dtype=object)
        src_s, dst_s = self.src.op_seconds, self.dst.op_seconds
        out = {b: self._row(float(src_s[bounds == b].sum()), float(dst_s[bounds == b].sum()))
               for b in ROOFS if b in ALWAYS_SHOWN or (bounds == b).any()}
        if self.src.host_seconds:
            out["host"] = {**self._row(self.src.host_seconds, self.dst.host_seconds),
                           "saved_fraction": 0.0}
        return Rows(out)

    def by_op(self) -> Any:
        """Per-op predicted times on both devices (a pandas DataFrame)."""
        df = self.src.trace.to_dataframe()[["name", "category", "phase", "module", "flops",
                                            "bytes"]]
        df["src_seconds"] = self.src.op_seconds
        df["dst_seconds"] = self.dst.op_seconds
        df["src_bound"] = self.src.bound
        df["dst_bound"] = self.dst.bound
        return df

    def reasons(self) -> Reasons:
        """Why the speedup is what it is: shares per bound, limits and assumptions
        (``roofline.explain`` puts them in words)."""
        src, dst = self.src, self.dst
        shares = {k: v["fraction"] for k, v in src.by_bound().items()}
        return Reasons(
            src=src.device.name, dst=dst.device.name, speedup=self.speedup,
            flops_ratio=self.flops_ratio, bandwidth_ratio=self.bandwidth_ratio, shares=shares,
            achievable_flops_ratio=self.achievable_flops_ratio,
            categories={b: top_categories(src, b) for b in shares if b != "host"},
            limits=self.speedup_limits(),
            assumptions=list(dict.fromkeys(src.assumptions + dst.assumptions)),
            empty=src.seconds == 0, flops=src.trace.total_flops, band=self.band,
            fusion=self.fusion,
            misaligned={a.device.name: share for a in (src, dst)
                        if (share := a.misaligned_share()) > 0})

    def __repr__(self) -> str:
        return (f"Comparison({self.src.device.name} -> {self.dst.device.name}: "
                f"{self.speedup:.2f}x, {self.src.seconds * 1e3:.3f} ms -> "
                f"{self.dst.seconds * 1e3:.3f} ms)")

    def _repr_html_(self) -> str:  # Jupyter: the repr's fields as a table
        from roofline._table import html_table

        return html_table(["Comparison", f"{self.src.device.name} -> {self.dst.device.name}"],
                          [["speedup", f"{self.speedup:.2f}x"],
                           [self.src.device.name, f"{self.src.seconds * 1e3:.3f} ms"],
                           [self.dst.device.name, f"{self.dst.seconds * 1e3:.3f} ms"]])


def _pair(trace: Trace, src: DeviceSpec, dst: DeviceSpec, options: dict[str, Any],
          ) -> tuple[Analysis, Analysis]:
    a = analyze(trace, src, **options)
    if options.get("host_fraction"):
        # the host time is measured on the source and stays fixed on the destination
        options = {**options, "host_fraction": None, "host_seconds": a.host_seconds}
    return a, analyze(trace, dst, **options)


@overload
def compare(trace: Trace, src: str | DeviceSpec, dst: str | DeviceSpec,
            method: str = ..., measurement: Measurement | None = ...,
            **options: Any) -> Comparison: ...
@overload
def compare(trace: ServingTrace | Serving, src: str | DeviceSpec, dst: str | DeviceSpec,
            method: str = ..., measurement: Measurement | None = ...,
            **options: Any) -> ServingComparison: ...
@overload
def compare(trace: Trace, src: Trace, dst: str | DeviceSpec, method: str = ...,
            measurement: Measurement | None = ..., **options: Any) -> Comparison: ...
def compare(trace: Trace | ServingTrace | Serving, src: str | DeviceSpec | Trace,
            dst: str | DeviceSpec, method: str = "roofline",
            measurement: Measurement | None = None,
            **options: Any) -> Comparison | ServingComparison:
    """Predict the speedup of ``dst`` over ``src`` for ``trace``.

    A serving trace (:func:`roofline.trace_serving`, or a :class:`Serving`) gives a
    :class:`~roofline.analysis.serving_compare.ServingComparison`: the speedups of
    prefill and decode apart, with their reasons.

    ``compare(eager, compiled, device)``, with the same step traced eagerly and with
    ``trace(..., compile=True)``, predicts what ``torch.compile`` buys on ``device``:
    ``src`` is the eager step, ``dst`` the compiled one, and
    :attr:`Comparison.fusion` the bytes fusion removed per op family.

    Parameters
    ----------
    method : {"roofline", "runtime"}
        ``"roofline"`` predicts both devices from their specs; ``"runtime"`` starts from
        ``measurement`` (taken on ``src``) and scales each measured op by the ratio of its
        predicted times on ``dst`` and ``src``.
    options
        Those of :func:`roofline.analyze`; ``host_fraction`` is taken on ``src`` and the
        resulting host seconds are kept on ``dst``.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> c = roofline.compare(t, "a100", "h100")
    >>> round(c.speedup, 2), round(c.flops_ratio, 2), round(c.achievable_flops_ratio, 2)
    (2.71, 3.43, 2.71)
    """
    if method not in ("roofline", "runtime"):
        raise ValueError(f"method must be 'roofline' or 'runtime', got {method!r}")
    if isinstance(src, Trace):
        return _compare_compiled(trace, src, dst, method, measurement, options)
    if isinstance(trace, (ServingTrace, Serving)):
        if method != "roofline" or measurement is not None:
            raise ValueError("a serving trace is compared with method='roofline' only")
        return compare_serving(trace, src, dst, **options)
    a, b = _pair(trace, get_device(src), get_device(dst), options)
    if method == "roofline":
        if measurement is not None:
            raise ValueError("measurement= is used by method='runtime' only")
        return Comparison(a, b)
    if measurement is None:
        raise ValueError("method='runtime' needs measurement=roofline.measure(...) on src")
    check_same_ops(a, measurement)  # same ops, or a clear error
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
        return replace(x, roof_seconds=x.roof_seconds * factor, host_seconds=host)

    return Comparison(scaled(a), scaled(b), label="runtime")


def _compare_compiled(eager: Any, compiled: Trace, device: Any, method: str,
                      measurement: Measurement | None, options: dict[str, Any]) -> Comparison:
    """``compare(eager, compiled, device)``: one device, the step before and after fusion."""
    if not isinstance(eager, Trace) or isinstance(eager, ServingTrace):
        raise TypeError("compare(eager, compiled, device) takes two training or inference "
                        f"traces, got {type(eager).__name__}")
    if isinstance(device, Trace):
        raise TypeError("compare(eager, compiled, device): the third argument is the device")
    if method != "roofline" or measurement is not None:
        raise ValueError("an eager and a compiled trace are compared with "
                         "method='roofline' only")
    if eager.info.compiled or not compiled.info.compiled:
        raise ValueError("compare(eager, compiled, device) takes the eager trace first and "
                         "the trace(..., compile=True) one second")
    if (eager.info.model, eager.info.train, eager.info.batch) != (
            compiled.info.model, compiled.info.train, compiled.info.batch):
        raise ValueError(
            "the two traces are not of the same step: eager "
            f"{eager.info.model} (train={eager.info.train}, batch {eager.info.batch}), "
            f"compiled {compiled.info.model} (train={compiled.info.train}, batch "
            f"{compiled.info.batch})")
    spec = get_device(device)
    return Comparison(analyze(eager, spec, **options), analyze(compiled, spec, **options))


@overload
def what_if(trace: Trace, device: str | DeviceSpec, flops: float | None = ...,
            bandwidth: float | None = ..., clock: float | None = ...,
            cores: float | None = ..., **options: Any) -> Comparison: ...
@overload
def what_if(trace: ServingTrace | Serving, device: str | DeviceSpec,
            flops: float | None = ..., bandwidth: float | None = ...,
            clock: float | None = ..., cores: float | None = ...,
            **options: Any) -> ServingComparison: ...
def what_if(trace: Trace | ServingTrace | Serving, device: str | DeviceSpec,
            flops: float | None = None, bandwidth: float | None = None,
            clock: float | None = None, cores: float | None = None,
            **options: Any) -> Comparison | ServingComparison:
    """Speedup if ``device`` had ``flops``x its FLOP/s, ``bandwidth``x its bandwidth,
    ``clock``x its clock or ``cores``x its compute units.

    All four are *factors* (``flops`` and ``bandwidth`` are the one place in the library
    where these names are not a count and a rate, so that the seed question reads as it is
    asked: ``what_if(t, "a100", flops=2)``). A device's compute peak is compute units x
    FLOP per clock per unit x clock, so:

    * ``clock`` scales every compute peak (matrix and vector) and the clock, not the DRAM
      bandwidth (memory runs on its own clock) nor the launch overhead (host-bound);
    * ``cores`` scales the compute peaks and ``compute_units``: a matmul too small to
      fill today's chip fills less of the larger one (its waves of tiles), so only ops
      that fill the chip gain; bandwidth stays.

    A factor not given stays 1; with none given the call asks the seed question,
    ``flops=2``. A serving trace (:func:`roofline.trace_serving`) gives a
    :class:`~roofline.analysis.serving_compare.ServingComparison`: prefill and decode
    apart.

    Examples
    --------
    >>> t = roofline.trace(lambda x: (x * 2).sum(), torch.randn(2 ** 26), fake=True)
    >>> roofline.what_if(t, "a100", flops=2.0).speedup < 1.01  # memory-bound: no gain
    True
    >>> round(roofline.what_if(t, "a100", bandwidth=2.0).speedup, 2)
    1.98
    """
    if flops is None and bandwidth is None and clock is None and cores is None:
        flops = SEED_FLOPS_FACTOR
    factors = {"flops_factor": flops, "bandwidth_factor": bandwidth, "clock_factor": clock,
               "cores_factor": cores}
    for name, value in factors.items():
        if value is not None:
            _check_factor(name.removesuffix("_factor"), value)
    spec = get_device(device)
    one = {k: 1.0 if v is None else v for k, v in factors.items()}
    if isinstance(trace, (ServingTrace, Serving)):
        return what_if_serving(trace, spec, one, **options)
    return compare(trace, spec, spec.scaled(
        flops_factor=one["flops_factor"], bandwidth_factor=one["bandwidth_factor"],
        clock_factor=one["clock_factor"], cores_factor=one["cores_factor"]), **options)


def sweep(trace: Trace, device: str | DeviceSpec, flops: Sequence[float] = (1, 2, 4, 8),
          bandwidth: Sequence[float] = (1, 2, 4, 8), **options: Any) -> Any:
    """Speedup over a grid of FLOP/s and bandwidth factors (a pandas DataFrame).

    Rows are one (flops, bandwidth) factor pair each, with columns ``flops``,
    ``bandwidth``, ``seconds`` and ``speedup``.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> df = roofline.sweep(t, "a100", flops=[1, 2], bandwidth=[1, 2])
    >>> list(df.columns)[:3], len(df)
    (['flops', 'bandwidth', 'seconds'], 4)
    """
    import pandas as pd

    for f in flops:
        _check_factor("flops", f)
    for b in bandwidth:
        _check_factor("bandwidth", b)
    a = analyze(trace, device, **options)
    rows = []
    for f in flops:
        for b in bandwidth:
            seconds = a.seconds_with(compute=f, memory=b)
            rows.append({"flops": f, "bandwidth": b, "seconds": seconds,
                         "speedup": ratio(a.seconds, seconds)})
    return pd.DataFrame(rows)


def _check_factor(name: str, value: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0
                                       and math.isfinite(value)):
        raise ValueError(f"{name} factor must be a finite number > 0, got {value!r}")
