"""Predicted multi-GPU speedup of data-parallel training against published measurements.

Each row is a published training throughput of one model on N GPUs of one system and on
one GPU of it, with the same per-GPU batch (weak scaling, as both sources run it). The
script builds the same model shape on the meta device, as ``published.py`` traces its
source (NVIDIA's SQuAD model and optimizers, which Lambda's runs use too; NVIDIA's ResNet-50
AMP in NHWC), traces one fake training step on one GPU and one rank of a DDP step
(``roofline.trace(..., parallel="ddp")``, re-costed for each N: DDP's buckets do not depend
on N), and predicts the speedup N x t(1 GPU) / t(N GPUs) with :func:`roofline.parallel`.
Nothing is tuned to a row. The error is that of the predicted speedup against the measured
one (throughput on N over throughput on 1).

Sources (read with the fetch tool at the commits named; the numbers are transcribed below):

* lambdal/deeplearning-benchmark@aa5addb6a53675a649a80036dad548f1c27cbcc4
  ``pytorch/pytorch-train-throughput-fp16.csv`` and ``-fp32.csv`` (samples/s by system,
  e.g. "8x A100 80GB SXM4") and ``pytorch/pytorch-train-bs-fp16.csv`` / ``-fp32.csv``
  (the global batch, N x the per-GPU batch). Their runs are NVIDIA DeepLearningExamples'
  scripts (ResNet-50 on ImageNet, BERT SQuAD fine-tuning at sequence length 384).
* NVIDIA/DeepLearningExamples@729963dd47e7c8bd462ad10bfac7a7b0b604e6dd
  ``PyTorch/Classification/ConvNets/resnet50v1.5/README.md`` ("Training performance:
  NVIDIA DGX A100 (8x A100 80GB)", "DGX-1 16GB (8x V100 16GB)"; batch 256 a GPU, 112 for
  FP32 on V100, from ``PyTorch/Classification/ConvNets/configs.yml``) and
  ``PyTorch/LanguageModeling/BERT/README.md`` ("Fine-tuning NVIDIA DGX A100", "Fine-tuning
  NVIDIA DGX-1 With 32G", SQuAD: batch 32 a GPU on A100, 8 (FP32) / 16 (AMP) on V100).

Usage: ``python benchmarks/scaling.py`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

import published
import torch

import roofline

LAMBDA = "lambdal/deeplearning-benchmark@aa5addb:pytorch/pytorch-train-throughput-{}.csv"
DLE_RN50 = ("NVIDIA/DeepLearningExamples@729963d:PyTorch/Classification/ConvNets/"
            "resnet50v1.5/README.md")
DLE_BERT = "NVIDIA/DeepLearningExamples@729963d:PyTorch/LanguageModeling/BERT/README.md"


@dataclass(frozen=True)
class Row:
    """One published pair of throughputs: 1 GPU and N GPUs, the same per-GPU batch."""

    source: str
    model: str  # zoo name
    precision: str  # "amp" (fp16 autocast), "tf32", "fp32"
    system: str  # as the source names it
    device: str  # registry name
    gpus: int
    batch: int  # per GPU
    one_gpu: float  # samples/s
    n_gpus: float  # samples/s

    @property
    def measured(self) -> float:
        return self.n_gpus / self.one_gpu


def _lambda(model: str, precision: str, system: str, device: str, batch: int,
            rates: tuple[float, float, float, float]) -> list[Row]:
    """Lambda's 1, 2, 4 and 8 GPU throughputs of one system as three rows."""
    src = LAMBDA.format("fp16" if precision == "amp" else "fp32")
    return [Row(src, model, precision, system, device, n, batch, rates[0], rate)
            for n, rate in zip((2, 4, 8), rates[1:], strict=True)]


