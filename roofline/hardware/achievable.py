"""Achievable figures of a device: measured, else a documented default for its class, else
the datasheet.

The registry stores datasheet peaks and, next to them, *measured* achievable figures
(:class:`roofline.hardware.measured.Achievable`), each with source, method and conditions.
:func:`figures` resolves every figure the analysis needs, and says where it came from:

* ``"measured"``: a measurement of this device in the registry (or, on a calibrated spec,
  the spec's own figures, which ``roofline.calibrate`` measured);
* ``"class default"``: the median over the *shipped* registry's measured members of the
  device's class (:func:`class_of`), applied to this device's datasheet figure, or of a
  pool named with the rule (the vendor's devices for a dtype ratio, the vendor's parts of
  one ISA for the power rule). A default is never chosen by hand, and never fitted to
  validation data: it is the median of the measured figures, recomputed whenever the data
  files change;
* ``"datasheet"``: no measurement and no measured member of the class: the datasheet
  figure itself (share 1.0), or for launch overhead the registry's modelling constant.

Classes (:func:`class_of`): memory family (HBM; GDDR incl. GDDR5X/6/6X/7; other) and
segment, which stands for the power class. GPUs are *consumer* (a name or alias with
GeForce, TITAN, GTX or Radeon, or RTX without a workstation word: boards that boost above
their rated clock), *workstation* (Quadro, RTX A-series, RTX Ada: full-rate fp32
accumulation at a 130-300 W board limit) or *datacentre* (the rest: Tesla-class NVIDIA
parts such as T4, A10, L4, A100, H100, and AMD Instinct). GPUs on unified LPDDR memory
(Apple, Jetson) form "other GPU"; TPUs, other accelerators and CPUs form classes of their
own ("HBM TPU", "HBM accelerator", "CPU"). Launch overhead defaults pool every measured
device of a kind ("GPU"); DRAM latency defaults pool the GPUs of a memory family
("HBM GPU", "GDDR GPU").

Resolution, per figure:

* ``bandwidth(pattern)``: the device's measurement of that pattern; else its nearest
  measured pattern (``copy`` falls back to ``stream_app``, FluidX3D's LBM kernel, which
  like copy moves one byte in per byte out; ``read`` and ``triad`` fall back to the
  device's ``copy``, then ``stream_app``), still ``"measured"`` and saying which; else the
  class median of the members' shares for that pattern (each member counted with its own
  figure resolved the same way); else the datasheet. ``layer_norm`` (the rate PyTorch's
  layer-norm forward kernel streams at, 56-73% of the copy figure where measured) has no
  nearer pattern: a device without its measurement takes its own ``copy`` figure times the
  median ratio of layer norm to copy over the measured GPUs of its vendor (the kernel, not
  the memory, sets the ratio); with no measured GPU of the vendor, the copy figure.
* ``matrix(dtype)``: the measurement of that dtype; else, for fp16/bf16 with equal
  datasheet peaks, the device's measured share of the other; else, for another dtype
  (tf32, fp8...), the device's own measured 16-bit share (else its power-rule one, below)
  times the median ratio of that
  dtype's share to the 16-bit share over the vendor's devices measured in both (the same
  matrix units at the same power limit: held out, TF32 on NVIDIA GPUs is 3% off at the
  median against 6% for the class median and 23% for the datasheet,
  ``benchmarks/kernels.py``); else, for bf16/fp16 on a device with an ISA
  (``DeviceSpec.isa``) and a TDP, the *power rule*: the median over the measured parts of
  its vendor and ISA (one SM design and process: the same energy per matrix FLOP) of their
  16-bit share times (its board power per TFLOP/s of the peak over theirs) ^
  :data:`POWER_EXPONENT` (a power-capped clock goes as the cube root of the power; held out
  over 18 parts, 4.0% off at the median against 7.5% for the class median); else the class
  median share for that dtype; else the datasheet. None when the device has no matrix peak
  for it.
* ``vector(dtype)``: the measurement; else, for fp32, the median share of the measured
  devices of the same class and FP32 datapath design (:func:`fp32_datapath_class`: the
  vendor, the class, the FP32 lanes per compute unit the datasheet implies, and whether
  the part has matrix units); else the datasheet. SGEMM with TF32 off reaches 62-78% of
  the datasheet on Ampere GA10x, Ada and Hopper boards (two FP32 datapaths per SM
  partition, one shared with INT32; 128 lanes per SM) and 90-98% on Volta and A100 (one
  datapath; 64 lanes); the datacentre GDDR cards L4, L40S and T4 reach 51-54%
  (zzc0721/torch-performance-test-data@9d8282763726, fp32 column).
* ``attention(dtype)``: the rate causal flash attention was measured to reach on the
  matrix units (or its fp16/bf16 sibling's share); else the class median share of the
  matrix peak; else None, and the analysis runs attention at ``matrix(dtype)``.
* ``launch_overhead(graphs)``: the measurement; else an explicit
  ``launch_overhead_seconds`` on the spec (a value other than the per-kind modelling
  default, e.g. from a user file); else the median over measured devices of the same kind
  (all measured GPUs: launch cost is a driver and front-end property, not a memory one);
  else the modelling constant ``spec.launch_overhead_seconds`` (origin ``"datasheet"``,
  which here means the registry constant, as its method says).
* ``dram_latency()``: the measurement; else the median over measured GPUs of the same
  memory family (HBM, GDDR); else None.
* ``clock()``: the measured sustained clock (share of ``boost_clock_hz`` where rated); None
  when not measured.

``power_capped`` is True when a measured sustained clock is more than 1% (one 15 MHz clock
step at 1.5 GHz) below the rated boost clock: the board power or thermal limit holds the
clock down under load. ``power_capped_reason`` says why or why not.

Run ``python -c "from roofline.hardware.achievable import class_defaults; ..."`` or see
``docs/devices.md`` (generated) for the current class-default table.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from roofline._si import si
from roofline.hardware.measured import Achievable, GemmFit, Measured, gemm_engine
from roofline.hardware.measured import BandwidthPattern as Pattern
from roofline.hardware.registry import _builtin  # the shipped data files only
from roofline.hardware.spec import DEFAULT_LAUNCH_OVERHEAD_SECONDS, DeviceSpec
from roofline.hardware.units import canonical_dtype

__all__ = [
    "POWER_CAP_CLOCK_SHARE",
    "POWER_EXPONENT",
    "SIXTEEN_BIT",
    "ClassDefault",
    "Figure",
    "Figures",
    "GemmFigure",
    "Origin",
    "class_defaults",
    "class_of",
    "figures",
    "fp32_datapath_class",
    "own_16bit_share",
    "two_fp32_datapaths",
    "watts_per_tflops",
]

Origin = Literal["measured", "class default", "datasheet"]

#: The power rule's exponent: dynamic power goes as C V^2 f, and over the DVFS range the
#: voltage rises about in proportion to the clock, so a power-capped clock, and the matrix
#: rate with it, goes as the cube root of the power per FLOP/s. Set from that relation, not
#: fitted (benchmarks/kernels.py reports 1/4 and 1/2 beside it).
POWER_EXPONENT = 1 / 3
_EXPONENT = f"({Fraction(POWER_EXPONENT).limit_denominator(100)})"  # "(1/3)" in method texts

#: A measured sustained clock below this share of the rated boost marks the device power-
#: (or thermally) capped: more than one 15 MHz clock step below the boost at ~1.5 GHz.
POWER_CAP_CLOCK_SHARE = 0.99

# The pattern a missing one falls back to, in order (see the module docstring).
_BANDWIDTH_FALLBACK: dict[str, tuple[str, ...]] = {
    "copy": ("stream_app",),
    "read": ("copy", "stream_app"),
    "triad": ("copy", "stream_app"),
    "stream_app": ("copy",),
    "layer_norm": (),
}
_SIBLING = {"fp16": "bf16", "bf16": "fp16"}
#: The 16-bit matrix dtypes, in the order :func:`own_16bit_share` takes them.
SIXTEEN_BIT = ("bf16", "fp16")
_CONSUMER = re.compile(r"\b(geforce|titan|gtx|radeon)\b", re.IGNORECASE)
_WORKSTATION = re.compile(r"\b(quadro|rtx a\d+|ada)\b", re.IGNORECASE)
_KIND_LABEL = {"gpu": "GPU", "tpu": "TPU", "cpu": "CPU", "accelerator": "accelerator"}
_UNITS = {"bandwidth": "B/s", "flops": "FLOP/s", "seconds": "s", "hz": "Hz"}


@dataclass(frozen=True)
class Figure:
    """One resolved figure: its value, share of the datasheet, and where it comes from.

    Attributes
    ----------
    value : float
        In the unit its name implies (bytes/s, FLOP/s, seconds, Hz).
    share : float or None
        ``value`` over the datasheet figure it derates; None where there is none (latency,
        launch overhead, a clock with no rated boost).
    origin : {"measured", "class default", "datasheet"}
    source : str
        The citation (measured), the class and its members (class default), or the field.
    method : str
        How it was measured or derived.
    kind : str
        ``"bandwidth"``, ``"flops"``, ``"seconds"`` or ``"hz"`` (for printing).
    name : str
        What it is, e.g. ``"bandwidth (copy)"``, ``"matrix bf16"``.
    """

    value: float
    share: float | None
    origin: Origin
    source: str
    method: str
    kind: str = ""
    name: str = ""

    def __str__(self) -> str:
        """E.g. ``"2.69 TB/s (80% of datasheet, measured: FluidX3D@8986874)"``."""
        text = si(self.value, _UNITS.get(self.kind, ""), digits=3)
        share = "" if self.share is None else f"{self.share:.0%} of datasheet, "
        if self.origin == "datasheet":
            return f"{text} ({share}datasheet)" if share and self.share != 1.0 \
                else f"{text} (datasheet)"
        source = self.source.split(" (")[0] if self.origin == "class default" \
            else _short(self.source)
        return f"{text} ({share}{self.origin}: {source})"


#: The dtypes whose GEMM fits have class defaults (pooled: the same matrix units at the
#: same peak), by vendor and class: the 16-bit matrix units, fp8 and fp4 apart. fp32 GEMMs
#: run on the CUDA cores, where parts of one class differ by 2x (one FP32 datapath per SM
#: partition on Pascal, two on Ampere GA10x and Ada, which SGEMM fills to about 2/3:
#: zzc0721/torch-performance-test-data@9d8282763726:database.md): no default carries over.
GEMM_DEFAULT_DTYPES = frozenset({"bf16", "fp16", "fp8", "fp4"})
GEMM_PARTS = ("efficiency", "bandwidth_share", "floor_seconds")


def gemm_pool(dtype: str) -> str:
    """The class-default figure a GEMM fit of ``dtype`` pools into: ``"gemm"`` for the
    16-bit matrix units (bf16 and fp16 share a peak), ``"gemm fp8"`` for fp8 (and
    ``"gemm fp4"``)."""
    return "gemm" if dtype in ("bf16", "fp16") else f"gemm {dtype}"


@dataclass(frozen=True)
class GemmFigure:
    """The GEMM time model of one device and dtype, resolved (:meth:`Figures.gemm`).

    ``seconds = floor_seconds + max(flops / (efficiency x peak), bytes / (bandwidth_share x
    bandwidth))`` with the device's datasheet peak and bandwidth.
    """

    dtype: str
    efficiency: float
    bandwidth_share: float
    floor_seconds: float
    origin: Origin
    source: str
    fit: str = ""  # how well it fits its table, for a measured one
    compute_units: int | None = None  # of the chip it was measured on (class default: None)
    #: (m, n, k) ranges of the measured table's shapes (class default: None)
    ranges: tuple[tuple[int, int], tuple[int, int], tuple[int, int]] | None = None

    def __str__(self) -> str:
        """E.g. ``"75% of peak, 74% of bandwidth, 6.5 us floor (measured: ...)"``."""
        source = self.source if self.origin == "class default" else _short(self.source)
        fit = f"; {self.fit}" if self.fit else ""
        return (f"{self.efficiency:.0%} of peak, {self.bandwidth_share:.0%} of bandwidth, "
                f"{si(self.floor_seconds, 's', digits=2)} floor ({self.origin}: {source}{fit})")


@dataclass(frozen=True)
class ClassDefault:
    """Median of one figure over the measured members of one class.

    ``value`` is a share of the datasheet for bandwidth, matrix, vector and attention
    figures (attention: of the matrix peak), a ratio for "layer_norm" (to the copy figure)
    and "matrix ratio" (to the 16-bit share), a 16-bit share over (W per TFLOP/s) ^
    :data:`POWER_EXPONENT` for "matrix power", a GEMM fit's part for a GEMM pool, seconds
    for launch overhead and DRAM latency.
    """

    class_name: str
    #: "bandwidth", "layer_norm", "matrix", "matrix ratio", "matrix power", "vector",
    #: "attention", "launch", "latency", "gemm..."
    figure: str
    key: str  # pattern, dtype, "16-bit", "copy", "plain"/"graph", a GEMM part, or ""
    value: float
    members: tuple[str, ...]

    @property
    def description(self) -> str:
        plural = "s" if len(self.members) != 1 else ""
        return (f"median of {len(self.members)} measured {self.class_name} "
                f"device{plural} ({', '.join(self.members)})")


def _short(source: str) -> str:
    """A short form of a citation: ``owner/repo@commit:path`` -> ``repo@commit7``."""
    repo = re.match(r"[\w.-]+/([\w.-]+)@([0-9a-f]{7})", source)
    if repo:
        return f"{repo.group(1)}@{repo.group(2)}"
    url = re.match(r"https?://(?:www\.)?(\S+)", source)
    if url:
        text = url.group(1)
        return text if len(text) <= 40 else text[:39] + "..."
    return source if len(source) <= 60 else source[:59] + "..."


def memory_family(spec: DeviceSpec) -> str:
    """``"HBM"``, ``"GDDR"`` or ``"other"`` (LPDDR, DDR, unknown) from ``memory_type``."""
    memory = (spec.memory_type or "").upper()
    for family in ("HBM", "GDDR"):
        if memory.startswith(family):
            return family
    return "other"


def class_of(spec: DeviceSpec) -> str:
    """The device's class for defaults, e.g. ``"HBM datacentre"``, ``"GDDR consumer"``.

    See the module docstring for the rule.
    """
    family = memory_family(spec)
    if spec.kind == "cpu":
        return "CPU"
    if spec.kind == "tpu":
        return f"{family} TPU"
    if spec.kind == "accelerator":
        return f"{family} accelerator"
    if family == "other":
        return "other GPU"
    labels = (spec.name, *spec.aliases)
    if any(_CONSUMER.search(label) for label in labels):
        return f"{family} consumer"
    if any(_WORKSTATION.search(label) for label in labels):
        return f"{family} workstation"
    if any(re.search(r"\brtx\b", label, re.IGNORECASE) for label in labels):
        return f"{family} consumer"  # GeForce RTX cards named without "GeForce"
    return f"{family} datacentre"


def fp32_datapath_class(spec: DeviceSpec) -> str | None:
    """The device's FP32 datapath design within its class (:func:`class_of`, which stands
    for the power class), for the vector fp32 default, e.g. ``"NVIDIA GDDR consumer with
    128 FP32 lanes per compute unit and matrix units"``; None when the datasheet lacks the
    figures to say.

    The lanes are the fp32 vector peak over 2 FLOPs per FMA, the compute units and the boost
    clock (the measured sustained clock where no boost is rated), to the nearest power of
    two (None when none is within 10%). On NVIDIA parts with tensor cores 128 lanes means
    two FP32 datapaths per SM partition (Ampere GA10x, Ada, Hopper, Blackwell) and 64 one
    (Volta, Turing, A100); Pascal has 128 lanes in one datapath and no matrix units, so it
    is a class of its own.
    """
    lanes = _fp32_lanes(spec)
    if lanes is None:
        return None
    matrix = "and" if _has_matrix_units(spec) else "and no"
    return f"{spec.vendor} {class_of(spec)} with {lanes} FP32 lanes per compute unit " \
           f"{matrix} matrix units"


def two_fp32_datapaths(spec: DeviceSpec) -> bool:
    """Whether the part's SMs split their FP32 lanes over two datapaths, one shared with
    INT32 (an NVIDIA part with 128 lanes per SM and matrix units: Ampere GA10x, Ada,
    Hopper, Blackwell; see :func:`fp32_datapath_class`)."""
    return spec.vendor == "NVIDIA" and _fp32_lanes(spec) == 128 and _has_matrix_units(spec)


def _fp32_lanes(spec: DeviceSpec) -> float | None:
    """FP32 lanes per compute unit the datasheet implies, a power of two (an int from 1 up;
    :func:`fp32_datapath_class`)."""
    peak = spec.vector_flops_per_s.get("fp32")
    sustained = spec.achievable.sustained_clock_hz if spec.achievable else None
    clock = spec.boost_clock_hz or (sustained.value if sustained else None)
    if peak is None or not spec.compute_units or not clock:
        return None
    lanes = peak / (2 * spec.compute_units * clock)
    nearest = 2 ** round(math.log2(lanes))
    return nearest if abs(lanes / nearest - 1) <= 0.10 else None


def _has_matrix_units(spec: DeviceSpec) -> bool:
    return bool(spec.matrix_flops_per_s or spec.matrix_sparse_flops_per_s)


def _own_bandwidth(spec: DeviceSpec, pattern: str) -> tuple[Measured, str] | None:
    """The device's measurement for ``pattern`` or its nearest measured pattern, and which."""
    if spec.achievable is None:
        return None
    table = spec.achievable.bandwidth_bytes_per_s
    for key in (pattern, *_BANDWIDTH_FALLBACK[pattern]):
        if key in table:
            return table[key], key  # type: ignore[index]
    return None


