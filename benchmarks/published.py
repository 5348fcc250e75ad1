"""Predicted against published device-to-device speedups.

Reads ``published_throughput.csv`` from the shared validation folder (never copied into
this repository; ``--data`` or ``ROOFLINE_VALIDATION_CSV`` overrides the path), forms the
comparable pairs its README describes (same source, model, task, precision, metric, and
framework for NVIDIA's tables; batch for batch where a table measured each device at
several batches), builds the zoo's equivalent model for each covered
family at the published batch, precision and sequence length (fake tensors), traced as
the source ran it where its code says how (attention written out by NVIDIA's BERT and
Transformer, llama.cpp's prompt micro-batches, NVIDIA's SQuAD model and optimizers:
``benchmarks/recipes.py``; NVIDIA's PyTorch AMP ResNets, and TensorFlow's fp16 ones on
compute capability 7.0 and later, in NHWC: ``Workload.channels_last``), predicts
the speedup between the two devices, and prints each pair's predicted and measured
ratio, then the median and 90th-percentile error per source and precision. It also
predicts each row's absolute throughput (samples/s, or ms per iteration) against the
measured one. Rows whose workload the source does not publish in full (``NOT_COMPARABLE``)
are printed apart with their errors and left out of every statistic.

Every prediction is made six ways, each adding one physical effect to the one before
(the ablation says which effect moved which source's error):

1. ``datasheet``: datasheet peaks, launch overhead as a floor in the max (the classic
   roofline with a launch floor), no layout transposes;
2. ``+achievable``: the rates each device was measured to reach (registry ``achievable``
   figures, each cited; class defaults where a device has none);
3. ``+additive``: per-kernel overhead added to the transfer/compute time, and the DRAM
   latency of Little's law (``T = a + V / b``);
4. ``+layout``: cuDNN's NCHW <-> NHWC transposes around 16-bit channels-first
   convolutions;
5. ``+gemm shapes``: matmuls by the GEMM model fitted to the device's measured per-shape
   table, or its class's (``gemm_shapes``);
6. ``+passes`` (the library's default): softmax and layer norm with the passes PyTorch's
   GPU kernels make (``kernel_passes``).

No constant is tuned per model, device or pair, nor fitted to the validation file.

Usage: ``python benchmarks/published.py [--data PATH] [--efficiency 0.7] [--pairs]``
"""

from __future__ import annotations

import argparse
import datetime
import functools
import itertools
import json
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import recipes
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import roofline
from roofline.analysis.bands import BANDS_FILE, kind
from roofline.tracing import AttentionMode
from roofline.zoo import get_model

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "validation" / \
    "published_throughput.csv"


