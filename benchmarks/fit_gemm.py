"""Fit the GEMM time model to measured per-shape tables; write roofline/hardware/data/gemm.yaml.

The model (``roofline/analysis/gemm.py``, ``gemm_seconds``), per device and dtype::

    seconds = floor + max(2 m n k / (efficiency x peak), bytes / (bandwidth_share x bandwidth))

``peak`` is the device's datasheet dense peak of the engine the GEMM runs on (the matrix
units in bf16/fp16, the CUDA cores in fp32), ``bandwidth`` its datasheet DRAM bandwidth,
``bytes`` each operand read once and the output written once. Three numbers per table,
grid-searched to minimise the median |log(predicted / measured)| over the table's shapes
(every shape weighs the same; no shape or device is singled out). The tables are in
``benchmarks/data/kernels/`` (their sources, commits and licenses in its README.md).

Usage: ``python benchmarks/fit_gemm.py [--check]`` (``--check``: fail if the shipped
gemm.yaml differs from a fresh fit).
"""

from __future__ import annotations

import argparse
import gzip
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import roofline
from roofline.hardware.measured import gemm_engine

sys.path.insert(0, str(Path(__file__).parent / "data" / "kernels"))
from aic import A100, COMMIT, TRTLLM, TRTLLM_DEVICES, TRTLLM_LABEL

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "kernels"
OUT = ROOT / "roofline" / "hardware" / "data" / "gemm.yaml"
# NVFP4 (the "fp4" engine): two e2m1 values a byte and an e4m3 scale for every 16 of them
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "fp4": 0.5 + 1 / 16}
# fp8 and fp4 GEMMs write bf16; the others write their input dtype
OUTPUT_BYTES = {"fp8": 2, "fp4": 2}
# W4A4 serving quantizes the bf16 activation to NVFP4 before each GEMM (a kernel that reads
# it and writes the fp4 copy, which the GEMM reads): 2 + 2 x 0.5625 bytes an element
ACTIVATION_BYTES = {"fp4": 2 + 2 * ELEMENT_BYTES["fp4"]}
# Bounds of the search, physical rather than fitted: a weight-streaming GEMM moves its
# bytes at 50-100% of DRAM bandwidth (streaming kernels reach 65-97% of it on the
# registry's measured devices), and a kernel costs 1-20 us at the least (launch and
# DRAM latency). Tables of large, compute-bound shapes (DeepBench's) leave the bytes term
# and the floor loosely pinned; unbounded, a fit would bend them to absorb the small
# shapes' tile losses.
BANDWIDTH_SHARES = (0.50, 1.00)
FLOOR_SECONDS = (1e-6, 20e-6)


@dataclass(frozen=True)
class Table:
    """One measured table: a device, a dtype, its shapes and times, and where from."""

    device: str
    dtype: str
    file: str
    source: str
    method: str
    conditions: str


_AIC = (f"ai-dynamo/aiconfigurator@{COMMIT[:12]}:aic-core/src/aiconfigurator_core/systems/"
        "data/{dir}/gemm/{fw}/gemm_perf.parquet")
_AIC_METHOD = ("AIConfigurator collector: torch F.linear (cuBLAS) of randn bf16 operands, "
               "weights copied past L2, CUDA-graph replay, mean of 6 replays after 3 warm-up")
_AIC_FP8_METHOD = (
    "AIConfigurator collector: TensorRT-LLM Linear with fp8 weights and per-tensor scales "
    "(QuantAlgo.FP8), bf16 activations, weights copied past L2, CUDA-graph replay; the GEMM "
    "alone derived as AIConfigurator derives its static-fp8 GEMM: minus the activation's "
    "dynamic quantization (compute_scale and scale_matrix of the same m, k), floored at the "
    "speed of light (benchmarks/data/kernels/extract_aic_gemm.py)")
_AIC_FP4_METHOD = (
    "AIConfigurator collector: TensorRT-LLM Linear with NVFP4 weights (e2m1, an e4m3 scale per "
    "16 elements, a global scale) and a static input scale (QuantAlgo.NVFP4), weights copied "
    "past L2, CUDA-graph replay; each time includes the activation's fp4 block quantization, "
    "which W4A4 serving runs before every such GEMM")
_DB = "baidu-research/DeepBench@da81ba782073:results/{{train,inference}}/DeepBench_NV_{file}.xlsx"
_DB_METHOD = ("DeepBench gemm_bench (cublasSgemm/cublasGemmEx), mean of 400 back-to-back calls "
              "on the same operands after one warm-up; median over the transposes of a shape")
_DTYPES = (("bf16", _AIC_METHOD, ""), ("fp8", _AIC_FP8_METHOD, "; fp8 e4m3 in, bf16 out"),
           ("fp4", _AIC_FP4_METHOD, "; nvfp4 in, bf16 out"))
