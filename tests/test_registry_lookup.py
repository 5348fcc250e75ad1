"""Tests of device lookup, user device files and runtime registration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from roofline.hardware import (
    AmbiguousDeviceError,
    DeviceSpec,
    DeviceSpecError,
    UnknownDeviceError,
    get_device,
    list_devices,
    load_device,
    register_device,
)
from roofline.hardware import registry as registry_module


@pytest.fixture(autouse=True)
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An empty user device folder per test; runtime registrations never leak."""
    folder = tmp_path / "devices"
    folder.mkdir()
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(folder))
    registry_module._reset()
    yield folder
    registry_module._reset()


def device(name: str = "My GPU", **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "vendor": "Acme",
        "kind": "gpu",
        "matrix_flops_per_s": {"bf16": "200 TFLOPS"},
        "vector_flops_per_s": {"fp32": "25 TFLOPS"},
        "bandwidth_bytes_per_s": "1.2 TB/s",
        "memory_bytes": "32 GB",
        "sources": {"compute": "https://example.com", "memory": "https://example.com"},
    }
    data.update(overrides)
    return data


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- lookup
@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("H100 SXM", "H100 SXM"),
        ("h100", "H100 SXM"),
        ("H100", "H100 SXM"),
        ("h100-sxm", "H100 SXM"),
        ("H100_SXM5", "H100 SXM"),
        ("  h 1 0 0 . s x m ", "H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("a100", "A100 SXM 80GB"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2 16GB"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
        ("Tesla V100-PCIE-16GB", "V100 PCIe 16GB"),
        ("v100", "V100 SXM2 16GB"),
        ("Tesla T4", "T4"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        ("NVIDIA TITAN X (Pascal)", "TITAN X (Pascal)"),
        ("AMD Instinct MI300X", "MI300X"),
        ("mi300x", "MI300X"),
        ("AMD Instinct MI250X", "MI250X GCD"),
        ("tpu-v5e", "TPU v5e"),
        ("TPU v5 lite", "TPU v5e"),
        ("TPU v5", "TPU v5p"),
        ("trillium", "TPU v6e"),
        ("GAUDI3", "Gaudi 3"),
        ("apple m1 max", "Apple M1 Max"),
        ("M2 Ultra", "Apple M2 Ultra"),
        ("Intel(R) Xeon(R) Platinum 8480+", "Xeon Platinum 8480+"),
        ("AMD EPYC 9654 96-Core Processor", "EPYC 9654"),
        ("jetson agx orin", "Jetson AGX Orin 64GB"),
    ],
)
def test_lookup(query: str, name: str) -> None:
    assert get_device(query).name == name


def test_lookup_passes_specs_through() -> None:
    spec = get_device("h100").scaled(flops=2)
    assert get_device(spec) is spec


def test_unique_substring_matches() -> None:
    assert get_device("A100 SXM4 40").name == "A100 SXM 40GB"
    assert get_device("L40").name == "L40S"


@pytest.mark.parametrize(
    ("query", "candidates"),
    [
        ("rtx 40", {"RTX 4070 Ti", "RTX 4080", "RTX 4090", "RTX 4000 Ada"}),
        ("A100 PCIe", {"A100 PCIe 40GB", "A100 PCIe 80GB"}),
        ("MI3", {"MI300X", "MI325X", "MI355X"}),
        ("V100 PCIe", {"V100 PCIe 16GB", "V100 PCIe 32GB"}),
    ],
)
def test_ambiguous(query: str, candidates: set[str]) -> None:
    with pytest.raises(AmbiguousDeviceError) as info:
        get_device(query)
    assert set(info.value.candidates) == candidates
    assert isinstance(info.value, LookupError)
    for name in candidates:
        assert name in str(info.value)


def test_unknown_suggests_close_names() -> None:
    with pytest.raises(UnknownDeviceError, match="H100 SXM") as info:
        get_device("H1000")
    assert isinstance(info.value, LookupError)
    with pytest.raises(UnknownDeviceError, match="unknown device 'quantum toaster'"):
        get_device("quantum toaster")


def test_list_devices_filters() -> None:
    every = list_devices()
    assert len(every) >= 40
    nvidia = list_devices(vendor="nvidia")
    assert nvidia and all(spec.vendor == "NVIDIA" for spec in nvidia)
    tpus = list_devices(kind="tpu")
    assert {spec.name for spec in tpus} >= {"TPU v4", "TPU v5e", "TPU v5p", "TPU v6e"}
    assert {spec.name for spec in list_devices(vendor="Intel", kind="cpu")} >= {
        "Xeon Platinum 8480+"
    }
    assert list_devices(vendor="nobody") == []


# --------------------------------------------------------------------------- files
def test_load_device_single_and_list(tmp_path: Path) -> None:
    single = load_device(write_yaml(tmp_path / "one.yaml", device()))
    assert isinstance(single, DeviceSpec) and single.peak_flops_per_s("bf16") == 200e12
    many = load_device(write_yaml(tmp_path / "two.yaml", [device("A"), device("B")]))
    assert isinstance(many, list) and [s.name for s in many] == ["A", "B"]
    wrapped = load_device(write_yaml(tmp_path / "wrapped.yaml", {"devices": [device("C")]}))
    assert isinstance(wrapped, list) and wrapped[0].name == "C"
    as_json = tmp_path / "one.json"
    as_json.write_text(json.dumps(device("Zed Q9")), encoding="utf-8")
    loaded = load_device(as_json)
    assert isinstance(loaded, DeviceSpec) and loaded.name == "Zed Q9"
    with pytest.raises(UnknownDeviceError):  # loading does not register
        get_device("Zed Q9")


