"""Extract Liger-Kernel's PyTorch baselines into ``rowwise_liger_<device>_<dtype>.csv.gz``.

Liger-Kernel times its Triton kernels against PyTorch's own and keeps every run in
``benchmark/data/all_benchmark_data.csv`` (linkedin/Liger-Kernel at the pinned commit, read
with ``git show``). The rows kept here are PyTorch's, forward only, speed in ms (the
median, ``y_value_50``, of ``triton.testing.do_bench`` with ``rep=500``, which times each
call with CUDA events and clears the L2 between calls):

* ``layer_norm`` (provider ``huggingface``: ``torch.nn.LayerNorm(N)``, fp32 weights, over an
  fp32 ``(M, N)`` input that requires grad, so the forward saves its statistics;
  ``benchmark/scripts/benchmark_layer_norm.py`` at b5672a15 and 0bd8292d), M = 4,096 rows,
  N = 1,024-16,384, on an "NVIDIA A100-SXM4-80GB" (2024-09-03) and an "NVIDIA H100 80GB
  HBM3" (2025-07-17);
* ``rms_norm`` (provider ``huggingface``: Hugging Face's ``LlamaRMSNorm`` as the script
  writes it out, fp32 weight, the input cast to fp32 and back: ``pow``, ``mean``,
  ``rsqrt`` and the multiplies, each its own kernel), M = 2,048 rows of bf16, N =
  1,024-32,768, and ``cross_entropy`` (provider ``huggingface``: ``nn.CrossEntropyLoss()``
  over fp32 logits of ``B * T`` = 16,384 rows and a vocabulary V = 4,096-131,072; its
  log-softmax and the loss's gather), both on the A100 (2024-09-03;
  ``benchmark_{rms_norm,cross_entropy}.py`` at b5672a15);
* ``softmax`` (provider ``torch``: ``torch.nn.Softmax(dim=-1)`` over an ``(M, N)`` input
  that requires grad; ``benchmark/scripts/benchmark_softmax.py`` at 5d25e468, the script's
  first commit, which postdates these rows by four weeks), M = 2,048, N = 128-4,096, fp32
  and bf16, on an "NVIDIA GeForce RTX 3090" (2025-04-30).

Columns: op, rows, cols, dtype, seconds.

Usage: ``python benchmarks/data/kernels/extract_liger_rowwise.py --repo PATH``
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import subprocess
from pathlib import Path

COMMIT = "ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c"
#: (kernel, provider, gpu_name) -> this project's file name part
TABLES = {("layer_norm", "huggingface", "NVIDIA A100-SXM4-80GB"): "a100_sxm_80gb",
          ("layer_norm", "huggingface", "NVIDIA H100 80GB HBM3"): "h100_sxm",
          ("rms_norm", "huggingface", "NVIDIA A100-SXM4-80GB"): "a100_sxm_80gb",
          ("cross_entropy", "huggingface", "NVIDIA A100-SXM4-80GB"): "a100_sxm_80gb",
          ("softmax", "torch", "NVIDIA GeForce RTX 3090"): "rtx_3090"}
DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a clone of Liger-Kernel")
    args = parser.parse_args()
    text = subprocess.run(["git", "-C", str(args.repo), "show",
                           f"{COMMIT}:benchmark/data/all_benchmark_data.csv"],
                          check=True, capture_output=True, text=True).stdout
    out: dict[str, list[tuple[str, int, int, str, float]]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        name = TABLES.get((r["kernel_name"], r["kernel_provider"], r["gpu_name"]))
        if name is None or r["kernel_operation_mode"] != "forward" \
                or r["metric_name"] != "speed" or r["metric_unit"] != "ms":
            continue
        config = json.loads(r["extra_benchmark_config_str"])
        # cross-entropy's input: torch.randn(B * T, V) in the default dtype
        dtype = DTYPES[config.get("dtype", "torch.float32")]
        rows = int(config["M"]) if "M" in config else int(config["B"]) * int(config["T"])
        out.setdefault(f"rowwise_liger_{name}_{dtype}.csv.gz", []).append(
            (r["kernel_name"], rows, int(float(r["x_value"])), dtype,
             float(r["y_value_50"]) / 1e3))
    here = Path(__file__).resolve().parent
    for file, records in sorted(out.items()):
        lines = ["op,rows,cols,dtype,seconds\n"] + [
            f"{op},{m},{n},{dtype},{seconds:.6g}\n" for op, m, n, dtype, seconds in sorted(records)]
        with gzip.GzipFile(here / file, "wb", mtime=0) as f:  # the same bytes on every run
            f.write("".join(lines).encode())
        print(file, len(records))


if __name__ == "__main__":
    main()
