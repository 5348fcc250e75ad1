"""Measured achievable figures: shipped data, class defaults, rejections, what-if scaling.

Expected numbers are taken from the primary sources (the value the file prints, divided by
the datasheet figure) or computed by hand, never from the code under test.
"""

from __future__ import annotations

import gzip
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import yaml

import roofline
from roofline.analysis.rates import ATTENTION_NOTE
from roofline.hardware import DeviceSpec, DeviceSpecError, get_device, load_device
from roofline.hardware.achievable import (
    class_defaults,
    class_of,
    figures,
    fp32_datapath_class,
)
from roofline.hardware.registry import _builtin
from roofline.hardware.spec import CLOCK_MARGIN, validate_device

SHIPPED = [spec for spec, _ in _builtin()]


@pytest.fixture(autouse=True)
def _shipped_only(isolated_registry: None) -> None:
    """Every test sees the shipped registry alone."""


# --------------------------------------------------------------------------- shipped data
def test_registry_loads_with_achievable_figures() -> None:
    measured = [s for s in SHIPPED if s.achievable and s.achievable.measured()]
    assert len(measured) >= 40
    names = {s.name for s in measured}
    assert {"V100 PCIe 16GB", "T4", "A10", "A40", "L4", "L40", "L40S", "A100 SXM 80GB",
            "A100 PCIe 40GB", "H100 SXM", "H100 PCIe", "H200 SXM", "RTX 2080 Ti", "RTX 3080",
            "RTX 3090", "RTX 4090", "RTX A6000", "RTX 6000 Ada", "MI210"} <= names


@pytest.mark.parametrize("spec", [s for s in SHIPPED if s.achievable], ids=lambda s: s.name)
def test_every_measured_figure_cites_a_commit_or_url(spec: DeviceSpec) -> None:
    assert spec.achievable is not None
    for _, _, m in spec.achievable.measured():
        cited = m.source.startswith("https://") or (
            "@" in m.source and len(m.source.split("@")[1].split(":")[0].split()[0]) >= 12)
        assert cited, m.source
        assert m.method.strip()
        if "zzc0721" in m.source:  # crowd data says so
            assert "crowd" in m.method
    if spec.achievable.ecc_default is not None:
        assert spec.sources["ecc"].startswith("https://")


def test_a100_80gb_copy_share_from_gpu_benches() -> None:
    # gpu-benches@1c36d509ee71:gpu-stream/a100_80.txt, maximum of the "scale" column: 1732 GB/s
    copy = figures(get_device("A100 SXM 80GB")).bandwidth("copy")
    assert copy.origin == "measured" and "gpu-stream/a100_80.txt" in copy.source
    assert copy.value == pytest.approx(1732e9)
    assert copy.share == pytest.approx(1732 / 2039)
    # read column maximum 1769 GB/s, triad 1759 GB/s
    assert figures(get_device("A100 SXM 80GB")).bandwidth("read").value == pytest.approx(1769e9)
    assert figures(get_device("A100 SXM 80GB")).bandwidth("triad").value == pytest.approx(1759e9)


def test_h100_sxm_bandwidth_from_fluidx3d_and_bf16_from_mamf() -> None:
    h100 = figures(get_device("H100 SXM"))
    # FluidX3D README: H100 SXM5 80GB HBM3, 17602 MLUPs/s FP32/FP32 at 153 B per cell update
    copy = h100.bandwidth()
    assert copy.origin == "measured" and "FluidX3D" in copy.source
    assert copy.value == pytest.approx(17602 * 153e6, rel=1e-3)
    assert copy.share == pytest.approx(17602 * 153e6 / 3.35e12, rel=1e-3)  # the 80%
    assert str(copy) == "2.69 TB/s (80% of datasheet, measured: FluidX3D@8986874)"
    # MAMF table (stas00/ml-engineering@744d01e18b79): H100 SXM BF16 794.5 of 989 TFLOPS
    bf16 = h100.matrix("bfloat16")  # an alias resolves
    assert bf16 is not None and bf16.value == pytest.approx(794.5e12)
    assert bf16.share == pytest.approx(794.5 / 989.4)


def test_rtx_4090_fp16_is_the_median_of_the_crowd_rows() -> None:
    # zzc-db database.md, fp16 column of the six unmodified 24 GB RTX 4090 rows
    rows = [165.08, 171.06, 162.35, 167.80, 165.94, 168.38]
    fp16 = figures(get_device("RTX 4090")).matrix("fp16")
    assert fp16 is not None and fp16.origin == "measured" and "crowd" in fp16.method
    assert fp16.value == pytest.approx((165.94 + 167.80) / 2 * 1e12)
    assert fp16.value == pytest.approx(statistics.median(rows) * 1e12)
    assert fp16.share is not None and fp16.share > 1  # GeForce boosts above its rated clock


