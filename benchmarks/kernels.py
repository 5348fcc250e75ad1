"""Per-kernel error of the time model against measured per-shape tables, per device and
kernel family (GEMM, SGEMM peaks, convolution passes, batched GEMM, prefill attention,
elementwise, norm, softmax), with a train/test split.

Every prediction is the library's own: each measured shape becomes an op record (GEMMs)
or a traced step on fake tensors (row-wise kernels) and goes through ``roofline.analyze``.
Columns (median error over a table's shapes, as the factor prediction and measurement
differ by, minus one: ``exp(median |ln(predicted / measured)|) - 1``, so that 2x too fast
and 2x too slow are both 100%; ``bias``: the median signed log error, < 0 when predicted
faster than measured):

* ``datasheet``: the classic roofline, ``max(FLOPs / peak, bytes / bandwidth, launch)``;
* ``tiles``: achievable figures, a GEMM at the matrix figure times the share of the chip
  its tiles fill, plus the launch overhead (``gemm_shapes=False``, the model before the
  GEMM fits);
* ``fitted``: the default, the GEMM model fitted to this very table (in-sample);
* ``held out``: the device's own fit removed and replaced by the median of the *other*
  measured devices of its vendor and class (what a user's new GPU of that class gets);
  fp32 GEMMs have no fitted class default (see ``GEMM_DEFAULT_DTYPES``): their own fit
  and SGEMM figure are dropped, and they run at tiles with the median SGEMM share of the
  other measured devices of their FP32 datapath design
  (:func:`~roofline.hardware.achievable.fp32_datapath_class`). ``(tiles)``: no other
  member, the ``tiles`` column again.

Usage: ``python benchmarks/kernels.py`` (about a minute). Tables and their sources:
``benchmarks/data/kernels/README.md``; the A100 and H100 row-wise tables are vidur's, whose
boards are not stated (SXM assumed).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

import roofline
from roofline.analysis.gemm import (
    CONV_SLOWDOWN,
    CONV_WORK_PER_UNIT,
    DGRAD_STRIDED,
    FP32_CONV_SLOWDOWN,
    WGRAD_ONE_TILE,
    WGRAD_TILE_EXPONENT,
    wgrad_tiles,
    winograd,
)
from roofline.hardware.achievable import (
    GEMM_DEFAULT_DTYPES,
    POWER_EXPONENT,
    SIXTEEN_BIT,
    class_defaults,
    class_of,
    figures,
    fp32_datapath_class,
    gemm_pool,
    own_16bit_share,
    watts_per_tflops,
)
from roofline.hardware.measured import GemmFit, Measured
from roofline.tracing.records import OpRecord, Trace

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "data" / "kernels"))
from aic import A100, TRTLLM_DEVICES, TRTLLM_LABEL
from fit_gemm import ACTIVATION_BYTES, ELEMENT_BYTES, OUTPUT_BYTES, TABLES, Table

DATA = Path(__file__).parent / "data" / "kernels"
DATASHEET = {"peaks": "datasheet", "gemm_shapes": False, "overhead_model": "max"}
TILES = {"gemm_shapes": False}
TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _rows(name: str) -> tuple[list[str], np.ndarray]:
    with gzip.open(DATA / name, "rt") as f:
        header = f.readline().strip().split(",")
        lines = [line.strip().split(",") for line in f if line.strip()]
    return header, np.array(lines, dtype=object)


def _gemm_ops(m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str,
              batch: np.ndarray | None = None) -> list[OpRecord]:
    e = ELEMENT_BYTES[dtype]
    # an NVFP4 activation is read in bf16 and its fp4 copy written, then read (fit_gemm.py)
    copy = e if dtype in ACTIVATION_BYTES else 0
    name = "aten.mm.default" if batch is None else "aten.bmm.default"
    ops = []
    for i in range(len(m)):
        b = 1 if batch is None else int(batch[i])
        mi, ni, ki = int(m[i]), int(n[i]), int(k[i])
        lead = () if batch is None else (b,)
        read = ACTIVATION_BYTES.get(dtype, e) * mi * ki - copy * mi * ki + e * ki * ni
        written = OUTPUT_BYTES.get(dtype, e) * mi * ni + copy * mi * ki
        ops.append(OpRecord(name, "matmul", "forward", "", _TORCH_NAME[dtype],
                            2 * b * mi * ni * ki, round(b * read), round(b * written),
                            input_shapes=((*lead, mi, ki), (*lead, ki, ni)),
                            output_shapes=((*lead, mi, ni),)))
    return ops


_TORCH_NAME = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn",
               "fp4": "nvfp4"}


def _errors(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """(median and p90 error as factors minus one, median signed log error)."""
    log = np.log(predicted / measured)
    return (float(np.expm1(np.median(np.abs(log)))),
            float(np.expm1(np.percentile(np.abs(log), 90))), float(np.median(log)))


def _seconds(ops: list[OpRecord], device: str | roofline.DeviceSpec, **options: object,
             ) -> np.ndarray:
    a = roofline.analyze(Trace(ops), device, **options)  # type: ignore[arg-type]
    return np.asarray(a.op_seconds)


def held_out_spec(table: Table) -> roofline.DeviceSpec | None:
    """The device with its own 16-bit, fp8 or fp4 fit replaced by the median of the other
    measured devices of its vendor and class, for that dtype; for fp32, its fit and its
    SGEMM figure dropped and the figure replaced by the median share of the other devices
    of its FP32 datapath design (None: no other member)."""
    spec = roofline.get_device(table.device)
    if spec.achievable is None:
        return None
    if table.dtype == "fp32":
        return _held_out_sgemm(spec)
    if table.dtype not in GEMM_DEFAULT_DTYPES:
        return None
    others = []
    for other in roofline.list_devices(vendor=spec.vendor):
        if other.name == spec.name or other.achievable is None:
            continue
        fits = [f for d, f in other.achievable.gemm.items()
                if d in GEMM_DEFAULT_DTYPES and gemm_pool(d) == gemm_pool(table.dtype)]
        if fits and class_of(other) == class_of(spec):
            others.append((other.name, fits[0]))
    if not others:
        return None
    median = {p: statistics.median(getattr(f, p) for _, f in others)
              for p in ("efficiency", "bandwidth_share", "floor_seconds")}
    fit = GemmFit(**median, shapes=1, median_error=0, p90_error=0,
                  source=f"leave-one-out median of {', '.join(n for n, _ in others)}",
                  method="benchmarks/kernels.py")
    gemm = {d: f for d, f in spec.achievable.gemm.items()
            if d not in GEMM_DEFAULT_DTYPES or gemm_pool(d) != gemm_pool(table.dtype)}
    gemm[table.dtype] = fit
    return spec.with_overrides(achievable=spec.achievable.model_copy(update={"gemm": gemm}))


def _leave_one_out(spec: roofline.DeviceSpec, field: str, key: str,
                   base: Callable[[roofline.DeviceSpec], float],
                   same: Callable[[roofline.DeviceSpec], bool]) -> dict[str, Measured] | None:
    """``spec``'s ``achievable.<field>`` with ``key`` at ``base(spec)`` times the median
    ratio to their own ``base`` that the *other* measured devices of its vendor for which
    ``same`` holds reach, the figure citing them (None: no other member)."""
    others = [o for o in roofline.list_devices(vendor=spec.vendor)
              if o.name != spec.name and o.achievable is not None
              and key in getattr(o.achievable, field) and same(o)]
    if not others or spec.achievable is None:
        return None
    share = statistics.median(getattr(o.achievable, field)[key].value / base(o)
                              for o in others)
    names = ", ".join(o.name for o in others)
    figure = Measured(value=share * base(spec),
                      source=f"leave-one-out median of {names}",
                      method="benchmarks/kernels.py", conditions=None, clock_hz=None)
    return {**getattr(spec.achievable, field), key: figure}


def _held_out_sgemm(spec: roofline.DeviceSpec) -> roofline.DeviceSpec | None:
    """``spec`` as a user's new GPU of its FP32 datapath design would see it: no fp32 GEMM
    fit, and the SGEMM share the *other* measured members of the design reach."""
    design = fp32_datapath_class(spec)
    held = _leave_one_out(spec, "vector_flops_per_s", "fp32",
                          lambda o: o.vector_flops_per_s["fp32"],
                          lambda o: design is not None and fp32_datapath_class(o) == design)
    if held is None or spec.achievable is None:
        return None
    gemm = {d: f for d, f in spec.achievable.gemm.items() if d != "fp32"}
    return spec.with_overrides(achievable=spec.achievable.model_copy(
        update={"gemm": gemm, "vector_flops_per_s": held}))


def gemm_rows() -> list[list[str]]:
    rows = []
    for t in TABLES:
        header, data = _rows(t.file)
        m, n, k, measured = (data[:, header.index(c)].astype(float)
                             for c in ("m", "n", "k", "seconds"))
        ops = _gemm_ops(m, n, k, t.dtype)
        cells = [t.device, t.dtype, str(len(ops))]
        for options in (DATASHEET, TILES, {}):
            err = _errors(_seconds(ops, t.device, **options), measured)
            cells.append(f"{err[0]:.1%}")
        fitted = _errors(_seconds(ops, t.device), measured)
        cells.append(f"{fitted[1]:.0%}")
        held = held_out_spec(t)
        out = _errors(_seconds(ops, held if held is not None else t.device,
                               **({} if held is not None else TILES)), measured)
        cells += [f"{out[0]:.1%}" + ("" if held is not None else " (tiles)"), f"{out[1]:.0%}",
                  f"{out[2]:+.2f}"]
        rows.append(cells)
    return rows


def bmm_rows() -> list[list[str]]:
    rows = []
    for path in sorted(DATA.glob("bmm_aic_*_bf16.csv.gz")):
        device = {d.file: d.device for d in TRTLLM_DEVICES}[
            path.name.removeprefix("bmm_aic_").removesuffix("_bf16.csv.gz")]
        header, data = _rows(path.name)
        b, m, n, k, measured = (data[:, header.index(c)].astype(float)
                                for c in ("batch", "m", "n", "k", "seconds"))
        ops = _gemm_ops(m, n, k, "bf16", batch=b)
        cells = [device, "bf16", str(len(ops))]
        for options in (DATASHEET, TILES, {}):
            cells.append(f"{_errors(_seconds(ops, device, **options), measured)[0]:.1%}")
        cells.append(f"{_errors(_seconds(ops, device), measured)[2]:+.2f}")
        rows.append(cells)
    return rows


#: AIConfigurator's context-attention tables (``extract_aic_attention.py``): file name ->
#: (device, engine)
ATTENTION_TABLES = {**{d.file: (d.device, TRTLLM_LABEL) for d in TRTLLM_DEVICES},
                    A100.file: (A100.device, "vLLM 0.14.0 (FlashAttention-2)")}
#: Shapes with at least this many FLOPs: where the kernel, not its fixed cost, sets the time.
LARGE_ATTENTION_FLOPS = 1e11


@functools.cache
def _attention_trace(batch: int, heads: int, seq: int, head_dim: int) -> Trace:
    """Causal multi-head prefill attention on fake bf16 tensors, as PyTorch's SDPA runs it."""
    q = torch.empty(batch, heads, seq, head_dim, dtype=torch.bfloat16, device="meta")
    return roofline.trace(
        lambda q, k, v: nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        q, q, q, fake=True)