@dataclass(frozen=True)
class Workload:
    """A zoo model at one published configuration."""

    zoo: str
    task: str  # train | inference
    precision: str  # fp32 | amp | half
    batch: int
    seq_len: int | None = None
    # llama.cpp multiplies fp16 weights through cuBLAS with CUBLAS_COMPUTE_16F (fp16
    # accumulate; ggml-cuda's ggml_cuda_op_mul_mat_cublas): GeForce cards run that at
    # twice their fp32-accumulate tensor rate
    fp16_accumulate: bool = False
    # NVIDIA's PyTorch BERT and Transformer, which Lambda's PyTorch tables also run, write
    # attention out: matmul, softmax, dropout, matmul (BertSelfAttention in
    # PyTorch/LanguageModeling/BERT/modeling.py; strided_bmm1, softmax, dropout,
    # strided_bmm2 in PyTorch/Translation/Transformer/fairseq/modules/
    # multihead_attention.py, NVIDIA/DeepLearningExamples@1d4211fe9d94 and @48dc9adacd40)
    attention: AttentionMode = "fused"
    # NVIDIA's PyTorch ResNet-50 runs AMP in NHWC ("memory_format: nhwc" for every AMP
    # platform in PyTorch/Classification/ConvNets/configs.yml, NVIDIA/DeepLearningExamples
    # @097c7ff917b7); its TF32/FP32 runs and Lambda's (NCHW in their logs) are channels-first.
    # TensorFlow's code builds its ResNets channels-first too (NVIDIA's --data_format NCHW
    # until 2021-04: TensorFlow/Classification/ConvNets/utils/cmdline_helper.py @c4f90be49931;
    # tf_cnn_benchmarks' default), but its graph rewriter runs them NHWC where at least half
    # the GPUs have compute capability 7.0 or more and half the convolutions are fp16
    # (GetSrcAndDstDataFormats, tensorflow/core/grappler/optimizers/
    # generic_layout_optimizer.cc, NVIDIA/tensorflow@eaf50b258307, the TF 1.15 line of
    # NVIDIA's containers; TF 2.0 on: the TensorFlow team's note on tensorflow/tensorflow#26342)
    channels_last: bool = False
    # llama.cpp evaluates a prompt in micro-batches of this many tokens, each over the KV
    # cache of the ones before, and computes the last token's logits only (llama-bench's
    # pp test); None: the whole batch in one pass
    ubatch: int | None = None
    # BERT's head: "mlm" (pre-training) or "qa" (SQuAD's span head)
    head: str = "mlm"
    # NVIDIA's run_squad.py recipe ("dle-squad": apex amp O2 with FusedAdam in fp16,
    # BertAdam in fp32; benchmarks/recipes.py); None: autocast and AdamW(foreach)
    recipe: str | None = None
    # BERT's padding mask, added to every layer's scores: run_squad.py passes each
    # sequence's input_mask and NVIDIA's BertSelfAttention adds it before the softmax
    # ("attention_scores + attention_mask", PyTorch/LanguageModeling/BERT/modeling.py
    # @128ecbe4f8ee), one more pass over the scores in the model's dtype
    padding_mask: bool = False


#: Rows whose workload the source does not publish in full, by model: traced as the table
#: states them, they are shown with their errors but left out of every statistic.
NOT_COMPARABLE = {
    # NVIDIA/DeepLearningExamples@729963dd47e7, PyTorch/LanguageModeling/BERT/README.md,
    # changelog of January 2022: "Binned pretraining for phase2 with LDDL using a bin size
    # of 64": each batch is padded to its bin's length, not to 512, and the bins' mix of
    # Wikipedia's lengths is not published, so a trace at 512 counts work the run did not do
    "BERT-large pre-training (phase 2)": "phase 2 ran LDDL's binned batches (bins of 64 "
                                         "tokens, their mix unpublished), not 512 tokens",
}

#: llama.cpp's default micro-batch (``n_ubatch``) in the source's build
LLAMA_CPP_UBATCH = 512
#: ``--max_steps`` of Lambda's BERT SQuAD runs (the 14th argument of every
#: ``PyTorch_bert_*_squad_*_PARAMS`` in pytorch/scripts/config_v1 and config_v2,
#: lambdal/deeplearning-benchmark@aa5addb6a536)
LAMBDA_SQUAD_STEPS = 100

# family -> (zoo name, sequence length or None); rows of other families are skipped
FAMILIES: list[tuple[str, str, int | None]] = [
    (r"^ResNet-50", "resnet50", None),
    (r"^ResNet-152", "resnet152", None),
    (r"^BERT-base SQuAD", "bert-base", 384),
    (r"^BERT-large SQuAD", "bert-large", 384),
    (r"^BERT-large pre-training \(phase 1\)", "bert-large", 128),
    (r"^BERT-large pre-training \(phase 2\)", "bert-large", 512),
    (r"^Transformer-big", "transformer-big", 128),
    (r"^LLaMA-3-8B", "llama3-8b", None),
]


def family(model: str) -> tuple[str, int | None] | None:
    for pattern, zoo, seq in FAMILIES:
        if re.search(pattern, model):
            return zoo, seq
    return None