def _own_matrix(spec: DeviceSpec, dtype: str, field: str = "matrix_flops_per_s",
                ) -> tuple[Measured, str] | None:
    """The device's measurement for ``dtype`` in ``achievable.<field>`` (a rate of the
    matrix units), or of its fp16/bf16 sibling with the same datasheet matrix peak, and
    which dtype it is."""
    if spec.achievable is None:
        return None
    table: dict[str, Measured] = getattr(spec.achievable, field)
    if dtype in table:
        return table[dtype], dtype
    sibling = _SIBLING.get(dtype)
    peaks = spec.matrix_flops_per_s
    if sibling in table and sibling is not None and peaks.get(sibling) == peaks.get(dtype):
        return table[sibling], sibling
    return None


def own_16bit_share(spec: DeviceSpec) -> tuple[str, float] | None:
    """The device's measured share of its 16-bit matrix peak, bf16's where both are
    measured, and which dtype it is; None when neither is."""
    table = spec.achievable.matrix_flops_per_s if spec.achievable else {}
    for dtype in SIXTEEN_BIT:
        if dtype in table and dtype in spec.matrix_flops_per_s:
            return dtype, table[dtype].value / spec.matrix_flops_per_s[dtype]
    return None


def _power_pool(spec: DeviceSpec) -> str | None:
    """The devices whose power rule a device shares (its vendor and ISA, e.g. ``"NVIDIA
    sm_90"``); None without an ISA or a TDP."""
    if spec.isa is None or not spec.tdp_watts:
        return None
    return f"{spec.vendor} {spec.isa}"