def _held_out_attention(spec: roofline.DeviceSpec) -> roofline.DeviceSpec | None:
    """``spec`` with its measured attention rate replaced by the median share the *other*
    measured devices of its vendor and class reach (None: no other member)."""
    held = _leave_one_out(spec, "attention_flops_per_s", "bf16",
                          lambda o: o.matrix_flops_per_s["bf16"],
                          lambda o: class_of(o) == class_of(spec))
    if held is None or spec.achievable is None:
        return None
    return spec.with_overrides(achievable=spec.achievable.model_copy(
        update={"attention_flops_per_s": held}))


def attention_rows() -> list[list[str]]:
    rows = []
    for name, (device, engine) in ATTENTION_TABLES.items():
        header, data = _rows(f"attention_aic_{name}_bf16.csv.gz")
        b, h, s, d, measured = (data[:, header.index(c)].astype(float)
                                for c in ("batch", "heads", "seq", "head_dim", "seconds"))
        traces = [_attention_trace(*map(int, shape)) for shape in zip(b, h, s, d, strict=True)]
        flops = np.array([sum(op.flops for op in t.ops) for t in traces])
        spec = roofline.get_device(device)
        held = _held_out_attention(spec)
        predicted = {v: np.array([roofline.analyze(t, on, **options).seconds for t in traces])
                     for v, on, options in (("datasheet", spec, DATASHEET), ("default", spec, {}),
                                            ("held out", held, {})) if on is not None}
        large = flops >= LARGE_ATTENTION_FLOPS
        default, big = (_errors(predicted["default"][sel], measured[sel])
                        for sel in (np.ones_like(large), large))
        out = (_errors(predicted["held out"][large], measured[large]) if held is not None
               else None)
        reached = flops[large] / measured[large] / spec.matrix_flops_per_s["bf16"]
        rows.append([device, engine, str(len(traces)),
                     f"{_errors(predicted['datasheet'], measured)[0]:.1%}",
                     f"{default[0]:.1%}", f"{default[2]:+.2f}", str(int(large.sum())),
                     f"{big[0]:.1%}", f"{big[2]:+.2f}",
                     "-" if out is None else f"{out[0]:.1%}",
                     "-" if out is None else f"{out[2]:+.2f}", f"{np.median(reached):.0%}"])
    return rows


def _rowwise_step(op: str, rows: int, cols: int, dtype: torch.dtype) -> Callable[..., object]:
    if op == "layer_norm":
        norm = nn.LayerNorm(cols, device="meta", dtype=dtype)
        return lambda x: norm(x)
    if op == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    if op == "gelu":
        return lambda x: nn.functional.gelu(x)
    return torch.add  # vidur's residual add: two tensors of one shape in, one out


#: LLMCompass times one call with time.time() around it and a synchronize: below this the
#: host (Python, the launch, the synchronize: about 50 us for its smallest shapes), not the
#: kernel, is what it measured.
LLMCOMPASS_MIN_SECONDS = 200e-6
#: vidur's row-wise tables: file name part -> registry device (boards not stated: SXM assumed).
VIDUR_ROWWISE = (("a100", "A100 SXM 80GB"), ("h100", "H100 SXM"), ("a40", "A40"))
#: Shapes per (table, op), spread evenly over the table's sizes: tracing each takes a while.
ROWWISE_SHAPES = 60


@functools.cache
def _rowwise_trace(op: str, rows: int, cols: int) -> Trace:
    """One row-wise kernel on fake fp16 tensors (GELU over a flat vector where LLMCompass
    ran it so), traced once for every device."""
    shape = (rows, cols) if op != "gelu" or rows > 1 else (cols,)
    inputs = [torch.empty(*shape, dtype=torch.float16, device="meta")
              for _ in range(2 if op == "add" else 1)]
    return roofline.trace(_rowwise_step(op, rows, cols, torch.float16), *inputs, fake=True)


