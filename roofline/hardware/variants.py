"""What-if variants of a device: fields overridden (:func:`overridden`) or peaks scaled
(:func:`scaled`), with the measured figures following the peaks they were measured against.

A measured figure is a share of a datasheet figure: the matmul curve and the achievable
matrix FLOP/s of the matrix peak of their dtype, the depthwise rates and the achievable
vector FLOP/s of the vector peak, the memory curve and the achievable bandwidths of the
memory bandwidth, the fp16-accumulate peak of the fp16 peak, the sustained clock of the
boost clock. When a peak moves, its figures move with it, keeping their share
(:func:`follow`, the one rule both variants use); a removed peak drops its achievable
measurements. Launch overhead and DRAM latency stay as measured.

The functions work on a spec's ``model_dump()`` and return the data of the variant, which
:class:`roofline.hardware.spec.DeviceSpec` validates (``DeviceSpec.with_overrides`` and
``DeviceSpec.scaled`` are the public entry points).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from roofline.hardware.checks import check_sustained_clock
from roofline.hardware.measured import CLOCK_MARGIN, Achievable, Measured
from roofline.hardware.units import format_quantity

__all__ = ["Moves", "follow", "overridden", "scaled"]

#: A device as data: ``DeviceSpec.model_dump()``, or fields on their way to a DeviceSpec.
SpecData = dict[str, Any]

_PEAK_TABLES = ("matrix_flops_per_s", "matrix_sparse_flops_per_s", "vector_flops_per_s")
_DEPTHWISE_TABLES = ("depthwise_flops_per_s", "depthwise_backward_flops_per_s")


@dataclass(frozen=True)
class Moves:
    """How far each peak moved: the factor a figure measured against it follows.

    Attributes
    ----------
    bandwidth : float
        Of the memory bandwidth (memory curve, achievable bandwidths).
    clock : float
        Of the boost clock (sustained clock, and the clock each measurement states).
    flops : float
        Of a FLOP/s peak of a dtype not in ``matrix`` or ``vector``.
    matrix, vector : dict
        Of the matrix and vector peaks, per dtype.
    curve : float, optional
        Of the measured matmul curve where it differs from the matrix peaks (a cores
        what-if: the curve gains only as tiles fill, see ``matmul_curve_units``); None:
        the matrix peak of its dtype.
    """

    bandwidth: float = 1.0
    clock: float = 1.0
    flops: float = 1.0
    matrix: Mapping[str, float] = field(default_factory=dict)
    vector: Mapping[str, float] = field(default_factory=dict)
    curve: float | None = None

    def of_matrix(self, dtype: str) -> float:
        return self.matrix.get(dtype, self.flops)

    def of_vector(self, dtype: str) -> float:
        return self.vector.get(dtype, self.flops)

    def of_curve(self, dtype: str) -> float:
        return self.of_matrix(dtype) if self.curve is None else self.curve


def follow(data: SpecData, moves: Moves, *, fp16_accumulate: float | None,
           achievable: Achievable | None, keep: Collection[str] = ()) -> SpecData:
    """``data``, a variant's fields with its new peaks, with every measured figure of the
    original following its peak by ``moves``.

    Parameters
    ----------
    data : dict
        The variant's fields; its measured curves and depthwise rates are the original's.
        Changed in place and returned.
    moves : Moves
        How far each peak moved.
    fp16_accumulate : float or None
        The original's fp16-accumulate peak: it follows the fp16 matrix peak, and is dropped
        with it.
    achievable : Achievable or None
        The original's measured figures; those of a removed matrix or vector peak are
        dropped.
    keep : collection of str
        Fields the caller set itself: left as they are.
    """
    if "matmul_curve" not in keep:
        data["matmul_curve"] = {
            k: [{**p, "flops_per_s": p["flops_per_s"] * moves.of_curve(k)} for p in points]
            for k, points in data["matmul_curve"].items()}
    if "memory_curve" not in keep:
        data["memory_curve"] = [{**p, "bytes_per_s": p["bytes_per_s"] * moves.bandwidth}
                                for p in data["memory_curve"]]
    for table in _DEPTHWISE_TABLES:  # measured on the vector units
        if table not in keep:
            data[table] = {k: rate * moves.of_vector(k) for k, rate in data[table].items()}
    if "fp16_accumulate_flops_per_s" not in keep:  # 2x the fp16 peak on GeForce
        data["fp16_accumulate_flops_per_s"] = (
            fp16_accumulate * moves.of_matrix("fp16")
            if fp16_accumulate and "fp16" in data["matrix_flops_per_s"] else None)
    if "achievable" not in keep and achievable is not None:
        data["achievable"] = _follow_achievable(achievable, moves, data).model_dump()
    return data


def _follow_achievable(achievable: Achievable, moves: Moves, data: SpecData) -> Achievable:
    """``achievable`` following ``moves``, without the FLOP/s of a dtype ``data`` has no peak
    for; shares unchanged."""

    def times(m: Measured, factor: float) -> Measured:
        if factor == 1.0 and moves.clock == 1.0:
            return m
        clock_hz = None if m.clock_hz is None else m.clock_hz * moves.clock
        return m.model_copy(update={"value": m.value * factor, "clock_hz": clock_hz})

    clock = achievable.sustained_clock_hz
    return achievable.model_copy(update={
        "bandwidth_bytes_per_s": {k: times(m, moves.bandwidth)
                                  for k, m in achievable.bandwidth_bytes_per_s.items()},
        "matrix_flops_per_s": {k: times(m, moves.of_matrix(k))
                               for k, m in achievable.matrix_flops_per_s.items()
                               if k in data["matrix_flops_per_s"]},
        "vector_flops_per_s": {k: times(m, moves.of_vector(k))
                               for k, m in achievable.vector_flops_per_s.items()
                               if k in data["vector_flops_per_s"]},
        "attention_flops_per_s": {k: times(m, moves.of_matrix(k))
                                  for k, m in achievable.attention_flops_per_s.items()
                                  if k in data["matrix_flops_per_s"]},
        "sustained_clock_hz": None if clock is None else times(clock, moves.clock),
    })


# ------------------------------------------------------------------ with_overrides
def overridden(before: SpecData, achievable: Achievable | None, fields: Mapping[str, Any],
               validate: Callable[[SpecData], SpecData]) -> SpecData:
    """The data of ``DeviceSpec.with_overrides(**fields)``.

    Parameters
    ----------
    before : dict
        The original's ``model_dump()``.
    achievable : Achievable or None
        The original's measured figures.
    fields : mapping
        The fields to replace (values may be datasheet strings).
    validate : callable
        Validates a device's fields and returns the ``model_dump()`` of the result (so that
        datasheet strings in ``fields`` are numbers before the ratios are taken).
    """
    data = {**before, **fields}
    if fields.get("name", before["name"]) != before["name"] and "aliases" not in fields:
        data["aliases"] = []  # the original's names are not the new device's
    for name in ("fp16_accumulate_flops_per_s", "achievable"):
        if name not in fields:  # set by follow(), from the new peaks
            data[name] = None
    after = validate(data)
    moves = Moves(
        bandwidth=after["bandwidth_bytes_per_s"] / before["bandwidth_bytes_per_s"],
        clock=_ratio(before, after, "boost_clock_hz") or 1.0,
        matrix=_moved(before["matrix_flops_per_s"], after["matrix_flops_per_s"]),
        vector=_moved(before["vector_flops_per_s"], after["vector_flops_per_s"]),
    )
    data = follow(after, moves, fp16_accumulate=before["fp16_accumulate_flops_per_s"],
                  achievable=achievable, keep=fields)
    sixteen = moves.matrix.get("bf16") or moves.matrix.get("fp16")
    if sixteen and before["tdp_watts"] is not None and "tdp_watts" not in fields:
        # the power per FLOP/s stays, as in scaled(): a share derived from it stays too
        data["tdp_watts"] = before["tdp_watts"] * sixteen
    if before["boost_clock_hz"] is None and "achievable" not in fields:
        _fit_unrated_clock(data)
    return data


def _fit_unrated_clock(data: SpecData) -> None:
    """A sustained clock measured on a device with no rated boost, now that one is set.

    It did not follow the new boost (a measurement of the chip, with nothing to keep a
    share of): it stays as measured where it fits the boost as any measurement must
    (:func:`~roofline.hardware.checks.check_sustained_clock`), and is dropped, with a note
    saying why, where it does not.
    """
    boost, achievable = data["boost_clock_hz"], data["achievable"]
    clock = achievable["sustained_clock_hz"] if achievable is not None else None
    if boost is None or clock is None:
        return
    try:
        check_sustained_clock(clock["value"], boost)
    except ValueError:
        data["achievable"] = {**achievable, "sustained_clock_hz": None}
        data["notes"] = [*data["notes"], (
            f"achievable.sustained_clock_hz = {format_quantity(clock['value'], 'hz')} "
            f"(measured, {clock['source']}) dropped: the device had no rated boost_clock_hz, "
            f"and the measurement is {clock['value'] / boost:.3g}x the boost_clock_hz = "
            f"{format_quantity(boost, 'hz')} set by with_overrides(), outside the 0.01x to "
            f"{CLOCK_MARGIN:g}x (CLOCK_MARGIN) a measured clock may be of its rated boost.")]


def _ratio(before: Mapping[str, Any], after: Mapping[str, Any], key: str) -> float | None:
    """``after[key] / before[key]``, None unless both exist."""
    old, new = before.get(key), after.get(key)
    return new / old if old and new else None


def _moved(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Per key, how far a peak table moved (keys in both tables only)."""
    return {k: r for k in before if (r := _ratio(before, after, k))}


