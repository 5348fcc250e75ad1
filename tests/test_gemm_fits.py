"""The GEMM time model (issue 23, item 1): the shipped fits (hardware/gemm_fits.py,
data/gemm.yaml), their resolution per device (measured, sibling dtype, class median), the
time an analysis gives a matmul from them, and bad rows refused by file and row.

Expected numbers come from gemm.yaml's rows and the registry's datasheet figures, by hand:
the A100 SXM 80GB's bf16 row says efficiency 0.75, bandwidth_share 0.74, floor 6.5 us;
its datasheet is 312 TFLOP/s dense bf16 and 2,039 GB/s.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch
from torch import nn

import roofline
from roofline.hardware.achievable import figures
from roofline.hardware.gemm_fits import GEMM_FILE, read_gemm_fits, with_gemm_fits
from roofline.tracing.records import OpRecord, Trace

ROWS = read_gemm_fits()


def _mm(m: int, n: int, k: int, dtype: str = "bfloat16", size: int = 2) -> OpRecord:
    return OpRecord("aten.mm.default", "matmul", "forward", "", dtype, 2 * m * n * k,
                    size * (m * k + k * n), size * m * n, input_shapes=((m, k), (k, n)),
                    output_shapes=((m, n),))


def test_the_shipped_rows_load_with_their_sources() -> None:
    a100 = ROWS["A100 SXM 80GB"]["bf16"]
    assert (a100.efficiency, a100.bandwidth_share, a100.floor_seconds) == (0.75, 0.74, 6.5e-6)
    assert a100.source.startswith("ai-dynamo/aiconfigurator@095f58a51c4c:")
    # the registry adds the chip the table was measured on (108 SMs), for cores what-ifs
    assert roofline.get_device("A100 SXM 80GB").achievable.gemm["bf16"] == \
        a100.model_copy(update={"compute_units": 108})
    assert set(ROWS["T4"]) == {"fp32", "fp16"}  # DeepBench's SGEMM and tensor-core tables


def test_a_matmul_takes_the_fitted_time() -> None:
    """8192^3 bf16: compute-bound, 2 x 8192^3 / (0.75 x 312e12) plus the 6.5 us floor (above
    the A100's measured 2.63 us launch); 1 x 8192 x 8192: weight-streaming, its bytes over
    0.74 x 2.039e12 plus the floor."""
    big, thin = _mm(8192, 8192, 8192), _mm(1, 8192, 8192)
    a = roofline.analyze(Trace([big, thin]), "A100 SXM 80GB")
    assert a.op_seconds[0] == pytest.approx(6.5e-6 + 2 * 8192 ** 3 / (0.75 * 312e12))
    assert a.op_seconds[1] == pytest.approx(6.5e-6 + thin.bytes / (0.74 * 2.039e12))
    assert a.bound == ["compute", "memory"]
    assert any("GEMM model fitted" in n and "75% of peak" in n for n in a.assumptions)
    # gemm_shapes=False: the matrix figure (the MAMF share, 271 TFLOP/s) and tile fill
    old = roofline.analyze(Trace([big]), "A100 SXM 80GB", gemm_shapes=False)
    assert old.op_seconds[0] == pytest.approx(2.63e-6 + 2 * 8192 ** 3 / 271.2e12, rel=1e-3)


def test_fp16_reads_the_bf16_fit_of_the_same_peak() -> None:
    fig = figures(roofline.get_device("A100 SXM 80GB")).gemm("fp16")
    assert fig is not None and fig.origin == "measured" and fig.efficiency == 0.75


def test_a_device_without_a_table_gets_its_class_median() -> None:
    """The A100 PCIe 80GB has no table: the median of each part over the NVIDIA HBM
    datacentre devices that have one (each device's 16-bit row)."""
    members = [name for name, rows in ROWS.items() if "bf16" in rows or "fp16" in rows
               if roofline.get_device(name).memory_type.startswith("HBM")]
    assert members == ["A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200", "GB200 (per GPU)",
                       "B300", "GB300 (per GPU)", "V100 SXM2 16GB"]
    sixteen = [ROWS[n].get("bf16") or ROWS[n]["fp16"] for n in members]
    fig = figures(roofline.get_device("A100 PCIe 80GB")).gemm("bf16")
    assert fig is not None and fig.origin == "class default"
    assert fig.efficiency == statistics.median(r.efficiency for r in sixteen)
    assert fig.bandwidth_share == statistics.median(r.bandwidth_share for r in sixteen)
    assert fig.floor_seconds == statistics.median(r.floor_seconds for r in sixteen)


def test_fp8_matmuls_take_the_fp8_fit_and_its_class_median() -> None:
    """An fp8 GEMM (fp8 in, bf16 out) on the H100 SXM takes its own fp8 row, of the 1,979
    TFLOP/s fp8 peak; the H100 PCIe, with no table, the median of the fp8 rows of the
    NVIDIA HBM datacentre devices, apart from their 16-bit rows."""
    h100 = ROWS["H100 SXM"]["fp8"]
    op = OpRecord("aten.mm.default", "matmul", "forward", "", "float8_e4m3fn",
                  2 * 8192 ** 3, 2 * 8192 ** 2, 2 * 8192 ** 2, input_shapes=((8192, 8192),) * 2,
                  output_shapes=((8192, 8192),))
    a = roofline.analyze(Trace([op]), "H100 SXM")
    assert str(a.engine[0]) == "matrix fp8"
    assert a.op_seconds[0] == pytest.approx(
        h100.floor_seconds + 2 * 8192 ** 3 / (h100.efficiency * 1978.9e12))
    members = [name for name, rows in ROWS.items() if "fp8" in rows
               if roofline.get_device(name).memory_type.startswith("HBM")]
    assert members == ["H100 SXM", "H200 SXM", "B200", "GB200 (per GPU)", "B300",
                       "GB300 (per GPU)"]
    fig = figures(roofline.get_device("H100 PCIe")).gemm("fp8")
    assert fig is not None and fig.origin == "class default"
    assert fig.efficiency == statistics.median(ROWS[n]["fp8"].efficiency for n in members)
    assert fig.floor_seconds == statistics.median(ROWS[n]["fp8"].floor_seconds for n in members)
    sixteen = figures(roofline.get_device("H100 PCIe")).gemm("bf16")
    assert sixteen is not None and sixteen.efficiency != fig.efficiency


def test_nvfp4_matmuls_take_the_fp4_fit_of_the_fp4_peak() -> None:
    """An NVFP4 GEMM on the B200 takes its own fp4 row, of the 9 PFLOP/s dense fp4 peak
    (NVIDIA's B200 datasheet); an NVFP4 GEMM's bytes are 0.5625 an element, and the fp4
    rows pool apart from the fp8 and 16-bit ones."""
    b200 = ROWS["B200"]["fp4"]
    n = 8192
    op = OpRecord("aten.mm.default", "matmul", "forward", "", "nvfp4", 2 * n ** 3,
                  round(n * n * 0.5625 + n * n * (2 + 0.5625)), round(n * n * 0.5625) + 2 * n * n,
                  input_shapes=((n, n),) * 2, output_shapes=((n, n),))
    a = roofline.analyze(Trace([op]), "B200")
    assert str(a.engine[0]) == "matrix fp4"
    assert a.op_seconds[0] == pytest.approx(
        b200.floor_seconds + 2 * n ** 3 / (b200.efficiency * 9e15))
    assert [name for name, rows in ROWS.items() if "fp4" in rows] == [
        "B200", "GB200 (per GPU)", "B300", "GB300 (per GPU)"]
    fig = figures(roofline.get_device("B200")).gemm("nvfp4")
    assert fig is not None and fig.origin == "measured" and fig.efficiency == b200.efficiency
    assert figures(roofline.get_device("H100 SXM")).gemm("nvfp4") is None  # no fp4 units


@pytest.mark.parametrize(("device", "dtype"), [
    ("RTX 4090", "bf16"),  # no measured consumer part: no class median
    ("MI300X", "bf16"),  # another vendor's library: NVIDIA's tables do not carry over
    ("RTX 3090", "fp32"),  # fp32 on the CUDA cores has no class default
    ("T4", "bf16"),  # no bf16 peak at all
])
def test_no_fit_where_none_carries_over(device: str, dtype: str) -> None:
    assert figures(roofline.get_device(device)).gemm(dtype) is None


def test_fp32_matmuls_use_the_sgemm_fit_on_the_cuda_cores() -> None:
    """T4 fp32: DeepBench's SGEMM table gives 0.53 of the 8.1 TFLOP/s FP32 peak."""
    a = roofline.analyze(Trace([_mm(4096, 4096, 4096, "float32", 4)]), "T4")
    floor = max(ROWS["T4"]["fp32"].floor_seconds,
                figures(roofline.get_device("T4")).launch_overhead(graphs=False).value)
    assert str(a.engine[0]) == "vector fp32"
    assert a.op_seconds[0] == pytest.approx(floor + 2 * 4096 ** 3 / (0.53 * 8.1e12))


def test_a_renamed_what_if_keeps_the_shares() -> None:
    """A what-if device with 2x the FLOP/s keeps the fit's shares of its new peak."""
    t = Trace([_mm(8192, 8192, 8192)])
    base = roofline.analyze(t, "A100 SXM 80GB").op_seconds[0] - 6.5e-6
    fast = roofline.what_if(t, "A100 SXM 80GB", flops=2.0).dst.op_seconds[0] - 6.5e-6
    assert fast == pytest.approx(base / 2)


def test_a_traced_linear_layer_is_a_fitted_gemm() -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    a = roofline.analyze(t, "H100 SXM")
    (i,) = [j for j, op in enumerate(t.ops) if op.name == "aten.addmm.default"]
    h100 = ROWS["H100 SXM"]["bf16"]
    floor = max(h100.floor_seconds,
                figures(roofline.get_device("H100 SXM")).launch_overhead(graphs=False).value)
    assert a.op_seconds[i] == pytest.approx(
        floor + 2 * 8192 * 4096 ** 2 / (h100.efficiency * 989.4e12))


def test_a_matmul_beyond_the_measured_shapes_is_extrapolated_and_said() -> None:
    """The A100's bf16 row records the smallest and largest m, n and k of its table (read
    here from the shipped table itself); a matmul with n = 16, below the table's smallest n,
    is costed by the fitted model and the analysis says so; one inside the table's shapes,
    or on a device whose fit is its class's median (no table of its own), gets no note."""
    import gzip
    path = Path(__file__).parents[1] / "benchmarks" / "data" / "kernels" / \
        "gemm_aic_a100_sxm_80gb_bf16.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = [[float(v) for v in line.split(",")[:3]] for line in list(f)[1:]]
    spans = [(int(min(c)), int(max(c))) for c in zip(*rows, strict=True)]
    a100 = ROWS["A100 SXM 80GB"]["bf16"]
    assert [a100.m_range, a100.n_range, a100.k_range] == spans
    assert spans[1][0] > 16
    thin = roofline.analyze(Trace([_mm(4, 16, 128)]), "A100 SXM 80GB")
    (note,) = [n for n in thin.assumptions if "outside the shapes" in n]
    assert note.startswith("1 bf16 matmul calls") and f"n {spans[1][0]}-{spans[1][1]}" in note
    assert thin.op_seconds[0] == pytest.approx(
        6.5e-6 + max(2 * 4 * 16 * 128 / (0.75 * 312e12), thin.trace.ops[0].bytes
                     / (0.74 * 2.039e12)))
    inside = roofline.analyze(Trace([_mm(4096, 4096, 4096)]), "A100 SXM 80GB")
    assert not any("outside the shapes" in n for n in inside.assumptions)
    pooled = roofline.analyze(Trace([_mm(4, 16, 128)]), "H200 NVL")
    assert not any("outside the shapes" in n for n in pooled.assumptions)


# --- bad rows are refused, naming the file and the row -------------------------------------

GOOD = ("{device: 'A100 SXM 80GB', dtype: bf16, efficiency: 0.7, bandwidth_share: 0.7, "
        "floor_seconds: 3.0e-6, shapes: 10, median_error: 0.1, p90_error: 0.3, "
        "source: 'x@1:y', method: 'z'}")


@pytest.mark.parametrize(("row", "says"), [
    (GOOD.replace("efficiency: 0.7", "efficiency: 2.0"), "efficiency 2"),
    (GOOD.replace("bandwidth_share: 0.7", "bandwidth_share: 1.5"), "bandwidth_share 1.5"),
    (GOOD.replace("floor_seconds: 3.0e-6", "floor_seconds: 3.0"), "floor_seconds 3"),
    (GOOD.replace("floor_seconds: 3.0e-6", "floor_seconds: -1"), "floor_seconds"),
    (GOOD.replace("source: 'x@1:y'", "source: ''"), "needs its source"),
    (GOOD.replace("'A100 SXM 80GB'", "'No Such GPU'"), "no device named 'No Such GPU'"),
    (GOOD + "\n  - " + GOOD, "listed twice"),
    (GOOD.replace("dtype: bf16", "dtype: fp7"), "fp7"),
    # the A100 has no fp4 units: a share of a peak it does not list
    (GOOD.replace("dtype: bf16", "dtype: nvfp4"), "A100 SXM 80GB fp4 row .* does not list"),
    (GOOD.replace("shapes: 10,", "shapes: 10, m_range: [64, 1],"), "m_range .* no range"),
    (GOOD.replace("shapes: 10,", "shapes: 10, k_range: [0, 64],"), "k_range .* no range"),
])
def test_a_bad_row_is_refused_naming_file_and_row(tmp_path: Path, row: str, says: str) -> None:
    path = tmp_path / "gemm.yaml"
    path.write_text(f"gemm:\n  - {row}\n")
    with pytest.raises(roofline.RooflineError, match=says) as info:
        with_gemm_fits([roofline.get_device("A100 SXM 80GB")], path)
    assert str(path) in str(info.value)
    if "no device named" not in says:
        assert "row" in str(info.value)


def test_the_shipped_file_is_the_one_the_registry_reads() -> None:
    assert GEMM_FILE.name == "gemm.yaml" and GEMM_FILE.exists()
    assert len(ROWS) == 16 and sum(len(r) for r in ROWS.values()) == 29