def watts_per_tflops(spec: DeviceSpec, dtype: str) -> float:
    """Board power per TFLOP/s of the ``dtype`` matrix peak."""
    return (spec.tdp_watts or 0.0) / (spec.matrix_flops_per_s[dtype] / 1e12)


def class_defaults(population: Iterable[DeviceSpec]) -> dict[tuple[str, str, str], ClassDefault]:
    """Class defaults from the measured members of ``population``.

    Parameters
    ----------
    population : iterable of DeviceSpec
        The devices whose measurements define the defaults (:func:`figures` uses the
        shipped registry).

    Returns
    -------
    dict
        ``(class, figure, key) -> ClassDefault``; figure is ``"bandwidth"`` (key: pattern),
        ``"layer_norm"`` (class: the vendor's GPUs, key ``"copy"``: a ratio to the copy
        figure),
        ``"matrix"`` and ``"attention"`` (key: dtype), ``"matrix ratio"`` (class: the
        vendor's devices of the kind, key: a dtype other than 16-bit; a ratio to the
        device's own 16-bit share, :func:`own_16bit_share`), ``"matrix power"`` (class: the
        vendor and ISA, key ``"16-bit"``: a 16-bit share over the cube root of the part's
        board power per TFLOP/s, the power rule), ``"vector"`` (class:
        :func:`fp32_datapath_class`, key ``"fp32"``), ``"launch"`` (class: the device kind,
        key ``"plain"`` or ``"graph"``),
        ``"latency"`` (class: the memory family, key ``""``) or a GEMM pool (key: the fit's
        part).
    """
    samples: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
    for spec in population:
        if spec.achievable is not None and not spec.measured:
            for key, value in _samples(spec, spec.achievable):
                samples.setdefault(key, []).append((spec.name, value))
    return {key: ClassDefault(key[0], key[1], key[2],
                              statistics.median(v for _, v in rows),
                              tuple(name for name, _ in rows))
            for key, rows in sorted(samples.items())}


