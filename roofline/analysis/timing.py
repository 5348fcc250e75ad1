"""Per-operator roofline: which roof bounds each op on a device, and how long it takes.

The time model (one place, used by analyze, compare, what_if and sweep)
---------------------------------------------------------------------------
Each op has one time per roof in :data:`ROOFS`; on a device with effective compute rate
``P`` (the rate the engine that runs it reaches), bandwidth ``B`` (the rate its access
pattern streams at) and per-kernel overhead ``a``::

    compute_seconds  = flops / (P * fill)
    memory_seconds   = bytes / B
    latency_seconds  = max(bytes / (F / λ), (R - 1) λ)   (modelled kernels only)
    overhead_seconds = kernels * a
    seconds          = overhead_seconds + max(compute_seconds, memory_seconds, latency_seconds)

and the op's bound is the largest of the three. This is the form small-kernel
microbenchmarks fit, ``T = a + V / b`` (te42kyfo/gpu-benches, gpu-small-kernels): the
overhead of launching and draining a kernel adds to its transfer, it does not compete
with it, and on the fastest devices a 10 MB kernel's transfer is comparable to its
launch. ``a`` holds at least one DRAM latency ``λ`` (the first bytes a kernel asks for
arrive after it), so a kernel moving ``V`` bytes reaches ``V / (a + V / B)``: Little's
law, less than ``B`` until it keeps ``a B`` bytes (hundreds of KB on HBM parts) in
flight. An attention kernel whose grid keeps only ``F`` bytes in flight (few thread
blocks: a decode at a small batch) streams at most ``F / λ`` whatever the bandwidth: its
``latency`` roof (:mod:`roofline.analysis.inflight`), which more bandwidth does not lower;
so is a row-wise kernel whose blocks wait on ``R`` loads one after another (a layer norm
of few rows), beyond the first latency, which ``a`` holds.
``overhead_model="max"`` gives the classic form, ``seconds = max of the roofs``, with the
spec's launch constant.

``P``, ``B`` and ``a`` are what the device was measured to reach, each with its source
(``peaks="achievable"``, :mod:`roofline.hardware.achievable`; ``a`` no less than the
measured ``λ``), or the datasheet peaks and the spec's launch constant
(``peaks="datasheet"``). ``fill`` is the share of the chip a matmul-class op can occupy
(:mod:`roofline.analysis.gemm`); the engine is PyTorch's choice
(:mod:`roofline.analysis.rates`). An op below its overhead is ``overhead``-bound and gains
nothing from more FLOP/s or bandwidth.

A calibrated spec (``roofline.calibrate``) carries measured curves that replace those two
models where they exist: a matmul-class op runs at the rate ``torch.mm`` reached on its
(m, n, k) shape (batches stacked as rows; a convolution as its implicit GEMM), with fill
1, and an op's bytes move at the rate an elementwise add moving that many bytes reached
(cache, threads and launch included). See ``roofline/hardware/curves.py``.

The ``layout`` ops the capture records around 16-bit channels-first convolutions (the
NCHW <-> NHWC transposes cuDNN runs, which are not PyTorch ops) take time only on NVIDIA
GPUs (``layout_transposes=False`` drops them).

Time spent off the device (data loading, host work) is added as ``host_seconds`` and
stays fixed when the device changes (Amdahl's law).

A new roof (an L2 cache, say) is one entry in :data:`ROOFS` and one row of seconds
computed in :func:`analyze_step`; everything else (bounds, what-ifs, breakdowns, runtime
rescaling) loops over the roofs. Communication between GPUs is not a roof: it runs on a
second stream beside the compute (:mod:`roofline.analysis.parallel`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofline._errors import RooflineWarning, warn
from roofline._table import Rows
from roofline.analysis import alignment, gemm, inflight, passes, undercosted
from roofline.analysis.options import Options
from roofline.analysis.rates import Pattern, Rates, access_pattern, dtype_key
from roofline.hardware import DeviceSpec, get_device
from roofline.hardware.achievable import Figure, GemmFigure
from roofline.hardware.curves import interpolate_memory
from roofline.hardware.engines import Engine
from roofline.hardware.measured import BandwidthPattern
from roofline.tracing.records import MATRIX_CATEGORIES, Category, OpRecord, Trace

#: The roofs, in the order of :attr:`Analysis.roof_seconds`'s rows; also the bound names.
ROOFS: tuple[str, ...] = ("compute", "memory", "latency", "overhead")
#: Roofs listed by ``by_bound`` even at zero; the others only when some op is bound there.
ALWAYS_SHOWN: tuple[str, ...] = ("compute", "memory", "overhead")
#: Roofs whose time adds to the max of the others (``overhead_model="additive"``).
ADDITIVE: tuple[str, ...] = ("overhead",)
#: The same, for code that says "bound".
BOUNDS = ROOFS
#: The bound of an op that takes no time on any roof (views, allocations, empty tensors).
FREE = "none"
#: The speedup limits ``Comparison.speedup_limits`` reports: a roof made infinitely fast.
LIMITS: dict[str, str] = {"compute": "infinite_flops", "memory": "infinite_bandwidth"}


def ratio(a: float, b: float) -> float:
    """``a / b``, with 0 / 0 = 1 (nothing to speed up) and a / 0 = inf."""
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


@dataclass
class Analysis:
    """A trace costed on one device.

    Per-op arrays line up with ``trace.ops``: ``engine`` (None for an op with no FLOPs or
    no rate), ``flops_per_s`` (the engine's effective rate), ``fill``, ``bytes_per_s``
    (the effective bandwidth the op's bytes move at) and ``roof_seconds`` (one row per
    roof of :data:`ROOFS`). ``figures`` names the measured (or class-default) figures the
    rates came from, each with its source; empty with ``peaks="datasheet"``.
    """

    trace: Trace
    device: DeviceSpec
    options: Options
    engine: list[Engine | None]
    flops_per_s: np.ndarray
    fill: np.ndarray
    bytes_per_s: np.ndarray
    roof_seconds: np.ndarray
    host_seconds: float
    assumptions: list[str]
    figures: dict[str, Figure] = field(default_factory=dict)
    #: the least a step can take off the device: the batch over ``host_samples_per_s``
    input_floor_seconds: float = 0.0
    #: per op, the factor its rate is below its engine's for cuDNN's convolutions (their
    #: gradients' and implicit GEMM's, :func:`roofline.analysis.gemm.gradient_slowdown` and
    #: :func:`~roofline.analysis.gemm.conv_slowdown`) or a GEMM's rows off 16 bytes
    #: (:mod:`roofline.analysis.alignment`); 1 elsewhere; None: none anywhere
    slowdown: np.ndarray | None = None

    def engine_flops_per_s(self, engine: Engine) -> float | None:
        """The rate ``engine`` runs at in this analysis (its roof on a roofline chart):
        the achieved share of its peak with ``peaks="achievable"``, the peak otherwise."""
        return Rates(self.device, self.options).rate(engine)

    def stream_bytes_per_s(self, pattern: Pattern = "copy") -> float:
        """The bandwidth a large kernel of this access pattern streams at here."""
        return Rates(self.device, self.options).bandwidth_bytes_per_s(pattern)

    def roof(self, name: str) -> np.ndarray:
        """Seconds of every op under roof ``name``."""
        return self.roof_seconds[_roof_index(name)]

    @property
    def compute_seconds(self) -> np.ndarray:
        return self.roof("compute")

    @property
    def memory_seconds(self) -> np.ndarray:
        return self.roof("memory")

    @property
    def latency_seconds(self) -> np.ndarray:
        """Seconds of each op at its bytes in flight over the DRAM latency (0 where the
        kernel's grid is not modelled or keeps enough in flight)."""
        return self.roof("latency")

    @property
    def overhead_seconds(self) -> np.ndarray:
        return self.roof("overhead")

    @property
    def op_seconds(self) -> np.ndarray:
        """Predicted time of each op."""
        return _combine(self.roof_seconds, self.options.overhead_model)

    @property
    def bound(self) -> list[str]:
        """The roof that bounds each op (``compute``, ``memory`` or ``overhead``), or
        ``"none"`` (:data:`FREE`) for an op that takes no time."""
        if not self.roof_seconds.shape[1]:
            return []
        free = self.op_seconds <= 0
        return [FREE if f else ROOFS[i]
                for i, f in zip(np.argmax(self.roof_seconds, axis=0), free, strict=True)]

    @property
    def device_seconds(self) -> float:
        """Predicted time on the device (sum over ops)."""
        return float(self.op_seconds.sum())

    @property
    def seconds(self) -> float:
        """Predicted step time: device time plus host time, at least the input pipeline's
        time for the batch (``host_samples_per_s``)."""
        return max(self.device_seconds + self.host_seconds, self.input_floor_seconds)

    @property
    def input_wait_seconds(self) -> float:
        """Time the step waits for its input beyond the device and host work (0 unless
        ``host_samples_per_s`` holds the step)."""
        return max(0.0, self.input_floor_seconds - self.device_seconds - self.host_seconds)

    @property
    def intensity(self) -> np.ndarray:
        """FLOPs per byte of each op (``inf`` for an op that moves no bytes)."""
        flops, nbytes = _column(self.trace, "flops"), _column(self.trace, "bytes")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(nbytes > 0, flops / np.maximum(nbytes, 1), np.inf)

    @property
    def ridge_point(self) -> np.ndarray:
        """FLOPs per byte where each op's compute roof (its rate x fill) meets its memory
        roof (the bandwidth its bytes move at): above it the op is compute-bound."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.flops_per_s * self.fill / self.bytes_per_s

    @property
    def achieved_flops_per_s(self) -> float:
        """Total FLOPs over the predicted step time."""
        return ratio(self.trace.total_flops, self.seconds) if self.seconds else 0.0

    @property
    def mfu(self) -> float:
        """Model FLOP utilisation: achieved over the peak of the dominant engine."""
        peak = self.peak_flops_per_s
        return self.achieved_flops_per_s / peak if peak else 0.0

    @property
    def peak_flops_per_s(self) -> float:
        """Datasheet peak of the engine that carries most of the FLOPs."""
        top = self._top_engine()
        return 0.0 if top is None else self.device.peak_flops_per_s(None, top) or 0.0

    @property
    def achievable_flops_per_s(self) -> float:
        """The rate the engine that carries most of the FLOPs runs its largest op at, before
        fill and before a convolution's or misaligned GEMM's slowdown: the datasheet peak times
        the share the device reaches (measured, its class's or a GEMM fit's), as ``peaks``
        says; 0 when no op has a rate."""
        top = self._top_engine()
        rate = self.flops_per_s if self.slowdown is None \
            else self.flops_per_s * self.slowdown
        on_top = [(op.flops, float(r)) for op, e, r in
                  zip(self.trace.ops, self.engine, rate, strict=True) if e == top]
        return max(on_top)[1] if on_top else 0.0

    def misaligned_share(self) -> float:
        """Share of the step in GEMMs slowed for stored rows off a multiple of 16 bytes
        (:mod:`roofline.analysis.alignment`; 0 where none is)."""
        if self.slowdown is None or not self.seconds:
            return 0.0
        return float(self.op_seconds[_misaligned_gemms(self.trace, self.slowdown)].sum()
                     / self.seconds)

    def _top_engine(self) -> Engine | None:
        by_engine: dict[Engine, int] = {}
        for op, engine in zip(self.trace.ops, self.engine, strict=True):
            if engine is not None:
                by_engine[engine] = by_engine.get(engine, 0) + op.flops
        return max(by_engine, key=lambda e: by_engine[e]) if by_engine else None

    @property
    def unrated_flops_share(self) -> float:
        """Share of the trace's FLOPs that no engine of the device has a rate for (costed by
        bytes and overhead only; see ``assumptions``). 0 when every FLOP has a rate."""
        flops = _column(self.trace, "flops")
        unrated = np.array([e is None for e in self.engine], dtype=bool) & (flops > 0)
        return float(flops[unrated].sum() / flops.sum()) if unrated.any() else 0.0

    def _group(self, keys: list[str]) -> Rows:
        out: dict[str, dict[str, float]] = {}
        for k, s in zip(keys, self.op_seconds, strict=True):
            out.setdefault(k, {"seconds": 0.0, "fraction": 0.0})["seconds"] += float(s)
        for v in out.values():
            v["fraction"] = ratio(v["seconds"], self.seconds) if self.seconds else 0.0
        return Rows(sorted(out.items(), key=lambda kv: -kv[1]["seconds"]))

    def by_bound(self) -> dict[str, dict[str, float]]:
        """Seconds and fraction of the step per bound (``host`` included when nonzero)."""
        out = {b: {"seconds": 0.0, "fraction": 0.0} for b in ROOFS if b in ALWAYS_SHOWN}
        out.update({k: v for k, v in self._group(self.bound).items() if k != FREE})
        for name, extra in (("host", self.host_seconds), ("input", self.input_wait_seconds)):
            if extra:
                out[name] = {"seconds": extra, "fraction": extra / self.seconds}
        return Rows(out)

    def by_category(self) -> dict[str, dict[str, float]]:
        return self._group([str(op.category) for op in self.trace.ops])

    def by_phase(self) -> dict[str, dict[str, float]]:
        return self._group([op.phase for op in self.trace.ops])

    def by_module(self, depth: int | None = 2) -> dict[str, dict[str, float]]:
        return self._group([op.module if depth is None else
                            ".".join(op.module.split(".")[:depth]) for op in self.trace.ops])

    def uncounted_share(self) -> dict[str, float]:
        """Share of bytes and of predicted time taken by ops with no FLOP formula."""
        mask = np.array([not op.counted for op in self.trace.ops], dtype=bool)
        nbytes = _column(self.trace, "bytes")
        return {"bytes": float(nbytes[mask].sum() / (nbytes.sum() or 1.0)),
                "seconds": float(self.op_seconds[mask].sum() / (self.seconds or 1.0))}

    def seconds_with(self, **factors: float) -> float:
        """Step time with each named roof ``factor`` x faster, e.g. ``compute=2.0``.

        ``float('inf')`` removes a roof: ``memory=math.inf`` gives the step time with
        infinite bandwidth. Keys are the names in :data:`ROOFS`.
        """
        scale = np.ones(len(ROOFS))
        for name, factor in factors.items():
            if isinstance(factor, bool) or not (isinstance(factor, (int, float)) and factor > 0):
                raise ValueError(f"{name} factor must be a number > 0, got {factor!r}")
            scale[_roof_index(name)] = factor
        with np.errstate(divide="ignore"):
            inverse = np.where(np.isinf(scale), 0.0, 1.0 / scale)
        device = float(_combine(self.roof_seconds * inverse[:, None],
                                self.options.overhead_model).sum())
        return max(device + self.host_seconds, self.input_floor_seconds)

    def to_dataframe(self) -> Any:
        """One row per op: the trace's columns plus times, bound and roofline values."""
        df = self.trace.to_dataframe()
        df["engine"] = [str(e) if e is not None else "" for e in self.engine]
        df["flops_per_s"] = self.flops_per_s
        df["bytes_per_s"] = self.bytes_per_s
        df["intensity"] = self.intensity
        df["ridge_point"] = self.ridge_point
        df["fill"] = self.fill
        for name, row in zip(ROOFS, self.roof_seconds, strict=True):
            df[f"{name}_seconds"] = row
        df["seconds"] = self.op_seconds
        df["bound"] = self.bound
        return df

    def top(self, n: int = 10) -> list[tuple[OpRecord, float, str]]:
        """The ``n`` slowest ops: (record, seconds, bound)."""
        order = np.argsort(-self.op_seconds)[:n]
        bounds = self.bound
        return [(self.trace.ops[i], float(self.op_seconds[i]), bounds[i]) for i in order]

    def __repr__(self) -> str:
        shares = ", ".join(f"{b} {v['fraction']:.0%}" for b, v in self.by_bound().items()
                           if v["seconds"])
        return (f"Analysis({self.device.name}: {self.seconds * 1e3:.3f} ms/step, "
                f"{len(self.trace.ops)} ops, MFU {self.mfu:.1%}; {shares})")

    def _repr_html_(self) -> str:  # Jupyter: the repr's fields as a table
        from roofline._table import html_table

        rows: list[list[Any]] = [["step", f"{self.seconds * 1e3:.3f} ms"],
                                 ["ops", len(self.trace.ops)],
                ["MFU", f"{self.mfu:.1%}"]]
        rows += [[b, f"{v['fraction']:.0%}"] for b, v in self.by_bound().items() if v["seconds"]]
        return html_table(["Analysis", self.device.name], rows)


def _roof_index(name: str) -> int:
    try:
        return ROOFS.index(name)
    except ValueError:
        raise ValueError(f"unknown roof {name!r}; roofs are {', '.join(ROOFS)}") from None


_ADDED = np.array([r in ADDITIVE for r in ROOFS])


def _combine(roof_seconds: np.ndarray, model: str = "additive") -> np.ndarray:
    """Each op's time from its roofs: the additive roofs plus the slowest of the others
    (``"additive"``), or the slowest of all (``"max"``, the classic roofline)."""
    if not roof_seconds.shape[1]:
        return np.zeros(0)
    if model == "max":
        return roof_seconds.max(axis=0)
    return roof_seconds[~_ADDED].max(axis=0) + roof_seconds[_ADDED].sum(axis=0)


def _column(trace: Trace, name: str) -> np.ndarray:
    return np.fromiter((getattr(op, name) for op in trace.ops), dtype=float,
                       count=len(trace.ops))


def _engines(trace: Trace, spec: DeviceSpec, rates: Rates,
             ) -> tuple[list[Engine | None], np.ndarray, np.ndarray, dict[int, GemmFigure],
                        np.ndarray]:
    """Engine, effective FLOP/s and fill of every op, the GEMM time model of each matmul
    that has one, and each op's slowdown (a convolution gradient's, a GEMM's with rows off
    16 bytes; in the FLOP/s already)."""
    n = len(trace.ops)
    engines: list[Engine | None] = [None] * n
    rate, fill = np.zeros(n), np.ones(n)
    on_curve: dict[str, list[int]] = {}  # measured matmul curve's dtype -> op indices
    shapes: dict[int, gemm.Gemm] = {}
    fitted: dict[int, GemmFigure] = {}
    # a convolution's time over its FLOPs' at the engine's rate (_conv_slowdown), a GEMM's
    # over its aligned twin's (rows off 16 bytes, on Hopper)
    slow = np.ones(n)
    first = alignment.first_shapes(trace) if alignment.applies(spec) else {}
    for i, op in enumerate(trace.ops):
        if op.flops <= 0:  # nothing to compute: no engine, no rate to look up
            continue
        matrix, found = _engine(op, spec, rates)
        if found is None:
            continue
        engines[i], rate[i] = found
        engine = found[0]
        if not matrix:
            continue
        slow[i] = _misaligned(op, engine, spec, first, rates)
        # a GEMM, on the matrix engine or fallen back to the vector one
        if _on_curve(spec, op, engine) and (shape := gemm.gemm(op)) is not None:
            on_curve.setdefault(engine.dtype, []).append(i)
            shapes[i] = shape
        elif op.category == Category.MATMUL and (fit := rates.gemm(engine)) is not None:
            rate[i], fill[i] = _fitted_rate(spec, op, engine, fit, rates)
            fitted[i] = fit
        else:
            fill[i] = gemm.fill(op, spec.compute_units)
        if rates.options.kernel_passes and op.category == Category.CONV:
            slow[i] = _conv_slowdown(op, spec, engine, rates)
    for dtype, idx in on_curve.items():  # the measured rate of the shape replaces peak x fill
        rate[idx] = gemm.curve_rates([shapes[i] for i in idx], spec.matmul_curve[dtype]) \
            * rates.efficiency["matrix"]
        measured_on, units = spec.matmul_curve_units, spec.compute_units
        if measured_on and units and measured_on != units:  # a cores what-if of the chip
            rate[idx] *= [gemm.fill(trace.ops[i], units) * units
                          / (gemm.fill(trace.ops[i], measured_on) * measured_on) for i in idx]
    return engines, rate / slow, fill, fitted, slow


def _conv_slowdown(op: OpRecord, spec: DeviceSpec, engine: Engine, rates: Rates) -> float:
    """A convolution's time over its FLOPs' at ``engine``'s rate: cuDNN's gradients'
    multiples times its algorithm's (implicit GEMM on the tensor cores, Winograd or the rest
    in fp32 on older CUDA cores; 1: none applies)."""
    factor = gemm.gradient_slowdown(op, spec)
    if factor != 1:
        rates.note(gemm.GRADIENT_NOTE)
    tensor = gemm.conv_slowdown(op, spec, engine)
    if tensor != 1:
        rates.note(gemm.CONV_NOTE if engine.kind == "matrix" else gemm.FP32_CONV_NOTE)
        if engine.dtype == "tf32" and (simt := rates.rate(Engine("vector", "fp32"))) \
                and (tf32 := rates.rate(engine)):
            # cuDNN runs its fastest algorithm: a TF32 convolution is no slower than the
            # fp32 vector units would run it (GeForce Ampere: the same peak)
            tensor = max(1.0, min(tensor, tf32 / simt))
    return factor * tensor


def _misaligned_gemms(trace: Trace, slowdown: np.ndarray) -> np.ndarray:
    """Which ops are GEMMs slowed for rows off 16 bytes: a slowdown above 1 on a matmul (a
    convolution's is cuDNN's, :func:`_conv_slowdown`)."""
    matmuls = np.array([op.category == Category.MATMUL for op in trace.ops], dtype=bool)
    return (slowdown > 1) & matmuls


def _misaligned(op: OpRecord, engine: Engine, spec: DeviceSpec,
                first: dict[int, tuple[int, ...]], rates: Rates) -> float:
    """A GEMM's time over its aligned twin's for stored rows off 16 bytes: measured on
    Hopper, 1 elsewhere (the assumptions say so either way)."""
    if not first or (share := alignment.share(op, engine, first)) >= 1:
        return 1.0
    rates.note(alignment.note(spec))
    return 1 / share if alignment.measured(spec) else 1.0


def _engine(op: OpRecord, spec: DeviceSpec, rates: Rates,
            ) -> tuple[bool, tuple[Engine, float] | None]:
    """Whether the op is a GEMM, and the engine and FLOP/s it runs at (None: no rate). A
    depthwise convolution is a per-channel stencil with no GEMM for matrix units: on the
    vector units, at the calibrated depthwise rate where the spec has one."""
    matrix = op.category in MATRIX_CATEGORIES
    if not (matrix and gemm.is_depthwise(op)):
        return matrix, rates.compute(matrix, op.dtype, op.category)
    rates.note("depthwise convolutions run on the vector units (one input channel per group "
               "leaves no GEMM for matrix units)")
    found = rates.compute(False, op.dtype, op.category)
    if found is not None and (measured := gemm.depthwise_rate(spec, op, found[0])):
        rates.note("depthwise convolutions run at the calibrated depthwise rates")
        return False, (found[0], measured * rates.efficiency["vector"])
    return False, found


def _fitted_rate(spec: DeviceSpec, op: OpRecord, engine: Engine, fit: GemmFigure,
                 rates: Rates) -> tuple[float, float]:
    """(FLOP/s, fill) of a matmul by its GEMM fit: the fitted share of the peak (the tables'
    efficiency already holds their shapes' tile losses, so fill 1), and on a chip with
    other compute units than the one measured (a cores what-if) the share of it the
    GEMM's tiles fill, relative to the measured chip's."""
    rate = (spec.peak_flops_per_s(None, engine) or 0.0) * fit.efficiency \
        * rates.efficiency[engine.kind]
    units, measured_on = spec.compute_units, fit.compute_units
    if units and measured_on and units != measured_on:
        return rate, gemm.fill(op, units) / gemm.fill(op, measured_on)
    return rate, 1.0


def _on_curve(spec: DeviceSpec, op: OpRecord, engine: Engine) -> bool:
    """Whether the measured matmul curve holds the op: it measured torch.mm in the op's own
    dtype (tf32 for fp32 on TF32) with PyTorch's default fp32 accumulation; a fallback to
    another dtype, or fp16 accumulation, is not on it."""
    own = dtype_key(op.dtype)
    return (engine.dtype in spec.matmul_curve and engine.accumulate == "fp32"
            and (engine.dtype == own or (engine.dtype, own) == ("tf32", "fp32")))


def analyze(trace: Trace, device: str | DeviceSpec, **options: Any) -> Analysis:
    """Cost every op of ``trace`` on ``device`` (a registry name or a DeviceSpec).

    Keyword options are those of :class:`~roofline.analysis.options.Options`.

    Examples
    --------
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> a = roofline.analyze(t, "h100")
    >>> a.bound[-1], str(a.engine[-1])
    ('compute', 'matrix bf16')
    >>> round(float(a.op_seconds[-1]) * 1e3, 3)  # ms: 2 x 8192 x 4096^2 FLOPs at 0.77 of
    ... # the 989.4 TFLOP/s peak (the H100's fitted GEMM efficiency), plus its 2.7 us floor
    0.364
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"analyze() takes a Trace (from roofline.trace or roofline.capture), "
                        f"got {type(trace).__name__}; trace the model first: "
                        "t = roofline.trace(model, *inputs)")
    if getattr(trace, "info", None) is not None and trace.info.compiled == "reduce-overhead":
        # torch.compile(mode="reduce-overhead") replays the step from CUDA graphs
        options = {"graphs": True, **options}
    return analyze_step(trace, get_device(device), Options(**options))


def analyze_step(trace: Trace, spec: DeviceSpec, opts: Options, *,
                 collectives_costed: bool = False) -> Analysis:
    """:func:`analyze` of a checked trace, device and options.

    ``collectives_costed``: the caller costs the trace's collectives itself
    (:func:`roofline.parallel`), so the analysis neither warns nor notes that it does not.
    """
    rates = Rates(spec, opts)
    n = len(trace.ops)
    flops, nbytes = _column(trace, "flops"), _column(trace, "bytes")
    engines, rate, fill, fitted, slow = _engines(trace, spec, rates)
    _beyond_fits(trace, fitted, rates)
    unrated = (flops > 0) & (rate <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flops > 0, flops / (rate * fill), 0.0)
    compute[unrated] = 0.0
    kernels = _column(trace, "kernels")
    moved = nbytes  # the bytes the device's kernels move: the trace's, plus their passes
    if opts.kernel_passes and spec.kind == "gpu":
        moved, kernels = _with_passes(trace, nbytes, kernels, rates)
    if spec.memory_curve:  # measured bytes/s of an op that size: cache, threads, launch
        bandwidth = interpolate_memory(spec.memory_curve, moved) * rates.efficiency["memory"]
    else:
        bandwidth = np.array([rates.bandwidth_bytes_per_s(_pattern(op, spec, opts))
                              for op in trace.ops]) if n else np.zeros(0)
    for i, fit in fitted.items():  # the weight-streaming rate and floor of the GEMM fit
        bandwidth[i] = spec.bandwidth_bytes_per_s * fit.bandwidth_share \
            * rates.efficiency["memory"]
    # a GEMM with rows off 16 bytes loses the 16-byte loads its operands stream with, not
    # only its math: its bytes slow by the same share (roofline.analysis.alignment)
    misaligned = _misaligned_gemms(trace, slow)
    bandwidth[misaligned] /= slow[misaligned]
    memory = moved / bandwidth
    latency = np.zeros(n)
    if opts.bytes_in_flight and spec.kind == "gpu":
        latency = _in_flight_seconds(trace, spec, rates, moved, memory)
    overhead = np.zeros(n)
    if opts.overhead:  # (only then is a measured overhead figure used, and listed)
        per_kernel = np.full(n, spec.launch_overhead_seconds if opts.overhead_model == "max"
                             else rates.kernel_overhead_seconds)
        for i, fit in fitted.items():
            per_kernel[i] = max(per_kernel[i], fit.floor_seconds)
        overhead = kernels * per_kernel
    roofs = np.stack([compute, memory, latency, overhead]) if n else np.zeros((len(ROOFS), 0))
    _drop_layout(trace, spec, opts, roofs, rates)
    device_seconds = float(_combine(roofs, opts.overhead_model).sum())
    host = opts.host_seconds
    if opts.host_fraction:
        host += opts.host_fraction / (1 - opts.host_fraction) * device_seconds
    gaps = [] if collectives_costed else _collectives_note(trace)
    if unrated.any():  # a gap in the device's peaks: in the result and said out loud
        gaps.append(_unrated_note(trace, spec, flops, unrated))
    for gap in gaps:
        rates.assumptions.append(gap)
        warn(gap, RooflineWarning)
    rates.assumptions.extend(_trace_notes(trace, nbytes))
    rates.assumptions.extend(_figure_notes(spec, rates))
    rates.assumptions.extend(_host_note(spec, host, device_seconds, int(kernels.sum())))
    rates.assumptions.extend(undercosted.note(trace, spec))
    floor = _input_floor(trace, opts, device_seconds + host, rates)
    return Analysis(trace, spec, opts, engines, rate, fill, bandwidth, roofs, host,
                    rates.assumptions, dict(rates.used), floor, slow)


#: Predicted device time per kernel below which a GPU step is likely bound by the host:
#: the three steps of the zoo that were host-bound on a lent H200 (the MLP's training and
#: inference steps, llama-tiny's training step; benchmarks/data/steps) took 28-73 us per
#: kernel there (runs 2 and 3), eager PyTorch's dispatch, autograd and Python, whatever
#: their kernels took.
HOST_BOUND_SECONDS_PER_KERNEL = 20e-6


def _host_note(spec: DeviceSpec, host: float, device_seconds: float, kernels: int,
               ) -> list[str]:
    """Say that a GPU step of short kernels, with no host time given, is likely bound by
    the host, which a device-side prediction leaves out (nothing otherwise)."""
    if spec.kind != "gpu" or host or not kernels \
            or device_seconds / kernels >= HOST_BOUND_SECONDS_PER_KERNEL:
        return []
    return [f"the step's {kernels} kernels are predicted at {device_seconds / kernels * 1e6:.3g}"
            " us each on average: such a step is usually bound by the host instead, eager "
            "PyTorch's dispatch, autograd and Python (28-73 us per kernel in the zoo's "
            "host-bound steps measured on an H200's host, 2026-12-04; benchmarks/data/steps), "
            "which this device-side prediction leaves out: host_seconds= adds such time, "
            "roofline.measure measures it"]


def _input_floor(trace: Trace, opts: Options, seconds: float, rates: Rates) -> float:
    """The least time the input pipeline takes for the trace's batch (0: no ceiling)."""
    if opts.host_samples_per_s is None:
        return 0.0
    batch = trace.info.batch
    if not batch:
        raise ValueError("host_samples_per_s needs the trace's batch, and this trace records "
                         "none (trace.info.batch is None: a capture() block, or no tensor "
                         "input); pass host_seconds= instead")
    floor = batch / opts.host_samples_per_s
    held = "holds the step" if floor > seconds else "does not hold the step"
    rates.note(f"the input pipeline delivers at most {opts.host_samples_per_s:.4g} samples/s "
               f"(host_samples_per_s): batch {batch} takes at least {floor * 1e3:.4g} ms, "
               f"which {held} ({seconds * 1e3:.4g} ms on the device and host)")
    return floor


def _beyond_fits(trace: Trace, fitted: dict[int, GemmFigure], rates: Rates) -> None:
    """A note on the matmuls whose (m, n, k) lies outside the shapes their GEMM fit was
    measured on: the fitted model extrapolates them, no table value stands in."""
    beyond: dict[str, list[int]] = {}
    for i, fit in fitted.items():
        shape = gemm.gemm(trace.ops[i])
        if fit.ranges is None or shape is None:
            continue
        _, m, n, k = shape
        if any(not lo <= size <= hi for size, (lo, hi) in zip(
                (m, n, round(k)), fit.ranges, strict=True)):
            beyond.setdefault(fit.dtype, []).append(i)
    for dtype, idx in beyond.items():
        ranges = fitted[idx[0]].ranges
        assert ranges is not None
        spans = ", ".join(f"{d} {lo}-{hi}" for d, (lo, hi) in zip("mnk", ranges, strict=True))
        rates.note(f"{len(idx)} {dtype} matmul calls lie outside the shapes their GEMM fit was "
                   f"measured on ({spans}): the fitted model (floor + max(compute, bytes)) "
                   "extrapolates them, no measured time stands in")


def _pattern(op: OpRecord, spec: DeviceSpec, opts: Options) -> BandwidthPattern:
    """The measured bandwidth an op streams at: its PyTorch GPU kernel's own figure where
    it has one (:func:`roofline.analysis.passes.pattern`), else its bytes' access pattern."""
    kernel = passes.pattern(op) if opts.kernel_passes and spec.kind == "gpu" else None
    return kernel or access_pattern(op.bytes_read, op.bytes_written)


def _with_passes(trace: Trace, nbytes: np.ndarray, kernels: np.ndarray, rates: Rates,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and kernels with the extra passes of PyTorch's GPU softmax and norm
    kernels (:mod:`roofline.analysis.passes`), and a note of how many ops have them."""
    nbytes, kernels = nbytes.copy(), kernels.copy()
    moved = 0
    for i, op in enumerate(trace.ops):
        more, launches = passes.extra(op)
        if more or launches:
            nbytes[i] += more
            kernels[i] += launches
            moved += more
    if moved:
        rates.note(f"softmax and norm kernels costed with the passes PyTorch's GPU "
                   f"kernels make (rows too long for the chip read 3x, softmax backward's "
                   f"extra multiply, layer- and RMS-norm weight gradients re-read): "
                   f"{moved / 1e9:.3g} GB more (kernel_passes=False: one read)")
    return nbytes, kernels


def _in_flight_seconds(trace: Trace, spec: DeviceSpec, rates: Rates, moved: np.ndarray,
                       memory: np.ndarray) -> np.ndarray:
    """Each modelled kernel's latency roof (:mod:`roofline.analysis.inflight`): its bytes
    over its bytes in flight per DRAM latency, or the latencies beyond the first that its
    blocks wait on one after another; 0 elsewhere. A note says how many each binds."""
    seconds = np.zeros(len(trace.ops))
    latency = rates.figures.dram_latency() if rates.figures is not None else None
    units = spec.compute_units or 0
    if latency is None or not units:
        return seconds
    for i, op in enumerate(trace.ops):
        held = inflight.in_flight_bytes(op, units)
        if held:  # an empty grid moves nothing
            seconds[i] = moved[i] * latency.value / held
    waits = _waits(trace, spec, latency.value, moved, memory)
    held = waits > np.maximum(memory, seconds)
    cudnn = sum(1 for i in np.flatnonzero(held) if trace.ops[i].name in inflight.BATCH_NORM_ALL
                and trace.ops[i].dtype in inflight.CUDNN_PER_CHANNEL)
    _in_flight_notes(rates, latency, int((seconds > memory).sum()), int(held.sum()), cudnn)
    return np.maximum(seconds, waits)


def _waits(trace: Trace, spec: DeviceSpec, latency: float, moved: np.ndarray,
           memory: np.ndarray) -> np.ndarray:
    """The DRAM latencies each op's kernels wait one after another on ``spec``, beyond the
    first (the launch overhead holds it), plus what runs before or after them on the
    stream."""
    vendor, units, cc = spec.vendor, spec.compute_units or 0, spec.compute_capability
    waits = np.zeros(len(trace.ops))
    # a step with no batch-norm backward ran its batch norms in evaluation (a trace of real
    # CUDA tensors records the statistics' shapes either way): the elementwise kernel alone
    evaluation = not any(op.name in inflight.BATCH_NORM_BACKWARD for op in trace.ops)
    windows = inflight.max_pool_windows(trace.ops)
    for i, op in enumerate(trace.ops):
        if op.name == inflight.MAX_POOL_BACKWARD:
            window = windows.get(op.input_ids[2]) if len(op.input_ids) > 2 else None
            rounds = inflight.max_pool_backward(op, window, vendor, units, cc) if window \
                else None
            if rounds and moved[i]:  # after the fill of the gradient, at the op's bandwidth
                waits[i] = (rounds - 1) * latency + memory[i] * op.bytes_written / moved[i]
            continue
        # batch norm's elementwise transform runs after its statistics kernel, so their
        # times add; it moves the op's bytes, at the bandwidth or its own rounds
        weight = trace.storages.get(op.input_ids[1]) \
            if op.name in inflight.BATCH_NORM_FORWARD and len(op.input_ids) > 1 else None
        transform = inflight.batch_norm_transform(op, vendor, units,
                                                  weight.dtype if weight else None, cc)
        if evaluation and op.name in inflight.BATCH_NORM_FORWARD:
            if transform:  # the only kernel
                waits[i] = max(memory[i], (transform - 1) * latency)
            continue
        rounds = inflight.dependent_loads(op, vendor, units, cc)
        if rounds:
            waits[i] = (rounds - 1) * latency
        if transform:
            waits[i] += max(memory[i], transform * latency)
    return waits


def _in_flight_notes(rates: Rates, latency: Figure, bound: int, rows: int, cudnn: int,
                     ) -> None:
    """Say how many kernels the latency roof binds, and which of them are cuDNN's."""
    if bound or rows:
        rates.used.setdefault("DRAM latency", latency)
    ns = f"{latency.value * 1e9:.0f} ns"
    if bound:
        rates.note(f"{bound} attention kernel(s) launch too few thread blocks to keep the "
                   f"memory busy: their bytes stream at most at the bytes in flight over the "
                   f"DRAM latency ({ns}; Little's law, roofline.analysis.inflight), a "
                   f"latency roof more bandwidth does not lower (bytes_in_flight=False: none)")
    if rows:
        cudnn_note = (
            f"; {cudnn} of them fp16 or fp32 batch norms, which with fp32 weights "
            f"(autocast's) cuDNN's closed NCHW kernels run: given the rounds of PyTorch's own "
            f"per-channel kernel (public profiles show 512-thread blocks per channel, no "
            f"faster than PyTorch's where both were timed)") if cudnn else ""
        rates.note(f"{rows} layer-, batch-norm or max-pool kernel(s) wait on their loads one "
                   f"after another (a layer norm of few rows; a channels-first batch norm in "
                   f"training, one block per channel, then on PyTorch's own kernels its "
                   f"elementwise transform, one element per thread at a time; a "
                   f"channels-first max pool, one element of its window at a time): each "
                   f"block takes at least its rounds of DRAM latency ({ns} each; "
                   f"roofline.analysis.inflight), a latency roof more bandwidth does not "
                   f"lower (bytes_in_flight=False: none){cudnn_note}")


def _drop_layout(trace: Trace, spec: DeviceSpec, opts: Options, roofs: np.ndarray,
                 rates: Rates) -> None:
    """Zero the recorded cuDNN layout transposes where they do not run; say where they do."""
    layout = np.array([op.category == Category.LAYOUT for op in trace.ops], dtype=bool)
    if not layout.any():
        return
    if opts.layout_transposes and spec.kind == "gpu" and spec.vendor == "NVIDIA":
        rates.note(f"{int(layout.sum())} NCHW <-> NHWC transposes that cuDNN runs around "
                   "16-bit channels-first convolutions are costed as memory-bound kernels "
                   "(a channels_last model has none; layout_transposes=False drops them)")
    else:
        roofs[:, layout] = 0.0


def _figure_notes(spec: DeviceSpec, rates: Rates) -> list[str]:
    """One line naming the achievable figures the analysis used, with their origin."""
    if rates.figures is None:
        return [f"{spec.name}: datasheet peaks (peaks='datasheet')"]
    if not rates.used:
        return [f"{spec.name}: datasheet peaks and the registry's launch constant (no "
                "measured figure for it or its class)"]
    parts = [f"{name} {fig}" for name, fig in rates.used.items()]
    notes = [f"{spec.name} at the rates it was measured to reach (peaks='achievable'; "
             "other rates at the datasheet's): " + "; ".join(parts)]
    if rates.gemm_used:
        notes.append(f"{spec.name} matmuls by the GEMM model fitted to measured per-shape "
                     "tables (floor + max(FLOPs / (share x peak), bytes / (share x "
                     "bandwidth)); gemm_shapes=False for tiles x matrix figure): "
                     + "; ".join(f"{d} {fig}" for d, fig in rates.gemm_used.items()))
    return notes


def _collectives_note(trace: Trace) -> list[str]:
    """The note on a parallel trace's collectives, which a single-device analysis leaves
    uncosted (empty for a trace with none)."""
    comm = [op.collective for op in trace.ops if op.collective is not None]
    if not comm:
        return []
    world = trace.info.world_size or "?"
    return [f"collectives not costed here: {len(comm)} collectives "
            f"({sum(c.bytes for c in comm) / 1e6:.4g} MB) of a {world}-GPU trace take no "
            "time in analyze, compare and what_if; roofline.parallel(trace, device) costs "
            "them on the interconnect"]


def _unrated_note(trace: Trace, spec: DeviceSpec, flops: np.ndarray,
                  unrated: np.ndarray) -> str:
    dtypes = sorted({trace.ops[i].dtype or "?" for i in np.flatnonzero(unrated)})
    return (f"{spec.name} lists no compute rate for {', '.join(dtypes)} ops on any engine: "
            f"{int(unrated.sum())} op calls ({flops[unrated].sum() / max(flops.sum(), 1):.1%} "
            "of FLOPs) are costed by their bytes and launch overhead only")


def _trace_notes(trace: Trace, nbytes: np.ndarray) -> list[str]:
    """What the analysis assumed about the trace's gaps and capture choices."""
    notes = []
    uncounted = [not op.counted for op in trace.ops]
    if any(uncounted):
        share = nbytes[uncounted].sum() / max(nbytes.sum(), 1)
        notes.append(f"{sum(uncounted)} op calls have no FLOP formula ({share:.1%} of bytes): "
                     "costed by their bytes and launch overhead only")
    info = trace.info
    if calls := info.attention_calls:
        notes.append(
            f"attention calls with dropout ({calls}) were traced as one fused kernel each, "
            "as CUDA runs them; a CPU runs them unfused in fp32 (trace(..., "
            "attention='as-run') for a CPU prediction)" if info.attention == "fused"
            else f"attention calls ({calls}) were traced as explicit matmul, softmax "
            "and dropout (attention='eager')")
    if info.loss == "output.loss":
        notes.append("the loss is the one the model's output carries (output.loss, as a "
                     "Hugging Face model returns given labels)")
    if info.optimizer_foreach:
        notes.append("the optimizer ran its foreach kernels (one kernel per op over all "
                     "parameters), as PyTorch's default does on CUDA; on the CPU it loops over "
                     "the parameters (pass foreach=False to the optimizer to trace that)")
    if dropouts := info.fused_dropout_calls:
        notes.append(f"dropout calls ({dropouts}) were traced as CUDA runs them: one fused "
                     "native_dropout kernel each, keeping a 1-byte mask for backward")
    if norms := info.fused_rms_norm_calls:
        notes.append(f"RMS norm calls ({norms}) were traced as CUDA runs them: one fused "
                     "_fused_rms_norm kernel each, and one _fused_rms_norm_backward (ATen's "
                     "layer-norm kernels; torch's quack kernels, taken on Hopper and Blackwell "
                     "when the CuTe DSL is installed, are not modelled); the CPU runs them as "
                     "about six ops each way")
    if softmaxes := info.fused_softmax_calls:
        notes.append(f"softmax calls with an fp32 dtype over fp16 tensors ({softmaxes}) were "
                     "traced as CUDA runs them: one kernel reading fp16 and writing fp32, where "
                     "the CPU casts first")
    if calls := info.cuda_autocast_calls:
        notes.append(f"{calls} op calls under autocast were traced with CUDA autocast's cast "
                     "policy where the CPU's differs: pow, exp, softmax, layer_norm... in fp32, "
                     "cross-entropy's log_softmax in the logits' dtype")
    if unfused := info.attention_unfused:
        notes.append(
            f"attention calls with dropout ({unfused}) are in the trace as the CPU ran them, "
            "unfused in fp32 (a real-tensor trace, or grouped-query / masked-causal calls); "
            "CUDA would run one fused kernel")
    if info.compiled:
        fused = sum(1 for op in trace.ops if op.fused)
        breaks = f", {len(info.graph_breaks)} graph breaks" if info.graph_breaks else ""
        notes.append(
            f"the step as torch.compile (mode {info.compiled!r}) runs it: {fused} kernels "
            f"from inductor's GPU scheduler ({info.compiled_graphs} graphs{breaks}), each "
            "moving only what leaves it; GEMMs and attention as cuBLAS and SDPA, the "
            "optimizer eager; not modelled: max-autotune templates, pad_mm, a looped "
            "reduction's second read")
    return notes
