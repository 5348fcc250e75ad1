"""Measure what a device achieves and return it as a :class:`DeviceSpec` (``measured=True``).

Timings are medians of ``torch.utils.benchmark.Timer.blocked_autorange``, which synchronizes
the accelerator around each block of runs:

* matmul: n x n ``torch.mm``, 2 n^3 FLOPs, max of the two largest n -> ``matrix_flops_per_s``.
* memory: copy and triad ``a = b + s*c`` beyond the last-level cache -> ``bandwidth_bytes_per_s``.
* vector: ``torch.addcmul`` (2 FLOP/element) in cache, a LOWER BOUND of the SIMD / CUDA-core
  rate (eager elementwise kernels are load/store-bound even in cache).
* overhead: ``torch.add`` of 1-element tensors, back to back -> ``launch_overhead_seconds``.
* curves: ``torch.mm`` on a grid of (m, n, k) shapes per dtype -> ``matmul_curve``, and
  ``torch.add(b, c, out=a)`` (3 arrays moved) from a few KiB to beyond the last-level cache
  -> ``memory_curve``: what ops of each size and shape achieve (see ``hardware/curves.py``).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import itertools
import json
import os
import platform
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
import torch
from torch.utils.benchmark import Timer

from roofline._errors import CalibrationError, RooflineWarning, warn
from roofline.hardware.registry import AmbiguousDeviceError, UnknownDeviceError, get_device
from roofline.hardware.spec import DeviceSpec, DeviceSpecError, validate_device
from roofline.hardware.units import VECTOR_DTYPES, canonical_dtype, format_quantity

__all__ = ["CACHE_ENV", "CalibrationError", "as_efficiency", "calibrate", "efficiencies"]

CACHE_ENV = "ROOFLINE_CACHE_DIR"
_TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
                 "fp16": torch.float16, "bf16": torch.bfloat16}
_FORMAT = 3  # bumped when a calibration measures more: older cached results are re-measured
# A timing is "noisy" when its blocks' interquartile range exceeds 10% of their median: on
# an idle machine repeated blocks of one kernel agree to a few percent, so a wider spread
# means something else shared the device (flagged in the notes, not rejected).
_NOISY_SPREAD = 0.10
# Fields that describe the hardware rather than its speed, carried over from the base spec.
_CARRIED = ("memory_bytes", "memory_type", "cache_bytes", "form_factor", "tdp_watts", "host_link")


@dataclass(frozen=True)
class _Plan:
    matmul_sizes: tuple[int, ...]
    stream_bytes: int  # per array
    vector_elements: int  # per CPU thread, or in total on a GPU
    min_run_time: float  # seconds per Timer measurement
    curve_sizes: tuple[int, ...]  # m, n and k values of the matmul curve's grid
    curve_min_run_time: float = 0.02
    depthwise_batch: int = 1  # images in the depthwise convolution measured


_PLANS = {  # (kind, quick) -> plan
    ("cpu", True): _Plan(matmul_sizes=(256, 512, 1024), stream_bytes=64 << 20,
                         vector_elements=1 << 17, min_run_time=0.2,
                         curve_sizes=(32, 128, 512, 2048)),
    ("cpu", False): _Plan(matmul_sizes=(512, 1024, 2048), stream_bytes=256 << 20,
                          vector_elements=1 << 17, min_run_time=0.5,
                          curve_sizes=(16, 64, 256, 1024, 4096), curve_min_run_time=0.05),
    ("gpu", True): _Plan(matmul_sizes=(2048, 4096, 8192), stream_bytes=1 << 30,
                         vector_elements=1 << 21, min_run_time=0.2,
                         curve_sizes=(64, 256, 1024, 4096, 16384), depthwise_batch=32),
    ("gpu", False): _Plan(matmul_sizes=(4096, 8192, 16384), stream_bytes=1 << 30,
                          vector_elements=1 << 21, min_run_time=0.5,
                          curve_sizes=(16, 64, 256, 1024, 4096, 16384),
                          curve_min_run_time=0.05, depthwise_batch=32),
}


def calibrate(device: str = "cpu", dtypes: Sequence[str | torch.dtype] = ("float32",),
              quick: bool = True, threads: int | None = None, cache: bool = True,
              base: str | DeviceSpec | None = None) -> DeviceSpec:
    """Measure achievable matmul FLOP/s, vector FLOP/s, bandwidth and per-op overhead.

    Parameters
    ----------
    device : ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.
    dtypes : matmul dtypes (``"float32"``, ``torch.bfloat16``, ``"tf32"`` on CUDA, ...); fp32
        and those of them with a vector rate are also measured on the vector units.
    quick : small sizes (seconds); ``False`` uses larger ones (tens of seconds).
    threads : CPU threads for the run (default: ``torch.get_num_threads()``); restored after.
    cache : reuse a stored result with the same device, threads, dtypes, quick and torch
        version (folder: ``$ROOFLINE_CACHE_DIR`` or the user cache dir); ``False`` measures
        afresh and stores nothing.
    base : datasheet spec or registry name to compare with (CUDA: looked up from
        ``torch.cuda.get_device_name()`` when not given); efficiencies go into ``notes``.

    Returns a ``measured=True`` DeviceSpec whose peaks are the measured achievable rates.
    Raises :class:`CalibrationError` for a device that does not exist here, an unsupported
    dtype, or a measurement the DeviceSpec validators reject.

    Examples
    --------
    >>> spec = roofline.calibrate(quick=True)  # doctest: +SKIP
    >>> roofline.analyze(t, spec)  # the rates this machine reached  # doctest: +SKIP
    """
    dev = _resolve(str(device))
    keys = _dtype_keys(dtypes, dev)
    threads = torch.get_num_threads() if threads is None else threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise CalibrationError(f"threads must be a positive int, got {threads!r}")
    hw_name = _hardware_name(dev)
    base_spec = _base_spec(dev, hw_name, base)
    path = _cache_path(hw_name, [_FORMAT, hw_name, str(dev), threads, keys, quick,
                                 torch.__version__, base_spec and base_spec.name])
    if cache and (cached := _load_cached(path)) is not None:
        return cached
    measured = _measure(dev, _plan(dev, quick, base_spec), threads, keys)
    spec = _assemble(measured, dev, hw_name, threads, quick, base_spec, origin=str(device))
    if cache:
        _store(path, spec)
    return spec


def _base_spec(dev: torch.device, hw_name: str,
               base: str | DeviceSpec | None) -> DeviceSpec | None:
    """The datasheet spec to compare with: ``base``, or on CUDA the registry's match, if any."""
    if base is not None:
        return get_device(base)
    if dev.type == "cuda":
        with contextlib.suppress(UnknownDeviceError, AmbiguousDeviceError):
            return get_device(hw_name)
    return None


