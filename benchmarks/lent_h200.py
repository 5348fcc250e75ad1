"""The time model against the kernel tables this project measured on a lent H200.

``benchmarks/gpu_kernels.py`` measured them on 2026-12-04 (NVIDIA H200, driver 580.159.04,
torch 2.11.0+cu130; ``benchmarks/data/kernels/*_roofline_h200_sxm_*``; each time one kernel
from CUDA-graph replays, so the predictions here are ``graphs=True``). The H200's bf16 and
fp8 GEMM fits come from AIConfigurator's H200 table, so its bf16/fp16 GEMM rows are
in-sample for the fit but not for the software (cuBLAS under torch 2.11 against
TensorRT-LLM's); its fp32 and TF32 GEMMs, convolutions, batched GEMMs and row-wise kernels
were never fitted to an H200 table, so those rows are held out.

Columns: median |error| as the factor prediction and measurement differ by, minus one, the
p90 of it, and the bias (median signed log error as a factor minus one, < 0 when the
prediction is faster than the measurement).

It also recomputes the steps ``benchmarks/gpu.py`` measured there
(``benchmarks/data/steps``) against today's predictions.

Usage: ``python benchmarks/lent_h200.py`` (about a minute).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import gzip
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import roofline
from roofline.tracing.records import OpRecord, Trace

sys.path.insert(0, str(Path(__file__).parent))
from kernels import CONV_SHAPE, DATA, _conv_ops, _gemm_ops, _pass_seconds
from kernels import _errors as error_stats
from kernels import _seconds as op_seconds

DEVICE = "H200 SXM"
#: CUDA-graph replays, as the tables were measured
GRAPHS = {"graphs": True}
TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _read(name: str) -> list[dict[str, str]]:
    with gzip.open(DATA / name, "rt") as f:
        return list(csv.DictReader(f))


def _errors(predicted: np.ndarray, measured: np.ndarray) -> str:
    """kernels.py's error statistics as table cells: median, p90, bias as a factor - 1."""
    median, p90, bias = error_stats(predicted, measured)
    return f"{median:.1%} | {p90:.0%} | {np.expm1(bias):+.0%}"


def _analyze(ops: list[OpRecord], **options: object) -> np.ndarray:
    return op_seconds(ops, DEVICE, **GRAPHS, **options)


def _stored(ops: list[OpRecord]) -> list[OpRecord]:
    """``ops`` with storage ids, each operand its own contiguous tensor, as the table ran
    ``torch.mm(a, b)``: the rows the time model reads for their alignment."""
    n = len(ops)
    return [dataclasses.replace(op, input_ids=(2 * i, 2 * i + 1), output_ids=(2 * n + i,))
            for i, op in enumerate(ops)]


def aligned(m: np.ndarray, n: np.ndarray, k: np.ndarray, element_bytes: int) -> np.ndarray:
    """Rows whose stored leading dimensions (k of A, n of B and C, in ``torch.mm(A, B)``)
    are whole multiples of 16 bytes."""
    del m  # the rows of A and C are never a leading dimension here
    return ((n * element_bytes) % 16 == 0) & ((k * element_bytes) % 16 == 0)


def gemm_rows() -> list[str]:
    out = []
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        rows = _read(f"gemm_roofline_h200_sxm_{dtype}.csv.gz")
        m, n, k = (np.array([int(r[c]) for r in rows]) for c in "mnk")
        measured = np.array([float(r["seconds"]) for r in rows])
        record = "fp32" if dtype == "tf32" else dtype
        predicted = _analyze(_stored(_gemm_ops(m, n, k, record)),
                             tf32_matmul=dtype == "tf32")
        big = 2.0 * m * n * k >= 1e10
        ok = aligned(m, n, k, 2 if dtype in ("bf16", "fp16") else 4)
        for label, sel in (("all", np.ones_like(big)), (">= 10 GFLOP, aligned", big & ok),
                           (">= 10 GFLOP, a leading dim off 16 B", big & ~ok),
                           ("< 10 GFLOP", ~big)):
            if sel.any():
                out.append(f"| {dtype} | {label} | {sel.sum()} | "
                           f"{_errors(predicted[sel], measured[sel])} |")
    return out


