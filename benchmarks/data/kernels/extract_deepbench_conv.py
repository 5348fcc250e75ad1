"""Extract DeepBench's convolution tables into ``conv_deepbench_<device>_<dtype>.csv.gz``.

Reads ``results/train/DeepBench_NV_<part>.xlsx`` from a clone of baidu-research/DeepBench
at the pinned commit (``git show``), sheet by sheet: the "Convolution" block of the fp32
sheet, and of the "FP16 ip, Mixed math" sheet (fp16 operands on the tensor cores, fp32
accumulation) where the part has one. Each row is one cuDNN convolution of a network's
layer, timed three ways: forward, gradient of the input (dgrad; "N/A*" where not measured,
on some parts for a first layer, whose input needs none) and of the weight (wgrad), in ms.
How DeepBench ran them (``code/nvidia/conv_bench.cu`` at the same commit): fp32 in NCHW with
the algorithm cuDNN picks (implicit GEMM, Winograd, FFT); fp16 on the tensor cores in NHWC,
C and K padded to multiples of 8, forward IMPLICIT_PRECOMP_GEMM and both gradients ALGO_1
(the only algorithms cuDNN 7 gave tensor-op math). Columns: n, c, h, w, k, r, s, pad_h,
pad_w, stride_h, stride_w (the layer as listed, before padding), forward_seconds,
dgrad_seconds, wgrad_seconds (empty where not measured). Needs openpyxl, which roofline
does not depend on.

Usage: ``python benchmarks/data/kernels/extract_deepbench_conv.py --repo PATH``
"""

from __future__ import annotations

import argparse
import gzip
import io
import subprocess
from pathlib import Path

import openpyxl

COMMIT = "da81ba7820739e2e506dc27f382d15be5479f98f"
#: DeepBench's part name -> this project's file name part (as the GEMM tables name them)
PARTS = {"V100": "v100_sxm2_16gb", "T4": "t4", "P100": "p100_pcie_16gb",
         "1080Ti": "gtx_1080_ti", "TitanXp": "titan_xp", "TitanX_Pascal": "titan_x_pascal",
         "TitanX": "gtx_titan_x_maxwell"}
#: DeepBench's column, as :func:`_key` spells it (the sheets differ in case and in
#: "R (Filter height)" against "R") -> ours. R is the filter's height, S its width.
COLUMNS = {"n": "n", "c": "c", "h": "h", "w": "w", "k": "k", "r": "r", "s": "s",
           "pad_h": "pad_h", "pad_w": "pad_w", "vertical stride": "stride_h",
           "horizontal stride": "stride_w", "forward": "forward_seconds",
           "wrt inputs": "dgrad_seconds", "wrt parameters": "wgrad_seconds"}
TIMES = ("forward_seconds", "dgrad_seconds", "wgrad_seconds")


def _key(cell: object) -> str:
    return str(cell or "").split(" (")[0].strip().lower()


def _block(rows: list[tuple[object, ...]]) -> list[dict[str, object]]:
    """The rows of a sheet's "Convolution" block, keyed by our column names."""
    start = next(i for i, r in enumerate(rows) if "Convolution" in r)
    header = [_key(c) for c in rows[start + 1]]
    index = {ours: header.index(theirs) for theirs, ours in COLUMNS.items()}
    out = []
    for r in rows[start + 2:]:
        if not isinstance(r[index["w"]], (int, float)):
            break  # the block ends at the next section's title
        out.append({ours: r[i] for ours, i in index.items()})
    return out


def extract(repo: Path, part: str) -> dict[str, list[dict[str, object]]]:
    """dtype -> the part's convolution rows."""
    blob = subprocess.run(["git", "-C", str(repo), "show",
                           f"{COMMIT}:results/train/DeepBench_NV_{part}.xlsx"],
                          check=True, capture_output=True).stdout
    book = openpyxl.load_workbook(io.BytesIO(blob), read_only=True, data_only=True)
    out = {}
    for sheet in book.sheetnames:
        if "FP32" in sheet:
            dtype = "fp32"
        elif "Mixed math" in sheet:
            dtype = "fp16"
        else:
            continue  # the specs, and the P100's fp16 storage with fp32 math
        out[dtype] = _block([tuple(r) for r in book[sheet].iter_rows(values_only=True)])
    return out


def write(path: Path, rows: list[dict[str, object]]) -> None:
    names = list(COLUMNS.values())
    with gzip.open(path, "wt") as f:
        f.write(",".join(names) + "\n")
        for r in rows:
            cells = []
            for name in names:
                v = r[name]
                if name in TIMES:  # ms -> s; "N/A*" (not measured) -> empty
                    cells.append(f"{float(v) / 1e3:.6g}" if isinstance(v, (int, float)) else "")
                else:
                    cells.append(str(int(v)))  # type: ignore[call-overload]
            f.write(",".join(cells) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True,
                        help="a clone of baidu-research/DeepBench")
    args = parser.parse_args()
    here = Path(__file__).parent
    for part, name in PARTS.items():
        for dtype, rows in extract(args.repo, part).items():
            path = here / f"conv_deepbench_{name}_{dtype}.csv.gz"
            write(path, rows)
            print(f"{path.name}: {len(rows)} convolutions")


if __name__ == "__main__":
    main()
