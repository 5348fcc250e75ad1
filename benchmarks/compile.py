"""What torch.compile buys, predicted against published measurements, and what a compiled
trace costs to make.

    python benchmarks/compile.py            # both tables (about 10 minutes on 2 cores)
    python benchmarks/compile.py --cost     # the tracing-cost table only
    python benchmarks/compile.py --validation
    python benchmarks/compile.py --fused    # the shared file's fused-implementation rows

Validation rows (each: eager prediction, compiled prediction, their ratio, the same with
``compile={"regional": True}`` (each repeated block compiled on its own, as torchtitan and
torchtune compile), the published speedup). Every row is a training step traced on fake
tensors under bf16 autocast, eager and with ``trace(..., compile=True)``, and predicted on
the named GPU by ``roofline.compare(eager, compiled, device)``:

* torchtune, Llama 3.2 3B full fine-tune, one A100, bf16, batch 2 x 4096 tokens, AdamW:
  7,075 -> 8,998 tokens/s (pytorch/torchtune@1814feb:README.md, lines 110-122); torchtune
  compiles each layer and the loss;
* torchtitan, Llama 3.1 8B, FSDP2 on 8 H100s (96 GB HBM2e, 500 W), local batch 2 x 8192,
  selective activation checkpointing, per-block compile: 5,762 -> 6,667 tokens/s per GPU
  (pytorch/torchtitan@820504e:benchmarks/llama3_h100_202412_torchtitan.md, lines 23-29).
  Predicted as one GPU's step on the registry's H100 SXM: neither FSDP's communication
  nor the checkpointing's recomputation is in the prediction;
* the PyTorch 2.0 announcement: training on an A100, AMP, 1.51x over 163 models (the
  mean of three suites; pytorch/pytorch.github.io@01a1591c:_get_started/pytorch.md),
  set beside the geometric mean of the zoo's models predicted here (forward, backward and
  AdamW; the published runs have no optimizer, so the same rows without it are given);
* the inductor dashboard (pytorch/pytorch#96191, A100, AMP, forward and backward, no
  optimizer, inductor without CUDA graphs): GPT2ForSequenceClassification batch 4, 2.23x,
  and BERT_pytorch batch 16, 1.69x. Sequence lengths are not stated there: ours are the
  zoo's defaults (GPT-2 1024, BERT 128), and the models are the zoo's, not the suites'.
  The suites' eager models of March 2023 write attention out (transformers' GPT2Attention
  ``_attn``: matmul, softmax, dropout, matmul; BERT_pytorch's ``Attention``), so their
  eager step is traced with ``attention="eager"``; compiled, inductor keeps SDPA's kernel.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from typing import Any

import torch

import roofline
from roofline.zoo.registry import get_model

LLAMA32_3B = dict(dim=3072, n_layers=28, n_heads=24, n_kv_heads=8, hidden_dim=8192)

#: (label, zoo name, overrides, device, optimizer, eager attention, published
#: compiled/eager speedup, source)
ROWS: list[tuple[str, str, dict[str, Any], str, bool, str, float, str]] = [
    ("Llama 3.2 3B, bs 2 x 4096", "llama3-8b", dict(LLAMA32_3B, batch_size=2, seq_len=4096),
     "a100", True, "fused", 8998 / 7075, "torchtune README"),
    ("Llama 3.1 8B, bs 2 x 8192", "llama3-8b", dict(batch_size=2, seq_len=8192), "h100", True,
     "fused", 6667 / 5762, "torchtitan (FSDP, 8 GPUs)"),
    ("GPT-2 small, bs 4 x 1024", "gpt2", dict(batch_size=4), "a100", False, "eager", 2.2287,
     "pytorch#96191 (HF GPT2ForSeqCls)"),
    ("BERT base, bs 16 x 128", "bert-base", dict(batch_size=16), "a100", False, "eager",
     1.6863, "pytorch#96191 (BERT_pytorch)"),
]

#: The zoo models of the PyTorch 2.0 comparison (training, A100, AMP).
ZOO = ["gpt2", "bert-base", "resnet50", "mobilenet", "mlp", "vit-b16"]


def traced(name: str, overrides: dict[str, Any], optimizer: bool,
           compile: bool | dict[str, Any], attention: str = "fused",
           ) -> tuple[roofline.Trace, float]:
    zm = get_model(name, device="meta", **overrides)
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True) if optimizer else None
    loss = None if name.startswith("llama") else _loss
    start = time.perf_counter()
    with warnings.catch_warnings(), torch.autocast("cpu", dtype=torch.bfloat16):
        warnings.simplefilter("ignore")
        extra: dict[str, Any] = {"attention": attention} if not compile else {}
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                           loss_fn=loss, fake=True, compile=compile, **extra)
    return t, time.perf_counter() - start


def _loss(out: Any) -> torch.Tensor:
    from roofline.presentation.cli import _scalar_loss

    return _scalar_loss(out)


def validation() -> None:
    print("| row | device | eager ms | compiled ms | predicted | regional | published | "
          "error | source |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    errors = []
    for label, name, overrides, device, optimizer, attention, published, source in ROWS:
        eager, _ = traced(name, overrides, optimizer, False, attention)
        compiled, _ = traced(name, overrides, optimizer, True)
        regional, _ = traced(name, overrides, optimizer, {"regional": True})
        c = roofline.compare(eager, compiled, device)
        r = roofline.compare(eager, regional, device)
        error = c.speedup / published - 1
        errors.append(abs(error))
        print(f"| {label} | {c.src.device.name} | {c.src.seconds * 1e3:.1f} | "
              f"{c.dst.seconds * 1e3:.1f} | {c.speedup:.2f}x | {r.speedup:.2f}x | "
              f"{published:.2f}x | {error:+.0%} | {source} |", flush=True)
    print(f"\nmedian |error| {sorted(errors)[len(errors) // 2]:.0%} over {len(errors)} rows "
          "(whole-model compile)")
    print("\n| zoo model (A100, bf16) | with AdamW | forward+backward only |")
    print("|---|---:|---:|")
    means: dict[bool, list[float]] = {True: [], False: []}
    for name in ZOO:
        cells = []
        for optimizer in (True, False):
            eager, _ = traced(name, {}, optimizer, False)
            try:
                compiled, _ = traced(name, {}, optimizer, True)
            except roofline.CompileError as e:
                cells.append(f"refused: {str(e)[:60]}...")
                continue
            speedup = roofline.compare(eager, compiled, "a100").speedup
            means[optimizer].append(speedup)
            cells.append(f"{speedup:.2f}x")
        print(f"| {name} | {cells[0]} | {cells[1]} |", flush=True)
    geo = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in means.items()}
    print(f"| geometric mean | {geo[True]:.2f}x | {geo[False]:.2f}x |")
    print("| PyTorch 2.0, 163 models, AMP (published) | | 1.51x |")


def fused_rows() -> None:
    """The shared validation file's rows whose implementations fuse (NVIDIA's PyTorch BERT,
    with APEX's fused LayerNorm, bias-GELU, softmax and LAMB/Adam, timed by NVIDIA and by
    Lambda): measured throughput beside the eager and the compiled prediction."""
    import os
    from pathlib import Path

    import pandas as pd

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import published

    path = Path(os.environ.get("ROOFLINE_VALIDATION_CSV", published.DEFAULT))
    if not path.exists():
        print(f"(no validation file at {path}: set ROOFLINE_VALIDATION_CSV)")
        return
    df = pd.read_csv(path)
    df = df[df.model.str.startswith("BERT") & (df.task == "train")
            & df.precision.str.lower().str.contains("amp|mixed|fp16")
            & ~df.notes.fillna("").str.contains("SUSPECT")
            & (df.framework.fillna("").str.contains("PyTorch")
               | df.source.str.startswith("lambdal/deeplearning-benchmark"))]
    print("| source | model | device | batch | measured | eager | compiled | eager error | "
          "compiled error |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    errors: dict[str, list[float]] = {"eager": [], "compiled": []}
    compiled: dict[Any, roofline.Trace] = {}
    for _, row in df.iterrows():
        w = published.workload(row)
        units = published.per_step(row, w) if w is not None else None
        try:
            spec = published.device(row.device)
        except LookupError:
            continue
        if w is None or units is None or "ms" in str(row.metric):
            continue
        if w not in compiled:
            compiled[w] = _compiled_workload(w)
        eager_s = published.seconds(w, spec, {"tf32_matmul": True})
        compiled_s = roofline.analyze(compiled[w], spec, tf32_matmul=True).seconds
        cells = []
        for name, s in (("eager", eager_s), ("compiled", compiled_s)):
            errors[name].append(abs(units / s / row.value - 1))
            cells.append(units / s)
        print(f"| {published.source_of(row.source)[:28]} | {row.model} | {spec.name} | "
              f"{w.batch} | {row.value:.1f} | {cells[0]:.1f} | {cells[1]:.1f} | "
              f"{cells[0] / row.value - 1:+.0%} | {cells[1] / row.value - 1:+.0%} |",
              flush=True)
    for name, e in errors.items():
        if e:
            print(f"{name}: median |error| {sorted(e)[len(e) // 2]:.1%} over {len(e)} rows")


def _compiled_workload(w: Any) -> roofline.Trace:
    """A published.Workload traced with compile=True: the model, optimizer and precision
    published.build gives its eager trace; attention is the flash kernel inductor keeps,
    where the eager trace writes it out as NVIDIA's code does."""
    import published

    model, inputs, optimizer, amp = published.build(w, device="meta")
    print(f"tracing {w.zoo} batch {w.batch} compiled...", file=sys.stderr, flush=True)
    with warnings.catch_warnings(), amp:
        warnings.simplefilter("ignore")
        return roofline.trace(model, *inputs, train=True, optimizer=optimizer, compile=True)


def cost() -> None:
    print("| step | eager trace s | compiled trace s | ratio | kernels | regional s | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, name in [("GPT-2 small, bs 8 x 1024", "gpt2"),
                        ("Llama 2 7B, bs 1 x 2048", "llama-7b")]:
        _, te = traced(name, {}, True, False)
        compiled, tc = traced(name, {}, True, True)
        _, tr = traced(name, {}, True, {"regional": True})
        kernels = sum(1 for op in compiled.ops if op.fused)
        print(f"| {label} | {te:.1f} | {tc:.1f} | {tc / te:.1f}x | {kernels} | {tr:.1f} | "
              f"{tr / te:.1f}x |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", action="store_true", help="the tracing-cost table only")
    parser.add_argument("--validation", action="store_true", help="the validation only")
    parser.add_argument("--fused", action="store_true",
                        help="only the shared validation file's fused-implementation rows")
    args = parser.parse_args(argv)
    if args.fused:
        fused_rows()
        return 0
    if not args.validation:
        cost()
        print()
    if not args.cost:
        validation()
        print()
        fused_rows()
    return 0


if __name__ == "__main__":
    sys.exit(main())
