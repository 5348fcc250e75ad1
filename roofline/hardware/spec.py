"""The :class:`DeviceSpec` model: datasheet peaks of one accelerator or CPU.

All numbers are stored in base units (FLOP/s, bytes/s, bytes, Hz, W, s). Validators
accept datasheet strings (``"989.4 TFLOPS"``, ``"3.35 TB/s"``) and reject values that
look off by a unit prefix, zero/negative peaks, unknown dtype keys, sparse peaks above
twice the dense peak, and peak-to-bandwidth ratios (ridge points) no real device has,
which is how a 1000x slip ("989.4 GFLOPS" for a tensor-core peak, "3.35 GB/s" for HBM)
shows even when each number alone looks plausible.

The parts live next door: the field types in :mod:`~roofline.hardware.quantities`, links
in :mod:`~roofline.hardware.links`, measured figures in :mod:`~roofline.hardware.measured`,
the plausibility checks (with their bands and floors) in :mod:`~roofline.hardware.checks`,
and the what-if variants in :mod:`~roofline.hardware.variants`. Their public names are
importable from here too.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from roofline._errors import DeviceSpecError
from roofline.hardware import variants
from roofline.hardware.checks import (
    BANDWIDTH_PER_CAPACITY_FLOORS,
    LAUNCH_OVERHEAD_BAND_SECONDS,
    MEMORY_BANDWIDTH_FLOORS,
    RIDGE_BANDS_FLOP_PER_BYTE,
    check_achievable,
    check_efficiency,
    check_fp16_accumulate,
    check_kind_case,
    check_memory_type,
    check_physically_plausible,
    check_sparse,
)
from roofline.hardware.curves import MatmulPoint, MemoryPoint, check_grid, sorted_memory_curve
from roofline.hardware.engines import Engine, EngineKind
from roofline.hardware.links import HostLink, Interconnect
from roofline.hardware.measured import (
    CLOCK_MARGIN,
    DRAM_LATENCY_BAND_SECONDS,
    Achievable,
    BandwidthPattern,
    Measured,
)
from roofline.hardware.quantities import (
    NO_PLAUSIBILITY,
    Bytes,
    BytesPerS,
    CacheBytes,
    FlopsPerS,
    Hertz,
    MeasuredFlopsPerS,
    MemoryBytesPerS,
    Seconds,
    Watts,
    peak_table,
    plausibility_checked,
)
from roofline.hardware.units import DTYPES, VECTOR_DTYPES, format_quantity

# with the public names of quantities, links, measured and checks it used to define
__all__ = [
    "BANDWIDTH_PER_CAPACITY_FLOORS",
    "CLOCK_MARGIN",
    "DEFAULT_LAUNCH_OVERHEAD_SECONDS",
    "DRAM_LATENCY_BAND_SECONDS",
    "LAUNCH_OVERHEAD_BAND_SECONDS",
    "MEMORY_BANDWIDTH_FLOORS",
    "RIDGE_BANDS_FLOP_PER_BYTE",
    "Achievable",
    "BandwidthPattern",
    "Bytes",
    "BytesPerS",
    "CacheBytes",
    "DeviceSpec",
    "DeviceSpecError",
    "FlopsPerS",
    "Hertz",
    "HostLink",
    "Interconnect",
    "Measured",
    "MeasuredFlopsPerS",
    "MemoryBytesPerS",
    "Seconds",
    "Watts",
    "device_file_schema",
    "device_file_schema_json",
    "validate_device",
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
    isa: str | None = Field(
        None, pattern=r"^(sm_\d+|gfx[0-9a-f]+)$",
        description="The instruction set its kernels are built for: NVIDIA's sm_<compute "
        "capability> (e.g. 'sm_90'), AMD's LLVM target (e.g. 'gfx942'); its source is "
        "sources['isa']. Parts of one ISA share an SM/CU design and process, so a matrix "
        "FLOP costs them the same energy (roofline.hardware.achievable's power rule).")
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
    )(peak_table(DTYPES))
    normalise_vector_keys = field_validator(
        "vector_flops_per_s", "depthwise_flops_per_s", "depthwise_backward_flops_per_s",
        mode="before"
    )(peak_table(VECTOR_DTYPES))

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
        return check_kind_case(value, tuple(DEFAULT_LAUNCH_OVERHEAD_SECONDS))

    normalise_curve_keys = field_validator("matmul_curve", mode="before")(peak_table(DTYPES))

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
        return sorted_memory_curve(value)

    @field_validator("memory_type")
    @classmethod
    def _check_memory_type(cls, value: str | None) -> str | None:
        return check_memory_type(value)

    @field_validator("efficiency")
    @classmethod
    def _check_efficiency(cls, value: dict[str, float]) -> dict[str, float]:
        return check_efficiency(value)

    @model_validator(mode="after")
    def _check_isa_source(self) -> DeviceSpec:
        if self.isa is not None and not self.sources.get("isa"):
            raise ValueError(f"isa '{self.isa}' has no source: add sources['isa'] (the "
                             "vendor's page that lists the part's compute capability or target)")
        return self

    @model_validator(mode="after")
    def _check_sparse(self) -> DeviceSpec:
        check_sparse(self.matrix_flops_per_s, self.matrix_sparse_flops_per_s)
        return self

    @model_validator(mode="after")
    def _check_fp16_accumulate(self) -> DeviceSpec:
        check_fp16_accumulate(self.fp16_accumulate_flops_per_s,
                              self.matrix_flops_per_s.get("fp16"))
        return self

    @model_validator(mode="after")
    def _check_achievable(self) -> DeviceSpec:
        """Measured figures against the datasheet (:func:`.checks.check_achievable`)."""
        if self.achievable is not None:
            check_achievable(
                self.achievable, bandwidth_bytes_per_s=self.bandwidth_bytes_per_s,
                peaks={"matrix_flops_per_s": self.matrix_flops_per_s,
                       "vector_flops_per_s": self.vector_flops_per_s,
                       "attention_flops_per_s": self.matrix_flops_per_s},
                boost_clock_hz=self.boost_clock_hz, sources=self.sources)
        return self

    @model_validator(mode="after")
    def _check_physically_plausible(self, info: ValidationInfo) -> DeviceSpec:
        """Launch overhead, bandwidth floors and ridge points of a transcribed spec
        (:func:`.checks.check_physically_plausible`)."""
        if not self.measured and plausibility_checked(info):
            check_physically_plausible(
                launch_overhead_seconds=self.launch_overhead_seconds,
                default_overhead_seconds=DEFAULT_LAUNCH_OVERHEAD_SECONDS[self.kind],
                bandwidth_bytes_per_s=self.bandwidth_bytes_per_s, memory_type=self.memory_type,
                memory_bytes=self.memory_bytes, peaks=self._peaks())
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
    @property
    def compute_capability(self) -> int | None:
        """An NVIDIA GPU's compute capability as an integer, read from its ISA (75 for
        ``sm_75``), or None for another ISA or none."""
        isa = self.isa or ""
        return int(isa[3:]) if isa.startswith("sm_") else None

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
        A new bf16 (else fp16) matrix peak scales ``tdp_watts`` with it unless ``tdp_watts``
        is given, so a matrix share from the power rule stays as a measured one does; a new
        ``tdp_watts`` alone moves that share.
        On a device with no rated boost, a new ``boost_clock_hz`` leaves the measured
        sustained clock as it is, or drops it with a note where it does not fit the new
        boost (:data:`CLOCK_MARGIN`). Pass ``achievable`` to set them instead. A new
        ``name`` drops the original's aliases (pass ``aliases`` to give it some), so the
        copy can be registered beside the original.

        Raises
        ------
        DeviceSpecError
            If the result does not validate; the message names the device and field.
        """
        def check(data: dict[str, Any]) -> dict[str, Any]:
            return validate_device(data, origin="with_overrides()").model_dump()

        data = variants.overridden(self.model_dump(), self.achievable, fields, check)
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
        latency stay as measured. ``tdp_watts`` scales with the compute peaks, so the power
        per FLOP/s, and a matrix share derived from it, stay as they were.

        Raises
        ------
        ValueError
            If a factor is not a finite number > 0.
        """
        data = variants.scaled(self.model_dump(), self.achievable, flops=flops_factor,
                               bandwidth=bandwidth_factor, clock=clock_factor,
                               cores=cores_factor, name=name)
        return validate_device(data, origin="scaled()", plausibility=False)


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
        return DeviceSpec.model_validate(data, context={NO_PLAUSIBILITY: plausibility})
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