def alignment_rows() -> list[str]:
    """The 4096^3 GEMM with one dimension moved off by 1-8 elements, and GPT-2's LM head."""
    out = []
    for dtype in ("bf16", "tf32"):
        rows = _read(f"alignment_roofline_h200_sxm_{dtype}.csv.gz")
        base = {r["layout"]: float(r["seconds"]) for r in rows
                if r["case"] == "offset" and r["m"] == r["n"] == r["k"]}
        for r in rows:
            m, n, k, s = int(r["m"]), int(r["n"]), int(r["k"]), float(r["seconds"])
            rate = 2 * m * n * k / s / 1e12
            ref = f"{base[r['layout']] / s * (2 * m * n * k) / (2 * 4096**3):.2f}" \
                if r["case"] == "offset" else ""
            out.append(f"| {dtype} | {r['case']} {r['layout']} | {m} x {n} x {k} | "
                       f"{s * 1e6:.0f} us | {rate:.0f} | {ref} |")
    return out


def bmm_rows() -> list[str]:
    out = []
    for dtype in ("fp32", "bf16"):
        rows = _read(f"bmm_roofline_h200_sxm_{dtype}.csv.gz")
        b, m, n, k = (np.array([int(r[c]) for r in rows]) for c in ("batch", "m", "n", "k"))
        measured = np.array([float(r["seconds"]) for r in rows])
        predicted = _analyze(_stored(_gemm_ops(m, n, k, dtype, batch=b)))
        out.append(f"| {dtype} | {len(rows)} | {_errors(predicted, measured)} |")
    return out


def conv_rows() -> list[str]:
    """fp32 as PyTorch runs it (cuDNN's TF32 on), fp32 with TF32 off, fp16 channels-last;
    predicted from DeepBench-fitted gradient multiples (no H200 in those fits)."""
    out = []
    for part, dtype, options in (("fp32", "fp32", {}), ("fp32strict", "fp32",
                                                         {"tf32_conv": False}),
                                 ("fp16", "fp16", {})):
        rows = _read(f"conv_roofline_h200_sxm_{part}.csv.gz")
        shapes = [tuple(int(r[c]) for c in CONV_SHAPE) for r in rows]
        records = [_conv_ops(sh, dtype, True) for sh in shapes]
        for label, groups, measured in (
                ("forward", [f for f, _ in records],
                 np.array([float(r["forward_seconds"]) for r in rows])),
                ("backward", [b for _, b in records],
                 np.array([float(r["dgrad_seconds"]) + float(r["wgrad_seconds"])
                           for r in rows]))):
            predicted = _pass_seconds(groups, DEVICE, **GRAPHS, **options)
            out.append(f"| {part} | {label} | {len(rows)} | {_errors(predicted, measured)} |")
    return out


def _rowwise_fn(op: str, cols: int) -> tuple[Callable[..., object], bool]:
    """(the step to trace over (x, y, weight, bias), whether to keep only its backward)."""
    shape = (cols,)
    steps: dict[str, tuple[Callable[..., object], bool]] = {
        "layer_norm": (lambda x, y, w, b: F.layer_norm(x, shape, w, b), False),
        "layer_norm_backward": (lambda x, y, w, b: F.layer_norm(x, shape, w, b), True),
        "rms_norm": (lambda x, y, w, b: F.rms_norm(x, shape, w), False),
        "softmax": (lambda x, y, w, b: torch.softmax(x, dim=-1), False),
        "softmax_backward": (lambda x, y, w, b: torch.softmax(x, dim=-1), True),
        "log_softmax": (lambda x, y, w, b: torch.log_softmax(x, dim=-1), False),
        "gelu": (lambda x, y, w, b: F.gelu(x), False),
        "add": (lambda x, y, w, b: torch.add(x, y), False),
        "cross_entropy": (lambda x, y, w, b: F.cross_entropy(x, y[:, 0].long()), False),
    }
    return steps[op]