def test_sgemm_share_from_the_crowd_rows_with_tf32_off() -> None:
    # zzc-db database.md, fp32 column (test.py turns TF32 off): the three RTX 3090 rows
    # 24.46, 24.84, 24.79 TFLOPS against the 35.6 TFLOPS datasheet; H100 SXM 51.88 and 52.11
    rtx3090 = figures(get_device("RTX 3090")).vector("fp32")
    assert rtx3090 is not None and rtx3090.origin == "measured" and "TF32 off" in rtx3090.method
    assert rtx3090.value == pytest.approx(24.79e12)
    assert rtx3090.share == pytest.approx(24.79 / 35.6)
    h100 = figures(get_device("H100 SXM")).vector("fp32")
    assert h100 is not None and h100.value == pytest.approx((51.88 + 52.11) / 2 * 1e12)


def test_fp32_datapath_class_from_the_datasheet() -> None:
    # lanes = fp32 peak / (2 FLOPs x SMs x boost): RTX 4080 48.7e12 / (2 x 76 x 2505 MHz) =
    # 127.9 (two 16-lane datapaths per partition, Ada); TITAN RTX 16.3e12 / (2 x 72 x 1770
    # MHz) = 63.95 (Turing, one); GTX 1080 8.9e12 / (2 x 20 x 1733 MHz) = 128.4 but no
    # tensor cores (Pascal: 128 lanes in one datapath)
    assert fp32_datapath_class(get_device("RTX 4080")) == \
        "NVIDIA GDDR consumer with 128 FP32 lanes per compute unit and matrix units"
    assert fp32_datapath_class(get_device("TITAN RTX")) == \
        "NVIDIA GDDR consumer with 64 FP32 lanes per compute unit and matrix units"
    assert fp32_datapath_class(get_device("GTX 1080")) == \
        "NVIDIA GDDR consumer with 128 FP32 lanes per compute unit and no matrix units"
    # the H200 SXM rates no boost clock: its measured sustained 1980 MHz gives 67e12 / (2 x
    # 132 x 1980 MHz) = 128.2, the H100 SXM's design
    assert fp32_datapath_class(get_device("H200 SXM")) == \
        fp32_datapath_class(get_device("H100 SXM"))
    assert fp32_datapath_class(get_device("H100 NVL")) is None  # no clock to derive it from
    bare = hbm_gpu("No SMs")
    assert fp32_datapath_class(bare) is None


def test_sgemm_default_pools_one_datapath_design_and_class() -> None:
    """An unmeasured Ada GeForce takes the median SGEMM share of the measured GeForce cards of
    two FP32 datapaths (zzc-db fp32 column over each datasheet): RTX 3070 13.69 / 20.3,
    3080 21.07 / 29.8, 3080 Ti 24.635 / 34.1, 3090 24.79 / 35.6, 4090 54.255 / 82.6, 5090
    68.365 / 104.8. Never the Turing or Pascal cards' share, which SGEMM fills to ~90%."""
    shares = [13.69 / 20.3, 21.07 / 29.8, 24.635 / 34.1, 24.79 / 35.6, 54.255 / 82.6,
              68.365 / 104.8]
    fp32 = figures(get_device("RTX 4080")).vector("fp32")
    assert fp32 is not None and fp32.origin == "class default"
    assert fp32.share == pytest.approx(statistics.median(shares))
    assert fp32.value == pytest.approx(48.7e12 * statistics.median(shares))
    assert "6 measured" in fp32.source
    # Pascal pools with Pascal (GTX 1080 Ti: 10.09 / 11.3), not with the two-datapath cards
    pascal = figures(get_device("GTX 1080")).vector("fp32")
    assert pascal is not None and pascal.share == pytest.approx(10.09 / 11.3)
    # a Turing GeForce has no measured member of its design: the datasheet, said so
    turing = figures(get_device("TITAN RTX")).vector("fp32")
    assert turing is not None and turing.origin == "datasheet"
    assert "FP32 datapath design" in turing.method


#: TF32 / bf16 share ratios of the NVIDIA GPUs measured in both, by hand from the registry
#: (see the test below).
TF32_RATIOS = [(108.32 / 156) / (234.14 / 312), (32.03 / 29.8) / (64.68 / 59.5),
               (38.15 / 34.1) / (77.405 / 68.2), (31.88 / 60) / (70.89 / 121),
               (85.65 / 82.6) / (165.26 / 165.2), (402.15 / 494.7) / (794.5 / 989.4),
               (240.43 / 378) / (495.93 / 756.5)]


