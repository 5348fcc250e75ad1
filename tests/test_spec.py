"""The DeviceSpec model (hardware/spec.py): fields, queries, validation messages, JSON
round trips and the schema file.

Expected values are datasheet figures (H100 SXM: 989.4 dense bf16 TFLOPS, 3.35 TB/s, 80 GB)
and ridge points derived from them by hand (989.4 / 3.35 = 295.3 FLOP/B).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from roofline.hardware import DeviceSpec, get_device
from roofline.hardware import registry as registry_module
from roofline.hardware.registry import DATA_DIR
from roofline.hardware.spec import DEFAULT_LAUNCH_OVERHEAD_SECONDS, device_file_schema

pytestmark = pytest.mark.usefixtures("isolated_registry")


SHIPPED = [spec for spec, _ in registry_module._builtin()]  # shipped devices only


IDS = [spec.name for spec in SHIPPED]


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


# --- fields and queries -------------------------------------------------------------------

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


def test_spec_is_frozen_and_hashable() -> None:
    h100 = get_device("h100")
    with pytest.raises(ValidationError):
        h100.name = "other"  # type: ignore[misc]
    assert len({h100, get_device("H100 SXM"), h100.scaled(flops_factor=2)}) == 2


@pytest.mark.parametrize("spec", SHIPPED, ids=IDS)
def test_every_device_round_trips(spec: DeviceSpec) -> None:
    assert DeviceSpec.model_validate(spec.model_dump()) == spec
    assert DeviceSpec.model_validate_json(spec.model_dump_json()) == spec


# --- validation ---------------------------------------------------------------------------

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


# --- the schema file ----------------------------------------------------------------------

def test_schema_json_up_to_date() -> None:
    stored = json.loads((DATA_DIR / "schema.json").read_text(encoding="utf-8"))
    assert stored == device_file_schema(), "run: python docs/gen_devices.py"


# --- the split of spec.py (issue 21, item 1) ----------------------------------------------

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


def test_compute_capability_reads_an_nvidia_isa() -> None:
    """sm_<n> is compute capability n (the registry's sources give V100 7.0, T4 7.5, H100
    9.0); AMD's LLVM targets and a spec without an ISA have none."""
    assert [get_device(n).compute_capability for n in ("v100", "t4", "h100")] == [70, 75, 90]
    assert get_device("mi300x").compute_capability is None
    assert get_device("h100").with_overrides(isa=None).compute_capability is None
