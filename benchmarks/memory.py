"""Predicted peak memory of a training step against published measured figures.

Each row below is a training run whose peak memory a primary source measured on a GPU,
with the setup the source states (model shape, batch, sequence length, dtype, optimizer,
checkpointing) and what it measured (allocator statistics or ``nvidia-smi``'s used
memory). The script builds the same model shape with random weights on the meta device
(no download), traces one training step with ``fake=True`` as close to the row's setup as
the library can, and predicts:

* for an allocator figure (``torch.cuda`` peak allocated/active bytes): the step's peak
  live tensor bytes (:func:`roofline.memory`) plus the block rounding and the cuBLAS
  workspace that :func:`roofline.fits` adds (both allocated through the caching
  allocator), no CUDA context;
* for ``nvidia-smi``'s used memory: :func:`roofline.fits`'s required bytes with the CUDA
  context the same source measured on the same machine (not a tuned figure).

The gap between reserved and allocated memory (segments, fragmentation) is not modelled
(see :func:`roofline.fits`), so ``nvidia-smi`` rows are expected to come out low. No
figure is tuned to a row; what a row's setup has that the trace does not is printed with
it. Rows whose setup the library cannot trace at all (LoRA adapters, 8-bit and paged
optimizers, ``torch.compile``, unpacked datasets of unstated length) are listed as left
out at the end.

Usage: ``python benchmarks/memory.py`` (about 1 minute on 2 cores).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import roofline

MiB = 1024**2
GiB = 1024**3

# --- the sources ----------------------------------------------------------------------

#: huggingface/transformers, docs/source/en/perf_train_gpu_one.mdx at
#: 98513dfd0db6dab00d26c1ef3a0e5f7410ce2035 (the rows also in model_memory_anatomy.md at
#: 7d5e65fe8a39e4a2c272f194d753dcfca5782b22): bert-large-uncased sequence classification
#: (2 labels), 512 random sequences of 512 tokens, Trainer defaults (AdamW, fp32), one
#: Tesla V100-SXM2 16GB (its nvidia-smi output is printed there), "GPU memory occupied"
#: = pynvml ``nvmlDeviceGetMemoryInfo(...).used // 1024**2`` after ``trainer.train()``.
HF = "HF perf_train_gpu_one.mdx@98513df"
#: Same page: ``torch.ones((1, 1)).to("cuda")`` alone -> "GPU memory occupied: 1343 MB"
#: (the CUDA context with its kernels loaded, on that machine).
HF_CONTEXT_BYTES = 1343 * MiB
#: pytorch/torchtune, README.md at 1814feb17a9038e1a8053ce93111bd26774a8db6, table
#: "Optimization flags": Llama 3.2 3B, recipe full_finetune_single_device, batch 2, max
#: seq len 4096, bf16, A100; "Peak Memory Active (GiB)" is
#: ``torch.cuda.memory_stats()["active_bytes.all.peak"]`` (torchtune/training/memory.py,
#: ``get_memory_stats``). Each row adds a technique to the one above it; the baseline uses
#: torch.optim.AdamW ("LoRA and QLoRA ... do not use optimizer_in_bwd or AdamW8bit", which
#: later rows add), no activation checkpointing, no compile, unchunked cross-entropy.
TT = "torchtune README.md@1814feb"

#: cuBLAS workspace before sm90 (V100, A100): ``4096 * 1024 * 2 + 16 * 1024 * 8`` bytes
#: (pytorch/pytorch aten/src/ATen/cuda/CublasHandlePool.cpp, see
#: roofline.analysis.memory.CUBLAS_WORKSPACE_BYTES, the sm90 figure).
WORKSPACE_PRE_SM90_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8


@dataclass(frozen=True)
class Row:
    """One published measurement and the step that reproduces it."""

    source: str
    row: str  # the row as the source names it
    model: str  # "bert-large-cls" | "llama3.2-3b"
    batch: int
    seq_len: int
    precision: str  # fp32 | amp (fp16 autocast, fp32 weights) | bf16 (weights and all)
    optimizer: str  # adamw | adafactor
    checkpointing: bool
    measured_bytes: int
    measured: str  # "nvidia-smi" (context + reserved) | "allocator" (peak active bytes)
    device: str
    differs: str  # what the run had that the traced step does not


_GA = "grad. accumulation 4 (the add into .grad not traced)"
_AMP = "GradScaler not traced"
ROWS = [
    Row(HF, "Vanilla Training, bs 4", "bert-large-cls", 4, 512, "fp32", "adamw", False,
        14949 * MiB, "nvidia-smi", "V100 SXM2 16GB", "reserved-allocated gap"),
    Row(HF, "Gradient Accumulation, bs 1 x 4", "bert-large-cls", 1, 512, "fp32", "adamw",
        False, 8681 * MiB, "nvidia-smi", "V100 SXM2 16GB", _GA),
    Row(HF, "Gradient Checkpointing, bs 1 x 4", "bert-large-cls", 1, 512, "fp32", "adamw",
        True, 6775 * MiB, "nvidia-smi", "V100 SXM2 16GB", _GA),
    Row(HF, "FP16 Training, bs 4", "bert-large-cls", 4, 512, "amp", "adamw", False,
        13939 * MiB, "nvidia-smi", "V100 SXM2 16GB", _AMP),
    Row(HF, "FP16 + GA + GC, bs 1 x 4", "bert-large-cls", 1, 512, "amp", "adamw", True,
        7275 * MiB, "nvidia-smi", "V100 SXM2 16GB", f"{_GA}; {_AMP}"),
    Row(HF, "Adafactor, bs 4", "bert-large-cls", 4, 512, "fp32", "adafactor", False,
        12295 * MiB, "nvidia-smi", "V100 SXM2 16GB", "reserved-allocated gap"),
    Row(HF, "Adafactor + FP16 + GA + GC, bs 1 x 4", "bert-large-cls", 1, 512, "amp",
        "adafactor", True, 4847 * MiB, "nvidia-smi", "V100 SXM2 16GB", f"{_GA}; {_AMP}"),
    Row(TT, "+ Packed Dataset (bs 2 x 4096)", "llama3.2-3b", 2, 4096, "bf16", "adamw", False,
        int(60.0 * GiB), "allocator", "A100 SXM 80GB",
        "HF LlamaForCausalLM, not torchtune's TransformerDecoder; SDPA (causal) for the "
        "packed block-causal mask"),
]

#: Rows of the same tables not reproduced, and why.
LEFT_OUT = [
    f"{TT} Baseline (25.5 GiB): unpacked alpaca, sequence lengths not stated",
    f"{TT} + Compile, + Chunked CE, + Activation Checkpointing, + Fuse optimizer step, "
    "+ Activation Offloading, + 8-bit AdamW: all with torch.compile, which the trace does "
    "not model (and offloading, optimizer-in-backward, bitsandbytes)",
    f"{TT} LoRA, QLoRA; the Llama 3.1 8B/70B/405B table: LoRA adapters, NF4 weights, "
    "PagedAdamW8bit, FSDP, CPU offload, epoch-long runs over unpacked data",
    f"{HF} 8-bit Adam rows (13085 MB, 5363 MB): bitsandbytes Adam8bit",
]


# --- the models -----------------------------------------------------------------------


class _Loss(torch.nn.Module):
    """A Hugging Face model called with ``labels``, returning its loss."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids=input_ids, labels=labels).loss