TABLES = [
    Table(A100.device, "bf16", f"gemm_aic_{A100.file}_bf16.csv.gz",
          _AIC.format(dir=A100.folder, fw="sglang/0.5.10"), _AIC_METHOD,
          f"device {A100.recorded!r}; sglang 0.5.10"),
    *(Table(d.device, dtype, f"gemm_aic_{d.file}_{dtype}.csv.gz",
            _AIC.format(dir=d.folder, fw=TRTLLM), method,
            f"device {d.recorded!r}; {TRTLLM_LABEL}{io}")
      for dtype, method, io in _DTYPES for d in TRTLLM_DEVICES if dtype != "fp4" or d.nvfp4),
    Table("A40", "fp16", "gemm_vidur_a40_fp16.csv.gz",
          "microsoft/vidur@7d47513363ec:data/profiling/compute/a40/*/*/mlp.csv",
          "vidur MLP profiling: F.linear GEMMs of fp16 models (the attn/mlp projections), "
          "kineto kernel durations, median of 20 steps",
          "columns attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj"),
    Table("V100 SXM2 16GB", "fp32", "gemm_deepbench_v100_sxm2_16gb_fp32.csv.gz",
          _DB.format(file="V100"), _DB_METHOD, "DGX-1, CUDA 10.1.243, driver 418.67"),
    Table("V100 SXM2 16GB", "fp16", "gemm_deepbench_v100_sxm2_16gb_fp16.csv.gz",
          _DB.format(file="V100"), _DB_METHOD,
          "DGX-1, CUDA 10.1.243; tensor cores, fp16 inputs, fp32 accumulation"),
    Table("T4", "fp32", "gemm_deepbench_t4_fp32.csv.gz", _DB.format(file="T4"), _DB_METHOD,
          "Xeon Gold 6140 host, CUDA 10.1.243, driver 418.67; 70 W board"),
    Table("T4", "fp16", "gemm_deepbench_t4_fp16.csv.gz", _DB.format(file="T4"), _DB_METHOD,
          "CUDA 10.1.243; tensor cores, fp16 inputs, fp32 accumulation; 70 W board"),
    Table("P100 PCIe 16GB", "fp32", "gemm_deepbench_p100_pcie_16gb_fp32.csv.gz",
          _DB.format(file="P100"), _DB_METHOD,
          "CUDA 8.0.88 on an X99 workstation board (PCIe assumed)"),
    Table("GTX 1080 Ti", "fp32", "gemm_deepbench_gtx_1080_ti_fp32.csv.gz",
          _DB.format(file="1080Ti"), _DB_METHOD, "CUDA 8.0.88"),
    Table("TITAN Xp", "fp32", "gemm_deepbench_titan_xp_fp32.csv.gz",
          _DB.format(file="TitanXp"), _DB_METHOD, "CUDA 8.0.88"),
    Table("TITAN X (Pascal)", "fp32", "gemm_deepbench_titan_x_pascal_fp32.csv.gz",
          _DB.format(file="TitanX_Pascal"), _DB_METHOD, "CUDA 8.0.88"),
    Table("GTX TITAN X (Maxwell)", "fp32", "gemm_deepbench_gtx_titan_x_maxwell_fp32.csv.gz",
          _DB.format(file="TitanX"), _DB_METHOD, "CUDA 8.0.88"),
]


