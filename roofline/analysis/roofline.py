"""Per-operator roofline: which roof bounds each op on a device, and how long it takes.

The time model (one place, used by analyze, compare, what_if and sweep)
---------------------------------------------------------------------------
For each op, on a device with effective compute rate ``P`` (peak x efficiency of
the unit that runs it), effective bandwidth ``B`` and per-kernel overhead ``L``::

    compute_seconds  = flops / (P * fill)
    memory_seconds   = bytes / B
    overhead_seconds = kernels * L
    seconds          = max(compute_seconds, memory_seconds, overhead_seconds)

and the op's bound is the term that wins. ``L`` (``launch_overhead_seconds``, a
device field) is the least time a kernel occupies the device: launch latency and
the ramp of a kernel too small to fill the chip; an op below it is
``overhead``-bound and gains nothing from more FLOP/s or bandwidth. ``fill`` is
the share of the chip a matmul-class op can occupy: its output tiles (128x128
per compute unit, as cuBLAS/CUTLASS tile it; a convolution as its implicit GEMM;
attention: one 128-row block per batch x head), times the split-K chunks of 1024
its reduction allows, over the device's compute units, at most 1. Tile shapes and
split-K heuristics of real libraries vary; skinny GEMMs are the least certain.

A calibrated spec (``roofline.calibrate``) carries measured curves that replace those
two models where they exist: a matmul-class op runs at the rate ``torch.mm`` reached on
its (m, n, k) shape (batches stacked as rows; a convolution as its implicit GEMM), with
fill 1, and an op's bytes move at the rate an elementwise add moving that many bytes
reached (cache, threads and launch included). See ``roofline/hardware/curves.py``.

Units: matmul-class ops (matmul, conv, attention) run on the matrix units in
their dtype (depthwise convolutions, one input channel per group, on the vector
units); fp32 matmuls use TF32 only when ``tf32_matmul=True`` (PyTorch's default is
off), convolutions when ``tf32_conv=True`` (PyTorch's default is on).
A dtype the device has no matrix unit for falls back as PyTorch would (to the
vector units; fp8 to the 16-bit matrix peak) and the analysis says so in
``assumptions``. Everything else runs on the vector units in its dtype (fp32 when
the device lists no vector rate for it).

Time spent off the device (data loading, host work) is added as ``host_seconds``
and stays fixed when the device changes (Amdahl's law).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.hardware import DeviceSpec, get_device
from roofline.hardware.curves import interpolate_matmul, interpolate_memory
from roofline.hardware.units import canonical_dtype
from roofline.tracing.measure import Measurement
from roofline.tracing.records import OpRecord, Trace

if TYPE_CHECKING:
    from roofline.analysis.validate import Validation

MATRIX_CATEGORIES = frozenset({"matmul", "conv", "attention"})
BOUNDS = ("compute", "memory", "overhead")
_TILE_SIDE = 128  # cuBLAS/CUTLASS-style 128x128 output tile per compute unit
_SPLIT_K = 1024  # reduction length per split-K chunk
# Integer and boolean ops (indices, masks) are costed at the fp32 vector rate without a note.
_NOTED_FALLBACKS = frozenset({"float16", "bfloat16", "fp8", "float64"})
_FP16_ACCUMULATE = "(fp16 accumulate)"
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")


@dataclass(frozen=True)
class Options:
    """Analysis options; every public entry point takes them as keywords.

    Attributes
    ----------
    tf32_matmul : fp32 matmuls use TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32``).
    tf32_conv : fp32 convolutions use TF32 (``torch.backends.cudnn.allow_tf32``, on by default).
    fp16_accumulate : fp16 matmuls accumulate in fp16
        (``torch.backends.cuda.matmul.allow_fp16_accumulation``; cuBLAS ``CUBLAS_COMPUTE_16F``,
        which llama.cpp uses): on a device with a faster fp16-accumulate peak (GeForce),
        that peak.
    efficiency : achievable fraction of peak: one float for every roof, or a dict with
        keys ``matrix``, ``vector``, ``memory``. Overrides the device's own ``efficiency``.
    host_seconds : time per step off the device (data loading, Python), fixed across devices.
    host_fraction : the same, as a fraction of the whole step on the analysed device.
    overhead : model per-kernel launch overhead (``False``: a pure roofline).
    """

    tf32_matmul: bool = False
    tf32_conv: bool = True
    fp16_accumulate: bool = False
    efficiency: float | dict[str, float] | None = None
    host_seconds: float = 0.0
    host_fraction: float | None = None
    overhead: bool = True

    def __post_init__(self) -> None:
        if self.host_seconds < 0:
            raise ValueError(f"host_seconds must be >= 0, got {self.host_seconds}")
        if self.host_fraction is not None and not 0 <= self.host_fraction < 1:
            raise ValueError(f"host_fraction must be in [0, 1), got {self.host_fraction}")
        for k, v in _efficiency_dict(self.efficiency).items():
            if k not in ("matrix", "vector", "memory"):
                raise ValueError(f"unknown efficiency key {k!r} (matrix, vector, memory)")
            if not 0 < v <= 1:
                raise ValueError(f"efficiency[{k!r}] must be in (0, 1], got {v}")


def _efficiency_dict(e: float | dict[str, float] | None) -> dict[str, float]:
    if e is None:
        return {}
    if isinstance(e, (int, float)):
        return {"matrix": float(e), "vector": float(e), "memory": float(e)}
    return dict(e)


def _dtype_key(dtype: str) -> str:
    if dtype in _FLOAT8:
        return "fp8"
    return dtype or "float32"


@dataclass
class _Rates:
    """Effective rates of one device, looked up once per (category, dtype)."""

    spec: DeviceSpec
    options: Options
    assumptions: list[str] = field(default_factory=list)
    _cache: dict[tuple[bool, str, str], tuple[float, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        eff = {"matrix": 1.0, "vector": 1.0, "memory": 1.0}
        eff.update(_efficiency_dict(self.spec.efficiency))
        eff.update(_efficiency_dict(self.options.efficiency))
        self.eff = eff
        self.bandwidth_bytes_per_s = self.spec.bandwidth_bytes_per_s * eff["memory"]

    def compute(self, matrix: bool, dtype: str, category: str) -> tuple[float, str]:
        """(effective FLOP/s, unit label) for an op of ``category``."""
        key = (matrix, dtype, category)
        if key not in self._cache:
            self._cache[key] = self._lookup(matrix, _dtype_key(dtype), category)
        return self._cache[key]

    def _note(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)

    def _lookup(self, matrix: bool, dtype: str, category: str) -> tuple[float, str]:
        spec, name = self.spec, self.spec.name
        if matrix:
            want = dtype
            tf32 = self.options.tf32_conv if category == "conv" else self.options.tf32_matmul
            if dtype == "float32" and tf32:
                want = "tf32"
            peak = _peak(spec, want, "matrix")
            if peak is None and want == "tf32":
                want, peak = "float32", _peak(spec, "float32", "matrix")
            if peak is None and want == "fp8":
                for alt in ("bfloat16", "float16"):
                    peak = _peak(spec, alt, "matrix")
                    if peak is not None:
                        self._note(f"{name} has no fp8 matrix peak: fp8 matmuls costed at "
                                   f"its {alt} matrix peak")
                        return peak * self.eff["matrix"], f"matrix {alt}"
            # cuBLAS matmuls only: cuDNN convolutions and fused attention accumulate in fp32
            fast = spec.fp16_accumulate_flops_per_s
            if self.options.fp16_accumulate and fast is not None and category == "matmul" \
                    and _canonical(want) == "fp16":
                return fast * self.eff["matrix"], f"matrix {want} {_FP16_ACCUMULATE}"
            if peak is not None:
                return peak * self.eff["matrix"], f"matrix {want}"
            if want == "float32" and _peak(spec, "tf32", "matrix") is not None:
                # the units exist, but PyTorch leaves TF32 off by default for matmuls
                flag = "tf32_conv" if category == "conv" else "tf32_matmul"
                self._note(f"{name}: float32 {category} ops run on its vector units with TF32 "
                           f"off ({flag}=False, PyTorch's matmul default; --dtype tf32 on "
                           "the CLI)")
            else:
                self._note(f"{name} has no {want} matrix units: {dtype} matmuls run on its "
                           "vector units, as PyTorch falls back")
        peak = _peak(spec, dtype, "vector")
        unit = f"vector {dtype}"
        if peak is None:
            peak = _peak(spec, "float32", "vector")
            unit = "vector float32"
            if dtype in _NOTED_FALLBACKS and peak is not None:
                self._note(f"{name} lists no {dtype} vector rate: costed at its fp32 rate")
        if peak is None:
            raise ValueError(f"{name} has no compute peak for {dtype} (matrix or vector); "
                             "add one with spec.with_overrides(...)")
        return peak * self.eff["vector"], unit


def _canonical(dtype: str) -> str | None:
    try:
        return canonical_dtype(dtype)
    except ValueError:
        return None


def _peak(spec: DeviceSpec, dtype: str, unit: str) -> float | None:
    try:
        return spec.peak_flops_per_s(dtype, unit=unit)  # type: ignore[arg-type]
    except ValueError:
        return None


def _gemm(op: OpRecord) -> tuple[int, int, int, float] | None:
    """(batch, rows, cols, k) of a matmul-class op as a GEMM, from its shapes and FLOPs."""
    if not op.output_shapes or not op.output_shapes[0]:
        return None
    out = op.output_shapes[0]
    grads = 1  # GEMMs of the same shape the FLOPs count
    if op.category == "conv" and "backward" in op.name and op.input_shapes:
        # the forward's implicit GEMM, from grad_output; the FLOPs hold one GEMM per
        # gradient computed (input and weight are 3-D or more, a bias gradient is 1-D)
        out = op.input_shapes[0]
        grads = max(1, sum(len(shape) >= 3 for shape in op.output_shapes))
    if op.category == "attention" and len(out) == 4:  # per (batch, head): (s x d) @ (d x s)
        b, h, s, d = out
        return b * h, s, s, float(d)
    if op.category == "conv" and len(out) >= 3:  # implicit GEMM: rows N*H*W, columns C_out
        rows, cols, batch = int(np.prod(out)) // out[1], out[1], 1
    else:
        rows, cols = (out[-2], out[-1]) if len(out) >= 2 else (1, out[-1])
        batch = int(np.prod(out[:-2])) if len(out) > 2 else 1
    # the reduction length, derived from the FLOPs: 2 x outputs x K per GEMM
    return batch, rows, cols, op.flops / max(2 * int(np.prod(out)) * grads, 1)


def _fill(op: OpRecord, compute_units: int | None) -> float:
    """Share of the chip a matmul-class op can occupy (1 when unknown)."""
    gemm = _gemm(op)
    if not compute_units or gemm is None:
        return 1.0
    batch, rows, cols, k = gemm
    if op.category == "attention":
        return min(1.0, batch * -(-rows // _TILE_SIDE) / compute_units)
    tiles = batch * -(-rows // _TILE_SIDE) * -(-cols // _TILE_SIDE)
    # too few tiles: cuBLAS-style split-K spreads the reduction dimension over more
    # compute units, in chunks of _SPLIT_K
    split = max(1, int(k // _SPLIT_K))
    return min(1.0, tiles * split / compute_units)


def _depthwise(op: OpRecord) -> bool:
    """A convolution with one input channel per group (and more than one group)."""
    if op.category != "conv":
        return False
    backward = "backward" in op.name
    x, w = (1, 2) if backward else (0, 1)  # (grad_out,) input, weight, ...
    shapes = op.input_shapes
    if len(shapes) <= w or len(shapes[w]) < 3 or len(shapes[x]) < 3:
        return False
    out = shapes[0] if backward else (op.output_shapes[0] if op.output_shapes else ())
    # weight (C_out, C_in / groups, ...) with C_out the output's channels: not a transposed
    # convolution, whose weight is (C_in, C_out / groups, ...)
    return shapes[w][1] == 1 and shapes[x][1] > 1 and len(out) >= 2 and out[1] == shapes[w][0]


def _depthwise_rate(spec: DeviceSpec, op: OpRecord, unit: str) -> float | None:
    """Calibrated FLOP/s of a depthwise convolution in the dtype of the vector ``unit`` it
    runs on (the forward's for a backward not measured)."""
    key = _canonical(unit.split(" ")[1]) or ""
    forward = spec.depthwise_flops_per_s.get(key)
    if "backward" in op.name:
        return spec.depthwise_backward_flops_per_s.get(key, forward)
    return forward


def _curve_rates(gemms: list[tuple[int, int, int, float]], points: list[Any]) -> np.ndarray:
    """Measured FLOP/s of each GEMM shape (batches stacked as rows)."""
    dims = np.array([(b * r, c, max(k, 1.0)) for b, r, c, k in gemms],
                    dtype=float).reshape(-1, 3)
    return interpolate_matmul(points, dims[:, 0], dims[:, 1], dims[:, 2])


@dataclass
class Analysis:
    """A trace costed on one device.

    Per-op arrays (``compute_seconds``, ``memory_seconds``, ``overhead_seconds``,
    ``seconds``, ``bound``) line up with ``trace.ops``.
    """

    trace: Trace
    device: DeviceSpec
    options: Options
    flops_per_s: np.ndarray
    unit: list[str]
    fill: np.ndarray
    compute_seconds: np.ndarray
    memory_seconds: np.ndarray
    overhead_seconds: np.ndarray
    host_seconds: float
    assumptions: list[str]

    @property
    def op_seconds(self) -> np.ndarray:
        """Predicted time of each op."""
        return np.maximum(np.maximum(self.compute_seconds, self.memory_seconds),
                          self.overhead_seconds)

    @property
    def bound(self) -> list[str]:
        """``compute``, ``memory`` or ``overhead`` for each op."""
        stack = np.stack([self.compute_seconds, self.memory_seconds, self.overhead_seconds])
        idx = np.argmax(stack, axis=0) if len(self.trace.ops) else np.zeros(0, dtype=int)
        return [BOUNDS[i] for i in idx]

    @property
    def device_seconds(self) -> float:
        """Predicted time on the device (sum over ops)."""
        return float(self.op_seconds.sum())

    @property
    def seconds(self) -> float:
        """Predicted step time: device time plus host time."""
        return self.device_seconds + self.host_seconds

    @property
    def intensity(self) -> np.ndarray:
        """FLOPs per byte of each op."""
        flops = np.array([op.flops for op in self.trace.ops], dtype=float)
        nbytes = np.array([op.bytes for op in self.trace.ops], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(nbytes > 0, flops / np.maximum(nbytes, 1), np.inf)

    @property
    def ridge_point(self) -> np.ndarray:
        """FLOPs per byte where each op's compute and memory roofs meet."""
        return self.flops_per_s / self._bandwidth

    @property
    def _bandwidth(self) -> float:
        return self.device.bandwidth_bytes_per_s * _Rates(self.device, self.options).eff["memory"]

    @property
    def achieved_flops_per_s(self) -> float:
        """Total FLOPs over the predicted step time."""
        return self.trace.total_flops / self.seconds if self.seconds else 0.0

    @property
    def mfu(self) -> float:
        """Model FLOP utilisation: achieved over the peak of the dominant matmul dtype."""
        peak = self.peak_flops_per_s
        return self.achieved_flops_per_s / peak if peak else 0.0

    @property
    def peak_flops_per_s(self) -> float:
        """Datasheet peak of the unit and dtype that carry most of the FLOPs."""
        by_unit: dict[str, int] = {}
        for op, unit in zip(self.trace.ops, self.unit, strict=True):
            by_unit[unit] = by_unit.get(unit, 0) + op.flops
        if not by_unit:
            return 0.0
        unit = max(by_unit, key=lambda u: by_unit[u])
        if unit.endswith(_FP16_ACCUMULATE) and self.device.fp16_accumulate_flops_per_s:
            return self.device.fp16_accumulate_flops_per_s
        kind, dtype = unit.split(" ")[:2]
        return _peak(self.device, dtype, kind) or 0.0

    def _group(self, keys: list[str]) -> dict[str, dict[str, float]]:
        seconds = self.op_seconds
        total = self.seconds or 1.0
        out: dict[str, dict[str, float]] = {}
        for k, s in zip(keys, seconds, strict=True):
            out.setdefault(k, {"seconds": 0.0, "fraction": 0.0})["seconds"] += float(s)
        for v in out.values():
            v["fraction"] = v["seconds"] / total
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["seconds"]))

    def by_bound(self) -> dict[str, dict[str, float]]:
        """Seconds and fraction of the step per bound (``host`` included when nonzero)."""
        out = {b: {"seconds": 0.0, "fraction": 0.0} for b in BOUNDS}
        out.update(self._group(self.bound))
        if self.host_seconds:
            out["host"] = {"seconds": self.host_seconds,
                           "fraction": self.host_seconds / self.seconds}
        return out

    def by_category(self) -> dict[str, dict[str, float]]:
        return self._group([op.category for op in self.trace.ops])

    def by_phase(self) -> dict[str, dict[str, float]]:
        return self._group([op.phase for op in self.trace.ops])

    def by_module(self, depth: int | None = 2) -> dict[str, dict[str, float]]:
        return self._group([op.module if depth is None else
                            ".".join(op.module.split(".")[:depth]) for op in self.trace.ops])

    def uncounted_share(self) -> dict[str, float]:
        """Share of bytes and of predicted time taken by ops with no FLOP formula."""
        mask = np.array([not op.counted for op in self.trace.ops], dtype=bool)
        nbytes = np.array([op.bytes for op in self.trace.ops], dtype=float)
        total_bytes = nbytes.sum() or 1.0
        return {"bytes": float(nbytes[mask].sum() / total_bytes),
                "seconds": float(self.op_seconds[mask].sum() / (self.seconds or 1.0))}

    def seconds_with(self, flops: float = 1.0, bandwidth: float = 1.0) -> float:
        """Step time if every compute roof were ``flops``x and bandwidth ``bandwidth``x.

        ``float('inf')`` gives the limits: no compute time, or no memory time.
        """
        c = self.compute_seconds / flops if flops != np.inf else 0 * self.compute_seconds
        m = self.memory_seconds / bandwidth if bandwidth != np.inf else 0 * self.memory_seconds
        return float(np.maximum(np.maximum(c, m), self.overhead_seconds).sum()) + self.host_seconds

    def to_dataframe(self) -> Any:
        """One row per op: the trace's columns plus times, bound and roofline values."""
        df = self.trace.to_dataframe()
        df["unit"] = self.unit
        df["flops_per_s"] = self.flops_per_s
        df["intensity"] = self.intensity
        df["ridge_point"] = self.ridge_point
        df["fill"] = self.fill
        df["compute_seconds"] = self.compute_seconds
        df["memory_seconds"] = self.memory_seconds
        df["overhead_seconds"] = self.overhead_seconds
        df["seconds"] = self.op_seconds
        df["bound"] = self.bound
        return df

    def against(self, measurement: Measurement) -> Validation:
        """Set this prediction against a measurement of the same step."""
        from roofline.analysis.validate import Validation, check_same_ops

        check_same_ops(self, measurement)
        return Validation(self, measurement)

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