@functools.cache
def _rowwise_ops(op: str, rows: int, cols: int, dtype: str) -> tuple[OpRecord, ...]:
    fn, backward = _rowwise_fn(op, cols)
    t = TORCH[dtype]
    args = [torch.empty(rows, cols, dtype=t, device="meta").requires_grad_(backward),
            torch.empty(rows, cols, dtype=t, device="meta"),
            torch.empty(cols, dtype=t, device="meta").requires_grad_(backward),
            torch.empty(cols, dtype=t, device="meta").requires_grad_(backward)]
    trace = roofline.trace(fn, *args, train=backward, fake=True,
                           loss_fn=(lambda out: out.sum()) if backward else None)
    # the kernels the table timed: the backward's for *_backward, else the forward's,
    # without the step's own loss reduction and its gradient, or the label's cast
    return tuple(o for o in trace.ops if o.kernels > 0 and
                 o.phase == ("backward" if backward else "forward") and
                 o.category not in ("copy", "layout") and
                 (not backward or o.category in ("normalization", "softmax")))


def rowwise_rows() -> list[str]:
    out = []
    for dtype in ("bf16", "fp32"):
        rows = _read(f"rowwise_roofline_h200_sxm_{dtype}.csv.gz")
        for op in dict.fromkeys(r["op"] for r in rows):
            sel = [r for r in rows if r["op"] == op]
            measured = np.array([float(r["seconds"]) for r in sel])
            groups = [_rowwise_ops(op, int(r["rows"]), int(r["cols"]), dtype) for r in sel]
            flat = [o for g in groups for o in g]
            for label, options in (("default", {}), ("datasheet", {"peaks": "datasheet",
                                                                   "kernel_passes": False,
                                                                   "bytes_in_flight": False})):
                seconds = _analyze(flat, **options)
                ends = np.cumsum([len(g) for g in groups])
                predicted = np.array([seconds[e - len(g):e].sum()
                                      for g, e in zip(groups, ends, strict=True)])
                big = np.array([int(r["rows"]) * int(r["cols"]) >= 1 << 22 for r in sel])
                cells = [_errors(predicted, measured),
                         _errors(predicted[big], measured[big]) if big.any() else "- | - | -"]
                out.append(f"| {dtype} | {op} | {label} | {len(sel)} | {cells[0]} | "
                           f"{cells[1]} |")
    return out


STEPS = DATA.parent / "steps"


def _steps(name: str) -> dict[str, Any]:
    with gzip.open(STEPS / name, "rt", encoding="utf-8") as f:
        out: dict[str, Any] = json.load(f)
    return out


def steps_rows() -> list[str]:
    """The zoo's steps measured twice on the H200 (``benchmarks/data/steps``) against the
    prediction of that run's commit, today's default and today's analysis of run 3's
    calibrated spec (which predates the calibrated spec's carried ``isa``: the registry
    entry's is set on it here)."""
    run2, run3 = _steps("roofline_h200_sxm_run2.json.gz"), _steps("roofline_h200_sxm_run3.json.gz")
    recorded = _steps("roofline_h200_sxm_run3_calibration.json.gz")
    base = roofline.get_device(DEVICE)
    spec = recorded["calibrated"] | {"isa": base.isa, "sources": {
        **recorded["calibrated"]["sources"], "isa": base.sources["isa"]}}
    calibrated = roofline.DeviceSpec.model_validate(spec)
    before = {r["step"]: r["datasheet_ms"] / 1e3 for r in recorded["rows"]}
    out = []
    for name, step in run3.items():
        trace = Trace.from_json(json.dumps(step["trace"]))
        measured = step["step_seconds"]
        earlier = f"{run2[name]['step_seconds'] * 1e3:.3g}" if name in run2 else "-"
        now, cal = (roofline.analyze(trace, on).seconds for on in (DEVICE, calibrated))
        out.append(f"| {name} | {earlier}, {measured * 1e3:.3g} ms | "
                   f"{before[name] * 1e3:.3g} ms ({before[name] / measured - 1:+.0%}) | "
                   f"{now * 1e3:.3g} ms | {now / measured - 1:+.0%} | {cal * 1e3:.3g} ms | "
                   f"{cal / measured - 1:+.0%} |")
    return out