def load(table: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(m, n, k, seconds) of a table."""
    with gzip.open(DATA / table.file, "rt") as f:
        data = np.loadtxt(f, delimiter=",", skiprows=1, ndmin=2)
    return data[:, 0], data[:, 1], data[:, 2], data[:, 3]


def peaks(device: str, dtype: str) -> tuple[float, float]:
    """(datasheet FLOP/s of the engine the GEMM runs on, datasheet bytes/s)."""
    spec = roofline.get_device(device)
    engine = gemm_engine(dtype)
    peak = spec.peak_flops_per_s(dtype, engine)
    if peak is None:
        raise SystemExit(f"{device} lists no {engine} {dtype} peak")
    return peak, spec.bandwidth_bytes_per_s


def gemm_bytes(m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str) -> np.ndarray:
    """Each operand read once and the output written once (with an fp4 GEMM, the
    activation's quantization too)."""
    size = ELEMENT_BYTES[dtype]
    return ACTIVATION_BYTES.get(dtype, size) * m * k + size * k * n \
        + OUTPUT_BYTES.get(dtype, size) * m * n


def predict(m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str, peak: float,
            bandwidth: float, efficiency: float, bandwidth_share: float,
            floor_seconds: float) -> np.ndarray:
    """The model's seconds for each shape (the same formula as roofline.analysis.gemm)."""
    flops = 2 * m * n * k
    nbytes = gemm_bytes(m, n, k, dtype)
    return floor_seconds + np.maximum(flops / (efficiency * peak),
                                      nbytes / (bandwidth_share * bandwidth))


def log_errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return np.abs(np.log(predicted / measured))


def fit(m: np.ndarray, n: np.ndarray, k: np.ndarray, seconds: np.ndarray, dtype: str,
        peak: float, bandwidth: float) -> tuple[float, float, float]:
    """(efficiency, bandwidth_share, floor_seconds) minimising the median |log error|."""
    flops = 2 * m * n * k
    nbytes = gemm_bytes(m, n, k, dtype)
    effs = np.round(np.arange(0.20, 1.2001, 0.01), 2)
    shares = np.round(np.arange(BANDWIDTH_SHARES[0], BANDWIDTH_SHARES[1] + 1e-9, 0.02), 2)
    floors = np.round(np.geomspace(*FLOOR_SECONDS, 25), 9)
    best = (np.inf, 0.0, 0.0, 0.0)
    compute = flops[None, :] / (effs[:, None] * peak)  # (efficiency, shape)
    for share in shares:
        memory = nbytes / (share * bandwidth)
        body = np.maximum(compute, memory[None, :])
        for floor in floors:
            err = np.median(np.abs(np.log((body + floor) / seconds[None, :])), axis=1)
            i = int(np.argmin(err))
            if err[i] < best[0]:
                best = (float(err[i]), float(effs[i]), float(share), float(floor))
    return best[1], best[2], best[3]


def entry(table: Table) -> dict[str, object]:
    m, n, k, seconds = load(table)
    peak, bandwidth = peaks(table.device, table.dtype)
    eff, share, floor = fit(m, n, k, seconds, table.dtype, peak, bandwidth)
    err = log_errors(predict(m, n, k, table.dtype, peak, bandwidth, eff, share, floor), seconds)
    return {"device": table.device, "dtype": table.dtype, "efficiency": eff,
            "bandwidth_share": share, "floor_seconds": floor, "shapes": len(m),
            "median_error": round(float(np.expm1(np.median(err))), 4),
            "p90_error": round(float(np.expm1(np.percentile(err, 90))), 4),
            "ranges": [[int(x.min()), int(x.max())] for x in (m, n, k)],
            "source": table.source, "method": table.method, "conditions": table.conditions}


def render(entries: list[dict[str, object]]) -> str:
    lines = ["# GEMM time model per device and dtype, fitted by benchmarks/fit_gemm.py to the",
             "# measured per-shape tables in benchmarks/data/kernels/ (sources in its README).",
             "# seconds = floor + max(2mnk / (efficiency x datasheet peak),",
             "#                      bytes / (bandwidth_share x datasheet bandwidth))",
             "# median_error, p90_error: over the table's shapes, in-sample, the factor",
             "# predicted and measured differ by, minus one (exp|ln(predicted / measured)| - 1);",
             "# m_range, n_range, k_range: the smallest and largest of each dimension among",
             "# them. Generated: do not edit by hand; re-run the script.",
             "gemm:"]
    for e in entries:
        lines.append(f"  - {{device: {e['device']!r}, dtype: {e['dtype']}, "
                     f"efficiency: {e['efficiency']}, bandwidth_share: {e['bandwidth_share']}, "
                     f"floor_seconds: {e['floor_seconds']:.3g}, shapes: {e['shapes']}, "
                     f"median_error: {e['median_error']}, p90_error: {e['p90_error']},")
        spans = e["ranges"]
        assert isinstance(spans, list)
        lines.append(f"     m_range: {spans[0]}, n_range: {spans[1]}, k_range: {spans[2]},")
        for key in ("source", "method", "conditions"):
            end = "}" if key == "conditions" else ","
            lines.append(f"     {key}: {e[key]!r}{end}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if the shipped gemm.yaml differs from a fresh fit")
    args = parser.parse_args()
    entries = [entry(t) for t in TABLES]
    print(f"{'device':24s} {'dtype':5s} {'eff':>5s} {'bw':>5s} {'floor':>8s} {'n':>5s} "
          f"{'median':>7s} {'p90':>7s}")
    for e in entries:
        print(f"{e['device']:24s} {e['dtype']:5s} {e['efficiency']:5.2f} "
              f"{e['bandwidth_share']:5.2f} {float(str(e['floor_seconds'])) * 1e6:6.2f}us "
              f"{e['shapes']:5d} "
              f"{e['median_error']:7.1%} {e['p90_error']:7.1%}")
    text = render(entries)
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python benchmarks/fit_gemm.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