def _samples(spec: DeviceSpec, achievable: Achievable,
             ) -> Iterator[tuple[tuple[str, str, str], float]]:
    """((class, figure, key), value) of every measured figure of one device that a class
    default pools."""
    cls = class_of(spec)
    for pattern in ("read", "copy", "triad", "stream_app"):
        own = _own_bandwidth(spec, pattern)
        if own is not None:
            yield (cls, "bandwidth", pattern), own[0].value / spec.bandwidth_bytes_per_s
    yield from _layer_norm_samples(spec)
    yield from _matrix_samples(spec, achievable)
    datapath = fp32_datapath_class(spec)
    if datapath is not None and "fp32" in achievable.vector_flops_per_s:
        yield (datapath, "vector", "fp32"), \
            achievable.vector_flops_per_s["fp32"].value / spec.vector_flops_per_s["fp32"]
    for key, overhead in (("plain", achievable.launch_overhead_seconds),
                          ("graph", achievable.graph_launch_overhead_seconds)):
        if overhead is not None:
            yield (_KIND_LABEL[spec.kind], "launch", key), overhead.value
    pooled: dict[str, GemmFit] = {}  # one per device and pool: bf16 or fp16, fp8, fp4
    for dtype, fit in achievable.gemm.items():
        if dtype in GEMM_DEFAULT_DTYPES:
            pooled.setdefault(gemm_pool(dtype), fit)
    for pool, fit in pooled.items():  # by vendor too: cuBLAS and hipBLASLt are other libraries
        for part in GEMM_PARTS:
            yield (f"{spec.vendor} {cls}", pool, part), getattr(fit, part)
    latency = achievable.dram_latency_seconds
    if latency is not None and spec.kind == "gpu" and memory_family(spec) != "other":
        yield (f"{memory_family(spec)} GPU", "latency", ""), latency.value


