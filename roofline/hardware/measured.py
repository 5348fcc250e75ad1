"""Measured achievable figures of a device (:class:`Achievable`), each a :class:`Measured`
with its source, method and conditions.

These are the schema; :mod:`roofline.hardware.achievable` resolves them (measured, else a
class default, else the datasheet), and :mod:`roofline.hardware.checks` compares them with
the datasheet peaks they derate (:data:`CLOCK_MARGIN`, :data:`DRAM_LATENCY_BAND_SECONDS`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from roofline.hardware.quantities import Hertz, peak_table, quantity_schema
from roofline.hardware.units import DTYPES, VECTOR_DTYPES, parse_quantity

__all__ = [
    "CLOCK_MARGIN",
    "DRAM_LATENCY_BAND_SECONDS",
    "GEMM_FLOOR_BAND_SECONDS",
    "AccessPattern",
    "Achievable",
    "BandwidthPattern",
    "GemmFit",
    "Measured",
]

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

#: Plausible fixed time of one GEMM kernel, seconds (:class:`GemmFit`): a unit-slip check.
#: Measured floors are 2-14 us (the shipped gemm.yaml); 0.1 us to 1 ms leaves 10x each side.
GEMM_FLOOR_BAND_SECONDS: tuple[float, float] = (1e-7, 1e-3)

#: Patterns an op's memory traffic is classed as (``roofline.analysis.rates``): ``read``
#: (loads only), ``copy`` (one load and one store per element), ``triad`` (two loads, one
#: store).
AccessPattern = Literal["read", "copy", "triad"]
#: Patterns of a measured bandwidth: the access patterns; ``stream_app``, a large
#: bandwidth-bound application kernel kept apart from the microbenchmarks; and
#: ``layer_norm``, the bytes/s PyTorch's layer-norm forward kernel streams at (see
#: :class:`Achievable`).
BandwidthPattern = Literal[AccessPattern, "stream_app", "layer_norm"]

# kind of quantity (units.parse_quantity) and whether a bandwidth may be a bit rate
_MEASURED_KIND: dict[str, str] = {
    "bandwidth_bytes_per_s": "bandwidth",
    "matrix_flops_per_s": "flops",
    "vector_flops_per_s": "flops",
    "attention_flops_per_s": "flops",
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

    value: Annotated[float, Field(gt=0), quantity_schema(
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


def gemm_engine(dtype: str) -> Literal["matrix", "vector"]:
    """The engine a GEMM of ``dtype`` (canonical) runs on, whose datasheet peak its fit
    derates: the CUDA cores in fp32, the matrix units otherwise."""
    return "vector" if dtype == "fp32" else "matrix"


class GemmFit(BaseModel):
    """A GEMM time model fitted to a measured per-shape table of one device and dtype.

    ``seconds = floor_seconds + max(2 m n k / (efficiency x peak), bytes / (bandwidth_share
    x bandwidth))`` with the device's datasheet dense peak of the engine and its datasheet
    DRAM bandwidth (``roofline.analysis.gemm.gemm_seconds``). ``shapes``, ``median_error``
    and ``p90_error`` say how many shapes were fitted and how well (|predicted / measured -
    1|, in-sample); ``benchmarks/fit_gemm.py`` fits them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    efficiency: float = Field(gt=0, description="Share of the datasheet dense peak.")
    bandwidth_share: float = Field(gt=0, description="Share of the datasheet DRAM bandwidth.")
    floor_seconds: float = Field(gt=0, description="Fixed time per GEMM kernel, seconds.")
    shapes: int = Field(gt=0, description="Shapes in the measured table.")
    median_error: float = Field(ge=0, description="Median |predicted / measured - 1|.")
    p90_error: float = Field(ge=0, description="90th percentile of the same.")
    source: str = Field(description="Where the table was read: repo@commit:path or URL.")
    method: str = Field(description="How it was measured.")
    conditions: str | None = Field(None, description="Device string, software, power.")
    compute_units: int | None = Field(
        None, gt=0, description="Compute units (SMs) of the chip the table was measured on: "
        "a what-if with other units rescales each GEMM by the share of the chip it fills.")
    m_range: tuple[int, int] | None = Field(
        None, description="Smallest and largest m (rows of the output) of the table's shapes.")
    n_range: tuple[int, int] | None = Field(
        None, description="Smallest and largest n (columns of the output) of the same.")
    k_range: tuple[int, int] | None = Field(
        None, description="Smallest and largest k (the reduction length) of the same.")

    _require_source = model_validator(mode="before")(Measured._require_source.__func__)  # type: ignore[attr-defined]

    @model_validator(mode="after")
    def _plausible(self) -> GemmFit:
        if self.efficiency > CLOCK_MARGIN:
            raise ValueError(f"efficiency {self.efficiency:g} is above {CLOCK_MARGIN:g} of "
                             "the datasheet peak (a sparse, fp16-accumulate or wrong peak?)")
        if self.bandwidth_share > 1.0:
            raise ValueError(f"bandwidth_share {self.bandwidth_share:g} is above 1: DRAM "
                             "cannot stream faster than its datasheet bandwidth")
        lo, hi = GEMM_FLOOR_BAND_SECONDS
        if not lo <= self.floor_seconds <= hi:
            raise ValueError(f"floor_seconds {self.floor_seconds:g} is outside {lo:g}-{hi:g} s "
                             "(a unit slip: us written as s?)")
        for name in ("m_range", "n_range", "k_range"):
            span = getattr(self, name)
            if span is not None and not 1 <= span[0] <= span[1]:
                raise ValueError(f"{name} {list(span)} is no range of sizes (expected "
                                 "[smallest, largest], both at least 1)")
        return self

    @property
    def ranges(self) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]] | None:
        """(m, n, k) ranges of the measured shapes; None where the fit does not record them."""
        if self.m_range is None or self.n_range is None or self.k_range is None:
            return None
        return self.m_range, self.n_range, self.k_range


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
    as many bytes in as out, like copy) kept apart from the microbenchmarks, and
    ``layer_norm``: the compulsory bytes of PyTorch's CUDA layer-norm forward (one block
    of 128 threads per row, which reads its row twice around a block-wide reduction) over
    its kernel time, on rows that fill the chip.
    ``matrix_flops_per_s`` are dense matmuls with fp32 accumulation; ``vector_flops_per_s``
    non-matrix rates (FMA loops, SGEMM on CUDA cores); ``attention_flops_per_s`` the rate
    causal flash attention reaches on the matrix units (it derates their peak).
    ``launch_overhead_seconds`` is the GPU-side time per kernel of back-to-back launches
    (``graph_`` with CUDA/HIP graphs).
    ``ecc_default`` says whether ECC is on out of the box; its source is
    ``DeviceSpec.sources["ecc"]``. See ``roofline.hardware.achievable`` for how figures and
    class defaults are resolved.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bandwidth_bytes_per_s: dict[BandwidthPattern, Measured] = Field(default_factory=dict)
    matrix_flops_per_s: dict[str, Measured] = Field(default_factory=dict)
    vector_flops_per_s: dict[str, Measured] = Field(default_factory=dict)
    attention_flops_per_s: dict[str, Measured] = Field(
        default_factory=dict, description="Causal prefill flash attention on the matrix units, "
        "by dtype: the FLOPs of the query-key pairs it computes over its time, the median "
        "over a measured table's large shapes.")
    launch_overhead_seconds: Measured | None = None
    graph_launch_overhead_seconds: Measured | None = None
    sustained_clock_hz: Measured | None = None
    dram_latency_seconds: Measured | None = None
    gemm: dict[str, GemmFit] = Field(
        default_factory=dict, description="GEMM time models fitted to measured per-shape "
        "tables, by dtype (shipped ones: roofline/hardware/data/gemm.yaml).")
    ecc_default: bool | None = Field(
        None, description="ECC on by default (source in DeviceSpec.sources['ecc']).")

    normalise_matrix = field_validator("matrix_flops_per_s", mode="before")(peak_table(DTYPES))
    normalise_vector = field_validator("vector_flops_per_s", mode="before")(
        peak_table(VECTOR_DTYPES))
    normalise_attention = field_validator("attention_flops_per_s", mode="before")(
        peak_table(DTYPES))
    normalise_gemm = field_validator("gemm", mode="before")(peak_table(DTYPES))

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
                                              "vector_flops_per_s", "attention_flops_per_s")
                for key, m in getattr(self, table).items()]
        rows += [(name, "", m) for name in ("launch_overhead_seconds",
                                           "graph_launch_overhead_seconds",
                                           "sustained_clock_hz", "dram_latency_seconds")
                 if (m := getattr(self, name)) is not None]
        return rows

