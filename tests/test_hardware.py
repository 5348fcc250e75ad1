"""Tests of the DeviceSpec model, the shipped device data and the generated files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from roofline.hardware import DeviceSpec, DeviceSpecError, get_device
from roofline.hardware import registry as registry_module
from roofline.hardware.registry import DATA_DIR
from roofline.hardware.spec import DEFAULT_LAUNCH_OVERHEAD_SECONDS, HostLink, device_file_schema
from roofline.hardware.units import canonical_dtype, parse_quantity
from roofline.presentation.devices import devices_to_json, format_devices_table

ROOT = Path(__file__).resolve().parent.parent
ALL = [spec for spec, _ in registry_module._builtin()]  # shipped devices only
IDS = [spec.name for spec in ALL]


pytestmark = pytest.mark.usefixtures("isolated_registry")  # tests/conftest.py


def minimal(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "Test GPU",
        "vendor": "Test",
        "kind": "gpu",
        "matrix_flops_per_s": {"bf16": "100 TFLOPS"},
        "matrix_sparse_flops_per_s": {"bf16": "200 TFLOPS"},
        "vector_flops_per_s": {"fp32": "20 TFLOPS"},
        "bandwidth_bytes_per_s": "1 TB/s",
        "memory_bytes": "16 GB",
    }
    data.update(overrides)
    return data


# --------------------------------------------------------------------------- shipped data
def test_at_least_40_devices_with_unique_names() -> None:
    assert len(ALL) >= 40
    assert len(set(IDS)) == len(IDS)


REQUIRED = [
    "V100 SXM2 16GB", "V100 PCIe 16GB", "T4", "A10", "A10G", "A40", "A100 SXM 40GB",
    "A100 SXM 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB", "RTX A6000", "L4", "L40S", "H100 SXM",
    "H100 PCIe", "H100 NVL", "H200 SXM", "H200 NVL", "B200", "GB200 (per GPU)", "RTX 3090",
    "RTX 4090", "RTX 5090", "Jetson AGX Orin 64GB", "MI100", "MI210", "MI250X", "MI300X",
    "MI325X", "MI355X", "Gaudi 2", "Gaudi 3", "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e",
    "Apple M1", "Apple M1 Max", "Apple M2 Ultra", "Apple M3 Max", "Xeon Platinum 8480+",
    "EPYC 9654",
]  # fmt: skip


@pytest.mark.parametrize("name", REQUIRED)
def test_required_coverage(name: str) -> None:
    assert get_device(name).name == name


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_every_device_cites_compute_and_memory(spec: DeviceSpec) -> None:
    assert {"compute", "memory"} <= set(spec.sources)
    assert all(url.startswith(("https://", "http://")) for url in spec.sources.values())


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_every_device_round_trips(spec: DeviceSpec) -> None:
    assert DeviceSpec.model_validate(spec.model_dump()) == spec
    assert DeviceSpec.model_validate_json(spec.model_dump_json()) == spec


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_dense_below_sparse_below_twice_dense(spec: DeviceSpec) -> None:
    for dtype, sparse in spec.matrix_sparse_flops_per_s.items():
        dense = spec.matrix_flops_per_s[dtype]  # every shipped sparse figure has a dense one
        assert dense <= sparse <= 2 * dense * 1.01


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_matrix_units_beat_vector_fp32(spec: DeviceSpec) -> None:
    half = [p for p in (spec.peak_flops_per_s("bf16"), spec.peak_flops_per_s("fp16")) if p]
    fp32 = spec.peak_flops_per_s("fp32", "vector")
    if half and fp32:
        assert max(half) >= fp32


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_ridge_points_plausible(spec: DeviceSpec) -> None:
    ridges = [
        spec.ridge_point("bf16", "matrix"),
        spec.ridge_point("fp16", "matrix"),
        spec.ridge_point("fp32", "vector"),
    ]
    for ridge in ridges:
        assert ridge is None or 1 <= ridge <= 2000
    if all(r is None for r in ridges):  # no published compute figure: the notes must say so
        assert any("blank" in note for note in spec.notes)


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_device_has_no_guessed_defaults(spec: DeviceSpec) -> None:
    assert not spec.measured
    assert spec.efficiency == {}
    assert spec.launch_overhead_seconds == DEFAULT_LAUNCH_OVERHEAD_SECONDS[spec.kind]


HEADLINES = [
    ("H100 SXM", "matrix", "bf16", 989.4e12, 3.35e12),
    ("A100 SXM 80GB", "matrix", "bf16", 312e12, 2.039e12),
    ("A100 SXM 40GB", "matrix", "tf32", 156e12, 1.555e12),
    ("MI300X", "matrix", "bf16", 1307.4e12, 5.3e12),
    ("V100 SXM2 16GB", "matrix", "fp16", 125e12, 900e9),
    ("T4", "matrix", "fp16", 65e12, 320e9),
    ("H200 SXM", "matrix", "fp8", 1979e12, 4.8e12),
    ("RTX 4090", "matrix", "bf16", 165.2e12, 1008e9),
    ("L4", "vector", "fp32", 30.3e12, 300e9),
    ("Gaudi 3", "matrix", "bf16", 1835e12, 3.7e12),
    ("TPU v4", "matrix", "bf16", 275e12, 1200e9),
    ("TPU v5e", "matrix", "bf16", 197e12, 819e9),
    ("TPU v6e", "matrix", "bf16", 918e12, 1638e9),
    ("B200", "matrix", "bf16", 2.25e15, 8e12),
    ("Apple M2 Ultra", "vector", "fp32", 27.2e12, 800e9),
    ("Xeon Platinum 8480+", "vector", "fp32", 7.168e12, 307.2e9),
]


@pytest.mark.parametrize(("name", "unit", "dtype", "flops_per_s", "bytes_per_s"), HEADLINES)
def test_headline_values(
    name: str, unit: str, dtype: str, flops_per_s: float, bytes_per_s: float
) -> None:
    spec = get_device(name)
    assert spec.peak_flops_per_s(dtype, unit) == pytest.approx(flops_per_s, rel=1e-9)  # type: ignore[arg-type]
    assert spec.bandwidth_bytes_per_s == pytest.approx(bytes_per_s, rel=1e-9)


def test_headline_sparse_and_memory() -> None:
    h100 = get_device("H100 SXM")
    assert h100.matrix_sparse_flops_per_s["bf16"] == pytest.approx(1978.9e12)
    assert h100.memory_bytes == 80e9
    assert h100.interconnect is not None and h100.interconnect.direction == "bidirectional"
    assert get_device("T4").peak_flops_per_s("bf16") is None  # Turing has no BF16
    assert get_device("TPU v4").memory_bytes == 32 * 2**30


# --------------------------------------------------------------------------- the model
@pytest.mark.parametrize(
    ("dtype", "key"),
    [
        (torch.bfloat16, "bf16"), ("bfloat16", "bf16"), ("torch.bfloat16", "bf16"),
        ("BF16", "bf16"), (torch.float32, "fp32"), ("float", "fp32"), ("tf32", "tf32"),
        (torch.float16, "fp16"), ("half", "fp16"), (torch.float64, "fp64"), ("double", "fp64"),
        (torch.float8_e4m3fn, "fp8"), (torch.float8_e5m2, "fp8"), ("float8_e4m3fnuz", "fp8"),
        ("nvfp4", "fp4"), (torch.int8, "int8"), (torch.uint8, "int8"), ("int4", "int4"),
    ],
)  # fmt: skip
def test_canonical_dtype(dtype: Any, key: str) -> None:
    assert canonical_dtype(dtype) == key


def test_peak_lookup() -> None:
    h100 = get_device("h100")
    assert h100.peak_flops_per_s(torch.bfloat16) == 989.4e12
    assert h100.peak_flops_per_s("half", "vector") == 133.8e12
    assert h100.peak_flops_per_s("float8_e4m3fn") == 1978.9e12
    assert h100.peak_flops_per_s("tf32", "vector") is None
    assert h100.peak_flops_per_s("fp4") is None
    assert h100.ridge_point() == pytest.approx(989.4 / 3.35)
    assert h100.ridge_point("fp32", "vector") == pytest.approx(66.9 / 3.35)
    with pytest.raises(ValueError, match="unknown dtype"):
        h100.peak_flops_per_s("fp99")
    with pytest.raises(ValueError, match="unknown dtype"):
        h100.peak_flops_per_s(torch.complex64)
    with pytest.raises(ValueError, match="engine kind"):
        h100.peak_flops_per_s("bf16", "tensor")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("989.4 TFLOPS", "flops", 989.4e12), ("1979 TOPS", "flops", 1979e12),
        ("1,979 TFLOPS", "flops", 1979e12), ("2.25 PFLOPS", "flops", 2.25e15),
        ("197 TFLOPs", "flops", 197e12), ("3.35 TB/s", "bandwidth", 3.35e12),
        ("900 GB/s", "bandwidth", 900e9), ("2765 GBps", "bandwidth", 2765e9),
        ("4800 Gbps", "bandwidth", 600e9), ("80 GB", "bytes", 80e9),
        ("141 GiB", "bytes", 141 * 2**30), ("50 MB", "cache", 50e6), ("1980 MHz", "hz", 1.98e9),
        ("3.8 GHz", "hz", 3.8e9), ("700 W", "watts", 700.0), ("1.4 kW", "watts", 1400.0),
        ("5 us", "seconds", 5e-6), ("5 µs", "seconds", 5e-6), ("2 ms", "seconds", 2e-3),
        (3e12, "flops", 3e12), ("7e12", "flops", 7e12),
    ],
)  # fmt: skip
def test_parse_quantity(text: Any, kind: str, value: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "kind"),
    [("5 GB", "flops"), ("3 TFLOPS", "bandwidth"), ("fast", "flops"), ("5 min", "seconds")],
)
def test_parse_quantity_rejects_wrong_units(text: str, kind: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text, kind)


@given(st.floats(min_value=1e9, max_value=1e17))
def test_parse_quantity_tflops_round_trip(flops_per_s: float) -> None:
    assert parse_quantity(f"{flops_per_s / 1e12!r} TFLOPS", "flops") == pytest.approx(flops_per_s)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"matrix_flops_per_s": {"bf16": -1e12}}, "must be > 0"),
        ({"matrix_flops_per_s": {"bf16": 0}}, "must be > 0"),
        ({"vector_flops_per_s": {"fp32": "0 TFLOPS"}}, "must be > 0"),
        ({"matrix_flops_per_s": {"bf16": "989 FLOPS"}}, "looks off by a unit prefix"),
        ({"matrix_flops_per_s": {"bf16": 989e15}}, "looks off by a unit prefix"),
        ({"bandwidth_bytes_per_s": "3.35 PB/s"}, "looks off by a unit prefix"),
        ({"memory_bytes": "80 TB"}, "looks off by a unit prefix"),
        ({"memory_bytes": 80}, "looks off by a unit prefix"),
        ({"matrix_flops_per_s": {"bf17": "1 TFLOPS"}}, "unknown dtype key"),
        ({"vector_flops_per_s": {"tf32": "1 TFLOPS"}}, "unknown dtype key"),
        ({"matrix_sparse_flops_per_s": {"bf16": "250 TFLOPS"}}, "more than 2x"),
        ({"matrix_sparse_flops_per_s": {"bf16": "50 TFLOPS"}}, "below the dense"),
        ({"fp16_accumulate_flops_per_s": "300 TFLOPS"}, "needs the fp16 matrix peak"),
        ({"matrix_flops_per_s": {"fp16": "100 TFLOPS"},
          "fp16_accumulate_flops_per_s": "80 TFLOPS"}, "must lie between"),
        ({"matrix_flops_per_s": {"fp16": "100 TFLOPS"},
          "fp16_accumulate_flops_per_s": "300 TFLOPS"}, "must lie between"),
        ({"efficiency": {"matrix": 1.5}}, "not in"),
        ({"efficiency": {"compute": 0.5}}, "unknown efficiency key"),
        ({"kind": "fpga"}, "kind"),
        ({"colour": "green"}, "colour"),
        ({"tdp_watts": True}, "number"),
    ],
)
def test_bad_values_rejected(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DeviceSpec.model_validate(minimal(**fields))


def test_bandwidth_is_required() -> None:
    data = minimal()
    del data["bandwidth_bytes_per_s"]
    with pytest.raises(ValidationError, match="bandwidth_bytes_per_s"):
        DeviceSpec.model_validate(data)


def test_sparse_without_dense_allowed() -> None:
    spec = DeviceSpec.model_validate(minimal(matrix_sparse_flops_per_s={"fp8": "400 TFLOPS"}))
    assert spec.peak_flops_per_s("fp8") is None
    assert spec.matrix_sparse_flops_per_s["fp8"] == 400e12


@pytest.mark.parametrize("kind", sorted(DEFAULT_LAUNCH_OVERHEAD_SECONDS))
def test_launch_overhead_default_per_kind(kind: str) -> None:
    spec = DeviceSpec.model_validate(minimal(kind=kind))
    assert spec.launch_overhead_seconds == DEFAULT_LAUNCH_OVERHEAD_SECONDS[kind]
    assert any("modelling default" in note for note in spec.notes)
    explicit = DeviceSpec.model_validate(minimal(kind=kind, launch_overhead_seconds="12 us"))
    assert explicit.launch_overhead_seconds == pytest.approx(12e-6)
    assert not any("modelling default" in note for note in explicit.notes)


def test_host_link_bandwidth() -> None:
    # PCI-SIG's headline figures: Gen1 250 MB/s per lane, Gen3 x16 ~15.75 GB/s, Gen5 x16 ~63 GB/s
    assert HostLink(pcie_gen=1, lanes=1).bandwidth_bytes_per_s == pytest.approx(250e6)
    assert HostLink(pcie_gen=3, lanes=16).bandwidth_bytes_per_s == pytest.approx(15.75e9, rel=0.01)
    assert HostLink(pcie_gen=5, lanes=16).bandwidth_bytes_per_s == pytest.approx(63.0e9, rel=0.01)
    # Gen6 x16: above the TLP-only ~118 GB/s, below the raw 64 GT/s x 16 / 8 = 128 GB/s
    assert 118e9 < HostLink(pcie_gen=6, lanes=16).bandwidth_bytes_per_s < 128e9
    with pytest.raises(ValidationError):
        HostLink(pcie_gen=7, lanes=16)  # type: ignore[arg-type]


def test_spec_is_frozen_and_hashable() -> None:
    h100 = get_device("h100")
    with pytest.raises(ValidationError):
        h100.name = "other"  # type: ignore[misc]
    assert len({h100, get_device("H100 SXM"), h100.scaled(flops_factor=2)}) == 2


# --------------------------------------------------------------------------- variants
def test_scaled() -> None:
    h100 = get_device("H100 SXM")
    fast = h100.scaled(flops_factor=2.0)
    assert fast.name == "H100 SXM (2x FLOP/s)"
    assert fast.peak_flops_per_s("bf16") == pytest.approx(2 * 989.4e12)
    assert fast.matrix_sparse_flops_per_s["fp8"] == pytest.approx(2 * 3957.8e12)
    assert fast.peak_flops_per_s("fp32", "vector") == pytest.approx(2 * 66.9e12)
    assert fast.bandwidth_bytes_per_s == h100.bandwidth_bytes_per_s
    assert fast.aliases == [] and h100.aliases  # aliases stay with the real device
    assert any("What-if" in note for note in fast.notes)
    both = h100.scaled(flops_factor=2, bandwidth_factor=1.5)
    assert both.name == "H100 SXM (2x FLOP/s, 1.5x bandwidth)"
    assert both.bandwidth_bytes_per_s == pytest.approx(1.5 * 3.35e12)
    assert both.ridge_point() == pytest.approx(h100.ridge_point() * 2 / 1.5)  # type: ignore[operator]
    assert h100.scaled(bandwidth_factor=2, name="HBM4 H100").name == "HBM4 H100"
    # What-if devices may leave the plausible range of real hardware.
    assert get_device("B200").scaled(flops_factor=100).matrix_sparse_flops_per_s["fp4"] == 1.8e18


@pytest.mark.parametrize("factor", [0, -1, float("nan"), float("inf"), True, "2"])
def test_scaled_rejects_bad_factors(factor: Any) -> None:
    with pytest.raises(ValueError, match="factor"):
        get_device("h100").scaled(flops_factor=factor)
    with pytest.raises(ValueError, match="factor"):
        get_device("h100").scaled(bandwidth_factor=factor)


@given(st.floats(min_value=0.01, max_value=100))
def test_scaled_multiplies_every_peak(factor: float) -> None:
    a100 = get_device("A100 SXM 80GB")
    scaled = a100.scaled(flops_factor=factor)
    for table in ("matrix_flops_per_s", "matrix_sparse_flops_per_s", "vector_flops_per_s"):
        for dtype, value in getattr(a100, table).items():
            assert getattr(scaled, table)[dtype] == pytest.approx(value * factor)


def test_geforce_fp16_accumulate_is_twice_the_fp32_accumulate_rate() -> None:
    # NVIDIA's GeForce whitepapers (Turing, GA102, Ada, RTX Blackwell) list FP16 tensor math
    # with FP16 accumulate at exactly twice the FP32-accumulate rate; data-centre and
    # professional cards run both at one rate and carry no separate figure
    geforce = [s for s in ALL if s.fp16_accumulate_flops_per_s is not None]
    assert {s.name for s in geforce} >= {"RTX 2080 Ti", "RTX 3090", "RTX 4090", "RTX 5090"}
    for spec in geforce:
        fp16 = spec.matrix_flops_per_s["fp16"]
        assert spec.fp16_accumulate_flops_per_s == pytest.approx(2 * fp16, rel=0.005), spec.name
    for name in ("A100 SXM 80GB", "H100 SXM", "RTX A6000", "TITAN RTX", "L40S"):
        assert get_device(name).fp16_accumulate_flops_per_s is None
    rtx4090 = get_device("RTX 4090")
    assert rtx4090.scaled(flops_factor=2).fp16_accumulate_flops_per_s == pytest.approx(2 * 330.3e12)
    # an overridden fp16 peak carries the fp16-accumulate rate along; removing it drops it
    slower = rtx4090.with_overrides(matrix_flops_per_s={**rtx4090.matrix_flops_per_s,
                                                        "fp16": "200 TFLOPS"})
    assert slower.fp16_accumulate_flops_per_s == pytest.approx(330.3e12 * 200 / 165.2)
    no_fp16 = {k: v for k, v in rtx4090.matrix_flops_per_s.items() if k != "fp16"}
    assert rtx4090.with_overrides(matrix_flops_per_s=no_fp16).fp16_accumulate_flops_per_s is None
    assert rtx4090.with_overrides(tdp_watts=400).fp16_accumulate_flops_per_s == 330.3e12


def test_rtx_4000_ada_tensor_rate_is_derived_from_its_fp32_rate() -> None:
    # Ada SMs: 128 FP32 lanes (256 FLOP/clk) and 1024 dense FP16 tensor FLOP/clk
    spec = get_device("RTX 4000 Ada")
    assert spec.matrix_flops_per_s["fp16"] == pytest.approx(
        4 * spec.vector_flops_per_s["fp32"], rel=0.005)


def test_with_overrides() -> None:
    h100 = get_device("H100 SXM")
    h200_like = h100.with_overrides(name="H100 HBM3e", bandwidth_bytes_per_s="4.8 TB/s")
    assert h200_like.bandwidth_bytes_per_s == 4.8e12
    assert h200_like.peak_flops_per_s("bf16") == h100.peak_flops_per_s("bf16")
    assert h100.bandwidth_bytes_per_s == 3.35e12  # original untouched
    calibrated = h100.with_overrides(efficiency={"matrix": 0.7}, measured=True)
    assert calibrated.measured and calibrated.efficiency == {"matrix": 0.7}


def test_with_overrides_error_names_device_and_field() -> None:
    with pytest.raises(DeviceSpecError) as info:
        get_device("H100 SXM").with_overrides(matrix_flops_per_s={"bf16": "989 FLOPS"})
    message = str(info.value)
    assert "H100 SXM" in message
    assert "matrix_flops_per_s.bf16" in message
    assert "looks off by a unit prefix" in message
    with pytest.raises(DeviceSpecError, match="bandwidth_bytes_per_s"):
        get_device("H100 SXM").with_overrides(bandwidth_bytes_per_s=-1)
    with pytest.raises(DeviceSpecError, match="nonsense"):
        get_device("H100 SXM").with_overrides(nonsense=1)
    assert isinstance(DeviceSpecError("x"), ValueError)


# --------------------------------------------------------------------------- presentation
def test_format_devices_table() -> None:
    text = format_devices_table([get_device("H100 SXM"), get_device("T4")])
    lines = text.splitlines()
    assert lines[0].startswith("Name") and "BF16 matrix TFLOPS" in lines[0]
    h100_row = next(line for line in lines if line.startswith("H100 SXM"))
    for cell in ("NVIDIA", "989.4", "66.9", "3.350", "80", "295"):
        assert cell in h100_row.split()
    t4_row = next(line for line in lines if line.startswith("T4"))
    assert t4_row.split()[2] == "-"  # no BF16 on Turing
    assert len(format_devices_table(ALL).splitlines()) == len(ALL) + 2


def test_devices_to_json() -> None:
    data = json.loads(devices_to_json(ALL[:3]))
    assert [item["name"] for item in data] == IDS[:3]
    assert DeviceSpec.model_validate(data[0]) == ALL[0]


# --------------------------------------------------------------------------- generated files
def test_schema_json_up_to_date() -> None:
    stored = json.loads((DATA_DIR / "schema.json").read_text(encoding="utf-8"))
    assert stored == device_file_schema(), "run: python docs/gen_devices.py"


def _gen_devices_module() -> Any:
    spec = importlib.util.spec_from_file_location("gen_devices", ROOT / "docs" / "gen_devices.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_devices_md_up_to_date() -> None:
    expected = _gen_devices_module().render_devices_markdown()
    stored = (ROOT / "docs" / "devices.md").read_text(encoding="utf-8")
    assert stored == expected, "run: python docs/gen_devices.py"
    for spec in ALL:
        assert f"### {spec.name}" in stored
        for url in spec.sources.values():
            assert url in stored


def test_gen_devices_check_mode() -> None:
    assert _gen_devices_module().main(["--check"]) == 0


@pytest.mark.parametrize(
    ("name", "dtype", "engine", "ridge"),
    [
        # datasheet peak / datasheet bandwidth, by hand
        ("H100 SXM", "bf16", "matrix", 989.4e12 / 3.35e12),  # 295 FLOP/B
        ("A100 SXM 80GB", "bf16", "matrix", 312e12 / 2.039e12),  # 153
        ("MI300X", "bf16", "matrix", 1307.4e12 / 5.3e12),  # 247
        ("T4", "fp16", "matrix", 65e12 / 320e9),  # 203
        ("L4", "fp32", "vector", 30.3e12 / 300e9),  # 101
    ],
)
def test_ridge_point_matches_datasheet(name: str, dtype: str, engine: str, ridge: float) -> None:
    assert get_device(name).ridge_point(dtype, engine) == pytest.approx(ridge, rel=1e-9)  # type: ignore[arg-type]


def test_h100_ridge_point_is_295_flop_per_byte() -> None:
    # NVIDIA's H100 SXM datasheet: 989.4 dense BF16 TFLOPS, 3.35 TB/s; 989.4 / 3.35 = 295.3
    assert get_device("H100 SXM").ridge_point("bf16") == pytest.approx(295.3, abs=0.05)


# --------------------------------------------------------------------------- the split of spec.py
SPEC_NAMES = [
    "Kind", "DEFAULT_LAUNCH_OVERHEAD_SECONDS", "RIDGE_BANDS_FLOP_PER_BYTE",
    "MEMORY_BANDWIDTH_FLOORS", "BANDWIDTH_PER_CAPACITY_FLOORS", "LAUNCH_OVERHEAD_BAND_SECONDS",
    "FlopsPerS", "MeasuredFlopsPerS", "BytesPerS", "MemoryBytesPerS", "Bytes", "CacheBytes",
    "Hertz", "Watts", "Seconds", "Interconnect", "HostLink", "CLOCK_MARGIN",
    "DRAM_LATENCY_BAND_SECONDS", "BandwidthPattern", "Measured", "Achievable", "DeviceSpec",
    "DeviceSpecError", "validate_device", "device_file_schema", "device_file_schema_json",
]  # fmt: skip


def test_names_spec_py_defined_before_its_split_still_import_from_it() -> None:
    import roofline.hardware
    import roofline.hardware.spec as spec

    missing = [name for name in SPEC_NAMES if not hasattr(spec, name)]
    assert not missing
    for name in roofline.hardware.__all__:
        assert hasattr(roofline.hardware, name)


def test_bandwidth_patterns_are_declared_once() -> None:
    from typing import get_args

    from roofline.analysis import rates
    from roofline.hardware import achievable, measured

    assert achievable.Pattern is measured.BandwidthPattern
    assert rates.Pattern is measured.AccessPattern
    assert get_args(measured.BandwidthPattern) == ("read", "copy", "triad", "stream_app")


@pytest.mark.parametrize(("efficiency", "message"), [
    ({"compute": 0.5}, "unknown efficiency key 'compute'; expected matrix, vector or memory"),
    ({"matrix": 1.5}, r"efficiency\['matrix'\] = 1.5 is not in \(0, 1\]"),
    ({"memory": 0.0}, r"efficiency\['memory'\] = 0.0 is not in \(0, 1\]"),
])
def test_efficiency_is_checked_in_one_place(efficiency: dict[str, float], message: str) -> None:
    """A device's efficiency and the analysis option get the same check and message."""
    from roofline.analysis.options import Options

    with pytest.raises(ValidationError, match=message):
        DeviceSpec.model_validate(minimal(efficiency=efficiency))
    with pytest.raises(ValueError, match=message):
        Options(efficiency=efficiency)