def _matrix_samples(spec: DeviceSpec, achievable: Achievable,
                    ) -> Iterator[tuple[tuple[str, str, str], float]]:
    """A device's matrix and attention shares of the datasheet, by class, its other
    dtypes' shares over its own 16-bit share, by vendor and kind, and that 16-bit share over
    the cube root of its power per TFLOP/s, by vendor and ISA (the power rule)."""
    cls, base = class_of(spec), own_16bit_share(spec)
    if base is not None and (pool := _power_pool(spec)) is not None:
        yield (pool, "matrix power", "16-bit"), \
            base[1] / watts_per_tflops(spec, base[0]) ** POWER_EXPONENT
    for dtype, m in achievable.matrix_flops_per_s.items():
        share = m.value / spec.matrix_flops_per_s[dtype]
        yield (cls, "matrix", dtype), share
        if base is not None and dtype not in SIXTEEN_BIT:
            yield (f"{spec.vendor} {_KIND_LABEL[spec.kind]}", "matrix ratio", dtype), \
                share / base[1]
    for dtype, m in achievable.attention_flops_per_s.items():
        yield (cls, "attention", dtype), m.value / spec.matrix_flops_per_s[dtype]


def _layer_norm_samples(spec: DeviceSpec) -> Iterator[tuple[tuple[str, str, str], float]]:
    """A GPU's measured layer-norm bandwidth over its copy figure, pooled by vendor."""
    layer_norm, copy = _own_bandwidth(spec, "layer_norm"), _own_bandwidth(spec, "copy")
    if layer_norm is not None and copy is not None and spec.kind == "gpu":
        yield (f"{spec.vendor} GPU", "layer_norm", "copy"), layer_norm[0].value / copy[0].value


@functools.cache
def _shipped_defaults() -> dict[tuple[str, str, str], ClassDefault]:
    return class_defaults(spec for spec, _ in _builtin())