def analyze(trace: Trace, device: str | DeviceSpec, **options: Any) -> Analysis:
    """Cost every op of ``trace`` on ``device`` (a registry name or a DeviceSpec).

    Keyword options are those of :class:`Options`.
    """
    spec = get_device(device)
    opts = Options(**options)
    rates = _Rates(spec, opts)
    n = len(trace.ops)
    flops = np.fromiter((op.flops for op in trace.ops), dtype=float, count=n)
    nbytes = np.fromiter((op.bytes for op in trace.ops), dtype=float, count=n)
    kernels = np.fromiter((op.kernels for op in trace.ops), dtype=float, count=n)
    rate = np.empty(n)
    fill = np.ones(n)
    units: list[str] = []
    on_curve: dict[str, list[int]] = {}  # measured matmul curve's dtype -> op indices
    gemms: dict[int, tuple[int, int, int, float]] = {}
    for i, op in enumerate(trace.ops):
        matrix = op.category in MATRIX_CATEGORIES
        depthwise = matrix and _depthwise(op)
        if depthwise:  # a per-channel stencil: no GEMM for matrix units
            matrix = False
            rates._note("depthwise convolutions run on the vector units (one input channel "
                        "per group leaves no GEMM for matrix units)")
        rate[i], unit = rates.compute(matrix, op.dtype, op.category)
        if depthwise and (measured := _depthwise_rate(spec, op, unit)):
            rate[i] = measured * rates.eff["vector"]
            rates._note("depthwise convolutions run at the calibrated depthwise rates")
        units.append(unit)
        if matrix:
            # the curve measured torch.mm in the dtype the op runs in (tf32 for fp32 on
            # TF32), wherever that ran; a fallback to another dtype, or fp16 accumulation (the
            # curve measured PyTorch's default fp32 accumulation), is not on it
            key = canonical_dtype(unit.split(" ")[1])
            own = _canonical(_dtype_key(op.dtype))
            if key in spec.matmul_curve and (key == own or (key, own) == ("tf32", "fp32")) \
                    and not unit.endswith(_FP16_ACCUMULATE) and (gemm := _gemm(op)) is not None:
                on_curve.setdefault(key, []).append(i)
                gemms[i] = gemm
            else:
                fill[i] = _fill(op, spec.compute_units)
    for dtype, idx in on_curve.items():  # the measured rate of the shape replaces peak x fill
        rate[idx] = _curve_rates([gemms[i] for i in idx], spec.matmul_curve[dtype]) \
            * rates.eff["matrix"]
    compute = flops / (rate * fill)
    if spec.memory_curve:  # measured bytes/s of an op that size: cache, threads, launch
        bandwidth = interpolate_memory(spec.memory_curve, nbytes) * rates.eff["memory"]
    else:
        bandwidth = np.full(n, rates.bandwidth_bytes_per_s)
    memory = nbytes / bandwidth
    overhead = kernels * spec.launch_overhead_seconds if opts.overhead else np.zeros(n)
    device_seconds = float(np.maximum(np.maximum(compute, memory), overhead).sum())
    host = opts.host_seconds
    if opts.host_fraction:
        host += opts.host_fraction / (1 - opts.host_fraction) * device_seconds
    uncounted = sum(1 for op in trace.ops if not op.counted)
    if uncounted:
        share = nbytes[[not op.counted for op in trace.ops]].sum() / max(nbytes.sum(), 1)
        rates.assumptions.append(
            f"{uncounted} op calls have no FLOP formula ({share:.1%} of bytes): costed by "
            "their bytes and launch overhead only")
    if calls := trace.meta.get("attention_calls"):
        rates.assumptions.append(
            f"attention calls with dropout ({calls}) were traced as one fused kernel each, "
            "as CUDA runs them; a CPU runs them unfused in fp32 (trace(..., "
            "attention='as-run') for a CPU prediction)" if trace.meta.get("attention") ==
            "fused" else f"attention calls ({calls}) were traced as explicit matmul, softmax "
            "and dropout (attention='eager')")
    if unfused := trace.meta.get("attention_unfused"):
        rates.assumptions.append(
            f"attention calls with dropout ({unfused}) are in the trace as the CPU ran them, "
            "unfused in fp32 (a real-tensor trace, or grouped-query / masked-causal calls); "
            "CUDA would run one fused kernel")
    return Analysis(trace, spec, opts, rate, units, fill, compute, memory, overhead, host,
                    rates.assumptions)
