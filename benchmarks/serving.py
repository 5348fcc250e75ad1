"""Serving predictions against measurements: decode-sized kernels, llama.cpp and TensorRT-LLM.

Three parts, each printing its rows and then the median and 90th-percentile error:

1. ``ops``: the per-op prediction of decode-sized GEMMs (m = 1..64 tokens) and of decode
   attention against measured per-shape tables, under CUDA graphs as they were measured:
   AIConfigurator's ``gemm_perf`` and ``generation_attention_perf`` (A100, H100, H200, B200)
   and vidur's Llama-2 GEMM profiles (A100, H100). The extracts are in
   ``benchmarks/data/`` (README there), each row with its source. The attention rows are
   also split, per device and batch, into a fixed cost per call and the rate the cache
   streams at (a line through time against cache bytes), measured and predicted: the
   check of the bytes-in-flight model (``roofline.analysis.inflight``).
2. ``llamacpp``: llama.cpp's LLaMA-3 F16 rows of the shared validation file
   (``../shared/validation/published_throughput.csv``, never copied here; ``--data`` or
   ``ROOFLINE_VALIDATION_CSV`` overrides the path): generation of 1024 tokens at batch 1
   (a decode from an empty context) and a 1024-token prompt (as llama.cpp ran it: two
   512-token micro-batches, ``prefill_chunk``, attention written out), predicted with
   ``roofline.serve`` on the zoo's Llama at batch 1. Q4_K_M rows are left out (no 4-bit
   kernels are modelled).
3. ``trtllm``: TensorRT-LLM's static-batch tables (``benchmarks/data/published_serving.csv``:
   v0.9.0, v0.6.1 and the H200 launch blog), output tokens/s per GPU and first-token latency
   at batch 1, FP8 rows as FP8 weights, activations and KV cache
   (``weight_dtype``/``kv_dtype``). Rows on 2-8 GPUs are traced with their
   ``tensor_parallel`` size (the model split by transformers' own plan, the all-reduces
   costed on NVLink) and their errors are reported apart from the one-GPU rows.

Every serving prediction is made two ways, no constant tuned: ``eager`` (every ATen op of
the PyTorch step a kernel, as the library predicts by default) and ``graphs`` (the same
kernels launched from CUDA graphs, ``graphs=True``). Device-to-device ratio errors (pairs
of rows of one table that differ in the device) are reported apart from absolute errors.

Usage: ``python benchmarks/serving.py [--part ops|llamacpp|trtllm] [--data PATH] [--quick]``
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

import roofline
from roofline.zoo import get_model

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SHARED = HERE.parents[1] / "shared" / "validation" / "published_throughput.csv"
VARIANTS: dict[str, dict[str, Any]] = {"eager": {}, "graphs": {"graphs": True}}


def errors(pred_over_meas: pd.Series) -> str:
    """``median |e| 12.3%, p90 40.1%, signed median +5.0% (n rows)`` of ratios - 1."""
    e = pred_over_meas.to_numpy(float) - 1
    if not len(e):
        return "no rows"
    return (f"median |error| {np.median(np.abs(e)):6.1%}, p90 {np.percentile(np.abs(e), 90):6.1%}"
            f", signed median {np.median(e):+6.1%} ({len(e)} rows)")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Every warning silenced: the rows say what the analyses assumed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- 1. decode-sized kernels -----------------------------------------------------------------

def _linear(m: int, n: int, k: int) -> roofline.Trace:
    x = torch.empty(m, k, dtype=torch.bfloat16, device="meta")
    w = torch.empty(n, k, dtype=torch.bfloat16, device="meta")
    return roofline.trace(lambda x, w: F.linear(x, w), x, w, fake=True)


def _attention(batch: int, heads: int, kv_heads: int, head_dim: int,
               kv_len: int) -> roofline.Trace:
    """One decode step's attention as the zoo's Llama runs it: the query heads that share
    a K/V head stacked as rows, over ``kv_len`` cached keys and values."""
    q = torch.empty(batch, kv_heads, heads // kv_heads, head_dim, dtype=torch.bfloat16,
                    device="meta")
    k = torch.empty(batch, kv_heads, kv_len, head_dim, dtype=torch.bfloat16, device="meta")
    v = torch.empty_like(k)
    return roofline.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v,
                          fake=True)


def _kernel(kind: str, row: Any) -> tuple[tuple[Any, ...], Callable[[], roofline.Trace]]:
    """A table row's kernel: its key, and how to trace it."""
    if kind == "gemm":
        return ("gemm", row.m, row.n, row.k), functools.partial(_linear, row.m, row.n, row.k)
    shape = (row.batch, row.num_heads, row.kv_heads, row.head_dim, row.kv_len)
    return ("attn", *shape), functools.partial(_attention, *shape)


