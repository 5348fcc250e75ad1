"""Which engine runs each op, at what rate: PyTorch's choices on one device.

Matmul-class ops (matmul, conv, attention) run on the matrix engine in their dtype
(depthwise convolutions, one input channel per group, on the vector engine); fp32 matmuls
use TF32 only when ``tf32_matmul=True`` (PyTorch's default is off), convolutions when
``tf32_conv=True`` (PyTorch's default is on). A dtype the device has no matrix engine for
falls back as PyTorch would (to the vector engine; fp8 to the 16-bit matrix peak) and the
analysis says so in ``assumptions``. Everything else runs on the vector engine in its
dtype (fp32 when the device lists no vector rate for it).

With ``peaks="achievable"`` (the default) every rate is the datasheet peak times the
share of it the device was measured to reach (:mod:`roofline.hardware.achievable`: per
engine and dtype, per memory access pattern, with the launch overhead and DRAM latency
measured on it, or its class's default); :attr:`Rates.used` keeps the figures an analysis
used, with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from roofline.analysis.options import EFFICIENCY_KEYS, Options
from roofline.hardware import DeviceSpec
from roofline.hardware.achievable import (
    Figure,
    Figures,
    GemmFigure,
    figures,
    two_fp32_datapaths,
)
from roofline.hardware.checks import check_efficiency
from roofline.hardware.engines import Engine
from roofline.hardware.measured import AccessPattern as Pattern
from roofline.hardware.measured import BandwidthPattern
from roofline.hardware.units import canonical_dtype

#: Memory access patterns of the measured bandwidths: a kernel that reads at least 3 bytes
#: per byte it writes streams like a read (a reduction), one that reads 1.5-3 like a
#: triad (2 loads, 1 store: a binary elementwise op), the rest like a copy (1 load, 1
#: store; writes only, too).
READ_PER_WRITE = {"read": 3.0, "triad": 1.5}


def access_pattern(bytes_read: float, bytes_written: float) -> Pattern:
    """``"read"``, ``"triad"`` or ``"copy"``: the measured pattern an op's traffic is like."""
    if bytes_written <= 0:
        return "read" if bytes_read > 0 else "copy"
    r = bytes_read / bytes_written
    return "read" if r >= READ_PER_WRITE["read"] else "triad" if r >= READ_PER_WRITE[
        "triad"] else "copy"


def _two_datapaths(spec: DeviceSpec) -> str:
    """What the fp32 note adds for a part whose SMs split their FP32 lanes over two
    datapaths (:func:`~roofline.hardware.achievable.two_fp32_datapaths`)."""
    if not two_fp32_datapaths(spec):
        return ""
    return ("; its SMs have two FP32 datapaths per partition, one shared with INT32, which "
            "SGEMM keeps only partly busy: 51-78% of the fp32 peak where measured (the "
            "vector fp32 figure below)")


# Integer and boolean ops (indices, masks) are costed at the fp32 vector rate without a note.
_NOTED_FALLBACKS = frozenset({"fp16", "bf16", "fp8", "fp64"})
#: What an attention figure is a measurement of, and how far other kernels were from it.
ATTENTION_NOTE = (
    "fused attention costed at the rate measured for serving engines' prefill kernels at head "
    "dimension 128 (AIConfigurator: TensorRT-LLM's; vLLM's FlashAttention-2 on the A100), or "
    "its class's share of that; PyTorch's own kernels and other head dimensions run tens of "
    "percent apart from it (on an H200 under torch 2.11: its default, cuDNN's, 1.34-1.45x as "
    "fast forward at head dimension 128 and 1.00-1.06x at 64; its FlashAttention-2 backend "
    "0.56-0.79x; docs/validation.md, 'On a GPU')")


def dtype_key(dtype: str) -> str:
    """Canonical dtype key of a trace dtype; integer, boolean and unknown dtypes give ``""``
    (they have no engine of their own and fall back to the fp32 vector rate)."""
    try:
        key = canonical_dtype(dtype or "float32")
    except ValueError:
        return ""
    return "" if key in ("int8", "int4") and dtype not in ("int8", "uint8") else key


