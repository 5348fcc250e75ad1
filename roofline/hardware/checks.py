"""Plausibility checks of a device description: what catches a unit slip.

Each check is a plain function of plain values that raises ``ValueError`` with a message
saying what is wrong and the likely slip; :class:`roofline.hardware.spec.DeviceSpec`'s
validators call them. They reject sparse peaks above twice the dense peak, peak-to-bandwidth
ratios (ridge points) no real device has, which is how a 1000x slip ("989.4 GFLOPS" for a
tensor-core peak, "3.35 GB/s" for HBM) shows even when each number alone looks plausible,
bandwidths below what any memory of their family has, launch overheads and latencies in
the wrong unit, and measured figures above the datasheet figure they derate. Each band and
floor below says how it was derived.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from roofline.hardware.measured import CLOCK_MARGIN, DRAM_LATENCY_BAND_SECONDS, Achievable
from roofline.hardware.units import format_quantity

__all__ = [
    "BANDWIDTH_PER_CAPACITY_FLOORS",
    "EFFICIENCY_KEYS",
    "LAUNCH_OVERHEAD_BAND_SECONDS",
    "MEMORY_BANDWIDTH_FLOORS",
    "RIDGE_BANDS_FLOP_PER_BYTE",
    "check_achievable",
    "check_efficiency",
    "check_fp16_accumulate",
    "check_kind_case",
    "check_memory_type",
    "check_physically_plausible",
    "check_sparse",
    "check_sustained_clock",
]

# Datasheets round each figure on its own: H100's sparse fp8 prints as 3958 TFLOPS over a
# dense 1979 (exactly 2x), but a sparse figure rounded up over a dense one rounded down can
# exceed 2x by the rounding of 3-4 significant digits. 1% absorbs that, not a real gap.
_ROUNDING_TOLERANCE = 1.01

#: Ridge points (peak FLOP/s over memory bytes/s, FLOP/B) that real devices span, per
#: class of peak; a peak outside its band is a unit slip. Derived from the shipped registry
#: (tests/test_trust_hardware.py recomputes the extremes):
#:
#: * ``"narrow"``: matrix peaks in tf32 and narrower (dense, 2:4 sparse, fp16-accumulate).
#:   The registry's full-rate peaks span 37.4 (RTX 3080 Ti tf32) to 2621 (RTX 4090 int4
#:   sparse) FLOP/B; the band is 10x wider on each side. Blackwell Ultra's dense int8, cut
#:   to 0.15 POPS (B300 19.8 FLOP/B, GB300 20.6), sits inside it and is not one of the
#:   peaks it is derived from: a band 10x below it (1.98) would let 1000x slips of the
#:   densest parts' peaks through. Since 26214 / 3.74 is 7000x, a 1000x slip of ANY
#:   shipped narrow peak, or of its bandwidth, leaves the band (the two cut-down int8
#:   peaks' upward slips, 153 and 165 POPS, fail the 1e17 FLOP/s plausibility range).
#: * ``"wide"``: fp64/fp32 matrix peaks and all vector peaks. The registry spans 4.47
#:   (Gaudi 2 bf16 vector) to 113 (RTX 5000 Ada fp32 vector); the band is 100x lower at the
#:   bottom, because cut-down fp64 parts sit far below the registry (B300: 1.25 TFLOPS fp64
#:   on 8 TB/s, 0.16 FLOP/B, https://glennklockwood.com/garden/processors/B300), and 10x
#:   higher at the top. It catches every 1000x slip that raises a ridge point (a peak too
#:   high, a bandwidth too low), and one that lowers it only below 44.7 FLOP/B.
#:
#: Skipped for measured specs (calibration measures, it does not transcribe) and with
#: ``plausibility=False`` (what-if devices).
RIDGE_BANDS_FLOP_PER_BYTE: dict[str, tuple[float, float]] = {
    "narrow": (3.74, 26214.0),
    "wide": (0.0447, 1134.0),
}
_WIDE_DTYPES = ("fp64", "fp32")

#: Lowest main-memory bandwidth of a memory family, bytes/s; below it is a unit slip.
#: * HBM: one stack of first-generation HBM, 1024 data pins at 1 Gb/s = 128 GB/s (JEDEC
#:   JESD235, https://www.jedec.org/standards-documents/docs/jesd235a); every HBM device
#:   has at least one stack at least that fast.
#: * GDDR: one 32-bit GDDR5 device at 3.6 Gb/s per pin, the slowest GDDR5 speed bin, is
#:   14.4 GB/s (JESD212, https://www.jedec.org/standards-documents/docs/jesd212c); boards
#:   have at least one. LPDDR and DDR get no floor beyond the generic unit-prefix range (a
#:   single narrow channel is a few GB/s).
MEMORY_BANDWIDTH_FLOORS: dict[str, float] = {"HBM": 128e9, "GDDR": 14.4e9}

#: Lowest main-memory bandwidth per byte of capacity (bytes/s per byte, i.e. GB/s per GB) of
#: a memory family; below it the bandwidth is a unit slip (bits for bytes: "3.35 Tb/s" is
#: 419 GB/s, 5.2 GB/s per GB on an 80 GB H100). Bandwidth and capacity both scale with the
#: number of stacks (HBM) or chips (GDDR), so their ratio is a per-device property:
#:
#: * HBM: the least bandwidth per capacity a JEDEC stack allows at its rated pin speed is
#:   HBM3's tallest, densest stack, 16 dies x 32 Gb = 64 GB on 1024 pins x 6.4 Gb/s =
#:   819 GB/s, 12.8 GB/s per GB (JESD238); the registry spans 23.4 (MI325X) to 56.3
#:   (V100 16GB). 10 leaves 20% for a part clocked below its generation's rated speed and
#:   catches the 8x slip of every shipped HBM device (56.3 / 8 = 7.0).
#: * GDDR: a 32-bit GDDR5 chip of 8 Gb (1 GB) in clamshell mode (two chips share one x32
#:   channel) at the slowest bin, 3.6 Gb/s, is 14.4 GB/s over 2 GB = 7.2 GB/s per GB
#:   (JESD212); the registry spans 12.5 (L4) to 76 (RTX 3080), and the 24 GB Tesla M40 sits
#:   at 12 (288 GB/s). 6 is below the clamshell derivation; it catches an 8x slip only of a
#:   card above 48 (RTX 3070/3080/2080 Ti/5090), the rest is a documented gap.
#:
#: LPDDR and DDR get none: a CPU socket can hold terabytes on a few hundred GB/s.
BANDWIDTH_PER_CAPACITY_FLOORS: dict[str, float] = {"HBM": 10.0, "GDDR": 6.0}

#: Plausible ``launch_overhead_seconds`` of a transcribed (not measured) spec; outside it
#: the value is a unit slip (ms for us: "5 ms" makes every small op overhead-bound).
#: A unit-slip check, not a physical limit: per-kernel launch costs are quoted in
#: microseconds (the 5 us default of ``roofline.hardware.spec``, with its sources;
#: ``roofline.calibrate`` measured 2.4 us for a 1-element ``torch.add`` on the 2-core
#: machine this band was set on). 100 ns is 50x below the default and 1 ms 200x above it,
#: so a 1000x slip (ns or ms written for us) of any value between 1 us and 100 us leaves
#: the band. Skipped for measured specs: a loaded machine measures what it measures (the
#: generic 0 to 1 s unit range still applies).
LAUNCH_OVERHEAD_BAND_SECONDS: tuple[float, float] = (1e-7, 1e-3)
_MEMORY_TYPE = re.compile(r"(HBM|GDDR|LPDDR|DDR)\d?[A-Za-z]?")

#: Keys of an ``efficiency`` table: the matrix and vector engines and the memory system.
EFFICIENCY_KEYS = ("matrix", "vector", "memory")


# ------------------------------------------------------------------ fields
def check_kind_case(value: Any, kinds: tuple[str, ...]) -> Any:
    """``value`` unless it is a case variant of one of ``kinds`` ("GPU" for "gpu")."""
    # One spelling, as in the JSON schema and every comparison (spec.kind == "gpu"); a
    # case variant gets told which, rather than pydantic's list alone.
    if isinstance(value, str) and value not in kinds and value.strip().lower() in kinds:
        raise ValueError(f"write kind in lower case, {value.strip().lower()!r} rather than "
                         f"{value!r} (one of {', '.join(kinds)})")
    return value


def check_memory_type(value: str | None) -> str | None:
    """``value`` unless it names no memory technology (HBM3, GDDR6X, LPDDR5, DDR5, ...)."""
    if value is not None and not _MEMORY_TYPE.fullmatch(value):
        raise ValueError(f"unknown memory type {value!r}; expected e.g. HBM3, HBM2e, "
                         "GDDR6X, LPDDR5, DDR5 (or the family: HBM, GDDR, LPDDR, DDR)")
    return value


def check_efficiency(value: Any) -> dict[str, float]:
    """Achievable fractions of peak as a dict keyed by :data:`EFFICIENCY_KEYS`, checked.

    The one check of an ``efficiency``, both a device's (``DeviceSpec.efficiency``) and an
    analysis option's (``Options.efficiency``).

    Parameters
    ----------
    value : float, dict or None
        One fraction for every key, a dict with some of the keys, or None (empty).

    Returns
    -------
    dict
        Key -> fraction in (0, 1] (a new dict; empty for None).

    Raises
    ------
    ValueError
        For another type, an unknown key, or a fraction that is not a number in (0, 1].
    """
    if value is None:
        return {}
    if isinstance(value, bool):
        raise ValueError(f"efficiency must be a fraction in (0, 1] or a dict, got {value!r}")
    if isinstance(value, (int, float)):
        value = dict.fromkeys(EFFICIENCY_KEYS, float(value))
    if not isinstance(value, dict):
        raise ValueError(f"efficiency must be a float or a dict, got {type(value).__name__}")
    for key, fraction in value.items():
        if key not in EFFICIENCY_KEYS:
            raise ValueError(f"unknown efficiency key {key!r}; expected matrix, vector or memory")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise ValueError(f"efficiency[{key!r}] must be a number in (0, 1], got {fraction!r}")
        if not 0 < fraction <= 1:
            raise ValueError(f"efficiency[{key!r}] = {fraction!r} is not in (0, 1]")
    return dict(value)


# ------------------------------------------------------------------ peaks
def check_sparse(dense: Mapping[str, float], sparse: Mapping[str, float]) -> None:
    """2:4 sparse peaks between the dense peak of their dtype and twice it."""
    for dtype, rate in sparse.items():
        peak = dense.get(dtype)
        if peak is None:
            continue
        if rate > 2.0 * peak * _ROUNDING_TOLERANCE:
            raise ValueError(
                f"matrix_sparse_flops_per_s[{dtype!r}] = {format_quantity(rate, 'flops')} is "
                f"more than 2x the dense {format_quantity(peak, 'flops')}; 2:4 sparsity at "
                f"most doubles the dense peak"
            )
        if rate < peak:
            raise ValueError(
                f"matrix_sparse_flops_per_s[{dtype!r}] = {format_quantity(rate, 'flops')} is "
                f"below the dense {format_quantity(peak, 'flops')}; dense and sparse swapped?"
            )


def check_fp16_accumulate(rate: float | None, fp16: float | None) -> None:
    """An fp16-accumulate peak between the (fp32-accumulate) fp16 peak and twice it."""
    if rate is None:
        return
    if fp16 is None:
        raise ValueError("fp16_accumulate_flops_per_s needs the fp16 matrix peak it speeds up")
    if not fp16 <= rate <= 2.0 * fp16 * _ROUNDING_TOLERANCE:
        raise ValueError(
            f"fp16_accumulate_flops_per_s = {format_quantity(rate, 'flops')} must lie between "
            f"the fp32-accumulate fp16 peak {format_quantity(fp16, 'flops')} and twice it "
            "(half-rate fp32 accumulation is the only gap datasheets list)"
        )


# ------------------------------------------------------------------ measured figures
def check_achievable(achievable: Achievable, *, bandwidth_bytes_per_s: float,
                     peaks: Mapping[str, Mapping[str, float]], boost_clock_hz: float | None,
                     sources: Mapping[str, str]) -> None:
    """Measured figures against the datasheet: bandwidth at most the datasheet figure,
    FLOP/s and clocks at most :data:`CLOCK_MARGIN` times the peak / rated boost, every
    figure above 1% of what it derates (below is a unit slip), an ECC flag with its
    source.

    ``peaks`` holds the datasheet tables the measured FLOP/s derate, by field name
    (``matrix_flops_per_s``, ``vector_flops_per_s``; ``attention_flops_per_s`` derates the
    matrix peaks).
    """
    _check_bandwidths(achievable, bandwidth_bytes_per_s)
    for table, datasheet in peaks.items():
        _check_rates(table, getattr(achievable, table), datasheet)
    clock = achievable.sustained_clock_hz
    if clock is not None and boost_clock_hz is not None:
        check_sustained_clock(clock.value, boost_clock_hz)
    _check_times(achievable)
    if achievable.ecc_default is not None and "ecc" not in sources:
        raise ValueError("achievable.ecc_default needs its source in sources['ecc']")


def check_sustained_clock(value: float, boost_clock_hz: float) -> None:
    """A measured sustained clock within :data:`CLOCK_MARGIN` of the rated boost, and above
    1% of it."""
    where = "achievable.sustained_clock_hz"
    _check_margin(where, value, boost_clock_hz, "hz", "boost_clock_hz")
    _check_share_floor(where, value / boost_clock_hz)


def _check_bandwidths(achievable: Achievable, datasheet: float) -> None:
    for pattern, m in achievable.bandwidth_bytes_per_s.items():
        where = f"achievable.bandwidth_bytes_per_s[{pattern!r}]"
        share = m.value / datasheet
        if share > 1.0:
            raise ValueError(
                f"{where} = {format_quantity(m.value, 'bandwidth')} is above the datasheet "
                f"bandwidth_bytes_per_s = {format_quantity(datasheet, 'bandwidth')}: a "
                f"bandwidth efficiency of {share:.3g} > 1 (DRAM cannot stream faster than its "
                "interface; a cache-resident or bit-rate figure?)")
        _check_share_floor(where, share)


def _check_rates(table: str, measured: Mapping[str, Any], peaks: Mapping[str, float]) -> None:
    for dtype, m in measured.items():
        where = f"achievable.{table}[{dtype!r}]"
        peak = peaks.get(dtype)
        if peak is None:
            raise ValueError(f"{where}: the device has no datasheet {table}[{dtype!r}] "
                             "peak to compare the measurement with")
        _check_margin(where, m.value, peak, "flops", f"{table}[{dtype!r}]")
        _check_share_floor(where, m.value / peak)


def _check_times(achievable: Achievable) -> None:
    for name in ("launch_overhead_seconds", "graph_launch_overhead_seconds",
                 "dram_latency_seconds"):
        m = getattr(achievable, name)
        low, high = (DRAM_LATENCY_BAND_SECONDS if name == "dram_latency_seconds"
                     else LAUNCH_OVERHEAD_BAND_SECONDS)
        if m is not None and not low <= m.value <= high:
            raise ValueError(
                f"achievable.{name} = {format_quantity(m.value, 'seconds')} is outside "
                f"{format_quantity(low, 'seconds')} to {format_quantity(high, 'seconds')}: "
                "ms, us or ns slipped?")


def _check_margin(where: str, value: float, peak: float, kind: str, peak_name: str) -> None:
    if value > peak * CLOCK_MARGIN:
        raise ValueError(
            f"{where} = {format_quantity(value, kind)} is {value / peak:.3g}x the datasheet "
            f"{peak_name} = {format_quantity(peak, kind)}, more than the {CLOCK_MARGIN:g}x "
            "clock margin (CLOCK_MARGIN) that boards running above their rated boost reach: a "
            "sparse or fp16-accumulate rate, or the wrong unit?")


def _check_share_floor(where: str, share: float) -> None:
    if share < 0.01:
        raise ValueError(f"{where} is {share:.3g} of the datasheet figure it derates, below "
                         "1%: a unit slip (GFLOPS for TFLOPS, GB/s for TB/s)?")


# ------------------------------------------------------------------ physical plausibility
def check_physically_plausible(
    *, launch_overhead_seconds: float, default_overhead_seconds: float,
    bandwidth_bytes_per_s: float, memory_type: str | None, memory_bytes: float | None,
    peaks: Iterable[tuple[str, str, float]],
) -> None:
    """Launch overhead inside :data:`LAUNCH_OVERHEAD_BAND_SECONDS`; HBM/GDDR bandwidth
    floors (:data:`MEMORY_BANDWIDTH_FLOORS`, :data:`BANDWIDTH_PER_CAPACITY_FLOORS`); ridge
    points inside :data:`RIDGE_BANDS_FLOP_PER_BYTE`.

    ``default_overhead_seconds`` is the device kind's modelling default (named in the
    message); ``peaks`` are (field, dtype, FLOP/s) of every datasheet peak.
    """
    _check_launch_overhead(launch_overhead_seconds, default_overhead_seconds)
    _check_bandwidth_floors(bandwidth_bytes_per_s, memory_type, memory_bytes)
    _check_ridge_points(peaks, bandwidth_bytes_per_s)


def _check_launch_overhead(overhead: float, default: float) -> None:
    low, high = LAUNCH_OVERHEAD_BAND_SECONDS
    if not low <= overhead <= high:
        raise ValueError(
            f"launch_overhead_seconds = {format_quantity(overhead, 'seconds')} is outside "
            f"the {format_quantity(low, 'seconds')} to {format_quantity(high, 'seconds')} "
            "that a kernel launch or eager op dispatch takes: ms or ns written for us? (the "
            f"default is {format_quantity(default, 'seconds')}; "
            "for a pure roofline use the analysis option overhead=False)")


def _check_bandwidth_floors(bandwidth: float, memory_type: str | None,
                            memory_bytes: float | None) -> None:
    family = _MEMORY_TYPE.fullmatch(memory_type or "")
    floor = MEMORY_BANDWIDTH_FLOORS.get(family.group(1) if family else "")
    if floor is not None and bandwidth < floor:
        raise ValueError(
            f"bandwidth_bytes_per_s = {format_quantity(bandwidth, 'bandwidth')} is below "
            f"{format_quantity(floor, 'bandwidth')}, the least any {memory_type} device "
            "has: GB/s written for TB/s?")
    per_byte = BANDWIDTH_PER_CAPACITY_FLOORS.get(family.group(1) if family else "")
    if per_byte is not None and memory_bytes and bandwidth < per_byte * memory_bytes:
        raise ValueError(
            f"bandwidth_bytes_per_s = {format_quantity(bandwidth, 'bandwidth')} on "
            f"memory_bytes = {format_quantity(memory_bytes, 'bytes')} of "
            f"{memory_type} is {bandwidth / memory_bytes:.3g} GB/s per GB, below "
            f"the {per_byte:g} GB/s per GB any {memory_type} device has (bandwidth and "
            "capacity grow together with the stacks or chips): bits written for bytes, or a "
            "prefix slip in either?")


def _check_ridge_points(peaks: Iterable[tuple[str, str, float]], bandwidth: float) -> None:
    for field_name, dtype, rate in peaks:
        band = "wide" if field_name == "vector_flops_per_s" or dtype in _WIDE_DTYPES \
            else "narrow"
        low, high = RIDGE_BANDS_FLOP_PER_BYTE[band]
        ridge = rate / bandwidth
        if not low <= ridge <= high:
            where = f"{field_name}[{dtype!r}]" if dtype else field_name
            raise ValueError(
                f"{where} = {format_quantity(rate, 'flops')} over bandwidth_bytes_per_s = "
                f"{format_quantity(bandwidth, 'bandwidth')} is a ridge point of "
                f"{ridge:.3g} FLOP/B, outside the {low:g} to {high:g} FLOP/B of real devices "
                "for this kind of peak: is one of them off by 1000 (GFLOPS for TFLOPS, "
                "GB/s for TB/s)?")