def _cache_path(hw_name: str, key: list[Any]) -> Path:
    """Cache file of one calibration: readable hardware name plus a hash of everything keyed."""
    folder = os.environ.get(CACHE_ENV) or Path(platformdirs.user_cache_dir("roofline"),
                                               "calibration")
    return Path(folder, re.sub(r"[^0-9a-z]+", "-", hw_name.lower())[:40] + "-"
                + hashlib.sha256(json.dumps(key).encode()).hexdigest()[:12] + ".json")


def _load_cached(path: Path) -> DeviceSpec | None:
    """The stored measured spec, or None if missing, unreadable or invalid (then: measure)."""
    with contextlib.suppress(OSError, ValueError):
        if (cached := DeviceSpec.model_validate_json(path.read_text("utf-8"))).measured:
            return cached
    return None


def _plan(dev: torch.device, quick: bool, base_spec: DeviceSpec | None) -> _Plan:
    plan = _PLANS["cpu" if dev.type == "cpu" else "gpu", quick]
    if base_spec and base_spec.cache_bytes and dev.type == "cpu":  # stay well beyond the LLC
        plan = replace(plan, stream_bytes=max(plan.stream_bytes, 4 * int(base_spec.cache_bytes)))
    return plan


def _measure(dev: torch.device, plan: _Plan, threads: int, keys: list[str]) -> dict[str, Any]:
    """Run the microbenchmarks at ``threads`` CPU threads; the thread count is restored after."""
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(threads if dev.type == "cpu" else previous)
        # The Timer synchronizes the *current* accelerator: make it the one measured.
        with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
            return _Bench(dev, plan, threads).run(keys)
    finally:
        torch.set_num_threads(previous)