def test_tf32_share_is_the_devices_bf16_share_times_the_vendor_ratio() -> None:
    """TF32 on the same tensor cores as bf16: a device measured in bf16 only takes its own
    bf16 share times the median ratio of TF32 to bf16 shares over the NVIDIA GPUs measured
    in both (the registry's figures over their datasheet peaks, by hand): A100 PCIe 40GB
    (108.32 / 156) / (234.14 / 312), RTX 3080 (32.03 / 29.8) / (64.68 / 59.5), 3080 Ti
    (38.15 / 34.1) / (77.405 / 68.2), L4 (31.88 / 60) / (70.89 / 121), RTX 4090
    (85.65 / 82.6) / (165.26 / 165.2), H100 SXM (402.15 / 494.7) / (794.5 / 989.4), H100
    PCIe (240.43 / 378) / (495.93 / 756.5)."""
    ratios = TF32_RATIOS
    tf32 = figures(get_device("A100 SXM 40GB")).matrix("tf32")  # MAMF bf16 271.2 of 312
    assert tf32 is not None and tf32.origin == "class default"
    assert tf32.share == pytest.approx(271.2 / 312 * statistics.median(ratios))
    assert tf32.value == pytest.approx(156e12 * 271.2 / 312 * statistics.median(ratios))
    assert "bf16 share" in tf32.source and "7 measured NVIDIA GPU" in tf32.source
    # the RTX A6000's workstation class has no TF32 member: the datasheet before, now its
    # own bf16 share 123.34 / 154.8 times the same ratio
    a6000 = figures(get_device("RTX A6000")).matrix("tf32")
    assert a6000 is not None and a6000.share == pytest.approx(
        123.34 / 154.8 * statistics.median(ratios))
    # a device measured in TF32 keeps its own figure; one with no 16-bit measurement of its
    # own (B300) the class median
    assert figures(get_device("H100 SXM")).matrix("tf32").origin == "measured"  # type: ignore[union-attr]
    b300 = figures(get_device("B300")).matrix("tf32")
    assert b300 is not None and "ratio" not in b300.source


def test_the_ratio_rule_on_a_made_up_population() -> None:
    """Two devices measured in bf16 and fp8 (fp8 peak 200 TFLOPS): shares 0.8 / 0.6 and
    0.5 / 0.45, ratios 0.75 and 0.9, median 0.825; a third measured in bf16 at 0.7 takes
    0.7 x 0.825 for fp8, not the class median of fp8 shares (0.525)."""
    def gpu(name: str, bf16: float, fp8: float | None) -> DeviceSpec:
        achievable = {"matrix_flops_per_s": {"bf16": {
            "value": f"{bf16} TFLOPS", "source": "https://x.test/mm", "method": "test"}}}
        if fp8 is not None:
            achievable["matrix_flops_per_s"]["fp8"] = {
                "value": f"{fp8} TFLOPS", "source": "https://x.test/mm", "method": "test"}
        return hbm_gpu(name, matrix_flops_per_s={"bf16": "100 TFLOPS", "fp8": "200 TFLOPS"},
                       achievable=achievable)

    population = [gpu("A", 80, 120), gpu("B", 50, 90), gpu("C", 70, None)]
    fp8 = figures(population[2], population=population).matrix("fp8")
    assert fp8 is not None and fp8.origin == "class default"
    assert fp8.share == pytest.approx(0.7 * (0.75 + 0.9) / 2)
    assert fp8.value == pytest.approx(200e12 * 0.7 * (0.75 + 0.9) / 2)
    # no 16-bit measurement of its own: the class median of fp8 shares
    bare = hbm_gpu("D", matrix_flops_per_s={"bf16": "100 TFLOPS", "fp8": "200 TFLOPS"})
    median = figures(bare, population=population).matrix("fp8")
    assert median is not None and median.share == pytest.approx((0.6 + 0.45) / 2)
    assert "ratio" not in median.source



