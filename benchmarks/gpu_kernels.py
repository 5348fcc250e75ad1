"""Measure per-shape kernel tables on a lent GPU, in the formats of ``benchmarks/data/kernels``.

What the public tables lack, measured in one short run on the device at hand:

* GEMMs (``torch.mm``) in fp32 with TF32 off (the SIMT path PyTorch runs by default), in
  TF32, bf16 and fp16, one shared set of shapes: LLM projections and a log-uniform sample;
* batched GEMMs (``torch.bmm``) in fp32 and bf16, attention-like shapes;
* convolutions of DeepBench's 94 layers (read from the T4 table here), forward, input
  gradient and weight gradient, in fp32 as PyTorch runs it (cuDNN TF32 on), fp32 strict and
  fp16 channels-last, with ``cudnn.benchmark`` on as NVIDIA's training scripts set it;
* row-wise kernels (layer norm and its backward, RMS norm, softmax and its backward,
  log-softmax, GELU, add, cross-entropy) in bf16 and fp32, rows x columns, with the kernels
  each ran;
* AdamW steps (``foreach`` and ``fused``) over lists of parameters;
* ``F.scaled_dot_product_attention`` in bf16, forward and forward with backward, under
  PyTorch's own choice of backend and each of the flash, cuDNN and memory-efficient
  backends forced, head dims 64 and 128, sequences of 128 to 8192, causal or not;
* GEMMs with one dimension off a multiple of 8 elements, and GPT-2's LM head with its
  vocabulary of 50257 and padded to 50304 (bf16 and TF32);
* a sustained fp32 and bf16 GEMM for a few seconds each, with the SM clock and power that
  ``nvidia-smi`` sampled meanwhile (``smi.csv``).

Each time is one kernel: ``calls`` launches captured in a CUDA graph (operands rotated
among enough copies to exceed the L2 cache), the median of ``replays`` replays timed with
CUDA events, divided by ``calls``; random normal operands, never zeros. Writes
``kernels.tar.gz`` (one CSV per table) under ``--out``. ``--device cpu --quick`` is a dry
run of the same code with a few tiny shapes and host timers. Needs only torch.

Usage: ``python benchmarks/gpu_kernels.py [--device cuda] [--quick] [--out DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import itertools
import math
import os
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

DATA = Path(__file__).parent / "data" / "kernels"
#: Rotate operand copies until they exceed this many bytes (the H200's L2 is 60 MB).
ROTATE_BYTES = 256 << 20
SMI_FIELDS = ("timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,"
              "clocks_event_reasons.active")
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
          "fp16": torch.float16}


class Timer:
    """Seconds of one call of ``fn``, on the GPU from graph replays, on the CPU by wall clock."""

    def __init__(self, device: str, calls: int = 10, replays: int = 5) -> None:
        self.cuda = device.startswith("cuda")
        self.calls, self.replays = calls, replays

    def __call__(self, fn: Callable[..., object], sets: Sequence[tuple[Any, ...]]) -> float:
        for args in sets[:2]:  # warm-up: cuBLAS handles, cuDNN autotuning
            fn(*args)
        if not self.cuda:
            begin = time.perf_counter()
            for i in range(self.calls):
                fn(*sets[i % len(sets)])
            return (time.perf_counter() - begin) / self.calls
        torch.cuda.synchronize()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(self.calls):
                    fn(*sets[i % len(sets)])
            run: Callable[[], object] = graph.replay
        except RuntimeError:  # not capturable: time the launches themselves
            torch.cuda.synchronize()

            def run() -> None:
                for i in range(self.calls):
                    fn(*sets[i % len(sets)])
        run()
        torch.cuda.synchronize()
        times = []
        for _ in range(self.replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / self.calls)
        return float(np.median(times))


def _copies(bytes_per_set: int, device: str) -> int:
    if not device.startswith("cuda"):
        return 1
    return max(1, min(8, math.ceil(ROTATE_BYTES / max(bytes_per_set, 1))))


def _set_tf32(dtype: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"


def gemm_shapes(quick: bool) -> list[tuple[int, int, int]]:
    """LLM projections (Llama-2-7B/70B, GPT-2, BERT) at several token counts, then a
    log-uniform sample of m, n, k in [16, 16384]."""
    if quick:
        return [(64, 64, 64), (128, 256, 64), (1, 512, 256)]
    projections = [(4096, 4096), (4096, 11008), (11008, 4096), (4096, 12288), (8192, 28672),
                   (28672, 8192), (768, 2304), (768, 3072), (3072, 768), (1024, 4096),
                   (768, 50257)]
    shapes = [(m, n, k) for m in (1, 16, 128, 1024, 8192) for k, n in projections]
    rng = np.random.default_rng(0)
    for _ in range(120):
        m, n, k = (int(v) for v in np.exp(rng.uniform(math.log(16), math.log(16384), 3)))
        shapes.append((m, n, k))
    return shapes


def gemm_table(dtype: str, device: str, timer: Timer, quick: bool) -> list[dict[str, Any]]:
    _set_tf32(dtype)
    rows = []
    cap = 4e11 if dtype in ("fp32", "tf32") else 4e12  # FLOPs per call: a few ms at most
    for m, n, k in gemm_shapes(quick):
        if 2 * m * n * k > cap:
            continue
        t = DTYPES[dtype]
        size = (m * k + k * n + m * n) * t.itemsize
        sets = [(torch.randn(m, k, device=device, dtype=t), torch.randn(k, n, device=device,
                                                                        dtype=t))
                for _ in range(_copies(size, device))]
        rows.append({"m": m, "n": n, "k": k, "seconds": timer(torch.mm, sets)})
    _set_tf32("fp32")
    return rows


def alignment_table(dtype: str, device: str, timer: Timer, quick: bool,
                    ) -> list[dict[str, Any]]:
    """One GEMM with m, n or k moved off a multiple of 8 elements by 1, 2, 4 or 8, B plain
    or transposed (``torch.mm(a, b.t())``, as ``F.linear`` passes its weight); then GPT-2's
    LM head (8192 tokens x 768 x the vocabulary) as autograd runs its three GEMMs, with the
    vocabulary of 50257 and padded to 50304 as nanoGPT pads it."""
    _set_tf32(dtype)
    t = DTYPES[dtype]
    base = 64 if quick else 4096
    shapes = [(base, base, base, layout) for layout in ("nn", "nt")]
    for axis in range(3):
        for offset in (1, 2, 4, 8):
            for layout in ("nn", "nt"):
                m, n, k = (base + offset * (axis == i) for i in range(3))
                shapes.append((m, n, k, layout))
    rows = []
    for m, n, k, layout in shapes:
        b_shape = (n, k) if layout == "nt" else (k, n)
        sets = [(torch.randn(m, k, device=device, dtype=t),
                 torch.randn(*b_shape, device=device, dtype=t)) for _ in range(2)]
        fn = (lambda a, b: torch.mm(a, b.t())) if layout == "nt" else torch.mm
        rows.append({"case": "offset", "layout": layout, "m": m, "n": n, "k": k,
                     "seconds": timer(fn, sets)})
    tokens, width = (64, 32) if quick else (8192, 768)
    for vocab in ((50, 56) if quick else (50257, 50304)):
        x = torch.randn(tokens, width, device=device, dtype=t)
        w = torch.randn(vocab, width, device=device, dtype=t)
        dy = torch.randn(tokens, vocab, device=device, dtype=t)
        for case, fn, args in (("lm_head_forward", lambda a, b: torch.mm(a, b.t()), (x, w)),
                               ("lm_head_dgrad", torch.mm, (dy, w)),
                               ("lm_head_wgrad", lambda a, b: torch.mm(a.t(), b), (dy, x))):
            rows.append({"case": case, "layout": "", "m": tokens, "n": vocab, "k": width,
                         "seconds": timer(fn, [args])})
    _set_tf32("fp32")
    return rows


def bmm_table(dtype: str, device: str, timer: Timer, quick: bool) -> list[dict[str, Any]]:
    shapes = ([(4, 32, 32, 16)] if quick else
              [(b, s, s, d) for b in (12, 96, 384) for s in (128, 512, 1024, 2048)
               for d in (64, 128)] +
              [(b, s, d, s) for b in (12, 96) for s in (512, 2048) for d in (64, 128)])
    t = DTYPES[dtype]
    rows = []
    for b, m, n, k in shapes:
        if 2 * b * m * n * k > (4e11 if dtype == "fp32" else 4e12):
            continue
        size = b * (m * k + k * n + m * n) * t.itemsize
        sets = [(torch.randn(b, m, k, device=device, dtype=t),
                 torch.randn(b, k, n, device=device, dtype=t))
                for _ in range(_copies(size, device))]
        rows.append({"batch": b, "m": m, "n": n, "k": k, "seconds": timer(torch.bmm, sets)})
    return rows


SDPA_BACKENDS = ("default", "flash", "cudnn", "efficient")


def _sdpa_fn(backend: str, backward: bool, causal: bool) -> Callable[..., object]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    chosen = {"flash": [SDPBackend.FLASH_ATTENTION], "cudnn": [SDPBackend.CUDNN_ATTENTION],
              "efficient": [SDPBackend.EFFICIENT_ATTENTION]}.get(backend)

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> object:
        with contextlib.nullcontext() if chosen is None else sdpa_kernel(chosen):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            if backward:
                return torch.autograd.grad(out, (q, k, v), g)
            return out
    return run


def _kernel_names(fn: Callable[..., object], args: tuple[Any, ...]) -> str:
    """The GPU kernels one call of ``fn`` runs (which backend PyTorch chose)."""
    if not args[0].is_cuda:
        return ""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    # kernels only: the events with time on the device (the runtime's API calls have none)
    names = {e.key for e in prof.key_averages()
             if getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) > 0}
    return "; ".join(sorted(n[:60] for n in names))[:400]


def sdpa_table(device: str, timer: Timer, quick: bool) -> list[dict[str, Any]]:
    """bf16 attention: (batch x heads) query heads of ``seq`` tokens against as many keys,
    about 2^19 rows of queries in all (2^10 in the dry run)."""
    rows = []
    seqs = (16, 32) if quick else (128, 256, 512, 1024, 2048, 4096, 8192)
    for d, s, causal in itertools.product((64, 128), seqs, (False, True)):
        heads = 16 if d == 64 else 8
        batch = max(1, (2**10 if quick else 2**19) // (s * heads))
        t = torch.bfloat16 if device.startswith("cuda") else torch.float32
        size = 4 * batch * heads * s * d * t.itemsize
        sets = [tuple(torch.randn(batch, heads, s, d, device=device, dtype=t,
                                  requires_grad=i < 3) for i in range(4))
                for _ in range(_copies(size, device))]
        for backend, backward in itertools.product(SDPA_BACKENDS, (False, True)):
            fn = _sdpa_fn(backend, backward, causal)
            try:
                seconds = timer(fn, sets)
            except RuntimeError as exc:  # a backend that does not take these shapes
                seconds, note = float("nan"), str(exc).splitlines()[0][:80]
            else:
                note = _kernel_names(fn, sets[0]) if backend == "default" else ""
            rows.append({"backend": backend, "backward": int(backward), "causal": int(causal),
                         "batch": batch, "heads": heads, "seq": s, "head_dim": d,
                         "seconds": seconds, "note": note})
    return rows


def conv_layers(quick: bool) -> list[dict[str, int]]:
    """DeepBench's 94 layers as the T4 fp32 table in this repository lists them."""
    with gzip.open(DATA / "conv_deepbench_t4_fp32.csv.gz", "rt") as f:
        layers = [{k: int(v) for k, v in r.items() if not k.endswith("_seconds")}
                  for r in csv.DictReader(f)]
    return layers[:2] if quick else layers