def step_ops_rows(top: int = 5) -> list[str]:
    """Where each measured training step's time goes missing: the ``top`` ops (by name)
    whose measured kernel time (torch.profiler, matched per op) most exceeds today's
    prediction, and the step's time outside its matched kernels (launch gaps, host work,
    kernels no op claimed)."""
    out = []
    for name, step in _steps("roofline_h200_sxm_run3.json.gz").items():
        if not name.endswith("train"):
            continue
        trace = Trace.from_json(json.dumps(step["trace"]))
        predicted = roofline.analyze(trace, DEVICE).op_seconds
        by_name: dict[str, list[float]] = {}
        for op, p, m in zip(trace.ops, predicted, step["op_seconds"], strict=True):
            if m is not None:
                sums = by_name.setdefault(op.name.removeprefix("aten."), [0, 0.0, 0.0])
                sums[0] += 1
                sums[1] += float(p)
                sums[2] += m
        worst = sorted(by_name.items(), key=lambda kv: kv[1][1] - kv[1][2])[:top]
        for op_name, (calls, p, m) in worst:
            out.append(f"| {name} | {op_name} | {calls} | {p * 1e3:.2f} ms | {m * 1e3:.2f} ms | "
                       f"{p / m:.2f} |")
        matched = sum(m for _, _, m in by_name.values())
        out.append(f"| {name} | (outside matched kernels) | - | - | "
                   f"{(step['step_seconds'] - matched) * 1e3:.2f} ms | - |")
    return out


def sustained_rows() -> list[str]:
    rows = _read("sustained_roofline_h200_sxm.csv.gz")
    out = []
    for dtype in ("fp32", "bf16"):
        sel = [r for r in rows if r["dtype"] == dtype]
        rates = sorted(float(r["flops_per_s"]) for r in sel)
        clocks = sorted(int(r["sm_clock_mhz"]) for r in sel)
        power = sorted(float(r["power_w"]) for r in sel[2:])  # after the first second
        out.append(f"| {dtype} | {rates[len(rates) // 2] / 1e12:.1f} TFLOP/s | "
                   f"{clocks[0]}-{clocks[-1]} MHz (median {clocks[len(clocks) // 2]}) | "
                   f"{power[len(power) // 2]:.0f} W |")
    return out


@functools.cache
def _sdpa_ops(batch: int, heads: int, seq: int, head_dim: int, causal: bool,
              backward: bool) -> tuple[OpRecord, ...]:
    """The attention kernels of one SDPA call (and its backward), traced on fake bf16."""
    q = torch.empty(batch, heads, seq, head_dim, dtype=torch.bfloat16, device="meta",
                    requires_grad=backward)

    def step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if backward:
            out.sum().backward()
    ops = roofline.trace(step, q, q, q, fake=True).ops
    return tuple(op for op in ops if op.category == "attention")