def test_a_part_with_no_matrix_measurement_takes_the_power_rule_of_its_isa() -> None:
    """The A100 PCIe 80GB (sm_80, 300 W, 312 TFLOPS bf16) from the measured sm_80 parts, by
    hand from the registry's figures: A100 PCIe 40GB 234.14 / 312 at 250 W, A100 SXM 40GB
    and 80GB 271.2 / 312 at 400 W, each times (300 / 312 over its W per TFLOP/s)^(1/3);
    the median is the SXM parts'."""
    own = 300 / 312
    carried = [234.14 / 312 * (own / (250 / 312)) ** (1 / 3),
               271.2 / 312 * (own / (400 / 312)) ** (1 / 3),
               271.2 / 312 * (own / (400 / 312)) ** (1 / 3)]
    fig = figures(get_device("A100 PCIe 80GB")).matrix("bf16")
    assert fig is not None and fig.origin == "class default"
    assert fig.share == pytest.approx(statistics.median(carried))
    assert fig.value == pytest.approx(312e12 * statistics.median(carried))
    assert fig.source.startswith("power rule") and "3 measured NVIDIA sm_80" in fig.source
    # a measured part keeps its own figure
    assert figures(get_device("A100 PCIe 40GB")).matrix("bf16").origin == "measured"  # type: ignore[union-attr]
    # a what-if keeps the share: its TDP scales with its peaks, in scaled() and in a new
    # 16-bit peak; a new TDP alone moves it by the cube root
    base = get_device("A100 PCIe 80GB")
    twice = base.scaled(flops_factor=2.0)
    assert twice.tdp_watts == 600
    assert figures(twice).matrix("bf16").share == pytest.approx(fig.share)  # type: ignore[union-attr]
    faster = base.with_overrides(matrix_flops_per_s={**base.matrix_flops_per_s,
                                                     "bf16": 624e12, "fp16": 624e12})
    assert faster.tdp_watts == 600
    assert figures(faster).matrix("bf16").share == pytest.approx(fig.share)  # type: ignore[union-attr]
    # its TF32 follows its power-rule bf16 share as a measured one would
    tf32 = figures(base).matrix("tf32")
    assert tf32 is not None and "power-rule bf16 share" in tf32.method
    assert tf32.share == pytest.approx(fig.share * statistics.median(TF32_RATIOS))
    capped = base.with_overrides(tdp_watts="150 W")
    assert figures(capped).matrix("bf16").share == pytest.approx(  # type: ignore[union-attr]
        fig.share * 0.5 ** (1 / 3))


def test_the_power_rule_on_a_made_up_population() -> None:
    """One part measured at 0.8 of 100 TFLOPS at 400 W (4 W per TFLOP/s): a part of its ISA
    at 50 W (0.5 W per TFLOP/s, an eighth) takes 0.8 x (1/8)^(1/3) = 0.4; without an ISA,
    a TDP, or a measured part of the same ISA, the class median (0.8) instead."""
    def gpu(name: str, watts: float | None, isa: str | None = "sm_90",
            bf16: float | None = None) -> DeviceSpec:
        fields: dict[str, Any] = {"tdp_watts": f"{watts} W"} if watts else {}
        if isa:
            fields.update(isa=isa, sources={"compute": "https://x.test", "isa": "https://x.test"})
        return hbm_gpu(name, bf16_tflops=bf16, **fields)

    population = [gpu("A", 400, bf16=80), gpu("B", 50)]
    low = figures(population[1], population=population).matrix("bf16")
    assert low is not None and low.share == pytest.approx(0.4)
    assert low.source.startswith("power rule") and "1 measured Test sm_90 device (A)" in low.source
    for other in (gpu("C", None), gpu("D", 50, isa=None), gpu("E", 50, isa="sm_80")):
        fig = figures(other, population=[*population, other]).matrix("bf16")
        assert fig is not None and fig.share == pytest.approx(0.8)
        assert not fig.source.startswith("power rule")


def test_an_isa_needs_its_source() -> None:
    with pytest.raises(DeviceSpecError, match=r"isa 'sm_90' has no source"):
        hbm_gpu("X", isa="sm_90")
    with pytest.raises(DeviceSpecError, match="isa"):
        hbm_gpu("Y", isa="volta", sources={"compute": "https://x.test", "isa": "https://x.test"})

def _attention_rate(name: str) -> tuple[float, int]:
    """The median over a shipped AIConfigurator attention table's shapes of at least 1e11
    FLOPs of FLOPs over time, the FLOPs by hand: two matmuls of 2 FLOPs per multiply-add
    over the s (s + 1) / 2 query-key pairs a causal mask keeps, per batch and head."""
    path = Path(__file__).parents[1] / "benchmarks" / "data" / "kernels" / \
        f"attention_aic_{name}_bf16.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = [line.strip().split(",") for line in f][1:]
    rates = []
    for b, h, s, d, seconds in rows:
        flops = 4 * int(b) * int(h) * int(d) * int(s) * (int(s) + 1) // 2
        if flops >= 1e11:
            rates.append(flops / float(seconds))
    return statistics.median(rates), len(rates)


@pytest.mark.parametrize(("device", "table"), [
    ("H100 SXM", "h100_sxm"), ("H200 SXM", "h200_sxm"), ("B200", "b200"),
    ("GB200 (per GPU)", "gb200_per_gpu"), ("B300", "b300"), ("GB300 (per GPU)", "gb300_per_gpu"),
    ("L40S", "l40s"), ("A100 SXM 80GB", "a100_sxm_80gb")])