def _carried(base_spec: DeviceSpec | None) -> dict[str, Any]:
    """The hardware fields of ``base_spec`` a measured spec keeps: memory, form, and the
    architecture (``isa``) that parts of the time model key on."""
    if base_spec is None:
        return {}
    return {**{k: getattr(base_spec, k) for k in _CARRIED},
            **({"isa": base_spec.isa} if base_spec.isa else {})}


def _vector_floor(measured: dict[str, Any], base_spec: DeviceSpec) -> dict[str, Any]:
    """On a GPU the in-cache ``addcmul`` is bound by the cache and the launch (on an H200,
    2^21 elements took about the 7 us of one launch: 0.6 TFLOP/s against 67), so its rate,
    a lower bound of the vector units, must not lower the datasheet's ceiling: the larger
    of the two is kept, and a note says so."""
    peaks = {k: float(v) for k, v in base_spec.vector_flops_per_s.items()}
    rates = {k: max(v, peaks[k]) for k, v in measured["vector_flops_per_s"].items() if k in peaks}
    if rates == measured["vector_flops_per_s"]:
        return {}
    note = (f"vector: the datasheet's ceilings ({', '.join(peaks)}) kept over the in-cache "
            "addcmul's lower bound, and no other dtype's, as the datasheet spec has none (GPU "
            "elementwise kernels are bound by memory and the launch, not by the vector units).")
    return {"vector_flops_per_s": rates, "notes": [*measured["notes"], note]}


def _assemble(measured: dict[str, Any], dev: torch.device, hw_name: str, threads: int,
              quick: bool, base_spec: DeviceSpec | None, origin: str) -> DeviceSpec:
    """The measured spec: rates, hardware fields of ``base_spec``, provenance and efficiencies."""
    gpu = dev.type != "cpu"
    if gpu and base_spec:
        measured = {**measured, **_vector_floor(measured, base_spec)}
    source = f"measured by roofline.calibrate on {datetime.date.today().isoformat()}"
    label = base_spec.name if base_spec else (hw_name if gpu else "CPU")
    props = torch.cuda.get_device_properties(dev) if dev.type == "cuda" else None
    data: dict[str, Any] = {
        **_carried(base_spec),
        **({"memory_bytes": props.total_memory} if props and not base_spec else {}),
        **measured,
        "name": f"{label} (measured)" if gpu
        else f"{label} ({threads} thread{'s' * (threads != 1)}, measured)",
        "vendor": base_spec.vendor if base_spec else "measured",
        "kind": "gpu" if gpu else "cpu",
        "compute_units": props.multi_processor_count if props else (None if gpu else threads),
        "measured": True,
        "sources": {"compute": source, "memory": source,
                    **({"isa": base_spec.sources["isa"]} if base_spec and base_spec.isa
                       else {})},
        "notes": [f"{source.capitalize()}: {hw_name} ({dev}), torch "
                  f"{torch.__version__}, {threads} CPU thread(s), quick={quick}.",
                  *measured["notes"]],
    }
    try:
        spec = validate_device(data, origin=f"calibrate({origin!r})")
    except DeviceSpecError as exc:
        raise CalibrationError(f"a measurement failed DeviceSpec validation (a dtype this device "
                               f"only emulates slowly can fall below 1 GFLOP/s): {exc}") from exc
    lines = [f"{k.replace('_', ' ')}: {v:.1%} of peak ({base_spec.name} datasheet)"
             for k, v in efficiencies(spec, base_spec).items()] if base_spec else \
        ["No datasheet spec known (pass base=): efficiencies vs peak not computed."]
    return spec.with_overrides(notes=[*spec.notes, *lines])