def kernels() -> None:
    """Part 1: predicted over measured time of each decode-sized kernel."""
    traces: dict[tuple[Any, ...], roofline.Trace] = {}
    frames = []
    for name, path, kind in (("AIConfigurator GEMM", "aic_decode_gemm.csv", "gemm"),
                             ("vidur GEMM", "vidur_decode_gemm.csv", "gemm"),
                             ("AIConfigurator attention", "aic_decode_attention.csv", "attn")):
        df = pd.read_csv(DATA / path)
        pred = []
        for row in df.itertuples():
            key, make = _kernel(kind, row)
            with quiet():
                if key not in traces:
                    traces[key] = make()
                pred.append(roofline.analyze(traces[key], str(row.device),
                                             graphs=True).seconds * 1e6)
        df["predicted_us"] = pred
        df["ratio"] = df.predicted_us / df.latency_us
        df["table"] = name
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    for col in ("m", "batch", "kv_len"):
        out[col] = out[col].astype("Int64")
    print("== 1. decode-sized kernels: predicted / measured time, under CUDA graphs "
          "(graphs=True)")
    grouped = out.groupby(["table", "device"]).ratio
    table = pd.DataFrame({"rows": grouped.size(), "median": grouped.median(),
                          "p10": grouped.quantile(0.1), "p90": grouped.quantile(0.9)})
    print(table.round(2).to_string())
    gemm = out[out.table != "AIConfigurator attention"]
    by_m = gemm.groupby(["device", "m"]).ratio.median().unstack()
    print("\nGEMM predicted / measured, median over shapes, by m (tokens):")
    print(by_m.round(2).to_string())
    attn = out[out.table == "AIConfigurator attention"]
    print("\nattention (32 query / 8 KV heads of 128, bf16 cache), predicted / measured:")
    print(attn.pivot_table(index=["batch", "kv_len"], columns="device", values="ratio")
          .round(2).to_string())
    print("\nattention split into a fixed cost per call and the rate the cache streams at (a "
          "line through each device and batch's rows: time = fixed + cache bytes / rate):")
    print(_streaming(attn).round(2).to_string())
    for table_name, part in out.groupby("table"):
        print(f"  {table_name}: {errors(part.ratio)}")


def _streaming(attn: pd.DataFrame) -> pd.DataFrame:
    """Per device and batch, the least-squares line of time against K/V bytes read, for
    the measured and the predicted times: its slope as TB/s, its intercept as µs."""
    rows = []
    for (device, batch), g in attn.groupby(["device", "batch"]):
        cache = (g.batch * g.kv_heads * g.kv_len * g.head_dim * 2 * 2).to_numpy(float)
        row: dict[str, Any] = {"device": device, "batch": batch}
        for name, col in (("measured", "latency_us"), ("predicted", "predicted_us")):
            slope, fixed = np.polyfit(cache, g[col].to_numpy(float), 1)
            row[f"{name} TB/s"] = 1e-6 / slope
            row[f"{name} fixed µs"] = fixed
        rows.append(row)
    return pd.DataFrame(rows).set_index(["device", "batch"])


# --- serving predictions -------------------------------------------------------------------

_TRACES: dict[tuple[Any, ...], roofline.ServingTrace] = {}


def serving_trace(model: str, builder: Callable[[], torch.nn.Module], **kw: Any,
                  ) -> roofline.ServingTrace:
    key = (model, *sorted(kw.items()))
    if key not in _TRACES:
        start = time.perf_counter()
        with quiet():
            _TRACES[key] = roofline.trace_serving(builder(), **kw)
        print(f"  traced {model} {kw} in {time.perf_counter() - start:.1f} s",
              file=sys.stderr, flush=True)
    return _TRACES[key]