def test_attention_rates_are_the_median_of_their_tables(device: str, table: str) -> None:
    rate, shapes = _attention_rate(table)
    fig = figures(get_device(device)).attention("bf16")
    assert fig is not None and fig.origin == "measured"
    assert fig.value == pytest.approx(rate, rel=1e-3)
    assert f"median over the {shapes} shapes" in fig.method
    assert fig.share is not None and fig.share < 0.5  # flash attention: far below the GEMMs


def test_attention_class_default_and_fallbacks() -> None:
    """The HBM datacentre parts' median share (A100 SXM 80GB, H100 SXM, H200 SXM, B200,
    GB200, B300, GB300) for an unmeasured H100 PCIe, bf16 and fp16 alike; none for a
    GeForce card, whose attention keeps the matrix figure."""
    shares = [_attention_rate(t)[0] / get_device(d).matrix_flops_per_s["bf16"] for d, t in
              (("A100 SXM 80GB", "a100_sxm_80gb"), ("H100 SXM", "h100_sxm"),
               ("H200 SXM", "h200_sxm"), ("B200", "b200"), ("GB200 (per GPU)", "gb200_per_gpu"),
               ("B300", "b300"), ("GB300 (per GPU)", "gb300_per_gpu"))]
    pcie = figures(get_device("H100 PCIe"))
    for dtype in ("bf16", "fp16"):
        fig = pcie.attention(dtype)
        assert fig is not None and fig.origin == "class default"
        assert fig.share == pytest.approx(statistics.median(shares), rel=1e-3)
    assert figures(get_device("RTX 4090")).attention("bf16") is None
    assert figures(get_device("H100 SXM")).attention("fp8") is None


def _layer_norm_bandwidth(name: str) -> tuple[float, int]:
    """The median over a shipped vidur table's layer norms of 2,048 rows and more of the
    compulsory bytes over time, the bytes by hand: each fp16 element of the rows read and
    written once, the weight and bias read, an fp32 mean and rstd written per row."""
    path = Path(__file__).parents[1] / "benchmarks" / "data" / "kernels" / \
        f"rowwise_vidur_{name}_fp16.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = [line.strip().split(",") for line in f][1:]
    rates = [(2 * int(r) * int(c) * 2 + 2 * int(c) * 2 + int(r) * 8) / float(seconds)
             for op, r, c, _, seconds in rows if op == "layer_norm" and int(r) >= 2048]
    return statistics.median(rates), len(rates)


LAYER_NORM_TABLES = (("A100 SXM 80GB", "a100"), ("H100 SXM", "h100"), ("A40", "a40"))


@pytest.mark.parametrize(("device", "table"), LAYER_NORM_TABLES)
def test_layer_norm_bandwidths_are_the_median_of_their_tables(device: str, table: str) -> None:
    rate, rows = _layer_norm_bandwidth(table)
    fig = figures(get_device(device)).bandwidth("layer_norm")
    assert fig.origin == "measured" and fig.value == pytest.approx(rate, rel=1e-3)
    assert f"the {rows} token counts" in fig.method
    copy = figures(get_device(device)).bandwidth("copy").value
    assert 0.5 < fig.value / copy < 0.75  # the block-per-row kernel misses the copy stream


def test_layer_norm_default_is_the_copy_figure_times_the_vendor_median_ratio() -> None:
    """An unmeasured NVIDIA GPU: its own copy figure times the median over the measured
    ones of layer norm over their copy figure (the H100 SXM's copy is FluidX3D's stream
    figure, its nearest measured pattern); another vendor's GPU keeps its copy figure."""
    ratios = [_layer_norm_bandwidth(t)[0] / figures(get_device(d)).bandwidth("copy").value
              for d, t in LAYER_NORM_TABLES]
    assert figures(get_device("H100 SXM")).bandwidth("copy").value == 2693e9
    for name in ("H200 SXM", "RTX 4090", "T4"):
        fig = figures(get_device(name))
        default = fig.bandwidth("layer_norm")
        assert default.origin == "class default" and "median of 3" in default.source
        assert default.value == pytest.approx(
            fig.bandwidth("copy").value * statistics.median(ratios), rel=1e-3)
    amd = figures(get_device("MI300X"))
    assert amd.bandwidth("layer_norm").value == amd.bandwidth("copy").value
    assert "no layer-norm measurement" in amd.bandwidth("layer_norm").method


