"""Extract AIConfigurator's context (prefill) attention tables into
``attention_aic_<device>_bf16.csv.gz``.

Reads ``context_attention_perf.parquet`` from a clone of ai-dynamo/aiconfigurator at the
pinned commit (``git show``), keeps multi-head attention (as many KV heads as query heads)
with a head size of 128, bf16 activations and KV cache and no sliding window, takes the
median latency of each (batch, heads, tokens), and keeps at most 300 shapes, drawn with
``numpy.random.default_rng(0)``. Columns: batch, heads, seq, head_dim, seconds. The
TensorRT-LLM tables (1.3.0rc20, ``kernel_source`` ``torch_flow``) time its attention op,
which fuses RoPE into the kernel (collector/trtllm/collect_attn.py); the A100's (vLLM
0.14.0) time vLLM's FlashAttention-2 backend. Needs pandas and pyarrow, which roofline does
not depend on.

Usage: ``python benchmarks/data/kernels/extract_aic_attention.py --repo PATH``
"""

from __future__ import annotations

import argparse
import io
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
from aic import A100, COMMIT, TRTLLM, TRTLLM_DEVICES

PATH = ("aic-core/src/aiconfigurator_core/systems/data/{dir}/attention/{fw}/"
        "context_attention_perf.parquet")
#: AIConfigurator's folder -> (framework/version, kernel_source, this project's file name)
TABLES = {**{d.folder: (TRTLLM, "torch_flow", d.file) for d in TRTLLM_DEVICES},
          A100.folder: ("vllm/0.14.0", "vllm_flash_attn", A100.file)}
MAX_SHAPES = 300


def extract(repo: Path, device_dir: str) -> pd.DataFrame:
    fw, source, _ = TABLES[device_dir]
    blob = subprocess.run(["git", "-C", str(repo), "show",
                           f"{COMMIT}:{PATH.format(dir=device_dir, fw=fw)}"],
                          check=True, capture_output=True).stdout
    df = pd.read_parquet(io.BytesIO(blob))
    keep = ((df.kernel_source == source) & (df.num_key_value_heads == df.num_heads)
            & (df.head_dim == 128) & (df.attn_dtype == "bfloat16")
            & (df.kv_cache_dtype == "bfloat16"))
    if "window_size" in df:
        keep &= df.window_size == 0
    shapes = df[keep].groupby(["batch_size", "num_heads", "isl"], as_index=False).latency.median()
    if len(shapes) > MAX_SHAPES:
        rows = np.sort(np.random.default_rng(0).choice(len(shapes), MAX_SHAPES, replace=False))
        shapes = shapes.iloc[rows]
    return pd.DataFrame({"batch": shapes.batch_size, "heads": shapes.num_heads,
                         "seq": shapes.isl, "head_dim": 128,
                         "seconds": shapes.latency / 1e3})  # the tables' latency is in ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True,
                        help="a clone of ai-dynamo/aiconfigurator")
    args = parser.parse_args()
    for device_dir, (_, _, name) in TABLES.items():
        out = Path(__file__).parent / f"attention_aic_{name}_bf16.csv.gz"
        table = extract(args.repo, device_dir)
        table.to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
        print(f"{out.name}: {len(table)} shapes")


if __name__ == "__main__":
    main()