def _bert_large_cls(r: Row) -> tuple[Any, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertForSequenceClassification

    # bert-large-uncased's config.json: 24 x 1024, 16 heads, 4096 FFN, vocab 30522. The
    # 2022 BertSelfAttention wrote attention out (matmul, softmax, dropout, matmul); the
    # SDPA call traced with attention="eager" (see trace) records it so, with CUDA
    # autocast's fp32 softmax, which HF's own eager path traced under CPU autocast lacks
    sizes: dict[str, Any] = {"hidden_size": 1024, "num_hidden_layers": 24,
                             "num_attention_heads": 16, "intermediate_size": 4096,
                             "num_labels": 2, "attn_implementation": "sdpa"}
    config = BertConfig(**sizes)
    with torch.device("meta"):
        model = BertForSequenceClassification(config)
        ids = torch.randint(100, 30000, (r.batch, r.seq_len))
        labels = torch.randint(0, 2, (r.batch,))
    return model, (ids, labels)


def _llama32_3b(r: Row) -> tuple[Any, tuple[torch.Tensor, ...]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    # torchtune.models.llama3_2.llama3_2_3b (same commit): 28 layers, 3072 wide, 24 heads,
    # 8 KV heads, 8192 FFN, vocab 128256, tied embeddings, RoPE base 500000
    sizes: dict[str, Any] = {"hidden_size": 3072, "intermediate_size": 8192,
                             "num_hidden_layers": 28, "num_attention_heads": 24,
                             "num_key_value_heads": 8, "vocab_size": 128256,
                             "tie_word_embeddings": True, "rope_theta": 500000.0,
                             "max_position_embeddings": 131072, "attn_implementation": "sdpa"}
    config = LlamaConfig(**sizes)
    with torch.device("meta"):
        model: Any = LlamaForCausalLM(config)
        model = model.to(torch.bfloat16)
        ids = torch.randint(0, config.vocab_size, (r.batch, r.seq_len))
    return model, (ids, ids)


# the transformers models are typed Any: their config classes take keyword arguments the
# stubs do not declare
MODELS: dict[str, Callable[[Row], tuple[Any, tuple[torch.Tensor, ...]]]] = {
    "bert-large-cls": _bert_large_cls, "llama3.2-3b": _llama32_3b}


def _optimizer(r: Row, params: Any) -> torch.optim.Optimizer:
    if r.optimizer == "adafactor":
        from transformers.optimization import Adafactor

        # Trainer(optim="adafactor"): scale_parameter=False, relative_step=False, lr 5e-5
        return Adafactor(params, lr=5e-5, scale_parameter=False, relative_step=False)
    # HF rows: the 2022 Trainer's default "adamw_hf" looped over parameters (foreach=False);
    # torchtune: torch.optim.AdamW, foreach by default on CUDA
    return torch.optim.AdamW(params, lr=5e-5, foreach=r.source == TT)


def trace(r: Row) -> roofline.Trace:
    model, inputs = MODELS[r.model](r)
    if r.checkpointing:
        # the 2022 BertEncoder called torch.utils.checkpoint.checkpoint (reentrant) per layer
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    step = _Loss(model)
    optimizer = _optimizer(r, model.parameters())
    amp = (torch.autocast("cpu", dtype=torch.float16) if r.precision == "amp"
           else contextlib.nullcontext())
    with warnings.catch_warnings(), amp:
        warnings.simplefilter("ignore")
        return roofline.trace(step, *inputs, train=True, optimizer=optimizer, fake=True,
                              attention="eager" if r.model.startswith("bert") else "fused")


def predict(r: Row, t: roofline.Trace) -> int:
    context = HF_CONTEXT_BYTES if r.measured == "nvidia-smi" else 0
    fit = roofline.fits(t, r.device, context_bytes=context,
                        workspace_bytes=WORKSPACE_PRE_SM90_BYTES)
    return fit.required_bytes


def main() -> None:
    print(f"roofline {roofline.__version__}, torch {torch.__version__}; GiB = 2**30 bytes\n")
    header = ("| source | row | setup | measured | measured GiB | predicted GiB | error "
              "| peak at | not matched |")
    print(header)
    print("|---|---|---|---|---:|---:|---:|---|---|")
    errors = []
    for r in ROWS:
        start = time.perf_counter()
        t = trace(r)
        report = roofline.memory(t)
        predicted = predict(r, t)
        error = predicted / r.measured_bytes - 1
        errors.append(error)
        ckpt = ", checkpointing" if r.checkpointing else ""
        setup = f"{r.batch} x {r.seq_len}, {r.precision}, {r.optimizer}{ckpt}, {r.device}"
        where = f"{report.peak_phase} {report.peak_name.removeprefix('aten.')}"
        print(f"| {r.source} | {r.row} | {setup} | {r.measured} | "
              f"{r.measured_bytes / GiB:.2f} | {predicted / GiB:.2f} | {error:+.1%} | "
              f"{where} | {r.differs} |", flush=True)
        print(f"  traced in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    abs_errors = [abs(e) for e in errors]
    print(f"\n{len(errors)} rows: median |error| {statistics.median(abs_errors):.1%}, "
          f"max {max(abs_errors):.1%}")
    print("\nleft out:")
    for line in LEFT_OUT:
        print(f"- {line}")


if __name__ == "__main__":
    main()