def predict(st: roofline.ServingTrace, device: str, metric: str,
            **options: Any) -> dict[str, float]:
    """The metric on ``device`` for each variant, or NaN where the device has no rate for
    the FLOPs of a compute-bound metric (Apple GPUs list fp32 only). Tokens/s "per GPU"
    divide the group's by its tensor-parallel size."""
    out = {}
    for variant, extra in VARIANTS.items():
        with quiet():
            s = roofline.serve(st, device, capacity=False, **options, **extra)
        unrated = s.prefill.unrated_flops_share > 0
        if metric.startswith("TTFT"):
            out[variant] = np.nan if unrated else s.ttft_seconds * 1e3
        elif "prompt" in metric:
            out[variant] = np.nan if unrated else s.prefill_tokens_per_s
        elif "per GPU" in metric:
            out[variant] = s.output_tokens_per_s / st.tensor_parallel
        else:
            out[variant] = s.output_tokens_per_s
    return out


def pairs(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Every two rows of one table that differ in the device: predicted over measured
    ratio of their values (a latency's ratio inverted), per variant."""
    out = []
    for _, group in rows.groupby(keys):
        for (_, a), (_, b) in itertools.combinations(group.iterrows(), 2):
            if a.device == b.device:
                continue
            latency = str(a.metric).startswith("TTFT")
            measured = (a.value / b.value) if latency else (b.value / a.value)
            row = {"A": a.device, "B": b.device, **{k: a[k] for k in keys},
                   "measured": measured}
            for v in VARIANTS:
                predicted = (a[v] / b[v]) if latency else (b[v] / a[v])
                row[f"pred {v}"] = predicted
                row[f"ratio {v}"] = predicted / measured
            out.append(row)
    return pd.DataFrame(out)


def report(rows: pd.DataFrame, keys: list[str], title: str) -> None:
    rows = rows.dropna(subset=list(VARIANTS))
    for v in VARIANTS:
        rows[f"ratio {v}"] = rows[v] / rows.value
    show = ["device", *[k for k in keys if k != "metric"], "metric", "value",
            *(["fits"] if "fits" in rows else []), *VARIANTS,
            *[f"ratio {v}" for v in VARIANTS]]
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(rows[show].round(3).to_string(index=False))
    print(f"\n{title}: absolute error (predicted / measured - 1; > 0: more tokens/s, or a "
          "longer first-token latency, than measured)")
    for (metric,), part in rows.groupby(["metric"]):
        for v in VARIANTS:
            print(f"  {metric:<26} {v:<7} {errors(part[f'ratio {v}'])}")
    p = pairs(rows, keys)
    print(f"\n{title}: device-to-device ratio error (predicted ratio / measured ratio - 1),"
          f" {len(p)} pairs")
    if len(p):
        for (metric,), part in p.groupby(["metric"]):
            for v in VARIANTS:
                print(f"  {metric:<26} {v:<7} {errors(part[f'ratio {v}'])}")
        with pd.option_context("display.width", 200, "display.max_rows", None):
            cols = ["A", "B", *keys, "measured", *[f"pred {v}" for v in VARIANTS]]
            print(p[cols].round(3).to_string(index=False))


# --- 2. llama.cpp ----------------------------------------------------------------------------

LLAMA3_70B: dict[str, Any] = {"dim": 8192, "n_layers": 80, "n_heads": 64, "n_kv_heads": 8,
                               "hidden_dim": 28672}


def zoo_llama(sizes: dict[str, Any]) -> torch.nn.Module:
    """The zoo's Llama-3-8B with ``sizes`` changed (70B: :data:`LLAMA3_70B`), on meta."""
    model: torch.nn.Module = get_model("llama3-8b", device="meta", **sizes).model
    return model


def llama_cpp(path: Path, quick: bool) -> None:
    """Part 2: llama.cpp's LLaMA-3 F16 rows, batch 1."""
    # the validation file's device spellings, and llama.cpp's micro-batch
    from published import DEVICE_NAMES, LLAMA_CPP_UBATCH

    df = pd.read_csv(path)
    df = df[df.source.str.startswith("XiongjieDai") & (df.precision == "fp16 weights")
            & ~df.notes.fillna("").str.contains("SUSPECT")].copy()
    if quick:
        df = df[df.model == "LLaMA-3-8B"]
    rows = []
    for r in df.itertuples():
        name = DEVICE_NAMES.get(r.device, r.device)
        try:
            device = roofline.get_device(name).name
        except LookupError:
            print(f"  skipped {r.device}: not in the registry", file=sys.stderr)
            continue
        sizes = {} if r.model == "LLaMA-3-8B" else LLAMA3_70B
        generation = "generation" in r.metric
        # a prompt as llama.cpp ran it (build 2843: n_ubatch = 512, flash_attn = 0, as
        # published.py traces it): micro-batches over the cache, attention written out
        prompt = {} if generation else {"prefill_chunk": LLAMA_CPP_UBATCH,
                                        "attention": "eager"}
        st = serving_trace(r.model, functools.partial(zoo_llama, sizes),
                           prompt_tokens=1 if generation else 1024,
                           new_tokens=1024 if generation else 1, dtype="fp16", **prompt)
        # llama.cpp multiplies F16 weights with cuBLAS in fp16 accumulate
        # (ggml-cuda's ggml_cuda_op_mul_mat_cublas: CUBLAS_COMPUTE_16F)
        pred = predict(st, device, r.metric, fp16_accumulate=True)
        rows.append({"device": device, "model": r.model, "metric": r.metric,
                     "value": r.value, **pred})
    print("\n== 2. llama.cpp, LLaMA-3 F16, batch 1 (XiongjieDai/GPU-Benchmarks-on-LLM-Inference"
          "@aa72e0ec86c3): tokens/s predicted and measured")
    report(pd.DataFrame(rows), ["model", "metric"], "llama.cpp")


# --- 3. TensorRT-LLM ---------------------------------------------------------------------------

HF_SIZES: dict[str, dict[str, Any]] = {
    "LLaMA-2-7B": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 32},
    "LLaMA-2-13B": {"hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
                    "num_attention_heads": 40, "num_key_value_heads": 40},
    "LLaMA-2-70B": {"hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                    "num_attention_heads": 64, "num_key_value_heads": 8},
    # Mistral 7B is Llama-shaped with GQA 32/8 and a 14336 SwiGLU; its 4096-token sliding
    # window never binds at these lengths (<= 4096 tokens)
    "Mistral-7B": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8},
}


def hf_model(model: str) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, max_position_embeddings=4096, **HF_SIZES[model])
    with torch.device("meta"):
        return LlamaForCausalLM(config)