def _held_out_layer_norm(spec: roofline.DeviceSpec) -> roofline.DeviceSpec | None:
    """``spec`` as a user's new GPU would see it: its layer-norm bandwidth at its copy
    figure times the median ratio of layer norm to copy of the *other* measured GPUs of
    its vendor (None: no other)."""
    held = _leave_one_out(spec, "bandwidth_bytes_per_s", "layer_norm",
                          lambda o: figures(o).bandwidth("copy").value, lambda o: True)
    if held is None or spec.achievable is None:
        return None
    return spec.with_overrides(achievable=spec.achievable.model_copy(
        update={"bandwidth_bytes_per_s": held}))


def _rowwise_sample(header: list[str], data: np.ndarray, op: str, column: str = "rows",
                    least: float = 0.0, below: float = np.inf,
                    ) -> tuple[list[Trace], np.ndarray]:
    """The traces and measured seconds of up to :data:`ROWWISE_SHAPES` of a row-wise
    table's ``op`` rows whose ``column`` is at least ``least`` and below ``below``, spread
    evenly."""
    sel = data[data[:, header.index("op")] == op]
    values = sel[:, header.index(column)].astype(float)
    sel = sel[(values >= least) & (values < below)]
    sel = sel[np.linspace(0, len(sel) - 1, min(len(sel), ROWWISE_SHAPES)).astype(int)]
    traces = [_rowwise_trace(op, int(r), int(c)) for r, c in zip(
        sel[:, header.index("rows")], sel[:, header.index("cols")], strict=True)]
    return traces, sel[:, header.index("seconds")].astype(float)


def rowwise_rows() -> list[list[str]]:
    sources = {**{f"rowwise_vidur_{name}_fp16.csv.gz": (device, "vidur")
                  for name, device in VIDUR_ROWWISE},
               "rowwise_llmcompass_a100_fp16.csv.gz": ("A100 SXM 80GB", "LLMCompass")}
    out = []
    for file, (device, source) in sources.items():
        header, data = _rows(file)
        for op in sorted(set(data[:, header.index("op")])):
            # LLMCompass times one call's wall clock: launch-bound below ~50 us
            traces, measured = _rowwise_sample(header, data, op, "seconds", (
                LLMCOMPASS_MIN_SECONDS if source == "LLMCompass" else 0.0))
            cells = [device, source, op, str(len(traces))]
            held = _held_out_layer_norm(roofline.get_device(device)) \
                if op == "layer_norm" else None
            for label, on, options in (("datasheet", device, DATASHEET),
                                       ("default", device, {}),
                                       ("kernel only", device, {"overhead": False}),
                                       ("held out", held, {"overhead": False})):
                if on is None:
                    cells += ["-", "-"]
                    continue
                pred = np.array([roofline.analyze(t, on, **options).device_seconds
                                 for t in traces])
                err = _errors(pred, measured)
                cells += [f"{err[0]:.1%}"] if label == "datasheet" else [
                    f"{err[0]:.1%}", f"{err[2]:+.2f}"]
            out.append(cells)
    return out


#: Liger-Kernel's PyTorch baselines (``benchmarks/data/kernels/extract_liger_rowwise.py``):
#: file name part -> registry device. No figure or fit was taken from them.
LIGER_ROWWISE = (("a100_sxm_80gb", "A100 SXM 80GB"), ("h100_sxm", "H100 SXM"),
                 ("rtx_3090", "RTX 3090"))
_TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _llama_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Hugging Face's ``LlamaRMSNorm.forward`` as Liger-Kernel's script writes it out."""
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + 1e-6)
    return weight * hidden.to(x.dtype)


@functools.cache
def _liger_trace(op: str, rows: int, cols: int, dtype: str) -> Trace:
    """One of Liger-Kernel's PyTorch forwards on fake tensors, over an input that requires
    grad, as its scripts make it: ``nn.LayerNorm`` in fp32, ``nn.Softmax``, Hugging Face's
    RMS norm (fp32 weight), ``nn.CrossEntropyLoss`` over random targets."""
    x = torch.empty(rows, cols, dtype=_TORCH_DTYPES[dtype], device="meta").requires_grad_()
    if op == "rms_norm":
        return roofline.trace(_llama_rms_norm, x, torch.ones(cols, device="meta"), fake=True)
    if op == "cross_entropy":
        return roofline.trace(nn.functional.cross_entropy, x,
                              torch.zeros(rows, dtype=torch.long, device="meta"), fake=True)
    return roofline.trace(_rowwise_step(op, rows, cols, torch.float32), x, fake=True)


def liger_rows() -> list[list[str]]:
    """Liger-Kernel's timings of PyTorch's layer norm and softmax against the default model
    (with the launch overhead: CUDA events around each call hold the kernel's start), and
    layer norm with the device's own layer_norm figure held out."""
    out = []
    for name, device in LIGER_ROWWISE:
        spec = roofline.get_device(device)
        for file in sorted(DATA.glob(f"rowwise_liger_{name}_*.csv.gz")):
            header, data = _rows(file.name)
            for op in sorted(set(data[:, header.index("op")])):
                sel = data[data[:, header.index("op")] == op]
                measured = sel[:, header.index("seconds")].astype(float)
                traces = [_liger_trace(op, int(r), int(c), str(d)) for r, c, d in zip(
                    sel[:, header.index("rows")], sel[:, header.index("cols")],
                    sel[:, header.index("dtype")], strict=True)]
                cells = [device, op, str(sel[0, header.index("dtype")]), str(len(traces)),
                         f"{int(sel[0, header.index('rows')])} x "
                         f"{int(sel[:, header.index('cols')].astype(int).min())}-"
                         f"{int(sel[:, header.index('cols')].astype(int).max())}",
                         f"{measured.min() * 1e6:.0f}-{measured.max() * 1e6:.0f} us"]
                held = _held_out_layer_norm(spec) if op == "layer_norm" else None
                for label, on, options in (("datasheet", spec, DATASHEET),
                                           ("default", spec, {}), ("held out", held, {})):
                    if on is None:
                        cells += ["-", "-"]
                        continue
                    err = _errors(np.array([roofline.analyze(t, on, **options).device_seconds
                                            for t in traces]), measured)
                    cells += [f"{err[0]:.1%}"] if label == "datasheet" else [
                        f"{err[0]:.1%}", f"{err[2]:+.2f}"]
                out.append(cells)
    return out


#: Rows from which vidur's layer norms fill the chip: below, one block's row (5-7 us at a
#: single row, vidur's 1-row timings) and the A40's 6 MB L2 set the time, not the stream.
FULL_CHIP_ROWS = 1024


def layer_norm_rows() -> list[list[str]]:
    """vidur's layer norms of at least :data:`FULL_CHIP_ROWS` rows, kernel only: before
    (at the copy pattern), in-sample (the device's own layer_norm figure) and held out."""
    out = []
    for name, device in VIDUR_ROWWISE:
        header, data = _rows(f"rowwise_vidur_{name}_fp16.csv.gz")
        traces, measured = _rowwise_sample(header, data, "layer_norm", "rows", FULL_CHIP_ROWS)
        spec = roofline.get_device(device)
        cells = [device, str(len(traces))]
        for on, options in ((spec, {"overhead": False, "kernel_passes": False}),
                            (spec, {"overhead": False}),
                            (_held_out_layer_norm(spec), {"overhead": False})):
            assert on is not None
            err = _errors(np.array([roofline.analyze(t, on, **options).device_seconds
                                    for t in traces]), measured)
            cells += [f"{err[0]:.1%}", f"{err[2]:+.2f}"]
        fig = figures(spec)
        cells.append(f"{fig.bandwidth('layer_norm').value / fig.bandwidth('copy').value:.0%}")
        out.append(cells)
    return out


def few_rows_rows() -> list[list[str]]:
    """vidur's layer norms of fewer than :data:`FULL_CHIP_ROWS` rows, with the launch
    overhead (vidur's durations hold the kernel's own start and drain, which the overhead
    stands for): without and with the dependent-loads roof, whose DRAM latency is a
    pointer chase measured apart from these tables (or the memory family's median)."""
    out = []
    for name, device in VIDUR_ROWWISE:
        header, data = _rows(f"rowwise_vidur_{name}_fp16.csv.gz")
        traces, measured = _rowwise_sample(header, data, "layer_norm", "rows",
                                           below=FULL_CHIP_ROWS)
        latency = figures(roofline.get_device(device)).dram_latency()
        assert latency is not None
        cells = [device, str(len(traces)), f"{measured.min() * 1e6:.0f}-"
                 f"{measured.max() * 1e6:.0f} us"]
        for options in ({"bytes_in_flight": False}, {}):
            pred = np.array([roofline.analyze(t, device, **options).device_seconds
                             for t in traces])
            err = _errors(pred, measured)
            cells += [f"{pred.min() * 1e6:.1f}-{pred.max() * 1e6:.1f} us", f"{err[0]:.1%}",
                      f"{err[2]:+.2f}"]
        cells.append(f"{latency.value * 1e9:.0f} ns ({latency.origin})")
        out.append(cells)
    return out


#: DeepBench's convolution tables: file name part -> registry device (fit_gemm's names)
CONV_DEVICES = {t.file.removeprefix("gemm_deepbench_").rsplit("_", 1)[0]: t.device
                for t in TABLES if t.file.startswith("gemm_deepbench_")}


#: DeepBench's shape columns, in :func:`_conv_ops`' order
CONV_SHAPE = ("n", "c", "h", "w", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w")
#: DeepBench's fp16 convolutions ran in NHWC with C and K padded to multiples of this
#: (``code/nvidia/conv_bench.cu``: tensor cores need channels in eights)
FP16_CHANNEL_MULTIPLE = 8


@functools.cache
def _conv_ops(shape: tuple[int, ...], dtype: str, input_grad: bool,
              ) -> tuple[tuple[OpRecord, ...], tuple[OpRecord, ...]]:
    """The forward and backward convolution of one DeepBench layer (n, c, h, w, k, r, s,
    pad_h, pad_w, stride_h, stride_w), traced on fake tensors as DeepBench ran it: fp32 in
    NCHW, fp16 channels-last (so no layout transposes) with padded channels. The backward
    computes the weight's gradient, and the input's when ``input_grad``."""
    n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w = shape
    fmt = torch.contiguous_format
    if dtype == "fp16":
        c, k = (-(-v // FP16_CHANNEL_MULTIPLE) * FP16_CHANNEL_MULTIPLE for v in (c, k))
        fmt = torch.channels_last
    x = torch.empty(n, c, h, w, dtype=TORCH_DTYPE[dtype], device="meta").to(
        memory_format=fmt).requires_grad_(input_grad)
    weight = torch.empty(k, c, r, s, dtype=TORCH_DTYPE[dtype], device="meta").to(
        memory_format=fmt).requires_grad_()

    def step(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        y = nn.functional.conv2d(x, weight, padding=(pad_h, pad_w), stride=(stride_h, stride_w))
        return y.sum()

    ops = roofline.trace(step, x, weight, train=True, fake=True).ops
    assert not any(op.category == "layout" for op in ops), "DeepBench ran no transposes"
    conv = [op for op in ops if op.category == "conv"]
    return (tuple(op for op in conv if op.phase == "forward"),
            tuple(op for op in conv if op.phase == "backward"))


def _pass_seconds(groups: list[tuple[OpRecord, ...]], device: str | roofline.DeviceSpec,
                  **options: object) -> np.ndarray:
    """Seconds of each group of ops (one convolution's pass), from one analysis."""
    seconds = _seconds([op for g in groups for op in g], device, **options)
    ends = np.cumsum([len(g) for g in groups])
    return np.array([seconds[end - len(g):end].sum() for g, end in zip(groups, ends, strict=True)])


@functools.cache
def _conv_tables() -> list[tuple[str, str, dict[str, np.ndarray]]]:
    """(device, dtype, columns) of each DeepBench convolution table; times in seconds, NaN
    where not measured (the input gradient of some first layers)."""
    out = []
    for path in sorted(DATA.glob("conv_deepbench_*.csv.gz")):
        part, dtype = path.name.removeprefix("conv_deepbench_").removesuffix(
            ".csv.gz").rsplit("_", 1)
        header, data = _rows(path.name)
        col = {name: np.array([float(v) if v else np.nan for v in data[:, i]])
               for i, name in enumerate(header)}
        out.append((CONV_DEVICES[part], dtype, col))
    return out


#: Layers of at least this many input channels: the ratios of the passes leave out first
#: layers (1-3 channels), whose forward is a different kernel (no GEMM to speak of).
CONV_MIN_CHANNELS = 16


def _wgrad_layers() -> list[tuple[str, str, np.ndarray, np.ndarray, float, float]]:
    """Per table: (device, dtype, ln tiles of the weight gradient's output, ln wgrad /
    forward, and the median dgrad / forward at stride 1 and at stride 2) over its layers of
    >= CONV_MIN_CHANNELS channels."""
    out = []
    for device, dtype, col in _conv_tables():
        deep = col["c"] >= CONV_MIN_CHANNELS
        weights = zip(col["k"][deep], col["c"][deep], col["r"][deep], col["s"][deep],
                      strict=True)
        tiles = np.log([wgrad_tiles((int(k), int(c), int(r), int(s))) for k, c, r, s in weights])
        forward = col["forward_seconds"]
        dgrad = col["dgrad_seconds"] / forward
        strided = col["stride_h"] > 1
        out.append((device, dtype, tiles, np.log(col["wgrad_seconds"][deep] / forward[deep]),
                    float(np.nanmedian(dgrad[deep & ~strided])),
                    float(np.nanmedian(dgrad[deep & strided]))))
    return out


def _line(layers: list[tuple[str, str, np.ndarray, np.ndarray, float, float]],
          ) -> tuple[float, float, np.ndarray, np.ndarray]:
    """ln wgrad / forward = intercept + slope x ln tiles, least squares through the layers of
    these tables: (slope, intercept, ln tiles, ln ratios)."""
    x = np.concatenate([layer[2] for layer in layers])
    y = np.concatenate([layer[3] for layer in layers])
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept), x, y


def wgrad_rows() -> tuple[list[list[str]], dict[str, float]]:
    """Per table: the median wgrad / forward; the per-layer median error of the median of the
    other tables' ratios (a constant) and of the line ln ratio = a + b ln tiles fitted to
    the other tables (held out), with that fit's slope; the median dgrad / forward at stride
    1 and 2, and the stride-2 one of the other tables' (held out). Also the summary: the line
    fitted to all tables (``one_tile``, ``exponent``) and its per-layer median error
    (``in_sample``), the stride-2 median of all (``strided``), and the medians over tables
    of the held-out errors (``constant``, ``line``, ``strided_held``; ``strided_worst``)."""
    layers = _wgrad_layers()
    rows, constants, lines, strided_held = [], [], [], []
    for i, (device, dtype, tiles, ratio, dgrad1, dgrad2) in enumerate(layers):
        others = [layer for j, layer in enumerate(layers) if j != i]
        slope, intercept, _, y = _line(others)
        constants.append(np.expm1(np.median(np.abs(ratio - np.median(y)))))
        lines.append(np.expm1(np.median(np.abs(ratio - intercept - slope * tiles))))
        strided_held.append(float(np.median([layer[5] for layer in others])) / dgrad2 - 1)
        rows.append([device, dtype, str(len(ratio)), f"{np.exp(np.median(ratio)):.2f}",
                     f"{constants[-1]:.1%}", f"{lines[-1]:.1%}", f"{slope:+.3f}",
                     f"{dgrad1:.2f}", f"{dgrad2:.2f}", f"{strided_held[-1]:+.1%}"])
    slope, intercept, x, y = _line(layers)
    held = [abs(e) for e in strided_held]
    return rows, {"one_tile": float(np.exp(intercept)), "exponent": slope,
                  "in_sample": float(np.expm1(np.median(np.abs(y - intercept - slope * x)))),
                  "strided": float(np.median([layer[5] for layer in layers])),
                  "constant": float(np.median(constants)), "line": float(np.median(lines)),
                  "strided_held": float(np.median(held)), "strided_worst": max(held)}


#: The lent H200's convolution tables on the tensor cores (``gpu_kernels.py``, timed in CUDA
#: graphs): (file, dtype as traced, label of the engine's dtype)
H200_CONV_TABLES = (("conv_roofline_h200_sxm_fp16.csv.gz", "fp16", "fp16"),
                    ("conv_roofline_h200_sxm_fp32.csv.gz", "fp32", "tf32"))


@contextlib.contextmanager
def _conv_slowdown(dtype: str, factors: tuple[float, float]) -> Iterator[None]:
    """The library's convolution factors (small, large) of ``dtype`` (and bf16's with
    fp16's) set to ``factors`` inside the block."""
    keys = ("fp16", "bf16") if dtype == "fp16" else (dtype,)
    saved = {k: CONV_SLOWDOWN[k] for k in keys}
    CONV_SLOWDOWN.update(dict.fromkeys(keys, factors))
    try:
        yield
    finally:
        CONV_SLOWDOWN.update(saved)


#: (device, engine dtype, each layer's (forward, backward) ops, forward seconds, backward
#: seconds, analysis options, each layer's forward FLOPs per compute unit) of one table
ConvTable = tuple[str, str, list[tuple[tuple[OpRecord, ...], tuple[OpRecord, ...]]],
                  np.ndarray, np.ndarray, dict[str, object], np.ndarray]


def _conv_layers(device: str, dtype: str, col: dict[str, np.ndarray],
                 ) -> tuple[list[tuple[tuple[OpRecord, ...], tuple[OpRecord, ...]]], np.ndarray,
                            np.ndarray, np.ndarray]:
    """A convolution table's layers of >= CONV_MIN_CHANNELS input channels with a measured
    input gradient (first layers are a different kernel): each one's (forward, backward)
    ops, forward seconds, backward (input + weight gradients) seconds, and forward FLOPs per
    SM of ``device``."""
    keep = (col["c"] >= CONV_MIN_CHANNELS) & ~np.isnan(col["dgrad_seconds"])
    shapes = [tuple(int(col[c][i]) for c in CONV_SHAPE) for i in np.flatnonzero(keep)]
    layers = [_conv_ops(sh, dtype, True) for sh in shapes]
    units = roofline.get_device(device).compute_units or 1
    return (layers, col["forward_seconds"][keep],
            col["dgrad_seconds"][keep] + col["wgrad_seconds"][keep],
            np.array([sum(op.flops for op in f) / units for f, _ in layers]))


def _tensor_core_convs() -> list[ConvTable]:
    """(device, engine dtype, each layer's (forward, backward) ops, forward seconds, backward
    seconds, analysis options, forward FLOPs per SM) of each convolution table on the tensor
    cores, its layers of >= CONV_MIN_CHANNELS input channels (first layers are a different
    kernel)."""
    tables: list[tuple[str, str, str, dict[str, np.ndarray], dict[str, object]]] = [
        (device, dtype, "fp16", col, {}) for device, dtype, col in _conv_tables()
        if dtype == "fp16"]
    for name, dtype, engine in H200_CONV_TABLES:
        header, data = _rows(name)
        tables.append(("H200 SXM", dtype, engine,
                       {h: data[:, i].astype(float) for i, h in enumerate(header)},
                       {"graphs": True}))
    out: list[ConvTable] = []
    for device, dtype, engine, col, options in tables:
        layers, fwd, bwd, work = _conv_layers(device, dtype, col)
        out.append((device, engine, layers, fwd, bwd, options, work))
    return out


def _conv_factor(device: str, dtype: str,
                 layers: list[tuple[tuple[OpRecord, ...], tuple[OpRecord, ...]]],
                 measured: np.ndarray, options: dict[str, object],
                 setting: Callable[[float], contextlib.AbstractContextManager[None]] | None = None,
                 ) -> float:
    """The convolution factor (one, for layers of any size) at which the median of measured
    over predicted forward time of these layers is 1 (bisection: the prediction grows with
    the factor). ``setting(factor)`` sets it (default: the tensor cores' of ``dtype``)."""
    def tensor_cores(factor: float) -> contextlib.AbstractContextManager[None]:
        return _conv_slowdown(dtype, (factor, factor))

    setting = setting or tensor_cores
    low, high = 0.25, 8.0
    for _ in range(30):
        mid = (low * high) ** 0.5
        with setting(mid):
            predicted = _pass_seconds([f for f, _ in layers], device, **options)
        low, high = (mid, high) if np.median(measured / predicted) > 1 else (low, mid)
    return (low * high) ** 0.5


def _size_factors(device: str, dtype: str,
                  layers: list[tuple[tuple[OpRecord, ...], tuple[OpRecord, ...]]],
                  measured: np.ndarray, options: dict[str, object], work: np.ndarray,
                  among: np.ndarray,
                  setting: Callable[[float], contextlib.AbstractContextManager[None]] | None = None,
                  ) -> tuple[float, float, int, int]:
    """(small, large) factors, each fitted to the layers ``among`` of that size
    (CONV_WORK_PER_UNIT; NaN where there are none), and how many layers each took."""
    factors, counts = [], []
    for size in (work <= CONV_WORK_PER_UNIT[0], work >= CONV_WORK_PER_UNIT[1]):
        pick = among & size
        chosen = [layer for layer, keep in zip(layers, pick, strict=True) if keep]
        factors.append(_conv_factor(device, dtype, chosen, measured[pick], options, setting)
                       if pick.any() else float("nan"))
        counts.append(int(pick.sum()))
    return factors[0], factors[1], counts[0], counts[1]


def _own_factors(t: ConvTable) -> tuple[float, float, int, int]:
    """A table's (small, large) factors, each fitted to its layers of that size
    (CONV_WORK_PER_UNIT), and how many layers each took."""
    device, dtype, layers, fwd, _, options, work = t
    return _size_factors(device, dtype, layers, fwd, options, work, np.ones(len(work), bool))


def conv_factor_rows() -> tuple[list[list[str]], list[float]]:
    """Per tensor-core convolution table: its own small and large factors and the medians of
    the other tables' of its dtype (held out; none for a dtype measured once), and the
    forward's and backward's median error and bias over all its layers without a factor,
    with one factor for every size (its own), at the library's and held out; also the
    held-out factors' errors against each table's own."""
    tables = _tensor_core_convs()
    own = [_own_factors(t) for t in tables]
    single = [_conv_factor(d, e, layers, fwd, opts) for d, e, layers, fwd, _, opts, _ in tables]
    rows, held_errors = [], []
    for i, (device, dtype, layers, fwd, bwd, opts, _) in enumerate(tables):
        others = [own[j] for j in range(len(tables)) if j != i and tables[j][1] == dtype]
        held = (float(np.median([o[0] for o in others])),
                float(np.median([o[1] for o in others]))) if others else None
        cells = [device, dtype, f"{own[i][2]} / {own[i][3]}",
                 f"{own[i][0]:.2f} / {own[i][1]:.2f}",
                 "-" if held is None else f"{held[0]:.2f} / {held[1]:.2f}"]
        if held is not None:
            held_errors += [abs(held[k] / own[i][k] - 1) for k in (0, 1)]
        for pass_, measured in ((0, fwd), (1, bwd)):
            for factors in ((1.0, 1.0), (single[i], single[i]), CONV_SLOWDOWN[dtype], held):
                if factors is None:
                    cells.append("-")
                    continue
                with _conv_slowdown(dtype, factors):
                    predicted = _pass_seconds([ops[pass_] for ops in layers], device, **opts)
                err = _errors(predicted, measured)
                cells.append(f"{err[0]:.1%} ({err[2]:+.2f})")
        rows.append(cells)
    return rows, held_errors


@contextlib.contextmanager
def _fp32_slowdown(kind: str, factors: tuple[float, float]) -> Iterator[None]:
    """The library's fp32 convolution factors (small, large) of ``kind`` ("winograd" or
    "gemm") set to ``factors`` inside the block."""
    saved = FP32_CONV_SLOWDOWN[kind]
    FP32_CONV_SLOWDOWN[kind] = factors
    try:
        yield
    finally:
        FP32_CONV_SLOWDOWN[kind] = saved


#: (device, each layer's (forward, backward) ops, forward seconds, backward seconds, forward
#: FLOPs per SM, whether cuDNN could run the layer as Winograd) of one DeepBench fp32 table
Fp32Table = tuple[str, list[tuple[tuple[OpRecord, ...], tuple[OpRecord, ...]]], np.ndarray,
                  np.ndarray, np.ndarray, np.ndarray]
FP32_KINDS = ("winograd", "gemm")


def _fp32_convs() -> list[Fp32Table]:
    """DeepBench's fp32 convolution tables (NCHW, cuDNN's chosen algorithm per layer), their
    layers of >= CONV_MIN_CHANNELS input channels."""
    out: list[Fp32Table] = []
    for device, dtype, col in _conv_tables():
        if dtype == "fp32":
            layers, fwd, bwd, work = _conv_layers(device, dtype, col)
            out.append((device, layers, fwd, bwd, work,
                        np.array([winograd(f[0]) for f, _ in layers])))
    return out


def _fp32_own(t: Fp32Table) -> dict[str, tuple[float, float, int, int]]:
    """A table's (small, large) factors per kind, each fitted to its layers of that kind and
    size, and how many layers each took."""
    device, layers, fwd, _, work, wino = t
    out = {}
    for kind, among in zip(FP32_KINDS, (wino, ~wino), strict=True):
        def setting(f: float, kind: str = kind) -> contextlib.AbstractContextManager[None]:
            return _fp32_slowdown(kind, (f, f))

        out[kind] = _size_factors(device, "fp32", layers, fwd, {}, work, among, setting)
    return out


def _fp32_medians(own: list[dict[str, tuple[float, float, int, int]]]
                  ) -> dict[str, tuple[float, float]]:
    """Per kind, the medians over tables of their small and large factors."""
    return {kind: (float(np.nanmedian([o[kind][0] for o in own])),
                   float(np.nanmedian([o[kind][1] for o in own]))) for kind in FP32_KINDS}


def fp32_conv_rows() -> tuple[list[list[str]], list[float]]:
    """Per DeepBench fp32 table: its own Winograd and other factors (small / large), the
    medians of the other tables' (held out), and the forward's and backward's median error
    (bias) over its layers at factor 1 (the library before), at the library's and held out;
    also the held-out factors' errors against each table's own."""
    tables = _fp32_convs()
    own = [_fp32_own(t) for t in tables]
    rows, held_errors = [], []
    for i, (device, layers, fwd, bwd, _, wino) in enumerate(tables):
        held = _fp32_medians([o for j, o in enumerate(own) if j != i])
        cells = [device, f"{int(wino.sum())} / {int((~wino).sum())}"]
        for kind in FP32_KINDS:
            cells.append(" / ".join("-" if np.isnan(v) else f"{v:.2f}" for v in own[i][kind][:2]))
            cells.append(f"{held[kind][0]:.2f} / {held[kind][1]:.2f}")
            held_errors += [abs(h / o - 1) for h, o in zip(held[kind], own[i][kind][:2],
                                                           strict=True) if not np.isnan(o)]
        for pass_, measured in ((0, fwd), (1, bwd)):
            for factors in ({k: (1.0, 1.0) for k in FP32_KINDS}, dict(FP32_CONV_SLOWDOWN), held):
                with _fp32_slowdown("winograd", factors["winograd"]), \
                        _fp32_slowdown("gemm", factors["gemm"]):
                    predicted = _pass_seconds([ops[pass_] for ops in layers], device)
                err = _errors(predicted, measured)
                cells.append(f"{err[0]:.1%} ({err[2]:+.2f})")
        rows.append(cells)
    return rows, held_errors


def _held_summary(held: list[float]) -> str:
    """The held-out factors' errors against each table's own, as a line."""
    return (f"\nheld-out factors against each table's own: median |error| "
            f"{statistics.median(held):.1%}, worst {max(held):.1%} ({len(held)} factors)")


def fp32_conv_section() -> str:
    """The fp32 convolution factors' section of the report: what it shows, the table, the
    held-out factors' errors."""
    rows, held = fp32_conv_rows()
    header = ["device", "layers Winograd / other", "Winograd own", "held out", "other own",
              "held out", "fwd x1", "fwd library", "fwd held out", "bwd x1", "bwd library",
              "bwd held out"]
    return ("\nfp32 convolutions on the CUDA cores (DeepBench's seven fp32 tables, cuDNN "
            f"5-7.6, its chosen algorithm per layer; layers of >= {CONV_MIN_CHANNELS} input "
            "channels): each table's factors fitted to its Winograd layers (3x3, stride 1) and "
            "to the rest, small / large as above, the medians of the other tables' (held out), "
            "and the median error (bias) of the forward and the backward over all its layers "
            "at factor 1 (the library before), at the library's (FP32_CONV_SLOWDOWN) and held "
            f"out\n\n{table(header, rows)}\n{_held_summary(held)}")


def conv_rows() -> list[list[str]]:
    """Per table and pass: the library's convolution time against DeepBench's (datasheet:
    the classic roofline, both gradients at the forward's rate)."""
    out = []
    for device, dtype, col in _conv_tables():
        shapes = [tuple(int(col[c][i]) for c in CONV_SHAPE) for i in range(len(col["n"]))]
        dgrad = col["dgrad_seconds"]
        records = [_conv_ops(sh, dtype, not np.isnan(d))
                   for sh, d in zip(shapes, dgrad, strict=True)]
        passes = {"forward": ([f for f, _ in records], col["forward_seconds"]),
                  "backward": ([b for _, b in records],
                               np.nan_to_num(dgrad) + col["wgrad_seconds"])}
        for label, (groups, measured) in passes.items():
            cells = [device, dtype, label, str(len(groups))]
            for options in ({**DATASHEET, "kernel_passes": False},
                            {"kernel_passes": False}, {}):
                err = _errors(_pass_seconds(groups, device, **options), measured)
                cells += [f"{err[0]:.1%}", f"{err[2]:+.2f}"]
            out.append(cells)
    return out


def sgemm_rows() -> list[list[str]]:
    """Each device with a measured SGEMM peak (TF32 off) against the median share of the
    *other* measured devices of its FP32 datapath design: what a new GPU of that design
    gets, next to the datasheet's error."""
    rows = []
    for spec in roofline.list_devices():
        design = fp32_datapath_class(spec)
        own = spec.achievable.vector_flops_per_s.get("fp32") if spec.achievable else None
        if own is None or design is None:
            continue
        share = own.value / spec.vector_flops_per_s["fp32"]
        held = _held_out_sgemm(spec)
        if held is None or held.achievable is None:
            rows.append([spec.name, design.removeprefix(f"{spec.vendor} "), f"{share:.0%}",
                         "-", "-", f"{1 / share - 1:+.0%}"])
            continue
        other = held.achievable.vector_flops_per_s["fp32"].value / spec.vector_flops_per_s[
            "fp32"]
        rows.append([spec.name, design.removeprefix(f"{spec.vendor} "), f"{share:.0%}",
                     f"{other:.0%}", f"{other / share - 1:+.0%}", f"{1 / share - 1:+.0%}"])
    return rows


def _without(spec: roofline.DeviceSpec, dtype: str) -> roofline.DeviceSpec:
    """``spec`` with its measured ``dtype`` matrix rate removed."""
    assert spec.achievable is not None
    kept = {d: m for d, m in spec.achievable.matrix_flops_per_s.items() if d != dtype}
    return spec.with_overrides(achievable=spec.achievable.model_copy(
        update={"matrix_flops_per_s": kept}))


def matrix_ratio_rows() -> list[list[str]]:
    """Each device measured in a matrix dtype other than 16-bit and in 16-bit, that dtype's
    share held out: its own 16-bit share times the median ratio of the *other* devices of
    its vendor (the default), against the median share of the other devices of its class
    (the rule before) and the datasheet."""
    rows = []
    shipped = [s for s in roofline.list_devices() if s.kind in ("gpu", "accelerator")]
    for spec in shipped:
        measured = spec.achievable.matrix_flops_per_s if spec.achievable else {}
        if own_16bit_share(spec) is None:
            continue
        classes = class_defaults(o for o in shipped if o.name != spec.name)
        for dtype, m in measured.items():
            if dtype in SIXTEEN_BIT:
                continue
            share = m.value / spec.matrix_flops_per_s[dtype]
            held = _without(spec, dtype)
            others = [held if o.name == spec.name else o for o in shipped]
            figure = figures(held, population=others).matrix(dtype)
            ratio = figure.share if figure is not None and "ratio" in figure.source else None
            default = classes.get((class_of(spec), "matrix", dtype))
            cells = [spec.name, dtype, f"{share:.0%}"]
            for other in (ratio, default.value if default else None):
                cells += ["-", "-"] if other is None else [f"{other:.0%}",
                                                           f"{other / share - 1:+.0%}"]
            rows.append([*cells, f"{1 / share - 1:+.0%}"])
    return rows


#: The power rule's exponent and the ones printed beside it (0: the parts' median share).
EXPONENTS = (POWER_EXPONENT, 0.25, 0.5, 0.0)


def power_rule_rows() -> tuple[list[list[str]], list[list[float | None]]]:
    """Each GPU with a measured 16-bit matrix share and a TDP, and measured parts of the
    same vendor and ISA besides: its share held out, from the others by the power rule
    (the library's figure, exponent 1/3), and by exponents 1/4, 1/2 and 0 (the others'
    median share), against the median share of the other measured devices of its class
    and the datasheet. The table's rows, and per row the errors (predicted / measured - 1;
    None: no class median) unrounded."""
    rows: list[list[str]] = []
    errors: list[list[float | None]] = []
    shipped = [s for s in roofline.list_devices() if s.kind == "gpu"]
    measured = {s.name: (s, own) for s in shipped if s.isa and s.tdp_watts
                and (own := own_16bit_share(s)) is not None}
    for name, (spec, (dtype, share)) in measured.items():
        peers = [(p, own) for n, (p, own) in measured.items()
                 if n != name and p.vendor == spec.vendor and p.isa == spec.isa]
        if not peers:
            continue
        held = _without(_without(spec, "bf16"), "fp16")
        others = [held if o.name == name else o for o in shipped]
        figure = figures(held, population=others).matrix(dtype)
        assert figure is not None and figure.source.startswith("power rule")
        watts = watts_per_tflops(spec, dtype)
        off: list[float | None] = [figure.value / spec.matrix_flops_per_s[dtype] / share - 1]
        for exponent in EXPONENTS[1:]:
            predicted = statistics.median(
                s * (watts / watts_per_tflops(p, d)) ** exponent for p, (d, s) in peers)
            off.append(predicted / share - 1)
        default = class_defaults(o for o in shipped if o.name != name).get(
            (class_of(spec), "matrix", dtype))
        off += [default.value / share - 1 if default else None, 1 / share - 1]
        errors.append(off)
        rows.append([name, spec.isa or "", f"{watts:.2f}", str(len(peers)), f"{share:.0%}",
                     *("-" if e is None else f"{e:+.0%}" for e in off)])
    return rows, errors


def table(header: Sequence[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
            for r in rows]
    return "\n".join([line, rule, *body])


def main() -> int:
    print("GEMM (median |error| per table; fitted and held out also p90 and bias)\n")
    print(table(["device", "dtype", "shapes", "datasheet", "tiles", "fitted", "fitted p90",
                 "held out", "held-out p90", "held-out bias"], gemm_rows()))
    sgemm = sgemm_rows()
    print("\nSGEMM peak share (fp32, TF32 off; measured: zzc-db's maximum over square sizes), "
          "each device against the median of the other measured devices of its FP32 datapath "
          "design (error: predicted / measured - 1)\n")
    print(table(["device", "design", "measured", "held out", "held-out error",
                 "datasheet error"], sgemm))
    errors = [abs(float(r[4].rstrip("%")) / 100) for r in sgemm if r[4] != "-"]
    datasheet = [abs(float(r[5].rstrip("%")) / 100) for r in sgemm if r[4] != "-"]
    print(f"\n{len(errors)} held-out devices: median |error| {statistics.median(errors):.1%} "
          f"(datasheet {statistics.median(datasheet):.1%})")
    ratio = matrix_ratio_rows()
    print("\nMatrix peak share of TF32 and fp8 (measured: the registry's figures), each "
          "device's held out: its own measured 16-bit share times the median ratio of the "
          "other devices of its vendor measured in both (the default), against the median "
          "share of the other measured devices of its class (the rule before) and the "
          "datasheet (error: predicted / measured - 1)\n")
    print(table(["device", "dtype", "measured", "held out", "error", "class median", "error",
                 "datasheet error"], ratio))
    for dtype in sorted({r[1] for r in ratio}):
        errs = [[abs(float(r[i].rstrip("%")) / 100) for r in ratio
                 if r[1] == dtype and r[i] != "-"] for i in (4, 6, 7)]
        print(f"{dtype}: held out median |error| {statistics.median(errs[0]):.1%} (p90 "
              f"{np.percentile(errs[0], 90):.0%}, {len(errs[0])} devices); class median "
              f"{statistics.median(errs[1]):.1%} (p90 {np.percentile(errs[1], 90):.0%}, "
              f"{len(errs[1])}); datasheet {statistics.median(errs[2]):.1%}")
    power, power_errors = power_rule_rows()
    print("\n16-bit matrix peak share from the power rule (measured: the registry's figures), "
          "each GPU's held out: the median over the other measured parts of its vendor and "
          "ISA of their share x (this part's W per TFLOP/s / theirs)^e, e = 1/3 (the "
          "library's), 1/4, 1/2 and 0 (their median share), against the median share of the "
          "other measured devices of its class (the rule before; '-': none, the datasheet "
          "then) and the datasheet (error: predicted / measured - 1)\n")
    print(table(["device", "ISA", "W per TFLOP/s", "parts", "measured", "e = 1/3", "e = 1/4",
                 "e = 1/2", "e = 0", "class median", "datasheet"], power))
    for i, label in enumerate(("e = 1/3", "e = 1/4", "e = 1/2", "e = 0", "class median",
                               "datasheet")):
        off = [abs(e) for row in power_errors if (e := row[i]) is not None]
        print(f"{label}: median |error| {statistics.median(off):.1%}, p90 "
              f"{np.percentile(off, 90):.1%}, max {max(off):.1%} ({len(off)} devices)")
    wgrad, fit = wgrad_rows()
    print("\nConvolution gradients (DeepBench's cuDNN tables, layers of >= "
          f"{CONV_MIN_CHANNELS} input channels): the weight gradient's time over the "
          "forward's, the median per table; the per-layer median error of the median of the "
          "other tables (constant) and of ln ratio = a + b ln tiles fitted to the other tables "
          "(tiles: the 128x128 tiles of the gradient's C_out x C_in*R*S output), both held "
          "out, with that fit's slope b; the input gradient's time over the forward's at "
          "stride 1 and 2, and the error of the other tables' stride-2 median (held out)\n")
    print(table(["device", "dtype", "layers", "wgrad / forward", "constant, held out",
                 "line, held out", "slope", "dgrad / forward, stride 1", "stride 2",
                 "stride 2 held out"], wgrad))
    print(f"\nfitted to all {len(wgrad)} tables: wgrad / forward = {fit['one_tile']:.2f} x "
          f"tiles^{fit['exponent']:.3f} (the library's: {WGRAD_ONE_TILE} x tiles^"
          f"{WGRAD_TILE_EXPONENT}), per-layer median error {fit['in_sample']:.1%}; held out, "
          f"median over tables: constant {fit['constant']:.1%}, line {fit['line']:.1%}. "
          f"Strided dgrad / forward: median {fit['strided']:.2f} (the library's "
          f"DGRAD_STRIDED: {DGRAD_STRIDED}); held out median |error| "
          f"{fit['strided_held']:.1%}, worst {fit['strided_worst']:.1%}")
    print("\nConvolutions (DeepBench's 94 layers per table; forward, and backward = input + "
          "weight gradients; fp32 NCHW, fp16 NHWC with channels padded to eights, as "
          "DeepBench ran them; datasheet: the classic roofline; without slowdown: both "
          "gradients at the forward's rate, kernel_passes=False; default: the weight "
          "gradient at the fitted line's multiple of the forward's time and a strided "
          "input gradient at DGRAD_STRIDED's, fp16 on the tensor cores at CONV_SLOWDOWN's "
          "multiple of its FLOPs' time and fp32 at FP32_CONV_SLOWDOWN's, in-sample)\n")
    print(table(["device", "dtype", "pass", "layers", "datasheet", "bias",
                 "without slowdown", "bias", "default", "bias"], conv_rows()))
    low, high = CONV_WORK_PER_UNIT
    print("\nConvolutions on the tensor cores (layers of >= "
          f"{CONV_MIN_CHANNELS} input channels): the factor on the compute time of cuDNN's "
          "implicit GEMM that brings each table's median forward error to 0 over its small "
          f"layers (forward FLOPs per SM <= {low:.0e}) and over its large ones (>= "
          f"{high:.0e}), the medians of the other tables' of its dtype (held out), and the "
          "median error (bias) of the forward and the backward (input + weight gradients) "
          "over all its layers without a factor, with one factor for all sizes (the table's "
          "own), at the library's (CONV_SLOWDOWN: small, large, log-linear between) and held "
          "out; DeepBench's V100 and T4 (cuDNN 7.6, NHWC, channels padded to eights) and the "
          "lent H200's (cuDNN 9 under torch 2.11, CUDA graphs)\n")
    factor_rows, held = conv_factor_rows()
    print(table(["device", "dtype", "layers small / large", "own factors", "held out",
                 "fwd x1", "fwd one factor", "fwd library", "fwd held out",
                 "bwd x1", "bwd one factor", "bwd library", "bwd held out"], factor_rows))
    print(_held_summary(held))
    print(fp32_conv_section())
    print("\nBatched GEMM (AIConfigurator's MLA bmm; not fitted: the device's GEMM fit)\n")
    print(table(["device", "dtype", "shapes", "datasheet", "tiles", "fitted", "bias"],
                bmm_rows()))
    print("\nPrefill attention (causal, as many KV heads as query heads, head size 128, bf16; "
          "AIConfigurator's tables; the default runs it at the share of the matrix peak the "
          "device's large shapes reach (achievable.attention_flops_per_s), in-sample; held "
          "out: the median share of the other devices of its vendor and class)\n")
    print(table(["device", "engine", "shapes", "datasheet", "default", "bias",
                 f"shapes of >= {LARGE_ATTENTION_FLOPS:.0e} FLOPs", "their default",
                 "their bias", "held out", "held-out bias", "their share of the bf16 peak"],
                attention_rows()))
    print("\nRow-wise kernels (fp16; the library's model; kernel only: without the launch "
          "overhead, as vidur's kineto kernel durations are; layer norm streams at the "
          "device's measured layer_norm bandwidth, from vidur's tables here, so in-sample; "
          "held out, kernel only: at its copy figure times the median ratio of layer norm "
          "to copy of the other measured GPUs)\n")
    print(table(["device", "source", "op", "shapes", "datasheet", "default", "bias",
                 "kernel only", "bias", "held out", "bias"], rowwise_rows()))
    print(f"\nLayer norm on rows that fill the chip (vidur, >= {FULL_CHIP_ROWS} rows, kernel "
          "only; before: at the copy stream, as before the layer_norm figure)\n")
    print(table(["device", "shapes", "before", "bias", "in-sample", "bias", "held out", "bias",
                 "layer norm / copy"], layer_norm_rows()))
    print(f"\nLayer norm of few rows (vidur, < {FULL_CHIP_ROWS} rows, 2,560 wide, with the "
          "launch overhead; before: no dependent-loads roof, bytes_in_flight=False; now: "
          "ten rounds of DRAM latency per row, the first in the overhead)\n")
    print(table(["device", "shapes", "measured", "before", "error", "bias", "now", "error",
                 "bias", "DRAM latency"], few_rows_rows()))
    print("\nRow-wise kernels held out (Liger-Kernel's timings of PyTorch's own forwards, "
          "triton.testing.do_bench medians; no figure or fit was taken from them; held out: "
          "layer norm at the copy figure times the other measured GPUs' median ratio of "
          "layer norm to copy, as above)\n")
    print(table(["device", "op", "dtype", "shapes", "rows x cols", "measured", "datasheet",
                 "default", "bias", "held out", "bias"], liger_rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
