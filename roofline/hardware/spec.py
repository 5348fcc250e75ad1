"""The :class:`DeviceSpec` model: datasheet peaks of one accelerator or CPU.

All numbers are stored in base units (FLOP/s, bytes/s, bytes, Hz, W, s). Validators
accept datasheet strings (``"989.4 TFLOPS"``, ``"3.35 TB/s"``) and reject values that
look off by a unit prefix, zero/negative peaks, unknown dtype keys, sparse peaks above
twice the dense peak, and peak-to-bandwidth ratios (ridge points) no real device has,
which is how a 1000x slip ("989.4 GFLOPS" for a tensor-core peak, "3.35 GB/s" for HBM)
shows even when each number alone looks plausible.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from roofline._errors import DeviceSpecError
from roofline.hardware.curves import MatmulPoint, MemoryPoint, check_grid
from roofline.hardware.engines import Engine, EngineKind
from roofline.hardware.units import (
    DTYPES,
    VECTOR_DTYPES,
    canonical_dtype,
    check_plausible,
    format_quantity,
    parse_quantity,
)

__all__ = [
    "CLOCK_MARGIN",
    "DEFAULT_LAUNCH_OVERHEAD_SECONDS",
    "Achievable",
    "DeviceSpec",
    "DeviceSpecError",
    "HostLink",
    "Interconnect",
    "Measured",
    "device_file_schema",
]

Kind = Literal["gpu", "tpu", "accelerator", "cpu"]

#: Per-kernel launch/dispatch latency assumed by the overhead model when a device does
#: not set ``launch_overhead_seconds``. A modelling constant, not a datasheet value:
#: a CUDA kernel launch costs a few microseconds of host time (NVIDIA's CUDA Graphs
#: guide, https://docs.nvidia.com/dl-cuda-graph/cuda-graph-basics/cuda-graph.html;
#: 4-6 us measured per launch, https://susun-blog.com/blog/pegainfer-3-cuda-graph).
#: For TPUs, other accelerators and CPU eager-op dispatch no vendor figure exists; the
#: same order of magnitude is assumed (see https://horace.io/brrr_intro.html on
#: framework overhead). Calibration replaces it with a measured value.
DEFAULT_LAUNCH_OVERHEAD_SECONDS: dict[str, float] = {
    "gpu": 5e-6,
    "tpu": 5e-6,
    "accelerator": 5e-6,
    "cpu": 5e-6,
}

# Pass ``context={"plausibility": False}`` to model_validate to skip the unit-prefix
# range checks (used for what-if devices, whose scaled peaks may leave the range).
_NO_PLAUSIBILITY = "plausibility"

# Datasheets round each figure on its own: H100's sparse fp8 prints as 3958 TFLOPS over a
# dense 1979 (exactly 2x), but a sparse figure rounded up over a dense one rounded down can
# exceed 2x by the rounding of 3-4 significant digits. 1% absorbs that, not a real gap.
_ROUNDING_TOLERANCE = 1.01

#: Ridge points (peak FLOP/s over memory bytes/s, FLOP/B) that real devices span, per
#: class of peak; a peak outside its band is a unit slip. Derived from the shipped registry
#: (tests/test_trust_hardware.py recomputes the extremes):
#:
#: * ``"narrow"``: matrix peaks in tf32 and narrower (dense, 2:4 sparse, fp16-accumulate).
#:   The registry spans 37.4 (RTX 3080 Ti tf32) to 2621 (RTX 4090 int4 sparse) FLOP/B;
#:   the band is 10x wider on each side, room for devices beyond today's extremes (B300's
#:   int8 at 0.15 POPS on 7.7 TB/s is 19.5 FLOP/B). Since 26214 / 3.74 is 7000x, a 1000x
#:   slip of ANY shipped narrow peak, or of its bandwidth, leaves the band.
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
#: microseconds (the 5 us default above, with its sources; ``roofline.calibrate`` measured
#: 2.4 us for a 1-element ``torch.add`` on the 2-core machine this band was set on).
#: 100 ns is 50x below the default and 1 ms 200x above it, so a 1000x slip (ns or ms
#: written for us) of any value between 1 us and 100 us leaves the band. Skipped for
#: measured specs: a loaded machine measures what it measures (the generic 0 to 1 s unit
#: range still applies).
LAUNCH_OVERHEAD_BAND_SECONDS: tuple[float, float] = (1e-7, 1e-3)
_MEMORY_TYPE = re.compile(r"(HBM|GDDR|LPDDR|DDR)\d?[A-Za-z]?")


def _parser(kind: str) -> BeforeValidator:
    return BeforeValidator(lambda value: parse_quantity(value, kind))


def _checker(kind: str, allow_zero: bool = False) -> AfterValidator:
    def check(value: float, info: ValidationInfo) -> float:
        if value < 0 or (value == 0 and not allow_zero):
            raise ValueError(f"must be {'>= 0' if allow_zero else '> 0'}, got {value:g}")
        if (info.context or {}).get(_NO_PLAUSIBILITY, True):
            check_plausible(value, kind)
        return value

    return AfterValidator(check)


def _schema(doc: str) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}], "description": doc})


FlopsPerS = Annotated[
    float,
    _parser("flops"),
    _checker("flops"),
    _schema("FLOP/s (OP/s for int): number or e.g. '989.4 TFLOPS'"),
]
# Measured rates (a kernel far below any roof, e.g. a CPU depthwise convolution) are
# not datasheet peaks: positive, with no unit-prefix range check.
MeasuredFlopsPerS = Annotated[
    float,
    _parser("flops"),
    Field(gt=0),
    _schema("measured FLOP/s: number or e.g. '1.7 GFLOPS'"),
]
BytesPerS = Annotated[
    float,
    _parser("bandwidth"),
    _checker("bandwidth"),
    _schema("bytes/s: number or e.g. '3.35 TB/s', '4800 Gbps'"),
]
# Main-memory bandwidth: bytes only. Datasheets quote it in GB/s or TB/s; a bit rate there
# is a slip (or a per-pin "19 Gbps" copied into the bandwidth), an 8x error no range catches.
MemoryBytesPerS = Annotated[
    float,
    BeforeValidator(lambda value: parse_quantity(value, "bandwidth", bits=False)),
    _checker("bandwidth"),
    _schema("bytes/s: number or e.g. '3.35 TB/s' (bytes; bit rates are for links)"),
]
Bytes = Annotated[
    float, _parser("bytes"), _checker("bytes"), _schema("bytes: number or e.g. '80 GB', '141 GiB'")
]
CacheBytes = Annotated[
    float, _parser("cache"), _checker("cache"), _schema("bytes: number or e.g. '50 MB'")
]
Hertz = Annotated[float, _parser("hz"), _checker("hz"), _schema("Hz: number or e.g. '1980 MHz'")]
Watts = Annotated[float, _parser("watts"), _checker("watts"), _schema("W: number or e.g. '700 W'")]
Seconds = Annotated[
    float,
    _parser("seconds"),
    _checker("seconds", allow_zero=True),
    _schema("seconds: number or e.g. '5 us'"),
]


class Interconnect(BaseModel):
    """Device-to-device link (NVLink, Infinity Fabric, ICI, RoCE ports, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(description="Link family and generation, e.g. 'NVLink 4'.")
    bandwidth_bytes_per_s: BytesPerS
    direction: Literal["bidirectional", "unidirectional"] = Field(
        description="Whether the bandwidth counts both directions or one."
    )


# Per-lane transfer rate (GT/s, one bit per transfer and lane) and the fraction of the bits
# left after line encoding, by PCIe generation. Gen1/2 use 8b/10b, Gen3-5 128b/130b (PCI-SIG,
# PCIe 3.0 FAQ, http://www.pcisig.com/news_room/faqs/pcie3.0_faq/). Gen6 runs 64 GT/s
# (PAM4) in 256-byte flits of 236 B TLP + 6 B data-link payload + 8 B CRC + 6 B FEC
# (https://glennklockwood.com/garden/PCIe-Gen6, after PCI-SIG and Synopsys): CRC and FEC
# are its coding overhead, 242/256. As for Gen1-5, link-layer traffic (what the 6 B DLP
# carries) is not subtracted; counting only TLP bytes would give 236/256, 2.5% less.
_PCIE_LINE_CODING: dict[int, tuple[float, float]] = {
    1: (2.5e9, 8 / 10), 2: (5e9, 8 / 10), 3: (8e9, 128 / 130), 4: (16e9, 128 / 130),
    5: (32e9, 128 / 130), 6: (64e9, 242 / 256),
}
# Per-lane, per-direction payload rate in bytes/s: transfers/s x coding efficiency / 8 bits.
_PCIE_LANE_BYTES_PER_S = {gen: rate * efficiency / 8
                          for gen, (rate, efficiency) in _PCIE_LINE_CODING.items()}


class HostLink(BaseModel):
    """PCIe link to the host CPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pcie_gen: Literal[1, 2, 3, 4, 5, 6]
    lanes: Literal[1, 2, 4, 8, 16]

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Per-direction bandwidth in bytes/s (e.g. Gen5 x16: about 63 GB/s)."""
        return _PCIE_LANE_BYTES_PER_S[self.pcie_gen] * self.lanes


def _peak_table(allowed: tuple[str, ...]) -> Any:
    """Before-validator normalising dtype keys of a peak table.

    Two keys naming one dtype (``bf16`` and ``bfloat16``) are an error, not "the last one
    wins": they are distinct keys to YAML and JSON, so only here can the clash be seen.
    """

    def normalise(table: Any) -> Any:
        if table is None:
            return {}
        if not isinstance(table, dict):
            return table  # let pydantic report the type error
        out: dict[str, Any] = {}
        given: dict[str, Any] = {}  # canonical dtype -> the key it was written as
        for key, value in table.items():
            try:
                dtype = canonical_dtype(key)
            except ValueError:
                dtype = ""
            if dtype not in allowed:
                raise ValueError(f"unknown dtype key {key!r}; expected one of {', '.join(allowed)}")
            if dtype in given:
                raise ValueError(
                    f"two entries for {dtype}: {given[dtype]!r} = {table[given[dtype]]!r} and "
                    f"{key!r} = {value!r} both name {dtype}; keep one")
            given[dtype] = key
            out[dtype] = value
        return out

    return normalise


#: How far a measured FLOP/s figure or sustained clock may exceed the datasheet peak or rated
#: boost clock it is compared with before the registry rejects it as a slip. GeForce cards
#: run above their rated boost under load: an RTX 3090 held 1965 MHz against its rated
#: 1695 MHz (1.16x; nvidia-smi log, https://github.com/noonghunna/club-3090/issues/107), an
#: RTX 4090 2655 MHz against 2520 (1.05x; https://github.com/NVIDIA/nvbench/pull/207), and the
#: highest measured matmul share in the shipped data is 77.83 / 68.2 TFLOPS = 1.14 (RTX 3080
#: Ti, zzc0721/torch-performance-test-data@9d8282763726:database.md). 1.20 covers those with
#: room for factory-overclocked boards, and still rejects a figure taken against the wrong
#: peak: a sparse or fp16-accumulate rate (2x) filed as a dense fp32-accumulate measurement.
CLOCK_MARGIN = 1.20

#: Plausible pointer-chase DRAM latency, seconds: a unit-slip check (ns written as us), not
#: a physical limit. Measured GPU DRAM latencies are a few hundred ns (gpu-benches
#: gpu-latency: 317 ns V100, 408 ns A100, 254 ns L40); 10 ns to 10 us leaves 30x each side.
DRAM_LATENCY_BAND_SECONDS: tuple[float, float] = (1e-8, 1e-5)

BandwidthPattern = Literal["read", "copy", "triad", "stream_app"]

# kind of quantity (units.parse_quantity) and whether a bandwidth may be a bit rate
_MEASURED_KIND: dict[str, str] = {
    "bandwidth_bytes_per_s": "bandwidth",
    "matrix_flops_per_s": "flops",
    "vector_flops_per_s": "flops",
    "launch_overhead_seconds": "seconds",
    "graph_launch_overhead_seconds": "seconds",
    "sustained_clock_hz": "hz",
    "dram_latency_seconds": "seconds",
}


class Measured(BaseModel):
    """One measured achievable figure with where it comes from.

    ``value`` is in the unit of the field that holds it (bytes/s, FLOP/s, seconds, Hz) and
    may be written as a datasheet string ("2.69 TB/s", "794 TFLOPS", "2.6 us", "1395 MHz").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: Annotated[float, Field(gt=0), _schema(
        "Measured value in the unit of its field: number or e.g. '2.69 TB/s', '794 TFLOPS', "
        "'2.6 us', '1395 MHz'")]
    source: str = Field(description="Where the number was read: repo@commit:path or URL.")
    method: str = Field(description="How it was measured (benchmark, kernel, statistic).")
    conditions: str | None = Field(
        None, description="Conditions: software, power cap, data size, derivation.")
    clock_hz: Hertz | None = Field(
        None, description="Clock during the measurement where the source states it.")

    @model_validator(mode="before")
    @classmethod
    def _require_source(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("source", "method"):
                text = data.get(key)
                if not isinstance(text, str) or not text.strip():
                    what = ("its source (repo@commit:path or URL)" if key == "source"
                            else "its method (how it was measured)")
                    raise ValueError(f"an achievable figure needs {what}; got {text!r}")
        return data


def _measured_values(kind: str, bits: bool = True) -> Any:
    """Before-validator parsing ``value`` of a Measured (or a dict of them) as ``kind``."""

    def parse_one(item: Any) -> Any:
        if isinstance(item, dict) and "value" in item:
            return {**item, "value": parse_quantity(item["value"], kind, bits=bits)}
        return item

    def parse(data: Any) -> Any:
        if isinstance(data, dict) and "value" not in data:
            return {key: parse_one(item) for key, item in data.items()}
        return parse_one(data)

    return parse


class Achievable(BaseModel):
    """Measured achievable figures of a device, each with source, method and conditions.

    Patterns of ``bandwidth_bytes_per_s``: ``read`` (loads only), ``copy`` (STREAM scale or
    copy: one load and one store per element), ``triad`` (two loads, one store), and
    ``stream_app``, a large bandwidth-bound application kernel (FluidX3D's LBM, which moves
    as many bytes in as out, like copy) kept apart from the microbenchmarks.
    ``matrix_flops_per_s`` are dense matmuls with fp32 accumulation; ``vector_flops_per_s``
    non-matrix rates (FMA loops, SGEMM on CUDA cores). ``launch_overhead_seconds`` is the
    GPU-side time per kernel of back-to-back launches (``graph_`` with CUDA/HIP graphs).
    ``ecc_default`` says whether ECC is on out of the box; its source is
    ``DeviceSpec.sources["ecc"]``. See ``roofline.hardware.achievable`` for how figures and
    class defaults are resolved.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bandwidth_bytes_per_s: dict[BandwidthPattern, Measured] = Field(default_factory=dict)
    matrix_flops_per_s: dict[str, Measured] = Field(default_factory=dict)
    vector_flops_per_s: dict[str, Measured] = Field(default_factory=dict)
    launch_overhead_seconds: Measured | None = None
    graph_launch_overhead_seconds: Measured | None = None
    sustained_clock_hz: Measured | None = None
    dram_latency_seconds: Measured | None = None
    ecc_default: bool | None = Field(
        None, description="ECC on by default (source in DeviceSpec.sources['ecc']).")

    normalise_matrix = field_validator("matrix_flops_per_s", mode="before")(_peak_table(DTYPES))
    normalise_vector = field_validator("vector_flops_per_s", mode="before")(
        _peak_table(VECTOR_DTYPES))

    @model_validator(mode="before")
    @classmethod
    def _parse_values(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, kind in _MEASURED_KIND.items():
            if out.get(name) is not None:
                parse = _measured_values(kind, bits=name != "bandwidth_bytes_per_s")
                try:
                    out[name] = parse(out[name])
                except ValueError as exc:
                    raise ValueError(f"{name}: {exc}") from exc
        return out

    def measured(self) -> list[tuple[str, str, Measured]]:
        """(field, key, figure) of every measured figure; key is the pattern or dtype ("")."""
        rows = [(table, key, m) for table in ("bandwidth_bytes_per_s", "matrix_flops_per_s",
                                              "vector_flops_per_s")
                for key, m in getattr(self, table).items()]
        rows += [(name, "", m) for name in ("launch_overhead_seconds",
                                           "graph_launch_overhead_seconds",
                                           "sustained_clock_hz", "dram_latency_seconds")
                 if (m := getattr(self, name)) is not None]
        return rows

    def scaled(self, *, compute: float = 1.0, bandwidth: float = 1.0, clock: float = 1.0,
               matrix: dict[str, float] | None = None,
               vector: dict[str, float] | None = None) -> Achievable:
        """Copy with FLOP/s figures x ``compute`` (x ``matrix``/``vector`` per dtype),
        bandwidths x ``bandwidth`` and the sustained clock x ``clock``; shares unchanged."""

        def times(m: Measured, factor: float) -> Measured:
            if factor == 1.0 and clock == 1.0:
                return m
            clock_hz = None if m.clock_hz is None else m.clock_hz * clock
            return m.model_copy(update={"value": m.value * factor, "clock_hz": clock_hz})

        matrix, vector = matrix or {}, vector or {}
        clock_hz = self.sustained_clock_hz
        return self.model_copy(update={
            "bandwidth_bytes_per_s": {k: times(m, bandwidth)
                                      for k, m in self.bandwidth_bytes_per_s.items()},
            "matrix_flops_per_s": {k: times(m, compute * matrix.get(k, 1.0))
                                   for k, m in self.matrix_flops_per_s.items()},
            "vector_flops_per_s": {k: times(m, compute * vector.get(k, 1.0))
                                   for k, m in self.vector_flops_per_s.items()},
            "sustained_clock_hz": None if clock_hz is None else times(clock_hz, clock),
        })


class DeviceSpec(BaseModel):
    """Datasheet description of one device (one GPU, one TPU chip, one CPU socket).

    Peaks are dense unless stated: 2:4 structured-sparsity figures live in
    ``matrix_sparse_flops_per_s`` and are never used as dense peaks. Integer peaks are OP/s.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="Display name, e.g. 'H100 SXM'.")
    vendor: str = Field(min_length=1)
    kind: Kind
    aliases: list[str] = Field(
        default_factory=list, description="Other names, incl. torch.cuda.get_device_name() strings."
    )
    form_factor: str | None = None
    matrix_flops_per_s: dict[str, FlopsPerS] = Field(
        default_factory=dict, description="Dense peaks of matrix units (tensor cores, MXU, AMX)."
    )
    matrix_sparse_flops_per_s: dict[str, FlopsPerS] = Field(
        default_factory=dict, description="2:4 structured-sparsity peaks, kept apart from dense."
    )
    vector_flops_per_s: dict[str, FlopsPerS] = Field(
        default_factory=dict, description="Peaks of non-matrix units (CUDA cores, SIMD)."
    )
    fp16_accumulate_flops_per_s: FlopsPerS | None = Field(
        None,
        description="Dense fp16 matrix peak when products accumulate in fp16, where that is "
        "faster than the fp32-accumulate fp16 peak in matrix_flops_per_s (GeForce cards run "
        "fp32 accumulation at half rate). Used with the analysis option fp16_accumulate.",
    )
    memory_bytes: Bytes | None = None
    memory_type: str | None = Field(
        None,
        description="Main-memory technology, e.g. 'HBM3', 'GDDR6X', 'LPDDR5', 'DDR5' (or the "
        "family alone, 'HBM'); HBM and GDDR set bandwidth floors (absolute, and per byte of "
        "memory_bytes) that catch unit slips.",
    )
    bandwidth_bytes_per_s: MemoryBytesPerS = Field(
        description="Main-memory (HBM/GDDR/DRAM) bandwidth in bytes/s, e.g. '3.35 TB/s' "
        "(bit rates such as 'Tb/s' are rejected here; they are for links).")
    cache_bytes: CacheBytes | None = Field(None, description="Last-level cache.")
    compute_units: int | None = Field(None, gt=0, description="SMs / CUs / cores / TensorCores.")
    boost_clock_hz: Hertz | None = None
    tdp_watts: Watts | None = None
    interconnect: Interconnect | None = None
    host_link: HostLink | None = None
    launch_overhead_seconds: Seconds = Field(
        description="Per-kernel launch latency of the overhead model (modelling constant)."
    )
    efficiency: dict[str, float] = Field(
        default_factory=dict, description="Achievable fractions of peak in (0, 1]; empty = peaks."
    )
    matmul_curve: dict[str, list[MatmulPoint]] = Field(
        default_factory=dict,
        description="Measured matmul FLOP/s on a grid of (m, n, k) shapes, per dtype "
        "(roofline.calibrate); used in place of peak x fill for matrix ops of that dtype.",
    )
    matmul_curve_units: int | None = Field(
        None, gt=0,
        description="compute_units of the chip the matmul curve was measured on, where a "
        "cores what-if changed compute_units since (None: compute_units); a shape then "
        "gains only as its tiles fill the new count.",
    )
    depthwise_flops_per_s: dict[str, MeasuredFlopsPerS] = Field(
        default_factory=dict,
        description="Measured FLOP/s of a 3x3 depthwise convolution forward, per dtype "
        "(roofline.calibrate); depthwise convolutions run at it instead of the vector peak.",
    )
    depthwise_backward_flops_per_s: dict[str, MeasuredFlopsPerS] = Field(
        default_factory=dict,
        description="The same for its backward (input and weight gradients); depthwise "
        "convolution backward runs at it (at the forward rate where it is missing).",
    )
    memory_curve: list[MemoryPoint] = Field(
        default_factory=list,
        description="Measured bytes/s of an elementwise add by bytes moved (roofline.calibrate); "
        "used in place of bandwidth_bytes_per_s for an op that moves that many bytes.",
    )
    achievable: Achievable | None = Field(
        None, description="Measured achievable figures (bandwidth by access pattern, dense "
        "matmul per dtype, launch overhead, sustained clock, DRAM latency, ECC default), each "
        "with source, method and conditions; see roofline.hardware.achievable.")
    measured: bool = False
    sources: dict[str, str] = Field(default_factory=dict, description="Field group -> URL.")
    notes: list[str] = Field(default_factory=list)

    normalise_matrix_keys = field_validator(
        "matrix_flops_per_s", "matrix_sparse_flops_per_s", mode="before"
    )(_peak_table(DTYPES))
    normalise_vector_keys = field_validator(
        "vector_flops_per_s", "depthwise_flops_per_s", "depthwise_backward_flops_per_s",
        mode="before"
    )(_peak_table(VECTOR_DTYPES))

    @model_validator(mode="before")
    @classmethod
    def _default_launch_overhead(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("launch_overhead_seconds") is None:
            default = DEFAULT_LAUNCH_OVERHEAD_SECONDS.get(str(data.get("kind")))
            if default is None:
                # A missing or bad kind has no default, and the spec fails on kind anyway:
                # a placeholder keeps "launch_overhead_seconds: Field required", which only
                # follows from the kind, out of the error.
                return {**data, "launch_overhead_seconds": DEFAULT_LAUNCH_OVERHEAD_SECONDS["gpu"]}
            note = (
                f"launch_overhead_seconds = {format_quantity(default, 'seconds')} is the "
                f"modelling default for kind '{data['kind']}', not a datasheet value."
            )
            data = {**data, "launch_overhead_seconds": default}
            data["notes"] = [*(data.get("notes") or []), note]
        return data

    @field_validator("kind", mode="before")
    @classmethod
    def _check_kind_case(cls, value: Any) -> Any:
        # One spelling, as in the JSON schema and every comparison (spec.kind == "gpu"); a
        # case variant gets told which, rather than pydantic's list alone.
        if isinstance(value, str) and value not in DEFAULT_LAUNCH_OVERHEAD_SECONDS \
                and value.strip().lower() in DEFAULT_LAUNCH_OVERHEAD_SECONDS:
            kinds = ", ".join(DEFAULT_LAUNCH_OVERHEAD_SECONDS)
            raise ValueError(f"write kind in lower case, {value.strip().lower()!r} rather than "
                             f"{value!r} (one of {kinds})")
        return value

    normalise_curve_keys = field_validator("matmul_curve", mode="before")(_peak_table(DTYPES))

    @field_validator("matmul_curve")
    @classmethod
    def _check_matmul_curve(
        cls, value: dict[str, list[MatmulPoint]]
    ) -> dict[str, list[MatmulPoint]]:
        for points in value.values():
            check_grid(points)
        return value

    @field_validator("memory_curve")
    @classmethod
    def _check_memory_curve(cls, value: list[MemoryPoint]) -> list[MemoryPoint]:
        if len({p.bytes for p in value}) != len(value):
            raise ValueError("memory curve has duplicate byte sizes")
        return sorted(value, key=lambda p: p.bytes)

    @field_validator("memory_type")
    @classmethod
    def _check_memory_type(cls, value: str | None) -> str | None:
        if value is not None and not _MEMORY_TYPE.fullmatch(value):
            raise ValueError(f"unknown memory type {value!r}; expected e.g. HBM3, HBM2e, "
                             "GDDR6X, LPDDR5, DDR5 (or the family: HBM, GDDR, LPDDR, DDR)")
        return value

    @field_validator("efficiency")
    @classmethod
    def _check_efficiency(cls, value: dict[str, float]) -> dict[str, float]:
        for key, fraction in value.items():
            if key not in ("matrix", "vector", "memory"):
                raise ValueError(
                    f"unknown efficiency key {key!r}; expected matrix, vector or memory"
                )
            if not 0 < fraction <= 1:
                raise ValueError(f"efficiency[{key!r}] = {fraction} is not in (0, 1]")
        return value

    @model_validator(mode="after")
    def _check_sparse(self) -> DeviceSpec:
        for dtype, sparse in self.matrix_sparse_flops_per_s.items():
            dense = self.matrix_flops_per_s.get(dtype)
            if dense is None:
                continue
            if sparse > 2.0 * dense * _ROUNDING_TOLERANCE:
                raise ValueError(
                    f"matrix_sparse_flops_per_s[{dtype!r}] = {format_quantity(sparse, 'flops')} is "
                    f"more than 2x the dense {format_quantity(dense, 'flops')}; 2:4 sparsity at "
                    f"most doubles the dense peak"
                )
            if sparse < dense:
                raise ValueError(
                    f"matrix_sparse_flops_per_s[{dtype!r}] = {format_quantity(sparse, 'flops')} is "
                    f"below the dense {format_quantity(dense, 'flops')}; dense and sparse swapped?"
                )
        return self

    @model_validator(mode="after")
    def _check_fp16_accumulate(self) -> DeviceSpec:
        rate = self.fp16_accumulate_flops_per_s
        if rate is None:
            return self
        fp16 = self.matrix_flops_per_s.get("fp16")
        if fp16 is None:
            raise ValueError("fp16_accumulate_flops_per_s needs the fp16 matrix peak it speeds up")
        if not fp16 <= rate <= 2.0 * fp16 * _ROUNDING_TOLERANCE:
            raise ValueError(
                f"fp16_accumulate_flops_per_s = {format_quantity(rate, 'flops')} must lie between "
                f"the fp32-accumulate fp16 peak {format_quantity(fp16, 'flops')} and twice it "
                "(half-rate fp32 accumulation is the only gap datasheets list)"
            )
        return self

    @model_validator(mode="after")
    def _check_achievable(self) -> DeviceSpec:
        """Measured figures against the datasheet: bandwidth at most the datasheet figure,
        FLOP/s and clocks at most :data:`CLOCK_MARGIN` times the peak / rated boost, every
        figure above 1% of what it derates (below is a unit slip), an ECC flag with its
        source."""
        achievable = self.achievable
        if achievable is None:
            return self
        for pattern, m in achievable.bandwidth_bytes_per_s.items():
            where = f"achievable.bandwidth_bytes_per_s[{pattern!r}]"
            share = m.value / self.bandwidth_bytes_per_s
            datasheet = format_quantity(self.bandwidth_bytes_per_s, "bandwidth")
            if share > 1.0:
                raise ValueError(
                    f"{where} = {format_quantity(m.value, 'bandwidth')} is above the datasheet "
                    f"bandwidth_bytes_per_s = {datasheet}: a bandwidth efficiency of "
                    f"{share:.3g} > 1 (DRAM cannot stream faster than its interface; a "
                    "cache-resident or bit-rate figure?)")
            _check_share_floor(where, share)
        for table in ("matrix_flops_per_s", "vector_flops_per_s"):
            peaks = getattr(self, table)
            for dtype, m in getattr(achievable, table).items():
                where = f"achievable.{table}[{dtype!r}]"
                peak = peaks.get(dtype)
                if peak is None:
                    raise ValueError(f"{where}: the device has no datasheet {table}[{dtype!r}] "
                                     "peak to compare the measurement with")
                _check_margin(where, m.value, peak, "flops", f"{table}[{dtype!r}]")
                _check_share_floor(where, m.value / peak)
        clock = achievable.sustained_clock_hz
        if clock is not None and self.boost_clock_hz is not None:
            _check_margin("achievable.sustained_clock_hz", clock.value, self.boost_clock_hz,
                          "hz", "boost_clock_hz")
            _check_share_floor("achievable.sustained_clock_hz", clock.value / self.boost_clock_hz)
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
        if achievable.ecc_default is not None and "ecc" not in self.sources:
            raise ValueError("achievable.ecc_default needs its source in sources['ecc']")
        return self

    @model_validator(mode="after")
    def _check_physically_plausible(self, info: ValidationInfo) -> DeviceSpec:
        """Ridge points inside :data:`RIDGE_BANDS_FLOP_PER_BYTE`; HBM/GDDR bandwidth floors
        (:data:`MEMORY_BANDWIDTH_FLOORS`, :data:`BANDWIDTH_PER_CAPACITY_FLOORS`); launch
        overhead inside :data:`LAUNCH_OVERHEAD_BAND_SECONDS`."""
        if self.measured or not (info.context or {}).get(_NO_PLAUSIBILITY, True):
            return self
        overhead = self.launch_overhead_seconds
        low, high = LAUNCH_OVERHEAD_BAND_SECONDS
        default = DEFAULT_LAUNCH_OVERHEAD_SECONDS[self.kind]
        if not low <= overhead <= high:
            raise ValueError(
                f"launch_overhead_seconds = {format_quantity(overhead, 'seconds')} is outside "
                f"the {format_quantity(low, 'seconds')} to {format_quantity(high, 'seconds')} "
                "that a kernel launch or eager op dispatch takes: ms or ns written for us? (the "
                f"default is {format_quantity(default, 'seconds')}; "
                "for a pure roofline use the analysis option overhead=False)")
        bandwidth = self.bandwidth_bytes_per_s
        family = _MEMORY_TYPE.fullmatch(self.memory_type or "")
        floor = MEMORY_BANDWIDTH_FLOORS.get(family.group(1) if family else "")
        if floor is not None and bandwidth < floor:
            raise ValueError(
                f"bandwidth_bytes_per_s = {format_quantity(bandwidth, 'bandwidth')} is below "
                f"{format_quantity(floor, 'bandwidth')}, the least any {self.memory_type} device "
                "has: GB/s written for TB/s?")
        per_byte = BANDWIDTH_PER_CAPACITY_FLOORS.get(family.group(1) if family else "")
        if per_byte is not None and self.memory_bytes and bandwidth < per_byte \
                * self.memory_bytes:
            raise ValueError(
                f"bandwidth_bytes_per_s = {format_quantity(bandwidth, 'bandwidth')} on "
                f"memory_bytes = {format_quantity(self.memory_bytes, 'bytes')} of "
                f"{self.memory_type} is {bandwidth / self.memory_bytes:.3g} GB/s per GB, below "
                f"the {per_byte:g} GB/s per GB any {self.memory_type} device has (bandwidth and "
                "capacity grow together with the stacks or chips): bits written for bytes, or a "
                "prefix slip in either?")
        for field_name, dtype, rate in self._peaks():
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
        return self

    def _peaks(self) -> list[tuple[str, str, float]]:
        """(field, dtype, FLOP/s) of every datasheet peak."""
        peaks = [(table, dtype, rate)
                 for table in ("matrix_flops_per_s", "matrix_sparse_flops_per_s",
                               "vector_flops_per_s")
                 for dtype, rate in getattr(self, table).items()]
        if self.fp16_accumulate_flops_per_s is not None:
            peaks.append(("fp16_accumulate_flops_per_s", "", self.fp16_accumulate_flops_per_s))
        return peaks

    def __hash__(self) -> int:  # dict fields are unhashable; hash the canonical JSON instead
        return hash(self.model_dump_json())

    # ------------------------------------------------------------------ queries
    def peak_flops_per_s(self, dtype: Any, engine: Engine | EngineKind = "matrix",
                         ) -> float | None:
        """Dense datasheet peak for ``dtype`` on an engine.

        Parameters
        ----------
        dtype : torch.dtype or str
            E.g. ``torch.bfloat16``, ``"bf16"``, ``"float32"``, ``"tf32"``, ``"float8_e4m3fn"``.
            Ignored when ``engine`` is an :class:`Engine` (it names its own dtype).
        engine : Engine or {"matrix", "vector"}
            Tensor/matrix cores or the non-matrix (CUDA core / SIMD) units; an
            :class:`Engine` with fp16 accumulation gives ``fp16_accumulate_flops_per_s``.

        Returns
        -------
        float or None
            FLOP/s (OP/s for int dtypes); None where the device has no such engine or dtype.

        Raises
        ------
        ValueError
            For an unknown dtype name or engine kind.
        """
        e = Engine.of(engine, dtype)
        if e.accumulate == "fp16":
            return self.fp16_accumulate_flops_per_s
        table = self.matrix_flops_per_s if e.matrix else self.vector_flops_per_s
        return table.get(e.dtype)

    def ridge_point(self, dtype: Any = "bf16", engine: Engine | EngineKind = "matrix",
                    ) -> float | None:
        """Ridge point of the roofline in FLOP/byte: peak FLOP/s over memory bytes/s."""
        peak = self.peak_flops_per_s(dtype, engine)
        return None if peak is None else peak / self.bandwidth_bytes_per_s

    def attainable_flops_per_s(self, dtype: Any, engine: Engine | EngineKind = "matrix",
                               ) -> float | None:
        """Peak times ``efficiency[engine kind]`` (the peak itself when no efficiency is set)."""
        e = Engine.of(engine, dtype)
        peak = self.peak_flops_per_s(dtype, e)
        return None if peak is None else peak * self.efficiency.get(e.kind, 1.0)

    @property
    def attainable_bandwidth_bytes_per_s(self) -> float:
        """Bandwidth times ``efficiency['memory']`` (the peak when not set)."""
        return self.bandwidth_bytes_per_s * self.efficiency.get("memory", 1.0)

    # ------------------------------------------------------------------ variants
    def with_overrides(self, **fields: Any) -> DeviceSpec:
        """Copy with ``fields`` replaced and everything re-validated.

        Values may be datasheet strings, e.g.
        ``spec.with_overrides(bandwidth_bytes_per_s="4.8 TB/s")``. On a calibrated spec, a
        new bandwidth, matrix or vector peak rescales the measured memory curve, matmul curve
        or depthwise rate with it. Measured achievable figures follow an overridden peak
        the same way (their share of the datasheet is kept): a new bandwidth scales the
        measured bandwidths, a new matrix or vector peak the measurements of that dtype, a
        new ``boost_clock_hz`` the sustained clock; a removed peak drops its measurements.
        Pass ``achievable`` to set them instead.

        Raises
        ------
        DeviceSpecError
            If the result does not validate; the message names the device and field.
        """
        data = {**self.model_dump(), **fields}
        follow = "fp16_accumulate_flops_per_s" not in fields
        if follow:  # set below, from the new fp16 peak
            data["fp16_accumulate_flops_per_s"] = None
        keep_achievable = "achievable" not in fields
        if keep_achievable:  # set below, rescaled to the new peaks
            data["achievable"] = None
        spec = validate_device(data, origin="with_overrides()")
        # a measured curve or rate follows an overridden peak it was measured with
        matrix, vector = self.matrix_flops_per_s, self.vector_flops_per_s
        matmul = {key: r for key in spec.matmul_curve
                  if (r := _ratio(matrix, spec.matrix_flops_per_s, key))}
        memory = spec.bandwidth_bytes_per_s / self.bandwidth_bytes_per_s
        data = _scaled_curves(spec.model_dump(),
                              matmul if "matmul_curve" not in fields else {},
                              memory if "memory_curve" not in fields else 1.0)
        fp16 = _ratio(matrix, spec.matrix_flops_per_s, "fp16")
        if follow and self.fp16_accumulate_flops_per_s and fp16:
            # the fp16-accumulate rate follows an overridden fp16 peak (2x it on GeForce)
            data["fp16_accumulate_flops_per_s"] = self.fp16_accumulate_flops_per_s * fp16
        for table in ("depthwise_flops_per_s", "depthwise_backward_flops_per_s"):
            if table not in fields:  # measured on the vector units
                data[table] = {k: rate * (_ratio(vector, spec.vector_flops_per_s, k) or 1.0)
                               for k, rate in getattr(spec, table).items()}
        if keep_achievable and self.achievable is not None:
            clock = (spec.boost_clock_hz / self.boost_clock_hz
                     if spec.boost_clock_hz and self.boost_clock_hz else 1.0)
            achievable = self.achievable.scaled(
                bandwidth=memory, clock=clock,
                matrix={k: _ratio(matrix, spec.matrix_flops_per_s, k) or 1.0 for k in matrix},
                vector={k: _ratio(vector, spec.vector_flops_per_s, k) or 1.0 for k in vector},
            ).model_dump()
            for table in ("matrix_flops_per_s", "vector_flops_per_s"):  # a removed peak
                achievable[table] = {k: m for k, m in achievable[table].items()  # drops its
                                     if k in getattr(spec, table)}  # measurements
            data["achievable"] = achievable
        return validate_device(data, origin="with_overrides()")

    def scaled(
        self, flops_factor: float = 1.0, bandwidth_factor: float = 1.0, name: str | None = None,
        *, clock_factor: float = 1.0, cores_factor: float = 1.0,
    ) -> DeviceSpec:
        """What-if device: every peak times ``flops_factor``, bandwidth times ``bandwidth_factor``.

        Parameters
        ----------
        flops_factor : float
            Factor applied to all matrix, sparse and vector peaks (and the measured matmul
            curve, depthwise rates and measured achievable FLOP/s); must be > 0.
        bandwidth_factor : float
            Factor applied to ``bandwidth_bytes_per_s`` (and the measured memory curve and
            achievable bandwidths); must be > 0.
        name : str, optional
            Defaults to e.g. ``"H100 SXM (2x FLOP/s)"``.
        clock_factor : float
            A faster or slower clock: scales every compute peak as ``flops_factor`` does, and
            ``boost_clock_hz`` and the measured sustained clock; not DRAM bandwidth.
        cores_factor : float
            More or fewer SMs / CUs: scales every compute peak as ``flops_factor`` does, and
            ``compute_units`` (rounded to a whole number, at least 1); not DRAM bandwidth.
            A calibrated spec's measured matmul curve keeps the units it was measured on
            (``matmul_curve_units``): a shape gains as its tiles fill the new count.

        Achievable figures keep their share of the datasheet: measured FLOP/s scale with the
        compute peaks, measured bandwidths with the bandwidth; launch overhead and DRAM
        latency stay as measured.

        Raises
        ------
        ValueError
            If a factor is not a finite number > 0.
        """
        flops, bandwidth = flops_factor, bandwidth_factor
        clock, cores = clock_factor, cores_factor
        for label, factor in (("flops_factor", flops), ("bandwidth_factor", bandwidth),
                              ("clock_factor", clock), ("cores_factor", cores)):
            if (
                isinstance(factor, bool)
                or not isinstance(factor, (int, float))
                or not 0 < factor < float("inf")
            ):
                raise ValueError(f"{label} must be a finite number > 0, got {factor!r}")
        compute = flops * clock * cores
        parts = [
            f"{flops:g}x FLOP/s" if flops != 1 else "",
            f"{bandwidth:g}x bandwidth" if bandwidth != 1 else "",
            f"{clock:g}x clock" if clock != 1 else "",
            f"{cores:g}x cores" if cores != 1 else "",
        ]
        label = ", ".join(p for p in parts if p) or "1x"
        # the curve scales with the clock and FLOP/s; with cores only as far as each shape's
        # tiles fill the new chip, which the analysis works out from matmul_curve_units
        data = _scaled_curves(self.model_dump(), dict.fromkeys(self.matmul_curve,
                                                               flops * clock), bandwidth)
        if cores != 1 and self.matmul_curve and self.compute_units is not None:
            data["matmul_curve_units"] = self.matmul_curve_units or self.compute_units
        for table in ("matrix_flops_per_s", "matrix_sparse_flops_per_s", "vector_flops_per_s",
                      "depthwise_flops_per_s", "depthwise_backward_flops_per_s"):
            data[table] = {k: v * compute for k, v in data[table].items()}
        if self.fp16_accumulate_flops_per_s is not None:
            data["fp16_accumulate_flops_per_s"] = self.fp16_accumulate_flops_per_s * compute
        if self.boost_clock_hz is not None:
            data["boost_clock_hz"] = self.boost_clock_hz * clock
        if self.compute_units is not None:
            data["compute_units"] = max(1, round(self.compute_units * cores))
        if self.achievable is not None:
            data["achievable"] = self.achievable.scaled(
                compute=compute, bandwidth=bandwidth, clock=clock).model_dump()
        extra = "".join(f", {what} x{f:g}" for what, f in (("clock", clock), ("cores", cores))
                        if f != 1)
        data.update(
            name=name or f"{self.name} ({label})",
            aliases=[],
            bandwidth_bytes_per_s=self.bandwidth_bytes_per_s * bandwidth,
            notes=[
                *self.notes,
                f"What-if variant of {self.name}: peaks x{compute:g}, bandwidth "
                f"x{bandwidth:g}{extra}.",
            ],
        )
        return validate_device(data, origin="scaled()", plausibility=False)


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


def _ratio(before: dict[str, float], after: dict[str, float], key: str) -> float | None:
    """``after[key] / before[key]``, None unless both exist."""
    old, new = before.get(key), after.get(key)
    return new / old if old and new else None


def _scaled_curves(data: dict[str, Any], matmul: dict[str, float],
                   memory: float) -> dict[str, Any]:
    """``data`` (a dumped spec) with the matmul curve of each dtype in ``matmul`` times its
    factor and the memory curve times ``memory``."""
    curves = data["matmul_curve"]
    data["matmul_curve"] = {k: [{**p, "flops_per_s": p["flops_per_s"] * matmul.get(k, 1.0)}
                                for p in points] for k, points in curves.items()}
    data["memory_curve"] = [{**p, "bytes_per_s": p["bytes_per_s"] * memory}
                            for p in data["memory_curve"]]
    return data


def validate_device(data: Any, origin: str, *, plausibility: bool = True) -> DeviceSpec:
    """Validate ``data`` into a :class:`DeviceSpec`, wrapping errors in :class:`DeviceSpecError`.

    Parameters
    ----------
    data : mapping
        Raw fields, e.g. one entry of a YAML data file.
    origin : str
        Where the data came from (a file path); it leads the error message.
    plausibility : bool
        Whether to apply the unit-prefix range checks.
    """
    try:
        return DeviceSpec.model_validate(data, context={_NO_PLAUSIBILITY: plausibility})
    except ValidationError as exc:
        name = data.get("name", "<unnamed>") if isinstance(data, dict) else "<not a mapping>"
        problems = "; ".join(_describe(err) for err in exc.errors())
        raise DeviceSpecError(f"{origin}: device '{name}': {problems}") from exc


def _describe(err: Any) -> str:
    message = str(err["msg"]).removeprefix("Value error, ")
    field = ".".join(str(part) for part in err["loc"])
    return f"field '{field}': {message}" if field else message


def device_file_schema() -> dict[str, Any]:
    """JSON Schema of a device data file: one device or a list of devices."""
    schema = DeviceSpec.model_json_schema(ref_template="#/$defs/{model}")
    defs = schema.pop("$defs", {})
    # launch_overhead_seconds has a per-kind default filled in before validation.
    schema["required"] = [f for f in schema.get("required", []) if f != "launch_overhead_seconds"]
    defs["DeviceSpec"] = schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "roofline device file",
        "description": "One device or a list of devices; see docs/devices.md.",
        "anyOf": [
            {"$ref": "#/$defs/DeviceSpec"},
            {"type": "array", "items": {"$ref": "#/$defs/DeviceSpec"}},
        ],
        "$defs": defs,
    }


def device_file_schema_json() -> str:
    """:func:`device_file_schema` as the text stored in ``data/schema.json``."""
    return json.dumps(device_file_schema(), indent=2, sort_keys=True) + "\n"