def sdpa_rows() -> list[str]:
    """PyTorch's SDPA (its own choice, cuDNN's kernels there, and the flash backend forced)
    against the default prediction; the rates the long sequences ran at and were given."""
    rows = _read("sdpa_roofline_h200_sxm_bf16.csv.gz")
    out = []
    for backend, d, causal, backward in itertools.product(("default", "flash"), (64, 128),
                                                          (0, 1), (0, 1)):
        sel = [r for r in rows if (r["backend"], int(r["head_dim"]), int(r["causal"]),
                                   int(r["backward"])) == (backend, d, causal, backward)]
        shapes = [(int(r["batch"]), int(r["heads"]), int(r["seq"])) for r in sel]
        measured = np.array([float(r["seconds"]) for r in sel])
        long = np.array([s >= 2048 for _, _, s in shapes])
        ops = [_sdpa_ops(b, h, s, d, bool(causal), bool(backward)) for b, h, s in shapes]
        predicted = np.array([_analyze(list(o)).sum() for o in ops])
        flops = np.array([sum(op.flops for op in o) for o in ops])
        rates = [f"{np.median(flops[long] / t[long]) / 1e12:.0f}" for t in (measured, predicted)]
        out.append(f"| {backend} | {d} | {'causal' if causal else 'full'} | "
                   f"{'fwd+bwd' if backward else 'fwd'} | {len(sel)} | "
                   f"{_errors(predicted, measured)} | {_errors(predicted[long], measured[long])}"
                   f" | {' | '.join(rates)} |")
    return out

#: (title, columns, rows) of each table main() prints, in order
SECTIONS: list[tuple[str, tuple[str, ...], Callable[[], list[str]]]] = [
    ("Steps (benchmarks/data/steps: bf16 autocast, real tensors; measured in runs 2 and 3; "
     "predicted then (the device run's commit), by today's default, and from run 3's "
     "calibration; errors against run 3)", ("step", "measured (run 2, run 3)", "default then",
                                            "default now", "error", "calibrated now",
                                            "error"), steps_rows),
    ("Where the training steps' time goes missing (run 3; ops by name, the five whose "
     "measured kernel time most exceeds today's prediction)",
     ("step", "op", "calls", "predicted", "measured", "predicted / measured"),
     step_ops_rows),
    ("Sustained 8192^3 GEMMs, 6 s each (nvidia-smi's SM clock and power; the power limit is "
     "700 W)", ("dtype", "rate", "SM clock", "power"), sustained_rows),
    ("GEMM (torch.mm; TF32: tf32_matmul=True)",
     ("dtype", "shapes", "n", "median", "p90", "bias"), gemm_rows),
    ("Leading dimensions off 16 bytes (seconds; TFLOP/s; the share of the 4096^3 GEMM's rate)",
     ("dtype", "case", "m x n x k", "time", "TFLOP/s", "share"), alignment_rows),
    ("Batched GEMM (torch.bmm)", ("dtype", "shapes", "median", "p90", "bias"), bmm_rows),
    ("Convolutions (DeepBench's 94 layers; backward = input + weight gradients)",
     ("table", "pass", "layers", "median", "p90", "bias"), conv_rows),
    ("PyTorch's scaled_dot_product_attention in bf16 (torch 2.11: its default ran cuDNN's "
     "kernels: its times matched the cuDNN backend forced; flash: the FlashAttention-2 backend "
     "forced), 2^19 query rows of 128-8192 tokens; all sequences, then those of 2048 tokens "
     "or more, and the median TFLOP/s these ran at and were predicted at (the H200's "
     "attention figure is TensorRT-LLM's, at head dimension 128)",
     ("backend", "head dim", "mask", "pass", "shapes", "median", "p90", "bias",
      "long: median", "p90", "bias", "long: TFLOP/s", "predicted"), sdpa_rows),
    ("Row-wise kernels (all shapes; then those of >= 2^22 elements)",
     ("dtype", "op", "model", "shapes", "median", "p90", "bias", "large: median", "p90",
      "bias"), rowwise_rows),
]


def main() -> int:
    print(f"On the lent H200 ({DEVICE}): the library's default against the tables of "
          "benchmarks/gpu_kernels.py (graphs=True)")
    for title, columns, rows in SECTIONS:
        print(f"\n{title}\n\n| {' | '.join(columns)} |\n|{'---|' * len(columns)}")
        print("\n".join(rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