def test_load_device_error_names_file_device_and_field(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "bad.yaml", [device("Good"), device("Broken", memory_bytes=-5)])
    with pytest.raises(DeviceSpecError) as info:
        load_device(path)
    message = str(info.value)
    assert str(path) in message and "'Broken'" in message and "memory_bytes" in message


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"matrix_flops_per_s": {"bf16": "989 FLOPS"}}, "matrix_flops_per_s.bf16"),
        ({"matrix_flops_per_s": {"bfloat17": "1 TFLOPS"}}, "matrix_flops_per_s"),
        ({"bandwidth_bytes_per_s": None}, "bandwidth_bytes_per_s"),
        ({"matrix_sparse_flops_per_s": {"bf16": "900 TFLOPS"}}, "matrix_sparse_flops_per_s"),
    ],
)
def test_load_device_bad_fields(tmp_path: Path, entry: dict[str, Any], field: str) -> None:
    path = write_yaml(tmp_path / "bad.yaml", device("Bad GPU", **entry))
    with pytest.raises(DeviceSpecError, match=field) as info:
        load_device(path)
    assert "Bad GPU" in str(info.value) and "bad.yaml" in str(info.value)


def test_load_device_rejects_unsafe_and_malformed_yaml(tmp_path: Path) -> None:
    unsafe = tmp_path / "unsafe.yaml"
    unsafe.write_text("name: !!python/object/apply:os.system ['true']\n", encoding="utf-8")
    with pytest.raises(DeviceSpecError, match="cannot parse"):
        load_device(unsafe)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n", encoding="utf-8")
    with pytest.raises(DeviceSpecError, match="expected a device mapping"):
        load_device(scalar)


def test_user_folder_is_picked_up(user_dir: Path) -> None:
    write_yaml(user_dir / "lab.yaml", [device("Lab GPU", aliases=["lab-0"])])
    registry_module._reset()
    assert get_device("lab 0").name == "Lab GPU"
    assert "Lab GPU" in {spec.name for spec in list_devices(vendor="acme")}


def test_user_folder_follows_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    write_yaml(other / "x.yaml", device("Elsewhere GPU"))
    with pytest.raises(UnknownDeviceError):
        get_device("Elsewhere GPU")
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(other))
    assert get_device("Elsewhere GPU").vendor == "Acme"
    assert registry_module.user_devices_dir() == other


def test_duplicate_names_across_files(user_dir: Path) -> None:
    first = write_yaml(user_dir / "a.yaml", device("Twin"))
    second = write_yaml(user_dir / "b.yaml", device("twin"))
    with pytest.raises(DeviceSpecError) as info:
        get_device("h100")
    message = str(info.value)
    assert str(first) in message and str(second) in message
    assert "'Twin'" in message and "'twin'" in message and "field 'name'" in message


def test_alias_clashing_with_shipped_device(user_dir: Path) -> None:
    path = write_yaml(user_dir / "clash.yaml", device("Not An H100", aliases=["H100"]))
    with pytest.raises(DeviceSpecError) as info:
        list_devices()
    message = str(info.value)
    assert str(path) in message and "field 'aliases'" in message and "H100 SXM" in message
    assert "nvidia.yaml" in message


# --------------------------------------------------------------------------- registration
def test_register_device() -> None:
    spec = register_device(device("Prototype", aliases=["proto-1"]))
    assert get_device("PROTO 1") is spec
    assert spec in list_devices(vendor="Acme")
    what_if = register_device(get_device("H100 SXM").scaled(flops=2))
    assert get_device("H100 SXM (2x FLOP/s)") is what_if


def test_register_device_conflicts() -> None:
    register_device(device("Prototype"))
    with pytest.raises(DeviceSpecError, match="already defined"):
        register_device(device("Prototype"))
    replaced = register_device(device("Prototype", memory_bytes="64 GB"), overwrite=True)
    assert get_device("prototype") is replaced and replaced.memory_bytes == 64e9
    with pytest.raises(DeviceSpecError, match=r"field 'aliases'.*H100 SXM"):
        register_device(device("Impostor", aliases=["NVIDIA H100 80GB HBM3"]))
    with pytest.raises(DeviceSpecError, match="already defined"):
        register_device(get_device("H100 SXM").with_overrides(tdp_watts="600 W"))
    corrected = register_device(
        get_device("H100 SXM").with_overrides(tdp_watts="600 W"), overwrite=True
    )
    assert get_device("h100") is corrected


def test_register_invalid_mapping_names_field() -> None:
    with pytest.raises(DeviceSpecError, match=r"register_device.*'Bad'.*bandwidth_bytes_per_s"):
        register_device(device("Bad", bandwidth_bytes_per_s="3 TFLOPS"))


def test_registration_does_not_leak_first() -> None:
    register_device(device("Leaky"))
    assert get_device("Leaky").name == "Leaky"


def test_registration_does_not_leak_second() -> None:
    with pytest.raises(UnknownDeviceError):
        get_device("Leaky")
    assert get_device("h100").tdp_watts == 700