def test_launch_overhead_and_latency_from_gpu_benches() -> None:
    a100 = figures(get_device("A100 SXM 80GB"))
    # gpu-small-kernels/a100_80.txt: 4096 elements x 16 B = 64 KiB at 25 GB/s best -> 2.62 us
    plain = a100.launch_overhead()
    assert plain.origin == "measured"
    assert plain.value == pytest.approx(65536 / 25e9, rel=0.05)
    graph = a100.launch_overhead(graphs=True)  # a100_80_graph.txt: 49 GB/s -> 1.34 us
    assert graph.value == pytest.approx(65536 / 49e9, rel=0.05)
    # gpu-latency/a100_40.txt: 574.6 cycles per access at 1410 MHz
    latency = figures(get_device("A100 SXM 40GB")).dram_latency()
    assert latency is not None and latency.value == pytest.approx(574.6 / 1410e6, rel=1e-3)


def test_sustained_clock_and_power_cap() -> None:
    # gpu-roofline/alex_a40.txt at 128.25 Fl/B: 1725 1725 1710 1710 1725 1725 1710 1695 MHz
    a40 = figures(get_device("A40"))
    clock = a40.clock()
    assert clock is not None and clock.value == pytest.approx((1710 + 1725) / 2 * 1e6)
    assert clock.share == pytest.approx(1717.5 / 1740)
    assert a40.power_capped and "below" in a40.power_capped_reason
    a100 = figures(get_device("A100 SXM 40GB"))  # 1410 MHz on every GPU: the rated boost
    assert not a100.power_capped
    assert not figures(get_device("T4")).power_capped  # no clock measured
    rtx3090 = figures(get_device("RTX 3090")).clock()  # club-3090#107: 1965 MHz, boost 1695
    assert rtx3090 is not None and rtx3090.share == pytest.approx(1965 / 1695)
    assert rtx3090.share < CLOCK_MARGIN


def test_ecc_defaults() -> None:
    assert figures(get_device("T4")).ecc_default is True
    assert figures(get_device("H100 SXM")).ecc_default is True
    assert figures(get_device("RTX 4090")).ecc_default is False
    assert figures(get_device("TPU v5e")).ecc_default is None


def test_bandwidth_patterns_are_declared_once() -> None:
    from typing import get_args

    from roofline.analysis import rates
    from roofline.hardware import achievable, measured

    assert achievable.Pattern is measured.BandwidthPattern
    assert rates.Pattern is measured.AccessPattern
    assert get_args(measured.BandwidthPattern) == ("read", "copy", "triad", "stream_app",
                                                    "layer_norm")


# --------------------------------------------------------------------------- class defaults
def hbm_gpu(name: str, copy_gb_s: float | None = None, bf16_tflops: float | None = None,
            **fields: Any) -> DeviceSpec:
    """A made-up HBM datacentre GPU with 1000 GB/s and 100 TFLOPS bf16."""
    data: dict[str, Any] = {
        "name": name, "vendor": "Test", "kind": "gpu", "memory_type": "HBM3",
        "memory_bytes": "40 GB", "bandwidth_bytes_per_s": "1000 GB/s",
        "matrix_flops_per_s": {"bf16": "100 TFLOPS"}, "sources": {"compute": "https://x.test"},
    }
    achievable: dict[str, Any] = {}
    if copy_gb_s is not None:
        achievable["bandwidth_bytes_per_s"] = {"copy": {
            "value": f"{copy_gb_s} GB/s", "source": "https://x.test/stream", "method": "test"}}
    if bf16_tflops is not None:
        achievable["matrix_flops_per_s"] = {"bf16": {
            "value": f"{bf16_tflops} TFLOPS", "source": "https://x.test/mm", "method": "test"}}
    if achievable:
        data["achievable"] = achievable
    data.update(fields)
    return validate_device(data, origin="test")


def test_class_default_is_the_median_of_the_measured_members() -> None:
    population = [hbm_gpu("A", 600, 70), hbm_gpu("B", 900, 90), hbm_gpu("C", 700),
                  hbm_gpu("D", 800, 80), hbm_gpu("E")]
    assert {class_of(s) for s in population} == {"HBM datacentre"}
    defaults = class_defaults(population)
    # copy shares 0.6, 0.9, 0.7, 0.8 -> median (0.7 + 0.8) / 2; bf16 0.7, 0.9, 0.8 -> 0.8
    assert defaults["HBM datacentre", "bandwidth", "copy"].value == pytest.approx(0.75)
    assert defaults["HBM datacentre", "bandwidth", "copy"].members == ("A", "B", "C", "D")
    assert defaults["HBM datacentre", "matrix", "bf16"].value == pytest.approx(0.8)
    unmeasured = hbm_gpu("New", bandwidth_bytes_per_s="2 TB/s")
    fig = figures(unmeasured, population=population)
    copy = fig.bandwidth("copy")
    assert copy.origin == "class default" and copy.value == pytest.approx(0.75 * 2e12)
    assert copy.share == pytest.approx(0.75) and "median of 4 measured" in copy.source
    bf16 = fig.matrix("bf16")
    assert bf16 is not None and bf16.origin == "class default"
    assert bf16.value == pytest.approx(80e12)
    # a measured device keeps its own figure
    assert figures(population[0], population=population).bandwidth().value == pytest.approx(600e9)


