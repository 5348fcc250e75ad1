"""Measured achievable figures: shipped data, class defaults, rejections, what-if scaling.

Expected numbers are taken from the primary sources (the value the file prints, divided by
the datasheet figure) or computed by hand, never from the code under test.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from roofline.hardware import DeviceSpec, DeviceSpecError, get_device, load_device
from roofline.hardware.achievable import class_defaults, class_of, figures
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


def test_new_devices_resolve_by_their_torch_names() -> None:
    assert get_device("Tesla P100-PCIE-16GB").name == "P100 PCIe 16GB"
    assert get_device("Tesla P100-SXM2-16GB").name == "P100 SXM2 16GB"
    assert get_device("Tesla P4").name == "P4"
    mi250 = get_device("AMD Instinct MI250")
    assert mi250.name == "MI250 GCD" and mi250.compute_units == 104  # ROCm: 104 active CUs
    # half of AMD's package figures: 362.1 TFLOPS FP16, 3.2 TB/s
    assert mi250.matrix_flops_per_s["fp16"] == pytest.approx(362.1e12 / 2)
    assert get_device("NVIDIA L40").name == "L40"
    assert get_device("NVIDIA L40S").name == "L40S"
    assert get_device("AMD Instinct MI250X").name == "MI250X GCD"


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
    key = ("GDDR datacentre", "bandwidth", "copy")
    default = class_defaults(SHIPPED)[key]
    # recompute from the members' own copy figures (stream copy, else FluidX3D)
    shares = []
    for name in default.members:
        spec = get_device(name)
        assert spec.achievable is not None and class_of(spec) == "GDDR datacentre"
        table = spec.achievable.bandwidth_bytes_per_s
        m = table.get("copy") or table["stream_app"]
        shares.append(m.value / spec.bandwidth_bytes_per_s)
    assert default.value == pytest.approx(statistics.median(shares))
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


# --------------------------------------------------------------------------- what-if
def test_clock_factor_scales_compute_and_clocks_not_bandwidth() -> None:
    h100 = get_device("H100 SXM")
    fast = h100.scaled(clock_factor=1.2)
    assert fast.name == "H100 SXM (1.2x clock)"
    assert fast.matrix_flops_per_s["bf16"] == pytest.approx(1.2 * 989.4e12)
    assert fast.vector_flops_per_s["fp32"] == pytest.approx(1.2 * 66.9e12)
    assert fast.matrix_sparse_flops_per_s["fp8"] == pytest.approx(1.2 * 3957.8e12)
    assert fast.boost_clock_hz == pytest.approx(1.2 * 1980e6)
    assert fast.bandwidth_bytes_per_s == h100.bandwidth_bytes_per_s
    assert fast.compute_units == 132
    before, after = figures(h100), figures(fast)
    bf16_before, bf16_after = before.matrix("bf16"), after.matrix("bf16")
    assert bf16_before is not None and bf16_after is not None
    assert bf16_after.value == pytest.approx(1.2 * 794.5e12)
    assert bf16_after.share == pytest.approx(bf16_before.share)  # type: ignore[arg-type]
    assert after.bandwidth().value == pytest.approx(before.bandwidth().value)  # bandwidth kept
    a40 = get_device("A40").scaled(clock_factor=0.5)
    clock = figures(a40).clock()
    assert clock is not None and clock.value == pytest.approx(0.5 * 1717.5e6)
    assert clock.share == pytest.approx(1717.5 / 1740)


def test_cores_factor_scales_compute_and_compute_units_not_bandwidth() -> None:
    a100 = get_device("A100 SXM 80GB")
    half = a100.scaled(cores_factor=0.5)
    assert half.compute_units == 54
    assert half.matrix_flops_per_s["tf32"] == pytest.approx(0.5 * 156e12)
    assert half.vector_flops_per_s["fp64"] == pytest.approx(0.5 * 9.7e12)
    assert half.bandwidth_bytes_per_s == a100.bandwidth_bytes_per_s
    assert half.boost_clock_hz == a100.boost_clock_hz
    assert figures(half).matrix("bf16").value == pytest.approx(0.5 * 271.2e12)  # type: ignore[union-attr]
    assert figures(half).bandwidth().value == pytest.approx(1732e9)
    both = a100.scaled(flops_factor=2, cores_factor=1.5, clock_factor=1.1)
    assert both.matrix_flops_per_s["bf16"] == pytest.approx(312e12 * 2 * 1.5 * 1.1)
    assert both.compute_units == 162


@pytest.mark.parametrize("factor", [0, -1, float("nan"), float("inf"), True, "2"])
def test_clock_and_cores_factors_must_be_positive_numbers(factor: Any) -> None:
    with pytest.raises(ValueError, match="clock_factor"):
        get_device("h100").scaled(clock_factor=factor)
    with pytest.raises(ValueError, match="cores_factor"):
        get_device("h100").scaled(cores_factor=factor)


def test_scaling_bandwidth_keeps_the_measured_share() -> None:
    h100 = get_device("H100 SXM")
    share = figures(h100).bandwidth().share
    for spec in (h100.scaled(bandwidth_factor=1.5),
                 h100.with_overrides(bandwidth_bytes_per_s="4.8 TB/s")):
        copy = figures(spec).bandwidth()
        assert copy.origin == "measured"
        assert copy.share == pytest.approx(share)  # type: ignore[arg-type]
        assert copy.value == pytest.approx(share * spec.bandwidth_bytes_per_s)  # type: ignore[operator]


def test_overriding_a_peak_keeps_the_share_of_its_measurement() -> None:
    h100 = get_device("H100 SXM")
    slower = h100.with_overrides(
        matrix_flops_per_s={**h100.matrix_flops_per_s, "bf16": "500 TFLOPS"},
        matrix_sparse_flops_per_s={**h100.matrix_sparse_flops_per_s, "bf16": "1000 TFLOPS"})
    bf16 = figures(slower).matrix("bf16")
    assert bf16 is not None and bf16.value == pytest.approx(500e12 * 794.5 / 989.4)
    fp8 = figures(slower).matrix("fp8")  # untouched peak, untouched measurement
    assert fp8 is not None and fp8.value == pytest.approx(1402.6e12)


def test_a_new_boost_clock_follows_into_the_measured_sustained_clock() -> None:
    a40 = get_device("A40")  # rated 1740 MHz, held 1717.5 MHz
    faster = a40.with_overrides(boost_clock_hz="1914 MHz")
    clock = figures(faster).clock()
    assert clock is not None and clock.value == pytest.approx(1717.5e6 * 1.1)
    assert clock.share == pytest.approx(1717.5 / 1740)


def test_a_boost_clock_set_where_none_was_rated_keeps_the_measured_clock() -> None:
    """H200 SXM lists no rated boost; its sustained clock is a measurement of the chip, so a
    new rated boost does not rescale it: it stays as measured where it fits the new boost
    (within CLOCK_MARGIN), and is dropped with a note saying why where it does not."""
    h200 = get_device("H200 SXM")
    assert h200.boost_clock_hz is None and h200.achievable is not None
    measured = h200.achievable.sustained_clock_hz
    assert measured is not None and measured.value == 1.98e9
    rated = h200.with_overrides(boost_clock_hz="1980 MHz")
    clock = figures(rated).clock()
    assert clock is not None and clock.value == 1.98e9 and clock.share == pytest.approx(1.0)
    assert rated.notes == h200.notes
    slow = h200.with_overrides(boost_clock_hz="1.1 GHz")  # was DeviceSpecError
    assert slow.boost_clock_hz == 1.1e9 and figures(slow).clock() is None
    assert slow.achievable is not None
    assert slow.achievable.bandwidth_bytes_per_s == h200.achievable.bandwidth_bytes_per_s
    note = slow.notes[-1]
    assert slow.notes[:-1] == h200.notes
    assert "achievable.sustained_clock_hz" in note and "dropped" in note
    assert "1.98 GHz" in note and "1.1 GHz" in note and "1.8x" in note
    assert "no rated boost_clock_hz" in note
    edge = h200.with_overrides(boost_clock_hz="1.65 GHz")  # 1.98 / 1.65 = CLOCK_MARGIN: fits
    clock = figures(edge).clock()
    assert clock is not None and clock.value == 1.98e9 and edge.notes == h200.notes
    # figures the caller gives are checked as given, not dropped
    with pytest.raises(DeviceSpecError, match="clock margin"):
        h200.with_overrides(boost_clock_hz="1.1 GHz", achievable=h200.achievable.model_dump())