def _conv_passes(dy: torch.Tensor, stride: tuple[int, int], pad: tuple[int, int],
                 ) -> dict[str, Callable[[torch.Tensor, torch.Tensor], object]]:
    def backward(a: torch.Tensor, b: torch.Tensor, mask: tuple[bool, bool, bool]) -> object:
        return torch.ops.aten.convolution_backward(dy, a, b, None, stride, pad, (1, 1), False,
                                                   (0, 0), 1, mask)

    return {"forward": lambda a, b: F.conv2d(a, b, stride=stride, padding=pad),
            "dgrad": lambda a, b: backward(a, b, (True, False, False)),
            "wgrad": lambda a, b: backward(a, b, (False, True, False))}


def conv_table(dtype: str, device: str, timer: Timer, quick: bool) -> list[dict[str, Any]]:
    """``fp32`` as PyTorch runs it (cuDNN may use TF32), ``fp32_strict`` with TF32 off for
    cuDNN, ``fp16`` channels-last."""
    torch.backends.cudnn.allow_tf32 = dtype != "fp32_strict"
    torch.backends.cudnn.benchmark = True
    t = torch.float16 if dtype == "fp16" else torch.float32
    fmt = torch.channels_last if dtype == "fp16" else torch.contiguous_format
    rows = []
    for layer in conv_layers(quick):
        n, c, h, w, k, r, s = (layer[x] for x in "nchwkrs")
        stride, pad = (layer["stride_h"], layer["stride_w"]), (layer["pad_h"], layer["pad_w"])
        x = torch.randn(n, c, h, w, device=device, dtype=t).to(memory_format=fmt)
        wt = torch.randn(k, c, r, s, device=device, dtype=t).to(memory_format=fmt)
        y = F.conv2d(x, wt, stride=stride, padding=pad)
        dy = torch.randn_like(y)
        out: dict[str, Any] = dict(layer)
        for name, fn in _conv_passes(dy, stride, pad).items():
            try:
                out[f"{name}_seconds"] = timer(fn, [(x, wt)])
            except RuntimeError as exc:
                print(f"  conv {layer} {name}: {exc}"[:200])
                out[f"{name}_seconds"] = ""
        rows.append(out)
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = False
    return rows