# ------------------------------------------------------------------ scaled
def scaled(before: SpecData, achievable: Achievable | None, *, flops: float = 1.0,
           bandwidth: float = 1.0, clock: float = 1.0, cores: float = 1.0,
           name: str | None = None) -> SpecData:
    """The data of ``DeviceSpec.scaled(flops, bandwidth, name, clock_factor=clock,
    cores_factor=cores)``; see there. ``before`` is the original's ``model_dump()``."""
    for label, factor in (("flops_factor", flops), ("bandwidth_factor", bandwidth),
                          ("clock_factor", clock), ("cores_factor", cores)):
        _check_factor(label, factor)
    compute = flops * clock * cores
    data = dict(before)
    for table in _PEAK_TABLES:
        data[table] = {k: v * compute for k, v in before[table].items()}
    units = before["compute_units"]
    if cores != 1 and before["matmul_curve"] and units is not None:
        # the curve scales with the clock and FLOP/s; with cores only as far as each
        # shape's tiles fill the new chip, which the analysis works out from these units
        data["matmul_curve_units"] = before["matmul_curve_units"] or units
    if units is not None:
        data["compute_units"] = max(1, round(units * cores))
    if before["boost_clock_hz"] is not None:
        data["boost_clock_hz"] = before["boost_clock_hz"] * clock
    if before["tdp_watts"] is not None:
        # the power per FLOP/s stays, so a matrix share derived from it (achievable's
        # power rule) keeps its value, as measured shares do
        data["tdp_watts"] = before["tdp_watts"] * compute
    data = follow(data, Moves(bandwidth=bandwidth, clock=clock, flops=compute,
                              curve=flops * clock),
                  fp16_accumulate=before["fp16_accumulate_flops_per_s"], achievable=achievable)
    extra = "".join(f", {what} x{f:g}" for what, f in (("clock", clock), ("cores", cores))
                    if f != 1)
    data.update(
        name=name or f"{before['name']} ({_label(flops, bandwidth, clock, cores)})",
        aliases=[],
        bandwidth_bytes_per_s=before["bandwidth_bytes_per_s"] * bandwidth,
        notes=[*before["notes"], f"What-if variant of {before['name']}: peaks "
               f"x{compute:g}, bandwidth x{bandwidth:g}{extra}."],
    )
    return data


def _check_factor(label: str, factor: Any) -> None:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
            or not 0 < factor < math.inf:
        raise ValueError(f"{label} must be a finite number > 0, got {factor!r}")


def _label(flops: float, bandwidth: float, clock: float, cores: float) -> str:
    """E.g. ``"2x FLOP/s, 1.5x bandwidth"``; ``"1x"`` for no change."""
    parts = [f"{factor:g}x {what}" for what, factor in (
        ("FLOP/s", flops), ("bandwidth", bandwidth), ("clock", clock), ("cores", cores))
        if factor != 1]
    return ", ".join(parts) or "1x"