def precision_of(p: str) -> str:
    p = p.lower()
    if "amp" in p or p == "fp16" or "mixed" in p:
        return "amp"
    if "half" in p or "fp16 weights" in p:
        return "half"  # weights and activations in fp16 (llama.cpp F16)
    return "fp32"  # fp32 and tf32: TF32 is on by default in these sources' containers


def workload(row: pd.Series) -> Workload | None:
    fam = family(row.model)
    if fam is None or pd.isna(row.batch) or "int4" in row.precision:
        # the zoo has no 4-bit (GGUF Q4_K_M) kernels: traced in fp16 its weight bytes
        # would be 3.3x too high, so those llama.cpp rows count as not covered
        return None
    zoo, seq = fam
    batch = int(row.batch)
    prompt = zoo == "llama3-8b" and "generation" not in str(row.metric)
    if zoo == "llama3-8b":
        # generation: one new token per step, weights read once (the KV cache at <=1k
        # tokens is <1% of the bytes); prompt eval: the 1024-token prompt as llama.cpp ran
        # it (build 2843 in the source's notebooks, whose log prints "n_ubatch = 512" and
        # "flash_attn = 0"): two micro-batches of 512 tokens, the second over the first's
        # cache, attention written out (KQ, softmax, KQV)
        seq = 1024 if prompt else 1
    if zoo == "transformer-big" and seq:
        batch = max(1, batch // 2 // seq)  # token batch -> sentence pairs of src+tgt
    llama_cpp = "llama.cpp" in str(row.notes) or str(row.source).startswith("XiongjieDai")
    # NVIDIA's SQuAD fine-tuning (its own tables and Lambda's, which run its code) trains
    # BertForQuestionAnswering: the encoder and a 2-way span head, no MLM head
    squad = zoo.startswith("bert") and "SQuAD" in str(row.model)
    precision = precision_of(row.precision)
    nhwc = zoo.startswith("resnet") and precision == "amp" and (
        (str(row.source).startswith("NVIDIA") and "PyTorch" in str(row.framework))
        or ("TensorFlow" in str(row.framework) and _volta_or_later(str(row.device))))
    return Workload(zoo, row.task, precision, batch, seq,
                    fp16_accumulate=llama_cpp and precision == "half",
                    attention="eager" if zoo.startswith(("bert", "transformer")) or prompt
                    else "fused",
                    channels_last=nhwc, ubatch=LLAMA_CPP_UBATCH if prompt else None,
                    head="qa" if squad else "mlm", recipe="dle-squad" if squad else None,
                    padding_mask=squad)


# The sources' device spellings that the registry's lookup does not take as they are,
# mapped to registry entries by what the validation README says each machine is.
# Left out: V100 32GB (DGX-2H, a 450 W higher-clock part), M1 7-core GPU (a cut-down M1)
# and the dual Xeon E5-2630 v3: none is in the registry.
DEVICE_NAMES = {
    "LambdaCloud V100 16GB": "V100 SXM2 16GB", "V100 16GB (DGX-1)": "V100 SXM2 16GB",
    "V100 32GB (DGX-1)": "V100 SXM2 32GB", "V100 32GB (DGX-2)": "V100 SXM2 32GB",
    "LambdaCloud A10": "A10", "LambdaCloud A100 40GB PCIe": "A100 PCIe 40GB",
    "A100 80GB SXM4": "A100 SXM 80GB", "A100 80GB (DGX A100)": "A100 SXM 80GB",
    "A100 40GB (DGX A100)": "A100 SXM 40GB", "H100 80GB SXM5": "H100 SXM",
    "H100 80GB PCIe Gen5": "H100 PCIe", "3070 8GB": "RTX 3070", "3080 10GB": "RTX 3080",
    "3080 Ti 12GB": "RTX 3080 Ti", "3090 24GB": "RTX 3090", "4070 Ti 12GB": "RTX 4070 Ti",
    "4080 16GB": "RTX 4080", "4090 24GB": "RTX 4090", "RTX 4000 Ada 20GB": "RTX 4000 Ada",
    "RTX 5000 Ada 32GB": "RTX 5000 Ada", "RTX 6000 Ada 48GB": "RTX 6000 Ada",
    "RTX A6000 48GB": "RTX A6000", "A40 48GB": "A40", "L40S 48GB": "L40S",
    "Maxwell Titan X": "GTX TITAN X (Maxwell)", "Pascal Titan X": "TITAN X (Pascal)",
    "M1 Max 32-Core GPU 64GB": "Apple M1 Max", "M2 Ultra 76-Core GPU 192GB": "Apple M2 Ultra",
    "M3 Max 40-Core GPU 64GB": "Apple M3 Max",
    "H200 140GB SXM (LambdaBM_ENG04_1xH200_140GB_SXM_h200_v2)": "H200 SXM",
}


def device(name: str) -> roofline.DeviceSpec:
    return roofline.get_device(DEVICE_NAMES.get(name, name))


def _volta_or_later(name: str) -> bool:
    """Whether the device is an NVIDIA GPU of compute capability 7.0 or more (its ISA,
    ``sm_70`` on), where TensorFlow's layout optimizer runs fp16 convolutions NHWC."""
    try:
        sm = device(name).compute_capability
    except LookupError:  # a device not in the registry: its rows are skipped anyway
        return False
    return sm is not None and sm >= 70


_TRACES: dict[Workload, list[roofline.Trace]] = {}
#: Fields left out of a cached trace's file name at these values (caches before them match)
_DEFAULTS: dict[str, Any] = {"ubatch": None, "head": "mlm", "recipe": None,
                             "padding_mask": False}
#: Folder of traces saved as JSON by an earlier run (``--trace-cache``), or None.
TRACE_CACHE: Path | None = None


def traces(w: Workload) -> list[roofline.Trace]:
    """The workload's step, or its micro-batches in order (``ubatch``)."""
    if w in _TRACES:
        return _TRACES[w]
    parts = 1 if w.ubatch is None else -(-(w.seq_len or 1) // w.ubatch)
    cached: list[Path] = []
    if TRACE_CACHE is not None:
        # a field at its default stays out of the name, so earlier caches still match
        name = "-".join(str(v) for k, v in w.__dict__.items()
                        if v != _DEFAULTS.get(k, ...)).replace("/", "_")
        cached = [TRACE_CACHE / f"{name}{f'-part{i}' if parts > 1 else ''}"
                                f"-torch{torch.__version__}.json" for i in range(parts)]
        if all(c.exists() for c in cached):
            _TRACES[w] = [roofline.Trace.from_json(c.read_text()) for c in cached]
            return _TRACES[w]
    # progress on stderr: tracing the workloads is the slow part (minutes), the table is stdout
    print(f"tracing {w.zoo} {w.task} batch {w.batch} ({len(_TRACES) + 1} so far)...",
          file=sys.stderr, flush=True)
    model, inputs, optimizer, amp = build(w)
    train = w.task == "train"
    with warnings.catch_warnings(), amp, torch.set_grad_enabled(train):
        warnings.simplefilter("ignore")
        if w.ubatch is None:
            out = [roofline.trace(model, *inputs, train=train, optimizer=optimizer,
                                  fake=True, attention=w.attention)]
        else:
            out = [_micro_batch(model, w, i * w.ubatch) for i in range(parts)]
    _TRACES[w] = out
    for c, t in zip(cached, out, strict=False):
        c.parent.mkdir(parents=True, exist_ok=True)
        c.write_text(t.to_json())
    return out


def build(w: Workload, device: str | None = None,
          ) -> tuple[torch.nn.Module, tuple[Any, ...], torch.optim.Optimizer | None, Any]:
    """The workload's zoo model (on ``device``; the zoo's default if None), its inputs, its
    optimizer (None for inference) and the autocast context its step runs in."""
    kw: dict[str, Any] = {"batch_size": w.batch}
    if w.seq_len is not None:
        kw["seq_len"] = w.seq_len
    o2 = w.recipe == "dle-squad" and w.precision == "amp"  # apex O2: an fp16 model
    if w.precision == "half" or o2:
        kw["dtype"] = torch.float16
    if w.head != "mlm":
        kw["head"] = w.head
    if w.padding_mask:
        kw["padding_mask"] = True
    if device is not None or w.zoo.startswith("llama"):
        kw["device"] = device or "meta"
    zm = get_model(w.zoo, **kw)
    train = w.task == "train"
    if not train:
        zm.model.eval()
    inputs = zm.train_inputs if train else zm.inputs
    if w.channels_last:
        zm.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        inputs = tuple(x.to(memory_format=torch.channels_last)
                       if isinstance(x, torch.Tensor) and x.dim() == 4 else x for x in inputs)
    optimizer: torch.optim.Optimizer | None = None
    if train and w.recipe == "dle-squad":
        groups = recipes.squad_groups(zm.model)
        optimizer = recipes.ApexO2FusedAdam(groups) if o2 else recipes.BertAdam(groups)
    elif train:
        params = zm.model.parameters()
        optimizer = (torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True)
                     if "resnet" in w.zoo else torch.optim.AdamW(params, foreach=True))
    amp = torch.autocast("cpu", dtype=torch.float16, enabled=w.precision == "amp" and not o2)
    return zm.model, inputs, optimizer, amp


def _micro_batch(model: Any, w: Workload, filled: int) -> roofline.Trace:
    """One prompt micro-batch of ``w.ubatch`` tokens after ``filled`` cached ones, with
    the last token's logits only, on fake tensors."""
    tokens = min(w.ubatch or 1, (w.seq_len or 1) - filled)
    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
        cache = model.make_kv_cache(w.batch, filled + tokens, filled=filled, device="cpu")
        ids = torch.zeros(w.batch, tokens, dtype=torch.long)
        return roofline.trace(functools.partial(model, cache=cache, logits_to_keep=1), ids,
                              fake=True, attention=w.attention)


#: The four predictions, each adding one effect (module docstring), in order.
VARIANTS: dict[str, dict[str, Any]] = {
    "datasheet": {"peaks": "datasheet", "overhead_model": "max", "layout_transposes": False,
                  "gemm_shapes": False, "kernel_passes": False},
    "+achievable": {"overhead_model": "max", "layout_transposes": False,
                    "gemm_shapes": False, "kernel_passes": False},
    "+additive": {"layout_transposes": False, "gemm_shapes": False, "kernel_passes": False},
    "+layout": {"gemm_shapes": False, "kernel_passes": False},
    "+gemm shapes": {"kernel_passes": False},
    "+passes": {},
}
LAST = list(VARIANTS)[-1]

_SECONDS: dict[tuple[Workload, str, str], float] = {}
_ANALYSES: dict[tuple[Any, str], roofline.Analysis] = {}  # (workload, device) -> the default's
ROOT = Path(__file__).resolve().parent.parent


def seconds(w: Workload, device: roofline.DeviceSpec, opts: dict[str, Any],
            variant: str = LAST) -> float:
    key = (w, device.name, variant)
    if key not in _SECONDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", roofline.RooflineWarning)
            parts = [roofline.analyze(t, device, **opts, **VARIANTS[variant],
                                      fp16_accumulate=w.fp16_accumulate) for t in traces(w)]
        for a in parts:
            if a.unrated_flops_share > 0:  # part of the step has no published rate
                raise ValueError(a.assumptions[0])
        _SECONDS[key] = sum(a.seconds for a in parts)
        if variant == LAST:  # the kind of pair: the last (largest) micro-batch's bound
            _ANALYSES[(w, device.name)] = parts[-1]
    return _SECONDS[key]


def per_step(row: pd.Series, w: Workload) -> float | None:
    """The metric's units one traced step makes (images, sequences, tokens), or None
    for a metric with no per-step count (time to train)."""
    metric = str(row.metric)
    if "minutes" in metric:
        return None
    if "prompt eval" in metric:
        return float(w.seq_len or 1) * w.batch
    if w.zoo == "transformer-big":
        return float(row.batch)  # the table's batch is in tokens
    if w.recipe == "dle-squad" and str(row.source).startswith("Lambda"):
        # Lambda's run_squad.py (pytorch/scripts/patch/run_squad.py, lambdal/deeplearning-
        # benchmark@aa5addb6a536) breaks out of its loop once global_step > max_steps, so
        # it times max_steps + 1 steps (101: max_steps is 100 in its configs) and reports
        # train_batch_size x max_steps sequences over that time
        return float(w.batch) * LAMBDA_SQUAD_STEPS / (LAMBDA_SQUAD_STEPS + 1)
    return float(w.batch)


def absolute(row: pd.Series, w: Workload, d: roofline.DeviceSpec, opts: dict[str, Any],
             ) -> dict[str, float] | None:
    """Predicted over measured throughput - 1, per variant (> 0: predicted too fast)."""
    units = per_step(row, w)
    if units is None:
        return None
    out = {}
    for v in VARIANTS:
        s = seconds(w, d, opts, v)
        if "ms" in str(row.metric):  # a latency: measured ms over predicted ms
            out[v] = row.value / (s * 1e3) - 1
        else:
            out[v] = units / s / row.value - 1
    return out


def source_of(s: str) -> str:
    return s.split(" (")[0]


def throughput(value: float, metric: str) -> float:
    return 1.0 / value if ("ms" in metric or "minutes" in metric) else value


def run(path: Path, efficiency: float | None, show_pairs: bool) -> pd.DataFrame:
    df = pd.read_csv(path)
    df = df[~df.notes.fillna("").str.contains("SUSPECT")]
    df["src"] = df.source.map(source_of)
    keys = ["src", "model", "task", "precision", "metric"]
    rows: list[dict[str, Any]] = []
    skipped_model: set[str] = set()
    skipped_device: set[str] = set()
    absolutes: dict[Any, dict[str, Any]] = {}
    aside: list[dict[str, Any]] = []  # NOT_COMPARABLE rows' pairs, shown and not counted
    aside_absolutes: dict[Any, dict[str, Any]] = {}
    opts: dict[str, Any] = {"tf32_matmul": True, "tf32_conv": True}
    if efficiency is not None:
        opts["efficiency"] = efficiency
    for key, group in df.groupby(keys, sort=True):
        if group.src.str.startswith("NVIDIA").any():
            subgroups = [g for _, g in group.groupby("framework")]
        else:
            subgroups = [group]
        for g in subgroups:
            # a table that measured each device at several batches (NVIDIA's inference
            # tables: 1, 8, 64, 256) is compared batch for batch: across batches a pair
            # would test batch scaling, not the device swap
            per_batch = bool(g.device.duplicated().any())
            for (_, a), (_, b) in itertools.combinations(g.iterrows(), 2):
                if per_batch and a.batch != b.batch:
                    continue
                wa, wb = workload(a), workload(b)
                if wa is None or wb is None:
                    skipped_model.add(f"{a.model} {a.precision}" if "int4" in a.precision
                                      else a.model)
                    continue
                try:
                    da, db = device(a.device), device(b.device)
                except LookupError:
                    for r in (a, b):
                        try:
                            device(r.device)
                        except LookupError:
                            skipped_device.add(r.device)
                    continue
                if da.name == db.name:
                    continue
                try:
                    sa, sb = seconds(wa, da, opts), seconds(wb, db, opts)
                except ValueError:  # a device with no published peak for the dtype
                    for r, d in ((a, da), (b, db)):
                        try:
                            seconds(wa if r is a else wb, d, opts)
                        except ValueError:
                            skipped_device.add(f"{r.device} (no published {r.precision} peak)")
                    continue
                measured = throughput(b.value, b.metric) / throughput(a.value, a.metric)
                row: dict[str, Any] = {
                    "source": key[0], "model": key[1], "task": key[2], "precision": key[3],
                    "metric": key[4], "A": a.device, "B": b.device, "batch_A": a.batch,
                    "batch_B": b.batch, "measured": measured}
                for v in VARIANTS:
                    sa, sb = seconds(wa, da, opts, v), seconds(wb, db, opts, v)
                    row[f"pred {v}"] = (wb.batch / sb) / (wa.batch / sa)
                    row[f"err {v}"] = row[f"pred {v}"] / measured - 1
                row["predicted"], row["error"] = row[f"pred {LAST}"], row[f"err {LAST}"]
                row["kind"] = kind(_ANALYSES[(wa, da.name)], _ANALYSES[(wb, db.name)])
                apart = key[1] in NOT_COMPARABLE
                (aside if apart else rows).append(row)
                found = aside_absolutes if apart else absolutes
                for r, w, d in ((a, wa, da), (b, wb, db)):
                    if r.name not in found and (e := absolute(r, w, d, opts)) is not None:
                        found[r.name] = {"source": key[0], "model": key[1],
                                         "precision": key[3], "device": d.name, **e}
    out = pd.DataFrame(rows)
    out.attrs["absolute"] = pd.DataFrame(list(absolutes.values()))
    if skipped_model:
        print("families or precisions the zoo does not cover (skipped): "
              f"{', '.join(sorted(skipped_model))}")
    if skipped_device:
        print(f"devices not in the registry (skipped): {', '.join(sorted(skipped_device))}")
    _not_counted(aside, list(aside_absolutes.values()))
    if show_pairs:
        with pd.option_context("display.max_rows", None, "display.width", 200):
            print(out[["source", "model", "precision", "A", "B", "predicted", "measured",
                       "error"]].round(3).to_string(index=False))
    return out


def _not_counted(pairs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Print the NOT_COMPARABLE models' pairs and rows, with their errors as traced."""
    for model, why in NOT_COMPARABLE.items():
        speedups = [f"{r['A']} -> {r['B']} {r['error']:+.0%}" for r in pairs
                    if r["model"] == model]
        alone = [f"{r['device']} {r[LAST]:+.0%}" for r in rows if r["model"] == model]
        if speedups or alone:
            print(f"{model}: not counted, {why}; as traced, speedup "
                  f"{'; '.join(speedups) or '-'}, absolute {'; '.join(alone) or '-'}")


def summary(out: pd.DataFrame) -> None:
    errs = [f"err {v}" for v in VARIANTS]
    short = out.assign(src=out.source.str.slice(0, 40))
    absd = short[errs].abs()
    table = absd.groupby([short.src, short.precision]).agg(["median"])
    table.columns = [c[0].removeprefix("err ") for c in table.columns]
    table.insert(0, "pairs", short.groupby(["src", "precision"]).size())
    print("\nspeedup: median |error| per source and precision, each column adding one effect")
    print(table.round(3).to_string())
    print(f"\nspeedup, all {len(out)} pairs (targets: median <= 10%, p90 <= 25%)")
    for v in VARIANTS:
        e = out[f"err {v}"].abs()
        print(f"  {v:<12} median |error| {e.median():6.1%}   p90 {np.percentile(e, 90):6.1%}")
    ab = out.attrs["absolute"]
    if len(ab):
        ab = ab.assign(src=ab.source.str.slice(0, 40))
        t2 = ab.groupby(["src", "precision"])[list(VARIANTS)].agg(
            lambda x: x.abs().median())
        t2.insert(0, "rows", ab.groupby(["src", "precision"]).size())
        print("\nabsolute throughput: median |predicted / measured - 1| per source and "
              "precision")
        print(t2.round(3).to_string())
        print(f"\nabsolute, all {len(ab)} rows (target: median |error| <= 15%, issue 23); "
              "signed median > 0: predicted faster than measured")
        for v in VARIANTS:
            print(f"  {v:<12} median |error| {ab[v].abs().median():6.1%}   "
                  f"signed median {ab[v].median():+6.1%}   p90 "
                  f"{np.percentile(ab[v].abs(), 90):6.1%}")
    print("\nper-device bias: b(B) - b(A) fitted to log(predicted / measured) over all pairs "
          "(least squares, mean 0);\n> 0: the model makes this device look faster "
          "than it measured")
    bias = device_bias(out)
    print(", ".join(f"{name} {b:+.2f}" for name, b in bias.items()))


def bands(out: pd.DataFrame) -> dict[str, Any]:
    """Per kind of pair (roofline.analysis.bands.kind): the pairs and the 10th and 90th
    percentiles of predicted / measured speedup."""
    ratio = out.predicted / out.measured
    kinds = {k: {"pairs": len(r), "p10": round(float(np.percentile(r, 10)), 4),
                 "p90": round(float(np.percentile(r, 90)), 4)}
             for k, r in ratio.groupby(out.kind)}
    return {"source": f"benchmarks/published.py, {len(out)} device pairs of "
                      f"../shared/validation/published_throughput.csv, run "
                      f"{datetime.date.today().isoformat()} (roofline {roofline.__version__})",
            "kinds": dict(sorted(kinds.items()))}


def device_bias(out: pd.DataFrame) -> dict[str, float]:
    """Per-device log bias of the predictions, from pairs only (a diagnostic, not a fit used)."""
    a = out.A.map(lambda n: device(n).name)
    b = out.B.map(lambda n: device(n).name)
    names = sorted(set(a) | set(b))
    col = {n: i for i, n in enumerate(names)}
    design = np.zeros((len(out) + 1, len(names)))
    for row, (na, nb) in enumerate(zip(a, b, strict=True)):
        design[row, col[nb]] += 1
        design[row, col[na]] -= 1
    design[-1] = 1  # only differences are identified: fix the mean at 0
    target = np.r_[np.log((out.predicted / out.measured).to_numpy()), 0.0]
    fit = np.linalg.lstsq(design, target, rcond=None)[0]
    return dict(sorted(zip(names, fit.tolist(), strict=True), key=lambda kv: kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("ROOFLINE_VALIDATION_CSV", DEFAULT)))
    parser.add_argument("--efficiency", type=float, default=None,
                        help="one fraction for every device and roof, applied to the "
                             "rates of each variant (measured or datasheet)")
    parser.add_argument("--pairs", action="store_true", help="print every pair")
    parser.add_argument("--write-bands", action="store_true",
                        help=f"write the error bands to {BANDS_FILE.relative_to(ROOT)}")
    parser.add_argument("--trace-cache", type=Path, default=None,
                        help="folder to keep the traces in between runs (JSON)")
    args = parser.parse_args()
    global TRACE_CACHE
    TRACE_CACHE = args.trace_cache
    if not args.data.exists():
        raise SystemExit(f"no validation data at {args.data} (pass --data)")
    out = run(args.data, args.efficiency, args.pairs)
    summary(out)
    found = bands(out)
    print("\nerror bands (predicted / measured speedup) per kind of pair:")
    for k, b in found["kinds"].items():
        print(f"  {k:<30} {b['pairs']:4d} pairs   p10 {b['p10']:.3f}   p90 {b['p90']:.3f}")
    if args.write_bands:
        BANDS_FILE.parent.mkdir(exist_ok=True)
        BANDS_FILE.write_text(json.dumps(found, indent=1) + "\n")
        print(f"wrote {BANDS_FILE}")


if __name__ == "__main__":
    main()