ROWS: list[Row] = [
    # resnet50 column; batch = pytorch-train-bs-*.csv at 1 GPU (= N-GPU batch / N)
    *_lambda("resnet50", "amp", "A100 80GB SXM4", "A100 SXM 80GB", 1280,
             (1582, 3038, 6070, 11439)),
    *_lambda("resnet50", "amp", "H100 80GB SXM5", "H100 SXM", 1280,
             (2616, 5179, 10406, 20728)),
    *_lambda("resnet50", "amp", "LambdaCloud V100 16GB", "V100 SXM2 16GB", 256,
             (833, 1571, 3107, 6174)),
    *_lambda("resnet50", "amp", "RTX 6000 Ada", "RTX 6000 Ada", 928,
             (1146, 2301, 4548, 9211)),
    *_lambda("resnet50", "amp", "H100 80GB PCIe Gen5", "H100 PCIe", 1280,
             (1866, 3707, 7378, 14713)),
    *_lambda("resnet50", "fp32", "A100 80GB SXM4", "A100 SXM 80GB", 640,
             (1066, 2029, 4042, 7397)),
    *_lambda("resnet50", "fp32", "H100 80GB SXM5", "H100 SXM", 640,
             (1753, 3477, 6930, 13856)),
    *_lambda("resnet50", "fp32", "LambdaCloud V100 16GB", "V100 SXM2 16GB", 128,
             (369, 710, 1422, 2817)),
    # bert_large_squad / bert_base_squad columns (fp16): batch 112 / 320 a GPU
    *_lambda("bert-large", "amp", "A100 80GB SXM4", "A100 SXM 80GB", 112,
             (152, 246, 488, 746)),
    *_lambda("bert-large", "amp", "H100 80GB SXM5", "H100 SXM", 112,
             (301, 592, 1171, 2167)),
    *_lambda("bert-base", "amp", "A100 80GB SXM4", "A100 SXM 80GB", 320,
             (443, 815, 1654, 4273)),
    *_lambda("bert-base", "amp", "H100 80GB SXM5", "H100 SXM", 320,
             (812, 1630, 3219, 9176)),
    Row(DLE_RN50, "resnet50", "tf32", "DGX A100", "A100 SXM 80GB", 8, 256, 938, 7248),
    Row(DLE_RN50, "resnet50", "amp", "DGX A100", "A100 SXM 80GB", 8, 256, 2470, 16621),
    Row(DLE_RN50, "resnet50", "fp32", "DGX-1 16GB", "V100 SXM2 16GB", 8, 112, 367, 2855),
    Row(DLE_RN50, "resnet50", "amp", "DGX-1 16GB", "V100 SXM2 16GB", 8, 256, 1200, 8322),
    Row(DLE_BERT, "bert-large", "tf32", "DGX A100 (SQuAD)", "A100 SXM 80GB", 8, 32, 61.5,
        469.8),
    Row(DLE_BERT, "bert-large", "amp", "DGX A100 (SQuAD)", "A100 SXM 80GB", 8, 32, 110.5,
        846.7),
    Row(DLE_BERT, "bert-large", "fp32", "DGX-1 32G (SQuAD)", "V100 SXM2 32GB", 8, 8, 12,
        85.5),
    Row(DLE_BERT, "bert-large", "amp", "DGX-1 32G (SQuAD)", "V100 SXM2 32GB", 8, 16, 52,
        382),
]

SEQ_LEN = 384  # SQuAD fine-tuning in both sources
TARGET = 0.10


def _workload(row: Row) -> published.Workload:
    """The row's step as published.py traces its source: NVIDIA's SQuAD model and
    optimizers (Lambda runs NVIDIA's code), attention written out, NVIDIA's PyTorch
    ResNet-50 AMP in NHWC; TF32 rows are fp32 steps whose matmuls the options put on TF32."""
    bert = row.model.startswith("bert")
    precision = "amp" if row.precision == "amp" else "fp32"
    return published.Workload(
        row.model, "train", precision, row.batch, SEQ_LEN if bert else None,
        attention="eager" if bert else "fused",
        channels_last=not bert and precision == "amp" and row.source == DLE_RN50,
        head="qa" if bert else "mlm", recipe="dle-squad" if bert else None,
        padding_mask=bert)


def _traces(w: published.Workload) -> tuple[Any, Any]:
    """One GPU's fake training step and rank 0's DDP step (2 ranks)."""
    model, inputs, optimizer, amp = published.build(w, "meta")
    with amp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = roofline.trace(model, *inputs, train=True, optimizer=optimizer, fake=True,
                             attention=w.attention)
        batch2 = [x if x is None else torch.cat([x] * 2) for x in inputs]  # the global batch of 2
        ddp = roofline.trace(model, *batch2, train=True, optimizer=optimizer,
                             parallel="ddp", gpus=2, attention=w.attention)
    return one, ddp


def main() -> int:
    start = time.perf_counter()
    cache: dict[published.Workload, tuple[Any, Any]] = {}
    errors: list[float] = []
    print(f"{'source':<44} {'model':<10} {'prec':<4} {'system':<22} {'N':>2} "
          f"{'batch':>5} {'measured':>8} {'predicted':>9} {'error':>7} {'exposed':>7}")
    for row in ROWS:
        w = _workload(row)
        if w not in cache:
            cache[w] = _traces(w)
        one, ddp = cache[w]
        options = {"tf32_matmul": row.precision == "tf32"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t1 = roofline.analyze(one, row.device, **options).seconds
            p = roofline.parallel(ddp, row.device, gpus=row.gpus, one_gpu=t1,
                                  one_gpu_batch=row.batch, **options)
        predicted = p.speedup_vs_one_gpu
        assert predicted is not None
        error = predicted / row.measured - 1
        errors.append(error)
        print(f"{row.source.split(':')[-1][-44:]:<44} {row.model:<10} {row.precision:<4} "
              f"{row.system[:22]:<22} {row.gpus:>2} {row.batch:>5} {row.measured:>7.2f}x "
              f"{predicted:>8.2f}x {error:>+7.1%} {p.exposed_share:>7.1%}")
    median = statistics.median(abs(e) for e in errors)
    print(f"\n{len(ROWS)} rows: median |error| {median:.1%}, max {max(map(abs, errors)):.1%} "
          f"(target <= {TARGET:.0%}); {time.perf_counter() - start:.0f} s")
    return 0 if median <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