def _rowwise_fn(op: str, rows: int, cols: int, t: torch.dtype, device: str,
                ) -> tuple[Callable[..., object], Callable[[], tuple[Any, ...]]]:
    def x() -> torch.Tensor:
        return torch.randn(rows, cols, device=device, dtype=t)

    weight = torch.randn(cols, device=device, dtype=t)
    bias = torch.randn(cols, device=device, dtype=t)
    if op == "layer_norm":
        return (lambda a: F.layer_norm(a, (cols,), weight, bias)), lambda: (x(),)
    if op == "layer_norm_backward":
        def ln_args() -> tuple[Any, ...]:
            a = x()
            _, mean, rstd = torch.ops.aten.native_layer_norm(a, (cols,), weight, bias, 1e-5)
            return x(), a, mean, rstd

        return (lambda g, a, mean, rstd: torch.ops.aten.native_layer_norm_backward(
            g, a, (cols,), mean, rstd, weight, bias, (True, True, True))), ln_args
    if op == "rms_norm":
        return (lambda a: F.rms_norm(a, (cols,), weight)), lambda: (x(),)
    if op == "softmax":
        return (lambda a: torch.softmax(a, dim=-1)), lambda: (x(),)
    if op == "softmax_backward":
        return (lambda g, y: torch.ops.aten._softmax_backward_data(g, y, -1, t)), \
            lambda: (x(), torch.softmax(x(), dim=-1))
    if op == "log_softmax":
        return (lambda a: torch.log_softmax(a, dim=-1)), lambda: (x(),)
    if op == "gelu":
        return F.gelu, lambda: (x(),)
    if op == "add":
        return torch.add, lambda: (x(), x())
    if op == "cross_entropy":
        def ce_args() -> tuple[Any, ...]:
            return x(), torch.randint(0, cols, (rows,), device=device)

        return F.cross_entropy, ce_args
    raise ValueError(op)