class Figures:
    """Read-only view of a device's resolved achievable figures (see :func:`figures`)."""

    def __init__(self, spec: DeviceSpec,
                 defaults: dict[tuple[str, str, str], ClassDefault]) -> None:
        self._spec = spec
        self._defaults = defaults
        self._class = class_of(spec)

    @property
    def spec(self) -> DeviceSpec:
        return self._spec

    @property
    def class_name(self) -> str:
        """The device's class (:func:`class_of`)."""
        return self._class

    def _default(self, figure: str, key: str, cls: str | None = None) -> ClassDefault | None:
        return self._defaults.get((cls or self._class, figure, key))

    def _calibrated(self, value: float, kind: str, name: str) -> Figure:
        return Figure(value, 1.0 if kind != "seconds" else None, "measured",
                      "roofline.calibrate", "the spec's own figures were measured on this "
                      "machine (DeviceSpec.measured)", kind, name)

    # ------------------------------------------------------------------ bandwidth
    def bandwidth(self, pattern: Pattern = "copy") -> Figure:
        """Achievable DRAM bandwidth for an access pattern; never None.

        Parameters
        ----------
        pattern : {"copy", "read", "triad", "stream_app", "layer_norm"}
            ``copy``: one load and one store per element (STREAM scale); ``read``: loads
            only; ``triad``: two loads and one store; ``layer_norm``: PyTorch's layer-norm
            forward kernel (see the module docstring).
        """
        if pattern not in _BANDWIDTH_FALLBACK:
            raise ValueError(f"unknown bandwidth pattern {pattern!r}; expected one of "
                             f"{', '.join(_BANDWIDTH_FALLBACK)}")
        spec, name = self._spec, f"bandwidth ({pattern})"
        peak = spec.bandwidth_bytes_per_s
        if pattern == "layer_norm" and (spec.measured or _own_bandwidth(spec, pattern) is None):
            return self._layer_norm(name)
        if spec.measured:
            return self._calibrated(peak, "bandwidth", name)
        own = _own_bandwidth(spec, pattern)
        if own is not None:
            m, key = own
            method = m.method if key == pattern else (
                f"{m.method} [no {pattern} measurement: the device's {key} figure stands in]")
            return _measured(m, method, m.value / peak, "bandwidth", name)
        default = self._default("bandwidth", pattern)
        if default is not None:
            return Figure(peak * default.value, default.value, "class default",
                          default.description, f"datasheet bandwidth x class median share "
                          f"for {pattern}", "bandwidth", name)
        return Figure(peak, 1.0, "datasheet", "bandwidth_bytes_per_s",
                      "datasheet bandwidth (no measured member of the class "
                      f"{self._class!r})", "bandwidth", name)

    def _layer_norm(self, name: str) -> Figure:
        """The copy figure times the vendor's median ratio of layer norm to copy."""
        copy = self.bandwidth("copy")
        default = self._default("layer_norm", "copy", f"{self._spec.vendor} GPU")
        if default is None or self._spec.kind != "gpu":
            return Figure(copy.value, copy.share, copy.origin, copy.source,
                          f"{copy.method} [no layer-norm measurement of a "
                          f"{self._spec.vendor} GPU: the copy figure stands in]",
                          "bandwidth", name)
        value = copy.value * default.value
        return Figure(value, value / self._spec.bandwidth_bytes_per_s, "class default",
                      default.description, f"the device's copy figure ({copy}) x the median "
                      f"ratio of layer norm to copy, {default.value:.2f}", "bandwidth", name)

    # ------------------------------------------------------------------ compute
    def matrix(self, dtype: Any) -> Figure | None:
        """Achievable dense matrix FLOP/s for ``dtype`` (fp32 accumulate); None when the
        device has no datasheet matrix peak for it."""
        key = canonical_dtype(dtype)
        spec, name = self._spec, f"matrix {key}"
        peak = spec.matrix_flops_per_s.get(key)
        if peak is None:
            return None
        if spec.measured:
            return self._calibrated(peak, "flops", name)
        own = _own_matrix(spec, key)
        if own is not None:
            m, measured_dtype = own
            method = m.method if measured_dtype == key else (
                f"{m.method} [{measured_dtype} measurement; {key} has the same datasheet peak]")
            share = m.value / spec.matrix_flops_per_s[measured_dtype]
            return _measured(m, method, share, "flops", name, value=peak * share)
        if (ratio := self._ratio(key)) is not None:
            return ratio
        if (power := self._power(key)) is not None:
            return power
        default = self._default("matrix", key)
        if default is not None:
            return Figure(peak * default.value, default.value, "class default",
                          default.description, f"datasheet {key} peak x class median share",
                          "flops", name)
        return Figure(peak, 1.0, "datasheet", f"matrix_flops_per_s[{key!r}]",
                      f"datasheet peak (no measured {key} matmul in class {self._class!r})",
                      "flops", name)

    def _power(self, key: str) -> Figure | None:
        """A 16-bit share from the measured parts of the device's ISA, each carried to the
        device's power per FLOP/s by the power rule (None: another dtype, no ISA or TDP,
        no measured part of the ISA)."""
        spec = self._spec
        pool = _power_pool(spec) if key in SIXTEEN_BIT else None
        default = self._default("matrix power", "16-bit", pool) if pool else None
        if default is None:
            return None
        watts = watts_per_tflops(spec, key)
        share = default.value * watts ** POWER_EXPONENT
        return Figure(spec.matrix_flops_per_s[key] * share, share, "class default",
                      f"power rule over the {default.description}",
                      f"each measured {spec.isa} part's 16-bit share x (this part's "
                      f"{watts:.3g} W per {key} TFLOP/s / its own)^{_EXPONENT}, median (a "
                      "power-capped clock goes as the cube root of power)", "flops",
                      f"matrix {key}")

    def _power_16bit_share(self) -> tuple[str, float] | None:
        """The power rule's 16-bit share (bf16's first) and its dtype, as
        :func:`own_16bit_share` gives a measured one; None where the rule gives none."""
        for dtype in SIXTEEN_BIT:
            power = self._power(dtype) if dtype in self._spec.matrix_flops_per_s else None
            if power is not None and power.share is not None:
                return dtype, power.share
        return None

    def _ratio(self, key: str) -> Figure | None:
        """``key``'s share from the device's 16-bit share (its own measured one, else the
        power rule's) and the vendor's median ratio between the two (None: not a dtype it
        applies to, or no figure)."""
        spec = self._spec
        if key in SIXTEEN_BIT:
            return None
        base, how = own_16bit_share(spec), "measured"
        if base is None:
            base, how = self._power_16bit_share(), "power-rule"
        if base is None:
            return None
        ratio = self._default("matrix ratio", key, f"{spec.vendor} {_KIND_LABEL[spec.kind]}")
        if ratio is None:
            return None
        share = base[1] * ratio.value
        return Figure(spec.matrix_flops_per_s[key] * share, share, "class default",
                      f"the device's {base[0]} share x the {key} / 16-bit ratio, "
                      f"{ratio.description}", f"the device's {how} {base[0]} share, "
                      f"{base[1]:.1%}, x the median ratio of {key} to 16-bit shares over the "
                      f"vendor's devices measured in both, {ratio.value:.3f}", "flops",
                      f"matrix {key}")

    def attention(self, dtype: Any) -> Figure | None:
        """Achievable FLOP/s of causal flash attention in ``dtype`` on the matrix units: the
        device's measurement (or its fp16/bf16 sibling's share, of the same peak); else the
        class median share of the matrix peak; None without either (the analysis then runs
        attention at the matrix figure), for a calibrated spec, or without a matrix peak."""
        key = canonical_dtype(dtype)
        spec, name = self._spec, f"attention {key}"
        peak = spec.matrix_flops_per_s.get(key)
        if peak is None or spec.measured:
            return None
        own = _own_matrix(spec, key, "attention_flops_per_s")
        if own is not None:
            m, measured_dtype = own
            method = m.method if measured_dtype == key else (
                f"{m.method} [{measured_dtype} measurement; {key} has the same datasheet peak]")
            share = m.value / peak
            return _measured(m, method, share, "flops", name, value=peak * share)
        sibling = _SIBLING.get(key)
        default = self._default("attention", key)
        if default is None and sibling and spec.matrix_flops_per_s.get(sibling) == peak:
            default = self._default("attention", sibling)  # the same units at the same peak
        if default is None:
            return None
        return Figure(peak * default.value, default.value, "class default",
                      default.description, f"datasheet {key} matrix peak x the class median "
                      "share flash attention reaches", "flops", name)

    def gemm(self, dtype: Any) -> GemmFigure | None:
        """The GEMM time model for ``dtype``: fitted to this device's measured table (or
        its fp16/bf16 sibling's, of the same datasheet peak); else, for 16-bit, fp8 and
        fp4 dtypes, the class medians of each part; None when neither exists (the analysis
        then costs a GEMM at the matrix figure and the share of the chip it fills)."""
        key = canonical_dtype(dtype)
        spec = self._spec
        if spec.measured or spec.peak_flops_per_s(key, gemm_engine(key)) is None:
            return None
        table = spec.achievable.gemm if spec.achievable else {}
        sibling = _SIBLING.get(key)
        peaks = spec.matrix_flops_per_s
        for own in (key, sibling):
            if own in table and (own == key or peaks.get(own) == peaks.get(key)):
                fit = table[own]
                return GemmFigure(key, fit.efficiency, fit.bandwidth_share,
                                  fit.floor_seconds, "measured", fit.source,
                                  f"fit {fit.median_error:.0%} median over {fit.shapes} "
                                  f"{own} shapes", fit.compute_units, fit.ranges)
        if key not in GEMM_DEFAULT_DTYPES:
            return None
        parts = [self._default(gemm_pool(key), p, f"{spec.vendor} {self._class}")
                 for p in GEMM_PARTS]
        if not all(parts):
            return None
        eff, share, floor = (p.value for p in parts if p is not None)
        return GemmFigure(key, eff, share, floor, "class default",
                          parts[0].description if parts[0] else "")

    def vector(self, dtype: Any) -> Figure | None:
        """Achievable non-matrix FLOP/s for ``dtype``: measured, else the datasheet; None
        when the device has no vector peak for it."""
        key = canonical_dtype(dtype)
        spec, name = self._spec, f"vector {key}"
        peak = spec.vector_flops_per_s.get(key)
        if peak is None:
            return None
        if spec.measured:
            return self._calibrated(peak, "flops", name)
        m = spec.achievable.vector_flops_per_s.get(key) if spec.achievable else None
        if m is not None:
            return _measured(m, m.method, m.value / peak, "flops", name)
        datapath = fp32_datapath_class(spec) if key == "fp32" else None
        default = self._default("vector", key, datapath) if datapath else None
        if default is not None:
            return Figure(peak * default.value, default.value, "class default",
                          default.description, "datasheet fp32 peak x the median share "
                          "SGEMM reaches on parts of the same FP32 datapath design",
                          "flops", name)
        return Figure(peak, 1.0, "datasheet", f"vector_flops_per_s[{key!r}]",
                      "datasheet peak (no measured device of its FP32 datapath design)"
                      if key == "fp32" else "datasheet peak (only fp32 vector figures have "
                      "a class default)", "flops", name)

    # ------------------------------------------------------------------ overhead, latency
    def launch_overhead(self, graphs: bool = False) -> Figure:
        """GPU-side time per kernel of back-to-back launches (with CUDA/HIP graphs if
        ``graphs``); never None."""
        spec = self._spec
        name = "launch overhead" + (" (graphs)" if graphs else "")
        field = "graph_launch_overhead_seconds" if graphs else "launch_overhead_seconds"
        if spec.measured:
            return self._calibrated(spec.launch_overhead_seconds, "seconds", name)
        m = getattr(spec.achievable, field) if spec.achievable else None
        if m is not None:
            return _measured(m, m.method, None, "seconds", name)
        if spec.launch_overhead_seconds != DEFAULT_LAUNCH_OVERHEAD_SECONDS[spec.kind]:
            return Figure(spec.launch_overhead_seconds, None, "datasheet",
                          "launch_overhead_seconds", "set on the spec (not the per-kind "
                          "modelling default)", "seconds", name)
        default = self._default("launch", "graph" if graphs else "plain",
                                _KIND_LABEL[spec.kind])
        if default is not None:
            return Figure(default.value, None, "class default", default.description,
                          "median of measured per-kernel overheads of the same kind",
                          "seconds", name)
        return Figure(spec.launch_overhead_seconds, None, "datasheet",
                      "launch_overhead_seconds", "registry modelling constant "
                      "(DEFAULT_LAUNCH_OVERHEAD_SECONDS), not a measurement", "seconds", name)

    def dram_latency(self) -> Figure | None:
        """Pointer-chase DRAM latency: measured, else the memory family's median; None
        where neither exists (CPUs, TPUs, unified-memory GPUs)."""
        spec, name = self._spec, "DRAM latency"
        m = spec.achievable.dram_latency_seconds if spec.achievable else None
        if m is not None:
            return _measured(m, m.method, None, "seconds", name)
        if spec.kind != "gpu":
            return None
        default = self._default("latency", "", f"{memory_family(spec)} GPU")
        if default is None:
            return None
        return Figure(default.value, None, "class default", default.description,
                      "median of measured pointer-chase latencies of the memory family",
                      "seconds", name)

    def clock(self) -> Figure | None:
        """Measured sustained clock under load (share of the rated boost); None if not
        measured."""
        spec = self._spec
        m = spec.achievable.sustained_clock_hz if spec.achievable else None
        if m is None:
            return None
        share = m.value / spec.boost_clock_hz if spec.boost_clock_hz else None
        return _measured(m, m.method, share, "hz", "sustained clock")

    @property
    def ecc_default(self) -> bool | None:
        """Whether ECC is on by default (source: ``spec.sources["ecc"]``); None if unknown."""
        return self._spec.achievable.ecc_default if self._spec.achievable else None

    @property
    def power_capped(self) -> bool:
        """Whether a measured sustained clock sits below :data:`POWER_CAP_CLOCK_SHARE` of
        the rated boost (see :attr:`power_capped_reason`)."""
        clock = self.clock()
        return clock is not None and clock.share is not None \
            and clock.share < POWER_CAP_CLOCK_SHARE

    @property
    def power_capped_reason(self) -> str:
        """Why :attr:`power_capped` is what it is."""
        clock = self.clock()
        if clock is None:
            return "no measured sustained clock"
        if clock.share is None:
            return f"sustained clock {si(clock.value, 'Hz')} measured, but no rated boost clock"
        boost = si(self._spec.boost_clock_hz or 0.0, "Hz")
        relation = "below" if self.power_capped else "not below"
        return (f"measured sustained clock {si(clock.value, 'Hz', digits=4)} is "
                f"{clock.share:.1%} of the rated {boost} boost, {relation} "
                f"{POWER_CAP_CLOCK_SHARE:.0%}")

    def used(self) -> list[Figure]:
        """Every resolved figure of the device: bandwidth by pattern (and a GPU's layer
        norm), matrix, vector and attention per dtype, launch overheads, DRAM latency,
        sustained clock."""
        spec = self._spec
        rows: list[Figure | None] = [self.bandwidth(p) for p in ("read", "copy", "triad")]
        if spec.kind == "gpu":
            rows.append(self.bandwidth("layer_norm"))
        rows += [self.matrix(d) for d in spec.matrix_flops_per_s]
        rows += [self.vector(d) for d in spec.vector_flops_per_s]
        rows += [self.attention(d) for d in spec.matrix_flops_per_s]
        rows += [self.launch_overhead(), self.launch_overhead(graphs=True), self.dram_latency(),
                 self.clock()]
        return [row for row in rows if row is not None]

    def __repr__(self) -> str:
        return f"Figures({self._spec.name!r}, class={self._class!r})"


def _measured(m: Measured, method: str, share: float | None, kind: str, name: str,
              value: float | None = None) -> Figure:
    details = "; ".join(part for part in (method, m.conditions) if part)
    return Figure(m.value if value is None else value, share, "measured", m.source, details,
                  kind, name)


@functools.lru_cache(maxsize=512)
def _cached(spec: DeviceSpec) -> Figures:
    return Figures(spec, _shipped_defaults())


def figures(spec: DeviceSpec, population: Iterable[DeviceSpec] | None = None) -> Figures:
    """Resolved achievable figures of ``spec``.

    Parameters
    ----------
    spec : DeviceSpec
    population : iterable of DeviceSpec, optional
        Devices whose measurements define the class defaults; the shipped registry when
        omitted (the result is then cached per spec).

    Returns
    -------
    Figures
    """
    if population is None:
        return _cached(spec)
    return Figures(spec, class_defaults(population))