@dataclass
class Rates:
    """Effective rates of one device, looked up once per (matrix, dtype, category)."""

    spec: DeviceSpec
    options: Options
    assumptions: list[str] = field(default_factory=list)
    _cache: dict[tuple[bool, str, str], tuple[Engine, float] | None] = field(
        default_factory=dict)

    def __post_init__(self) -> None:
        eff = dict.fromkeys(EFFICIENCY_KEYS, 1.0)
        eff.update(check_efficiency(self.spec.efficiency))
        eff.update(check_efficiency(self.options.efficiency))
        self.efficiency = eff
        self.figures: Figures | None = (figures(self.spec) if self.options.peaks ==
                                        "achievable" else None)
        #: figure name -> the achievable figure an op of this analysis used
        self.used: dict[str, Figure] = {}
        #: dtype -> the GEMM time model matmuls of this analysis used
        self.gemm_used: dict[str, GemmFigure] = {}

    def _use(self, name: str, figure: Figure | None) -> float:
        """The share of its datasheet figure that ``figure`` is (1 without one)."""
        if figure is None or figure.share is None:
            return 1.0
        if figure.origin != "datasheet":  # the datasheet is the fallback: not worth a line
            self.used.setdefault(name, figure)
        return figure.share

    def bandwidth_bytes_per_s(self, pattern: BandwidthPattern = "copy") -> float:
        """Effective bandwidth of a kernel with this access pattern."""
        share = 1.0
        if self.figures is not None:
            share = self._use(f"{pattern} bandwidth", self.figures.bandwidth(pattern))
        return self.spec.bandwidth_bytes_per_s * share * self.efficiency["memory"]

    @property
    def kernel_overhead_seconds(self) -> float:
        """Per-kernel overhead ``a`` of ``T = a + V / b``: measured (plain or CUDA-graph
        launch, the intercept of a small-kernel fit) or its class's, else the spec's; no
        less than one DRAM latency, which every kernel that touches memory waits."""
        if self.figures is None:
            return self.spec.launch_overhead_seconds
        fig = self.figures.launch_overhead(graphs=self.options.graphs)
        if fig.origin != "datasheet":
            self.used.setdefault("graph launch overhead" if self.options.graphs
                                 else "launch overhead", fig)
        latency = self.figures.dram_latency()
        if latency is not None and latency.value > fig.value:
            self.used.setdefault("DRAM latency", latency)
            return latency.value
        return fig.value

    def gemm(self, engine: Engine) -> GemmFigure | None:
        """The GEMM time model of a matmul on ``engine`` (None: none, or switched off).
        The tables measured fp32 accumulation: an fp16-accumulate GEMM has none."""
        if self.figures is None or not self.options.gemm_shapes \
                or engine.accumulate != "fp32":
            return None
        fig = self.figures.gemm(engine.dtype)
        if fig is not None:
            self.gemm_used.setdefault(engine.dtype, fig)
        return fig

    def note(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)

    def compute(self, matrix: bool, dtype: str, category: str) -> tuple[Engine, float] | None:
        """(engine, effective FLOP/s) of an op of ``category``; None when the device lists
        no rate that could run it."""
        key = (matrix, dtype, category)
        if key not in self._cache:
            self._cache[key] = self._lookup(matrix, dtype_key(dtype), category)
        return self._cache[key]

    def rate(self, engine: Engine) -> float | None:
        """Effective FLOP/s of ``engine`` (peak x achieved share x efficiency), or None."""
        found = self._rated(engine)
        return None if found is None else found[1]

    def _rated(self, engine: Engine) -> tuple[Engine, float] | None:
        peak = self.spec.peak_flops_per_s(None, engine)
        if peak is None:
            return None
        share = 1.0
        if self.figures is not None:  # fp16 accumulation: the share its fp32 sibling reaches
            fig = (self.figures.matrix(engine.dtype) if engine.matrix
                   else self.figures.vector(engine.dtype))
            share = self._use(f"{engine.kind} {engine.dtype}", fig)
        return engine, peak * share * self.efficiency[engine.kind]

    def _lookup(self, matrix: bool, dtype: str, category: str) -> tuple[Engine, float] | None:
        if matrix and dtype and category == "attention" and (found := self._attention(dtype)):
            return found
        if matrix and dtype and (found := self._matrix(dtype, category)) is not None:
            return found
        return self._vector(dtype)

    def _matrix(self, dtype: str, category: str) -> tuple[Engine, float] | None:
        spec, name, opts = self.spec, self.spec.name, self.options
        want = dtype
        tf32 = opts.tf32_conv if category == "conv" else opts.tf32_matmul
        if dtype == "fp32" and tf32:
            want = "tf32" if spec.peak_flops_per_s("tf32", "matrix") is not None else "fp32"
        if want == "fp8" and spec.peak_flops_per_s("fp8", "matrix") is None:
            for alt in ("bf16", "fp16"):
                if (found := self._rated(Engine("matrix", alt))) is not None:
                    self.note(f"{name} has no fp8 matrix peak: fp8 matmuls costed at its "
                              f"{alt} matrix peak")
                    return found
        # cuBLAS matmuls only: cuDNN convolutions and fused attention accumulate in fp32
        if opts.fp16_accumulate and want == "fp16" and category == "matmul" \
                and spec.fp16_accumulate_flops_per_s is not None:
            return self._rated(Engine("matrix", "fp16", "fp16"))
        if (found := self._rated(Engine("matrix", want))) is not None:
            return found
        if want == "fp32" and spec.peak_flops_per_s("tf32", "matrix") is not None:
            # the engine exists, but PyTorch leaves TF32 off by default for matmuls
            flag = "tf32_conv" if category == "conv" else "tf32_matmul"
            self.note(f"{name}: float32 {category} ops run on its vector units with TF32 "
                      f"off ({flag}=False, PyTorch's matmul default; --dtype tf32 on the CLI)"
                      + _two_datapaths(spec))
        else:
            self.note(f"{name} has no {want} matrix units: {want} matmuls run on its vector "
                      "units, as PyTorch falls back")
        return None

    def _attention(self, dtype: str) -> tuple[Engine, float] | None:
        """Flash attention on the matrix units at the rate it was measured to reach (it
        stays well below the GEMMs' share); None: no figure, the matrix rate stands."""
        peak = self.spec.peak_flops_per_s(dtype, "matrix")
        fig = self.figures.attention(dtype) if self.figures is not None else None
        if peak is None or fig is None:
            return None
        share = self._use(f"attention {dtype}", fig)
        self.note(ATTENTION_NOTE)
        return Engine("matrix", dtype), peak * share * self.efficiency["matrix"]

    def _vector(self, dtype: str) -> tuple[Engine, float] | None:
        if dtype and dtype != "tf32" and (found := self._rated(Engine("vector", dtype))):
            return found
        found = self._rated(Engine("vector", "fp32"))
        if found is not None and dtype in _NOTED_FALLBACKS:
            self.note(f"{self.spec.name} lists no {dtype} vector rate: costed at its fp32 rate")
        return found