def trtllm(quick: bool) -> None:
    """Part 3: TensorRT-LLM's static-batch tables, on one GPU and tensor-parallel."""
    df = pd.read_csv(DATA / "published_serving.csv")
    if quick:
        df = df[~df.model.str.contains("70B|13B")]
    rows = []
    for r in df.itertuples():
        fp8 = r.precision == "fp8"
        ttft = str(r.metric).startswith("TTFT")
        st = serving_trace(str(r.model), functools.partial(hf_model, str(r.model)),
                           prompt_tokens=r.input_len,
                           new_tokens=1 if ttft else r.output_len, batch=r.batch,
                           dtype="fp16", kv_dtype="fp8" if fp8 else None,
                           weight_dtype="fp8" if fp8 else None, tensor_parallel=int(str(r.tp)))
        with quiet():
            fits = roofline.fits(st.decode_step(st.batch), str(r.device)).fits
        rows.append({"device": r.device, "version": r.version, "model": r.model,
                     "precision": r.precision, "tp": r.tp, "batch": r.batch,
                     "isl": r.input_len,
                     "osl": r.output_len, "metric": r.metric, "value": r.value,
                     "fits": fits, **predict(st, str(r.device), str(r.metric))})
    out = pd.DataFrame(rows)
    print("\n== 3. TensorRT-LLM static batch (gptSessionBenchmark), one GPU")
    report(out[out.tp == 1], ["version", "model", "isl", "osl", "metric"], "TensorRT-LLM")
    print("\n== 3b. TensorRT-LLM static batch, tensor parallel over 2-8 GPUs")
    report(out[out.tp > 1], ["version", "model", "tp", "isl", "osl", "metric"],
           "TensorRT-LLM tensor parallel")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("ops", "llamacpp", "trtllm"), action="append",
                        help="run only these parts (repeatable; default all three)")
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("ROOFLINE_VALIDATION_CSV", SHARED)),
                        help="the shared validation file (llama.cpp rows)")
    parser.add_argument("--quick", action="store_true",
                        help="leave out the 13B and 70B models (minutes less)")
    args = parser.parse_args()
    parts = args.part or ["ops", "llamacpp", "trtllm"]
    start = time.perf_counter()
    if "ops" in parts:
        kernels()
    if "llamacpp" in parts:
        if args.data.exists():
            llama_cpp(args.data, args.quick)
        else:
            print(f"\n== 2. llama.cpp: no validation data at {args.data} (pass --data); "
                  "skipped")
    if "trtllm" in parts:
        trtllm(args.quick)
    print(f"\n(ran in {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