ROWWISE_OPS = ("layer_norm", "layer_norm_backward", "rms_norm", "softmax", "softmax_backward",
               "log_softmax", "gelu", "add", "cross_entropy")


def rowwise_shapes(op: str, quick: bool) -> list[tuple[int, int]]:
    if quick:
        return [(8, 64), (64, 256)]
    widths = ((32000, 50257, 128256) if op == "cross_entropy" else
              (128, 512, 768, 1024, 2048, 4096, 8192))
    counts = (1, 8, 64, 512, 4096, 32768) if op == "cross_entropy" else \
        (1, 16, 128, 1024, 8192, 65536)
    return [(r, c) for r in counts for c in widths if r * c <= 1 << 28]


def rowwise_table(dtype: str, device: str, timer: Timer, quick: bool) -> list[dict[str, Any]]:
    t = DTYPES[dtype]
    out = []
    for op in ROWWISE_OPS:
        for rows, cols in rowwise_shapes(op, quick):
            fn, make = _rowwise_fn(op, rows, cols, t, device)
            sets = [make() for _ in range(_copies(rows * cols * t.itemsize * 2, device))]
            out.append({"op": op, "rows": rows, "cols": cols, "dtype": dtype,
                        "seconds": timer(fn, sets), "kernels": _kernel_names(fn, sets[0])})
    return out