def test_a_class_without_measured_members_falls_back_to_the_datasheet() -> None:
    population = [hbm_gpu("A", 600, 70)]
    gddr = hbm_gpu("G", memory_type="GDDR6", memory_bytes="16 GB", bandwidth_bytes_per_s="500 GB/s")
    assert class_of(gddr) == "GDDR datacentre"
    fig = figures(gddr, population=population)
    copy = fig.bandwidth()
    assert copy.origin == "datasheet" and copy.share == 1.0 and copy.value == 500e9
    assert fig.matrix("fp8") is None  # no datasheet peak
    overhead = fig.launch_overhead()
    assert overhead.origin == "datasheet" and overhead.value == 5e-6
    assert "modelling constant" in overhead.method
    assert fig.dram_latency() is None


def test_shipped_class_defaults_are_medians_of_the_shipped_members() -> None:
    """The GDDR datacentre copy default, by hand from nvidia.yaml: each member's copy
    bandwidth (gpu-benches' stream copy where measured, else FluidX3D's, which moves one byte
    in per byte out) over its datasheet bandwidth. T4 207.5 / 320 = 0.648, L40S 579.6 / 864
    = 0.671, A10 448.4 / 600 = 0.747, L4 228 / 300 = 0.760, L40 816 / 864 = 0.944, A40
    658 / 696 = 0.945: the median of the six is the mean of A10's and L4's, 0.754."""
    key = ("GDDR datacentre", "bandwidth", "copy")
    default = class_defaults(SHIPPED)[key]
    assert default.members == ("T4", "A10", "A40", "L4", "L40", "L40S")
    for name in default.members:
        spec = get_device(name)
        assert spec.achievable is not None and class_of(spec) == "GDDR datacentre"
    assert default.value == pytest.approx((448.4 / 600 + 228 / 300) / 2)
    a10g = figures(get_device("A10G")).bandwidth()  # no measurement of its own
    assert a10g.origin == "class default" and a10g.share == pytest.approx(default.value)


def test_fp16_borrows_the_bf16_share_only_where_the_peaks_are_equal() -> None:
    a100 = figures(get_device("A100 SXM 40GB"))  # MAMF bf16 only; fp16 peak equals bf16
    fp16 = a100.matrix("fp16")
    assert fp16 is not None and fp16.origin == "measured" and "bf16 measurement" in fp16.method
    assert fp16.share == pytest.approx(271.2 / 312)


# --------------------------------------------------------------------------- rejections
def write_device(tmp_path: Path, achievable: dict[str, Any], **fields: Any) -> Path:
    data = {"name": "Bad GPU", "vendor": "Test", "kind": "gpu", "memory_type": "HBM3",
            "memory_bytes": "80 GB", "bandwidth_bytes_per_s": "3.35 TB/s",
            "matrix_flops_per_s": {"bf16": "989.4 TFLOPS"}, "boost_clock_hz": "1980 MHz",
            "sources": {"compute": "https://x.test"}, "achievable": achievable, **fields}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


FIG = {"source": "https://x.test/src", "method": "test benchmark"}


