"""Extract AIConfigurator's per-shape GEMM tables into ``gemm_aic_<device>_<dtype>.csv.gz``.

Reads ``gemm_perf.parquet`` from a clone of ai-dynamo/aiconfigurator at the pinned commit
(``git show``, so the working tree may be anywhere), keeps one ``gemm_dtype``, takes the
median latency of each (m, n, k), and keeps at most 2,500 shapes, drawn with
``numpy.random.default_rng(0)``. Columns: m, n, k, seconds. Needs pandas and pyarrow,
which roofline does not depend on.

fp8: the collector times TensorRT-LLM's ``Linear`` with FP8 weights and no input scale,
so each time includes the dynamic quantization of the bf16 activation (collector/trtllm/
collect_gemm.py). The GEMM alone is derived as AIConfigurator derives its static-FP8 GEMM
(aic-core/rust/aiconfigurator-core/src/operators/gemm.rs): minus ``compute_scale`` and
``scale_matrix`` of the same (m, k) (``quantize/.../computescale_perf.parquet`` and
``scale_matrix_perf.parquet``), floored at the GEMM's speed of light, max(2 m n k / fp8
peak, (m n + m k + n k) x 1 B / bandwidth), with the registry's datasheet peak and bandwidth.

nvfp4: TensorRT-LLM's ``Linear`` with NVFP4 weights (e2m1, an e4m3 scale per 16 elements,
a global scale) and a static input scale (``QuantAlgo.NVFP4``): each time includes the
activation's block quantization to fp4 (``fp4_quantize``), which W4A4 serving runs before
every such GEMM; it is kept, as AIConfigurator keeps it.

Usage: ``python benchmarks/data/kernels/extract_aic_gemm.py --repo PATH fp8 h100_sxm ...``
(``nvfp4 b200_sxm gb200`` for the fp4 tables, written as ``..._fp4.csv.gz``; ``bf16
b300_sxm gb300`` for those two bf16 tables)
"""

from __future__ import annotations

import argparse
import io
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
from aic import COMMIT, TRTLLM, TRTLLM_DEVICES

ROOT = "aic-core/src/aiconfigurator_core/systems/data/{dir}/"
PATH = ROOT + f"gemm/{TRTLLM}/gemm_perf.parquet"
QUANT = ROOT + f"quantize/{TRTLLM}/{{table}}_perf.parquet"
_BY_FOLDER = {d.folder: d for d in TRTLLM_DEVICES}
DTYPES = {"fp8": "fp8", "bf16": "bfloat16", "nvfp4": "nvfp4"}
#: The file suffix: the registry's name of the engine (nvfp4 runs on the fp4 units).
SUFFIX = {"nvfp4": "fp4"}
MAX_SHAPES = 2500


def _read(repo: Path, path: str) -> pd.DataFrame:
    blob = subprocess.run(["git", "-C", str(repo), "show", f"{COMMIT}:{path}"],
                          check=True, capture_output=True).stdout
    return pd.read_parquet(io.BytesIO(blob))


def _static_fp8(repo: Path, device_dir: str, df: pd.DataFrame) -> pd.DataFrame:
    """The fp8 rows less the activation's dynamic quantization, floored at the GEMM's
    speed of light (latencies in ms)."""
    import roofline

    spec = roofline.get_device(_BY_FOLDER[device_dir].device)
    peak = spec.peak_flops_per_s("fp8", "matrix")
    assert peak is not None
    for table in ("computescale", "scale_matrix"):
        q = _read(repo, QUANT.format(dir=device_dir, table=table))
        q = q[q.quant_dtype == "fp8"].groupby(["m", "k"], as_index=False).latency.median()
        df = df.merge(q.rename(columns={"latency": table}), on=["m", "k"], how="inner")
    m, n, k = (df[c].astype(float) for c in ("m", "n", "k"))
    sol_ms = 1e3 * np.maximum(2 * m * n * k / peak,
                              (m * n + m * k + n * k) / spec.bandwidth_bytes_per_s)
    return df.assign(latency=np.maximum(sol_ms, df.latency - df.computescale - df.scale_matrix))


def extract(repo: Path, device_dir: str, dtype: str) -> pd.DataFrame:
    df = _read(repo, PATH.format(dir=device_dir))
    df = df[df.gemm_dtype == DTYPES[dtype]]
    if dtype == "fp8":
        df = _static_fp8(repo, device_dir, df)
    shapes = df.groupby(["m", "n", "k"], as_index=False).latency.median()
    if len(shapes) > MAX_SHAPES:
        keep = np.sort(np.random.default_rng(0).choice(len(shapes), MAX_SHAPES, replace=False))
        shapes = shapes.iloc[keep]
    return pd.DataFrame({"m": shapes.m, "n": shapes.n, "k": shapes.k,
                         "seconds": shapes.latency / 1e3})  # the tables' latency is in ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True,
                        help="a clone of ai-dynamo/aiconfigurator")
    parser.add_argument("dtype", choices=sorted(DTYPES))
    parser.add_argument("devices", nargs="+", choices=sorted(_BY_FOLDER))
    args = parser.parse_args()
    for device in args.devices:
        suffix = SUFFIX.get(args.dtype, args.dtype)
        out = Path(__file__).parent / f"gemm_aic_{_BY_FOLDER[device].file}_{suffix}.csv.gz"
        table = extract(args.repo, device, args.dtype)
        table.to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
        print(f"{out.name}: {len(table)} shapes")


if __name__ == "__main__":
    main()