def efficiencies(measured: DeviceSpec, base: DeviceSpec) -> dict[str, float]:
    """Measured over datasheet rates, e.g. ``{"matrix_bf16": 0.71, "memory": 0.88}``.

    Matmul dtypes without a matrix peak in ``base`` are compared with its vector peak (where
    PyTorch runs them, e.g. fp32 on CPUs). Keys without a peak are left out; ratios above 1
    (a datasheet derived at base clock can be beaten) are kept.
    """
    out: dict[str, float] = {}
    for key, rate in measured.matrix_flops_per_s.items():
        if peak := base.peak_flops_per_s(key, "matrix") or base.peak_flops_per_s(key, "vector"):
            out[f"matrix_{key}"] = rate / peak
    for key, rate in measured.vector_flops_per_s.items():
        if peak := base.peak_flops_per_s(key, "vector"):
            out[f"vector_{key}"] = rate / peak
    out["memory"] = measured.bandwidth_bytes_per_s / base.bandwidth_bytes_per_s
    return out


def as_efficiency(measured: DeviceSpec, base: DeviceSpec,
                  dtype: str | torch.dtype | None = None) -> dict[str, float]:
    """``{"matrix", "vector", "memory"}`` fractions for ``analyze(..., efficiency=...)``.

    ``matrix`` is that of ``dtype`` (default: the fastest calibrated dtype with a datasheet
    peak), ``vector`` that of fp32 (a lower bound). Capped at 1, as the analysis requires.
    """
    eff = efficiencies(measured, base)
    rates = {k: r for k, r in measured.matrix_flops_per_s.items() if f"matrix_{k}" in eff}
    key = canonical_dtype(dtype) if dtype else max(rates, key=lambda k: rates[k], default="")
    picked = {"matrix": eff.get(f"matrix_{key}"), "vector": eff.get("vector_fp32"),
              "memory": eff["memory"]}
    return {k: min(1.0, v) for k, v in picked.items() if v is not None}