def adamw_table(device: str, timer: Timer, quick: bool) -> list[dict[str, Any]]:
    """One AdamW step (fp32 parameters) over ``tensors`` tensors of ``numel`` elements."""
    layouts = [(4, 256)] if quick else [(1, 1 << 20), (1, 1 << 26), (148, 1 << 20),
                                        (1000, 1 << 16), (4000, 1 << 12), (200, 1 << 19)]
    rows = []
    for tensors, numel in layouts:
        for impl in ("foreach", "fused"):
            if impl == "fused" and not device.startswith("cuda"):
                continue
            params = [torch.nn.Parameter(torch.randn(numel, device=device))
                      for _ in range(tensors)]
            for p in params:
                p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW(params, lr=1e-4, capturable=device.startswith("cuda"),
                                    foreach=impl == "foreach", fused=impl == "fused")
            opt.step()  # the state
            rows.append({"tensors": tensors, "numel": numel, "impl": impl,
                         "seconds": timer(opt.step, [()])})
            del opt, params
    return rows


def sustained(device: str, seconds: float) -> list[dict[str, Any]]:
    """Back-to-back 8192^3 GEMMs (fp32 SIMT, then bf16) for ``seconds`` each, the rate per
    half second: whether the chip holds its clock under a dense GEMM."""
    if not device.startswith("cuda"):
        return []
    out = []
    size = 8192
    for dtype in ("fp32", "bf16"):
        _set_tf32(dtype)
        a = torch.randn(size, size, device=device, dtype=DTYPES[dtype])
        b = torch.randn(size, size, device=device, dtype=DTYPES[dtype])
        torch.mm(a, b)
        torch.cuda.synchronize()
        begin = time.time()
        while time.time() - begin < seconds:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            count = 0
            start.record()
            t0 = time.time()
            while time.time() - t0 < 0.5:
                torch.mm(a, b)
                count += 1
                if count % 4 == 0:
                    torch.cuda.synchronize()
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1e3
            out.append({"dtype": dtype, "unix_s": round(time.time(), 2),
                        "flops_per_s": 2 * size**3 * count / elapsed})
    _set_tf32("fp32")
    return out


def _csv(rows: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue().encode()


def _smi(out: Path) -> subprocess.Popen[bytes] | None:
    older = SMI_FIELDS.replace("clocks_event_reasons", "clocks_throttle_reasons")
    for fields in (SMI_FIELDS, older):
        try:
            proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv",
                                     "-lms", "200"], stdout=(out / "smi.csv").open("wb"),
                                    stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            return None
        time.sleep(1.0)
        if proc.poll() is None:
            return proc
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="a few tiny shapes: a dry run")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--sustained-seconds", type=float, default=6.0)
    parser.add_argument("--only", nargs="*", help="run only the tables whose names start so")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cuda = args.device.startswith("cuda")
    smi = _smi(args.out) if cuda else None
    timer = Timer(args.device)
    name = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"{name}, torch {torch.__version__}", flush=True)
    tables: dict[str, list[dict[str, Any]]] = {}
    jobs: list[tuple[str, Callable[[], list[dict[str, Any]]]]] = [
        *[(f"alignment_{d}", lambda d=d: alignment_table(d, args.device, timer, args.quick))
          for d in ("bf16", "tf32")],
        ("sustained", lambda: sustained(args.device, args.sustained_seconds)),
        *[(f"gemm_{d}", lambda d=d: gemm_table(d, args.device, timer, args.quick))
          for d in ("fp32", "tf32", "bf16", "fp16")],
        *[(f"bmm_{d}", lambda d=d: bmm_table(d, args.device, timer, args.quick))
          for d in ("fp32", "bf16")],
        *[(f"rowwise_{d}", lambda d=d: rowwise_table(d, args.device, timer, args.quick))
          for d in ("bf16", "fp32")],
        ("adamw_fp32", lambda: adamw_table(args.device, timer, args.quick)),
        ("sdpa_bf16", lambda: sdpa_table(args.device, timer, args.quick)),
        *[(f"conv_{d}", lambda d=d: conv_table(d, args.device, timer, args.quick))
          for d in ("fp32", "fp32_strict", "fp16")],
    ]
    if args.only:
        jobs = [(label, job) for label, job in jobs if label.startswith(tuple(args.only))]
    start = time.perf_counter()
    for label, job in jobs:
        t0 = time.perf_counter()
        try:
            tables[label] = job()
        except Exception as exc:  # report and go on: the device time is short
            print(f"{label}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        print(f"{label}: {len(tables[label])} rows in {time.perf_counter() - t0:.1f} s",
              flush=True)
        with tarfile.open(args.out / "kernels.tar.gz", "w:gz") as tar:
            for key, rows in tables.items():
                data = _csv(rows)
                info = tarfile.TarInfo(f"{key}.csv")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    if smi is not None:
        smi.terminate()
    print(f"done in {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