@pytest.mark.parametrize(
    ("achievable", "field", "message"),
    [
        ({"matrix_flops_per_s": {"bf16": {"value": "1250 TFLOPS", **FIG}}},
         "achievable.matrix_flops_per_s['bf16']", "clock margin"),
        ({"sustained_clock_hz": {"value": "2500 MHz", **FIG}},
         "achievable.sustained_clock_hz", "clock margin"),
        ({"bandwidth_bytes_per_s": {"copy": {"value": "3.5 TB/s", **FIG}}},
         "achievable.bandwidth_bytes_per_s['copy']", "bandwidth efficiency of 1.04 > 1"),
        ({"bandwidth_bytes_per_s": {"read": {"value": "2.7 TB/s", "method": "stream"}}},
         "achievable.bandwidth_bytes_per_s.read", "needs its source"),
        ({"bandwidth_bytes_per_s": {"read": {"value": "2.7 TB/s", "source": " ",
                                             "method": "stream"}}},
         "achievable.bandwidth_bytes_per_s.read", "needs its source"),
        ({"matrix_flops_per_s": {"fp8": {"value": "1500 TFLOPS", **FIG}}},
         "achievable.matrix_flops_per_s['fp8']", "no datasheet"),
        ({"matrix_flops_per_s": {"bf16": {"value": "794 GFLOPS", **FIG}}},
         "achievable.matrix_flops_per_s['bf16']", "below 1%"),
        ({"launch_overhead_seconds": {"value": "2.6 ms", **FIG}},
         "achievable.launch_overhead_seconds", "outside"),
        ({"ecc_default": True}, "ecc_default", "sources['ecc']"),
        ({"attention_flops_per_s": {"bf16": {"value": "1250 TFLOPS", **FIG}}},
         "achievable.attention_flops_per_s['bf16']", "clock margin"),
        ({"attention_flops_per_s": {"fp8": {"value": "500 TFLOPS", **FIG}}},
         "achievable.attention_flops_per_s['fp8']", "no datasheet"),
        ({"bandwidth_bytes_per_s": {"layer_norm": {"value": "3.5 TB/s", **FIG}}},
         "achievable.bandwidth_bytes_per_s['layer_norm']", "bandwidth efficiency of 1.04 > 1"),
        ({"bandwidth_bytes_per_s": {"layernorm": {"value": "1 TB/s", **FIG}}},
         "layernorm", "layer_norm"),
    ],
)
def test_bad_achievable_figures_rejected_naming_file_device_and_field(
        tmp_path: Path, achievable: dict[str, Any], field: str, message: str) -> None:
    path = write_device(tmp_path, achievable)
    with pytest.raises(DeviceSpecError) as info:
        load_device(path)
    text = str(info.value)
    assert str(path) in text and "device 'Bad GPU'" in text
    assert field in text and message in text


def test_geforce_above_its_rated_boost_is_accepted() -> None:
    # 1.14x: the RTX 3080 Ti's measured 77.83 TFLOPS over its 68.2 datasheet (zzc-db)
    data = {"name": "Boosting", "vendor": "Test", "kind": "gpu", "memory_type": "GDDR6X",
            "memory_bytes": "12 GB", "bandwidth_bytes_per_s": "912 GB/s",
            "matrix_flops_per_s": {"fp16": "68.2 TFLOPS"}, "achievable": {
                "matrix_flops_per_s": {"fp16": {"value": "77.83 TFLOPS", **FIG}}}}
    spec = validate_device(data, origin="test")
    fp16 = figures(spec).matrix("fp16")
    assert fp16 is not None and fp16.share == pytest.approx(77.83 / 68.2)


def _sdpa_over_figure(backend: str, head_dim: int, causal: int, backward: int) -> float:
    """The median rate PyTorch's SDPA reached on the lent H200 over its sequences of 2048
    tokens or more, over the H200's attention figure; FLOPs by hand: 4 x batch x heads x
    query-key pairs x head dim forward, 2.5 times that more with the backward."""
    path = Path(__file__).parents[1] / "benchmarks" / "data" / "kernels" / \
        "sdpa_roofline_h200_sxm_bf16.csv.gz"
    with gzip.open(path, "rt") as f:
        header, *rows = [line.strip().split(",") for line in f]
    col = {name: header.index(name) for name in header}
    rates = []
    for r in rows:
        if (r[col["backend"]], int(r[col["head_dim"]]), int(r[col["causal"]]),
                int(r[col["backward"]])) != (backend, head_dim, causal, backward):
            continue
        s = int(r[col["seq"]])
        if s < 2048:
            continue
        pairs = s * (s + 1) / 2 if causal else s * s
        flops = 4 * int(r[col["batch"]]) * int(r[col["heads"]]) * pairs * head_dim
        rates.append(flops * (3.5 if backward else 1) / float(r[col["seconds"]]))
    figure = figures(get_device("H200 SXM")).attention("bf16")
    assert figure is not None and figure.value is not None
    return statistics.median(rates) / figure.value


def test_an_attention_figure_says_what_it_measured_and_how_far_pytorch_ran_from_it() -> None:
    cudnn_128 = [_sdpa_over_figure("default", 128, c, 0) for c in (0, 1)]
    cudnn_64 = [_sdpa_over_figure("default", 64, c, 0) for c in (0, 1)]
    flash = [_sdpa_over_figure("flash", d, c, b) for d in (64, 128) for c in (0, 1)
             for b in (0, 1)]
    for span in (cudnn_128, cudnn_64, flash):
        assert f"{min(span):.2f}-{max(span):.2f}x" in ATTENTION_NOTE
    q = torch.empty(2, 12, 256, 64, dtype=torch.bfloat16, device="meta")
    trace = roofline.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, q, q,
                           fake=True)
    assert ATTENTION_NOTE in roofline.analyze(trace, "h100").assumptions
    assert ATTENTION_NOTE not in roofline.analyze(trace, "rtx 4090").assumptions  # no figure