@dataclass
class _Bench:
    """The microbenchmarks of one run; each appends what it measured to ``notes``."""

    dev: torch.device
    plan: _Plan
    threads: int
    notes: list[str] = field(default_factory=list)

    def run(self, keys: list[str]) -> dict[str, Any]:
        vector_keys = dict.fromkeys(k for k in ("fp32", *keys) if k in VECTOR_DTYPES)
        # depthwise first: after the large matmul and stream buffers were freed, this CPU ran
        # it up to 10x faster than a model's own depthwise layers did (see depthwise())
        depthwise = self.depthwise(vector_keys)
        return {"matrix_flops_per_s": {k: self.matmul(k) for k in keys},
                "vector_flops_per_s": {k: self.vector(k) for k in vector_keys},
                **depthwise,
                "bandwidth_bytes_per_s": self.bandwidth(),
                "launch_overhead_seconds": self.overhead(),
                "matmul_curve": {k: self.matmul_curve(k) for k in keys},
                "memory_curve": self.memory_curve(), "notes": self.notes}

    def _timed(self, stmt: str, min_run_time: float, **env: Any) -> tuple[float, bool]:
        """(median seconds of ``stmt``, noisy: IQR/median > 10% or fewer than 3 blocks)."""
        m = Timer(stmt, globals={"torch": torch, **env}, num_threads=self.threads
                  ).blocked_autorange(min_run_time=min_run_time)
        return m.median, m.iqr / m.median > _NOISY_SPREAD or len(m.times) < 3

    def time(self, stmt: str, what: str, **env: Any) -> float:
        """Median seconds of ``stmt``; notes "noisy:" when IQR/median > 10% or < 3 blocks."""
        m = Timer(stmt, globals={"torch": torch, **env}, num_threads=self.threads
                  ).blocked_autorange(min_run_time=self.plan.min_run_time)
        spread = m.iqr / m.median
        if spread > _NOISY_SPREAD or len(m.times) < 3:
            self.notes.append(f"noisy: {what}: IQR/median {spread:.0%}, {len(m.times)} block(s)")
        return m.median

    def matmul(self, key: str) -> float:
        rates = {}
        with _matmul_precision(key):
            for n in self.plan.matmul_sizes:
                a, b = (torch.randn(n, n, device=self.dev, dtype=_TORCH_DTYPES[key]) for _ in "ab")
                rates[n] = 2 * n**3 / self.time("torch.mm(a, b)", f"{key} matmul n={n}", a=a, b=b)
        best = max(rates[n] for n in sorted(rates)[-2:])
        sizes = ", ".join(f"n={n}: {format_quantity(r, 'flops')}" for n, r in rates.items())
        self.notes.append(f"{key} matmul (torch.mm, 2n^3 FLOPs): {sizes}; plateau (max of the "
                          f"two largest) {format_quantity(best, 'flops')}.")
        return best

    def matmul_curve(self, key: str) -> list[dict[str, float]]:
        sizes, points, noisy = self.plan.curve_sizes, [], 0
        with _matmul_precision(key):
            for m, n, k in itertools.product(sizes, sizes, sizes):
                a = torch.randn(m, k, device=self.dev, dtype=_TORCH_DTYPES[key])
                b = torch.randn(k, n, device=self.dev, dtype=_TORCH_DTYPES[key])
                seconds, bad = self._timed("torch.mm(a, b)", self.plan.curve_min_run_time,
                                           a=a, b=b)
                noisy += bad
                points.append({"m": m, "n": n, "k": k, "flops_per_s": 2 * m * n * k / seconds})
        rates = [p["flops_per_s"] for p in points]
        self.notes.append(f"{key} matmul curve: torch.mm over m, n, k in {sizes} "
                          f"({len(points)} shapes): {format_quantity(min(rates), 'flops')} to "
                          f"{format_quantity(max(rates), 'flops')}.{_noisy(noisy, len(points))}")
        return points

    def memory_curve(self) -> list[dict[str, float]]:
        top = self.plan.stream_bytes
        sizes = [*(b for b in (2048 * 4**i for i in range(20)) if b < top), top]  # per array
        points, noisy = [], 0
        for size in sizes:
            a, b, c = (torch.ones(size // 4, device=self.dev) for _ in "abc")
            seconds, bad = self._timed("torch.add(b, c, out=a)", self.plan.curve_min_run_time,
                                       a=a, b=b, c=c)
            noisy += bad
            points.append({"bytes": 3 * size, "bytes_per_s": 3 * size / seconds})
        rates = [p["bytes_per_s"] for p in points]
        self.notes.append(f"memory curve: torch.add(b, c, out=a) on fp32 arrays of 2 KiB to "
                          f"{top / 2**20:.0f} MiB ({len(points)} sizes, 3 arrays moved): "
                          f"{format_quantity(min(rates), 'bandwidth')} to "
                          f"{format_quantity(max(rates), 'bandwidth')}."
                          f"{_noisy(noisy, len(points))}")
        return points

    def bandwidth(self) -> float:
        n = self.plan.stream_bytes // 4
        a, b, c = (torch.ones(n, device=self.dev) for _ in "abc")
        copy = 2 * 4 * n / self.time("a.copy_(b)", "copy", a=a, b=b)
        triad = 3 * 4 * n / self.time("torch.add(b, c, alpha=0.5, out=a)", "triad", a=a, b=b, c=c)
        self.notes.append(
            f"bandwidth = the larger of copy {format_quantity(copy, 'bandwidth')} (read + write) "
            f"and triad a = b + s*c {format_quantity(triad, 'bandwidth')} (3 arrays) on "
            f"{n * 4 / 2**20:.0f} MiB fp32 arrays: {'copy' if copy >= triad else 'triad'}. Bytes "
            "counted as in STREAM (CPU write-allocate reads of the destination not counted).")
        return max(copy, triad)

    def vector(self, key: str) -> float:
        big = self.plan.vector_elements * (self.threads if self.dev.type == "cpu" else 1)
        rates = {}  # 2^14 elements stay under ATen's parallel grain size: one thread, no fork
        for n in (1 << 14, big):
            a, b, c, d = (torch.rand(n, device=self.dev, dtype=_TORCH_DTYPES[key]) for _ in "abcd")
            rates[n] = 2 * n / self.time("torch.addcmul(c, a, b, value=0.5, out=d)",
                                         f"{key} vector n={n}", a=a, b=b, c=c, d=d)
        sizes = ", ".join(f"n={n}: {format_quantity(r, 'flops')}" for n, r in rates.items())
        self.notes.append(f"{key} vector: torch.addcmul (2 FLOP/element, in cache) {sizes}; the "
                          "max is a LOWER BOUND of the vector units (eager elementwise kernels "
                          "are load/store-bound).")
        return max(rates.values())

    def depthwise(self, keys: Iterable[str]) -> dict[str, dict[str, float]]:
        """FLOP/s of a 3x3 depthwise convolution, forward and backward, per dtype.

        MobileNetV2's widest early layer: 144 channels at 56x56. Depthwise kernels are
        neither GEMMs nor plain elementwise passes and run far below both roofs on CPUs;
        their forward and backward scale with threads differently. On the development CPU
        the same kernel ran at 1-3 GFLOP/s in a fresh process (as a model's own depthwise
        layers did) and at 12-23 GFLOP/s after large buffers had been freed (first-touch
        page faults of its output, likely; not verified), so it is measured first, as the
        median over several allocations, with the range in the notes. A dtype with no kernel
        here is left out, with a note.
        """
        n, c, hw, copies = self.plan.depthwise_batch, 144, 56, 7
        seconds_each = self.plan.min_run_time / 2  # enough blocks of ms-long kernels for an IQR
        flops = 2 * 9 * n * c * hw * hw  # 2 x outputs x (1 channel x 3 x 3)
        rates: dict[str, dict[str, float]] = {"depthwise_flops_per_s": {},
                                              "depthwise_backward_flops_per_s": {}}
        for key in keys:
            forward, backward, noisy = [], [], 0
            kept = []  # alive, so that every copy lands at a new address
            try:
                for _ in range(copies):
                    x = torch.randn(n, c, hw, hw, device=self.dev, dtype=_TORCH_DTYPES[key])
                    env = {"x": x, "w": torch.randn(c, 1, 3, 3, device=self.dev, dtype=x.dtype),
                           "g": torch.randn_like(x), "c": c}
                    kept.append(env)
                    seconds, bad = self._timed(
                        "torch.nn.functional.conv2d(x, w, padding=1, groups=c)",
                        seconds_each, **env)
                    forward.append(flops / seconds)
                    # input and weight gradients: one forward's FLOPs each
                    seconds, worse = self._timed(
                        "torch.ops.aten.convolution_backward(g, x, w, None, [1, 1], [1, 1], "
                        "[1, 1], False, [0, 0], c, [True, True, False])",
                        seconds_each, **env)
                    backward.append(2 * flops / seconds)
                    noisy += bad + worse
            except (RuntimeError, NotImplementedError) as exc:  # e.g. no such CPU kernel
                self.notes.append(f"{key} depthwise conv not measured: "
                                  f"{str(exc).splitlines()[0]}")
                continue
            rates["depthwise_flops_per_s"][key] = float(np.median(forward))
            rates["depthwise_backward_flops_per_s"][key] = float(np.median(backward))
            self.notes.append(f"{key} depthwise conv ({n}x{c}x{hw}x{hw}, 3x3) over {copies} "
                              f"allocations: forward {_span(forward)}, backward (input and "
                              f"weight gradients) {_span(backward)}.{_noisy(noisy, 2 * copies)}")
        return rates

    def overhead(self) -> float:
        x = torch.ones(1, device=self.dev)
        t = self.time("torch.add(x, y)", "overhead", x=x, y=x.clone())
        self.notes.append(f"launch_overhead_seconds {format_quantity(t, 'seconds')}: median per "
                          "torch.add of 1-element tensors, back to back (dispatch + launch).")
        return t


@contextlib.contextmanager
def _matmul_precision(key: str) -> Iterator[None]:
    """fp32 measured as true fp32, tf32 with TF32 allowed; the settings are restored after.

    Setting the precision also sets the backends' ``fp32_precision`` from ``"none"`` to
    ``"ieee"``, which restoring the precision does not undo: they are restored one by one.
    """
    previous = torch.get_float32_matmul_precision()
    backends: list[Any] = [b for b in (getattr(torch.backends.cuda, "matmul", None),
                                       getattr(torch.backends.mkldnn, "matmul", None))
                           if hasattr(b, "fp32_precision")]  # torch >= 2.9
    saved = [b.fp32_precision for b in backends]
    torch.set_float32_matmul_precision("high" if key == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
        for backend, value in zip(backends, saved, strict=True):
            backend.fp32_precision = value


def _span(rates: list[float]) -> str:
    """'lowest to highest, median m' of measured FLOP/s."""
    low, high, mid = (format_quantity(float(f(rates)), "flops") for f in (min, max, np.median))
    return f"{low} to {high}, median {mid}"


def _noisy(count: int, total: int) -> str:
    if not count:
        return ""
    return f" noisy: {count} of {total} points with IQR/median > 10% (is something else running?)"


def _resolve(device: str) -> torch.device:
    match = re.fullmatch(r"(cpu|cuda|mps)(?::(\d+))?", device.strip().lower())
    kind, index = match.groups() if match else ("?", None)
    count = {"?": 0, "cpu": 1, "mps": int(torch.backends.mps.is_available()),
             "cuda": torch.cuda.device_count() if torch.cuda.is_available() else 0}[kind]
    if int(index or 0) >= count:
        why = {"?": "expected 'cpu', 'cuda', 'cuda:N' or 'mps'",
               "cpu": "there is one CPU device; use 'cpu'",
               "mps": "MPS is not available (needs Apple silicon and a torch build with MPS)",
               "cuda": f"{count} CUDA device(s) available here (torch {torch.__version__}, CUDA "
                       f"build {torch.version.cuda or 'none'})"}[kind]
        raise CalibrationError(f"cannot calibrate {device!r}: {why}")
    if kind != "cuda":
        return torch.device(kind)
    return torch.device("cuda", torch.cuda.current_device() if index is None else int(index))


def _dtype_keys(dtypes: Sequence[str | torch.dtype], dev: torch.device) -> list[str]:
    supported, keys = set(_TORCH_DTYPES) - ({"tf32"} if dev.type != "cuda" else set()), []
    for dtype in [dtypes] if isinstance(dtypes, (str, torch.dtype)) else dtypes:
        with contextlib.suppress(ValueError):  # unknown names fall through to the error
            if (key := canonical_dtype(dtype)) in supported:
                keys.append(key)
                continue
        raise CalibrationError(f"cannot calibrate dtype {dtype!r} on {dev.type}: supported are "
                               "fp64, fp32, fp16, bf16 (or torch dtypes), tf32 on CUDA")
    if not keys:
        raise CalibrationError("dtypes is empty: name at least one dtype to calibrate")
    return list(dict.fromkeys(keys))


def _hardware_name(dev: torch.device) -> str:
    if dev.type != "cpu":
        return torch.cuda.get_device_name(dev) if dev.type == "cuda" else "Apple MPS"
    with contextlib.suppress(OSError, IndexError):  # Linux; platform.processor() is often ""
        return re.findall(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())[0].strip()
    return platform.processor() or platform.machine() or "CPU"


def _store(path: Path, spec: DeviceSpec) -> None:
    try:  # a torn file (crash, concurrent writer) fails validation when read: re-measured
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(spec.model_dump_json(indent=2), encoding="utf-8")
    except OSError as exc:
        warn(f"calibration result not cached: {exc}", RooflineWarning)
