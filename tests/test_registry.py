"""The device registry (hardware/registry.py): the shipped data, lookup by name, user
device files and runtime registration.

Shipped data is checked against the datasheets it cites (the headline peaks and
bandwidths below, by hand) and for internal consistency (sparse between dense and twice
dense; ridge points 1-2000 FLOP/B). Lookup names are those ``torch.cuda.get_device_name()``
returns (NVML, the CUDA driver, ROCm's amdgpu.ids).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

import roofline
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
from roofline.hardware.registry import DeviceFileWarning
from roofline.hardware.spec import DEFAULT_LAUNCH_OVERHEAD_SECONDS
from roofline.tracing.records import OpRecord, Trace

SHIPPED = [spec for spec, _ in registry_module._builtin()]


IDS = [spec.name for spec in SHIPPED]


ROOT = Path(__file__).resolve().parent.parent


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


# --------------------------------------------------------------------------- shipped data

def test_at_least_40_devices_with_unique_names() -> None:
    assert len(SHIPPED) >= 40
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


@pytest.mark.parametrize("spec", SHIPPED, ids=IDS)
def test_every_device_cites_compute_and_memory(spec: DeviceSpec) -> None:
    assert {"compute", "memory"} <= set(spec.sources)
    assert all(url.startswith(("https://", "http://")) for url in spec.sources.values())


@pytest.mark.parametrize("spec", SHIPPED, ids=IDS)
def test_dense_below_sparse_below_twice_dense(spec: DeviceSpec) -> None:
    for dtype, sparse in spec.matrix_sparse_flops_per_s.items():
        dense = spec.matrix_flops_per_s[dtype]  # every shipped sparse figure has a dense one
        assert dense <= sparse <= 2 * dense * 1.01


@pytest.mark.parametrize("spec", SHIPPED, ids=IDS)
def test_matrix_units_beat_vector_fp32(spec: DeviceSpec) -> None:
    half = [p for p in (spec.peak_flops_per_s("bf16"), spec.peak_flops_per_s("fp16")) if p]
    fp32 = spec.peak_flops_per_s("fp32", "vector")
    if half and fp32:
        assert max(half) >= fp32


@pytest.mark.parametrize("spec", SHIPPED, ids=IDS)
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


@pytest.mark.parametrize("spec", SHIPPED, ids=IDS)
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


def test_geforce_fp16_accumulate_is_twice_the_fp32_accumulate_rate() -> None:
    # NVIDIA's GeForce whitepapers (Turing, GA102, Ada, RTX Blackwell) list FP16 tensor math
    # with FP16 accumulate at exactly twice the FP32-accumulate rate; data-centre and
    # professional cards run both at one rate and carry no separate figure
    geforce = [s for s in SHIPPED if s.fp16_accumulate_flops_per_s is not None]
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


@pytest.mark.parametrize("name", ["RTX 4000 Ada", "RTX 5000 Ada", "RTX 6000 Ada"])
def test_rtx_ada_cards_have_a_tf32_peak_at_half_their_fp16_rate(name: str) -> None:
    """Ada's TF32 tensor rate is half its FP16 one where NVIDIA prints both (L40S 183 of
    362.05, RTX 4090 82.6 of 165.2 TFLOPS); without a TF32 peak a TF32 matmul on these
    cards fell back to the CUDA cores."""
    for published in ("L40S", "RTX 4090"):
        ref = get_device(published).matrix_flops_per_s
        assert ref["tf32"] / ref["fp16"] == pytest.approx(0.5, rel=0.02)
    spec = get_device(name)
    assert spec.matrix_flops_per_s["tf32"] == pytest.approx(spec.matrix_flops_per_s["fp16"] / 2)
    a = roofline.analyze(Trace([OpRecord("aten.mm.default", "matmul", "forward", "", "float32",
                                         2 * 4096**3, 3 * 4 * 4096**2, 4 * 4096**2)]),
                         spec, tf32_matmul=True, gemm_shapes=False)
    assert str(a.engine[0]) == "matrix tf32"


# docs/devices.md is generated from the shipped data
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
    for spec in SHIPPED:
        assert f"### {spec.name}" in stored
        for url in spec.sources.values():
            assert url in stored


def test_gen_devices_check_mode() -> None:
    assert _gen_devices_module().main(["--check"]) == 0


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
    spec = get_device("h100").scaled(flops_factor=2)
    assert get_device(spec) is spec


@pytest.mark.parametrize("spec", SHIPPED, ids=[s.name for s in SHIPPED])
def test_every_name_and_alias_resolves_to_its_device(spec: DeviceSpec) -> None:
    for label in (spec.name, *spec.aliases):
        assert get_device(label).name == spec.name, label


# What torch.cuda.get_device_name() (NVML / the CUDA driver; libdrm's amdgpu.ids on ROCm)
# returns for each CUDA-visible registry device. Older drivers drop the "NVIDIA " prefix.
TORCH_NAMES = [
    ("Tesla V100-SXM2-16GB", "V100 SXM2 16GB"), ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
    ("Tesla V100-PCIE-16GB", "V100 PCIe 16GB"), ("Tesla V100-PCIE-32GB", "V100 PCIe 32GB"),
    ("Tesla T4", "T4"), ("Quadro RTX 8000", "Quadro RTX 8000"),
    ("NVIDIA TITAN RTX", "TITAN RTX"), ("TITAN RTX", "TITAN RTX"),
    ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti"), ("GeForce RTX 2080 Ti", "RTX 2080 Ti"),
    ("NVIDIA A10", "A10"), ("NVIDIA A10G", "A10G"), ("NVIDIA A40", "A40"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"), ("A100-SXM4-40GB", "A100 SXM 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"), ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"), ("NVIDIA RTX A6000", "RTX A6000"),
    ("NVIDIA GeForce RTX 3070", "RTX 3070"), ("NVIDIA GeForce RTX 3080", "RTX 3080"),
    ("NVIDIA GeForce RTX 3080 Ti", "RTX 3080 Ti"), ("NVIDIA GeForce RTX 3090", "RTX 3090"),
    ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4070 Ti", "RTX 4070 Ti"), ("NVIDIA GeForce RTX 4080", "RTX 4080"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada"),
    ("NVIDIA RTX 5000 Ada Generation", "RTX 5000 Ada"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA B200", "B200"), ("NVIDIA GB200", "GB200 (per GPU)"),
    # as AIConfigurator's collector recorded torch.cuda.get_device_name() on them
    # (ai-dynamo/aiconfigurator@095f58a51c4c, collector/trtllm/collect_gemm.py)
    ("NVIDIA B300 SXM6 AC", "B300"), ("NVIDIA GB300", "GB300 (per GPU)"),
    ("NVIDIA GeForce RTX 5090", "RTX 5090"), ("Orin", "Jetson AGX Orin 64GB"),
    ("NVIDIA TITAN Xp", "TITAN Xp"), ("NVIDIA GeForce GTX 1080 Ti", "GTX 1080 Ti"),
    ("NVIDIA TITAN X (Pascal)", "TITAN X (Pascal)"), ("NVIDIA GeForce GTX 1080", "GTX 1080"),
    ("NVIDIA GeForce GTX TITAN X", "GTX TITAN X (Maxwell)"),
    ("AMD Instinct MI100", "MI100"), ("AMD Instinct MI210", "MI210"),
    ("AMD Instinct MI250X", "MI250X GCD"), ("AMD Instinct MI250X / MI250", "MI250X GCD"),
    ("AMD Instinct MI250", "MI250 GCD"), ("NVIDIA L40", "L40"),
    ("Tesla P100-PCIE-16GB", "P100 PCIe 16GB"), ("Tesla P100-SXM2-16GB", "P100 SXM2 16GB"),
    ("Tesla P4", "P4"),
    ("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI325X", "MI325X"),
    ("AMD Instinct MI355X", "MI355X"),
]  # fmt: skip


@pytest.mark.parametrize(("torch_name", "name"), TORCH_NAMES)
def test_torch_device_names_resolve_exactly(torch_name: str, name: str) -> None:
    assert get_device(torch_name).name == name
    # exactly: the name or an alias, not the token rule
    assert registry_module.normalise(torch_name) in registry_module._registry().keys


def test_every_cuda_visible_device_has_its_torch_name() -> None:
    covered = {name for _, name in TORCH_NAMES}
    cuda = {s.name for s in SHIPPED if s.kind == "gpu" and s.vendor in ("NVIDIA", "AMD")}
    assert cuda - covered == {"MI250X"}  # the whole package: torch sees its two GCDs


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


@pytest.mark.parametrize(
    ("query", "name"),
    [
        # extra words that agree with the device: vendor, memory size/type, form factor
        ("NVIDIA H200 SXM 141GB", "H200 SXM"),
        ("NVIDIA H100 SXM5 80GB", "H100 SXM"),
        ("h100 sxm 80gb", "H100 SXM"),
        ("NVIDIA H100 PCIe 80GB HBM2e", "H100 PCIe"),
        ("NVIDIA A100 80GB", "A100 SXM 80GB"),
        ("NVIDIA RTX A6000 48GB", "RTX A6000"),
        ("NVIDIA Quadro RTX 8000", "Quadro RTX 8000"),
        ("Google TPU v4", "TPU v4"),
        ("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", "Xeon Platinum 8380"),  # /proc/cpuinfo
        ("AMD EPYC 7763 64-Core Processor", "EPYC 7763"),
    ],
)
def test_extra_filler_words_resolve(query: str, name: str) -> None:
    assert get_device(query).name == name


# issue 13, item 7: names are matched word by word; partial matches never substitute
@pytest.mark.parametrize(
    ("query", "suggested"),
    [
        # another product: a missing or extra model word is never substituted
        ("NVIDIA L40 G", "L40"),
        ("NVIDIA L40SX", "L40S"),
        ("NVIDIA GeForce RTX 4070", "RTX 4070 Ti"),
        ("Quadro RTX 6000", "RTX 6000 Ada"),  # Turing, not Ada
        ("Quadro RTX 5000", "RTX 5000 Ada"),
        ("Quadro RTX 4000", "RTX 4000 Ada"),
        ("rtx 2080", "RTX 2080 Ti"),
        ("NVIDIA GeForce RTX 4080 SUPER", "RTX 4080"),
        ("NVIDIA GeForce RTX 4090 D", "RTX 4090"),
        ("A100 SXM4 40", "A100 SXM 40GB"),
        ("Tesla V100S-PCIE-32GB", "V100 PCIe 32GB"),
        # filler that contradicts the device: memory size, form factor, core count
        ("NVIDIA H100 96GB", "H100 SXM"),
        ("H100 PCIe SXM", "H100 PCIe"),
        ("AMD EPYC 9654 64-Core Processor", "EPYC 9654"),
        # other products whose names start with the query's model number
        ("NVIDIA H20", "H200 SXM"),  # the China-market Hopper, not an H200
        ("AMD Instinct MI250XT", "MI250X"),
        ("rtx 40", "RTX 4090"),
        ("MI3", "MI300X"),
    ],
)
def test_near_misses_raise_with_a_suggestion(query: str, suggested: str) -> None:
    with pytest.raises(UnknownDeviceError) as info:
        get_device(query)
    message = str(info.value)
    assert "not in the registry; similar names:" in message and suggested in message
    assert repr(query) in message and "register_device()" in message
    assert "use one of" not in message  # another product: nothing to pick from


@pytest.mark.parametrize(
    ("query", "similar", "not_similar"),
    [
        # "m3" is inside "hbm3" (an H100 alias), not at a word boundary of it
        ("Apple M3", {"Apple M3 Max"}, {"H100 SXM"}),
        ("NVIDIA H20", {"H200 SXM", "H200 NVL"}, set()),
        ("AMD Instinct MI25", {"MI250X", "MI250X GCD", "MI250 GCD"}, set()),
        ("rtx 40", {"RTX 4070 Ti", "RTX 4080", "RTX 4090", "RTX 4000 Ada"}, set()),
    ],
)
def test_suggestions_start_at_a_word(query: str, similar: set[str], not_similar: set[str]) -> None:
    with pytest.raises(UnknownDeviceError) as info:
        get_device(query)
    suggested = str(info.value).split("similar names: ")[1].split(" (not substituted")[0]
    assert set(suggested.split(", ")) == similar
    assert not not_similar & set(suggested.split(", "))


def test_a_vendor_word_of_another_vendor_is_not_filler() -> None:
    with pytest.raises(LookupError, match="H100 SXM"):
        get_device("AMD H100")


@pytest.mark.parametrize("bad", [None, 123, 1.5, ["h100"], b"h100"])
def test_get_device_rejects_non_strings(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"device name \(str\) or a DeviceSpec"):
        get_device(bad)


@pytest.mark.parametrize(
    ("query", "candidates"),
    [
        # the product named, the variant not: the candidates differ only in memory size
        ("A100 PCIe", {"A100 PCIe 40GB", "A100 PCIe 80GB"}),
        ("NVIDIA A100 PCIe", {"A100 PCIe 40GB", "A100 PCIe 80GB"}),
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
    assert "use one of these names" in str(info.value)


def test_unknown_suggests_close_names() -> None:
    with pytest.raises(UnknownDeviceError, match="H100 SXM") as info:
        get_device("H1000")
    assert isinstance(info.value, LookupError)
    with pytest.raises(UnknownDeviceError,
                       match=r"unknown device 'quantum toaster': not in the registry\. See"):
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
    with pytest.warns(DeviceFileWarning) as record:
        assert get_device("h100").name == "H100 SXM"  # other lookups keep working
    message = str(record[0].message)
    assert str(first) in message and str(second) in message
    assert "'Twin'" in message and "'twin'" in message and "field 'name'" in message
    assert get_device("Twin").vendor == "Acme"  # the first file's device stays


def test_alias_clashing_with_shipped_device(user_dir: Path) -> None:
    path = write_yaml(user_dir / "clash.yaml", device("Not An H100", aliases=["H100"]))
    with pytest.warns(DeviceFileWarning) as record:
        names = {spec.name for spec in list_devices()}
    message = str(record[0].message)
    assert str(path) in message and "field 'aliases'" in message and "H100 SXM" in message
    assert "nvidia.yaml" in message
    assert "Not An H100" not in names and get_device("H100").name == "H100 SXM"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("name: [unclosed\n", "cannot parse"),
        ("- name: Half\n  vendor: Acme\n", "bandwidth_bytes_per_s"),
        ("name: X\nname: Y\n", "duplicate key 'name'"),
        ("just a string\n", "expected a device mapping"),
    ],
)
def test_broken_user_file_is_skipped_with_a_warning(user_dir: Path, content: str,
                                                    reason: str) -> None:
    write_yaml(user_dir / "good.yaml", device("Good GPU"))
    broken = user_dir / "broken.yaml"
    broken.write_text(content, encoding="utf-8")
    with pytest.warns(DeviceFileWarning, match=reason) as record:
        assert get_device("h100").name == "H100 SXM"
    assert len(record) == 1 and str(broken) in str(record[0].message)
    assert get_device("Good GPU").vendor == "Acme"  # the good file in the same folder loads
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        get_device("a100")  # warned once: the folder is read once per process


def test_a_file_with_one_bad_device_is_skipped_whole(user_dir: Path) -> None:
    write_yaml(user_dir / "pair.yaml", [device("Fine GPU"), device("Bad GPU", memory_bytes=-1)])
    with pytest.warns(DeviceFileWarning, match="Bad GPU"):
        names = {spec.name for spec in list_devices()}
    assert not {"Fine GPU", "Bad GPU"} & names


def test_binary_user_file_is_skipped(user_dir: Path) -> None:
    (user_dir / "garbage.yaml").write_bytes(b"\xff\xfe\x00binary")
    with pytest.warns(DeviceFileWarning, match="garbage.yaml"):
        assert get_device("t4").name == "T4"


# --------------------------------------------------------------------------- registration
def test_register_device() -> None:
    spec = register_device(device("Prototype", aliases=["proto-1"]))
    assert get_device("PROTO 1") is spec
    assert spec in list_devices(vendor="Acme")
    what_if = register_device(get_device("H100 SXM").scaled(flops_factor=2))
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


# issue 13, item 3: an overwrite is atomic and keeps the old aliases
def test_overwrite_keeps_old_aliases() -> None:
    old = get_device("H100 SXM")
    corrected = register_device(old.with_overrides(tdp_watts="600 W", aliases=["my-h100"]),
                                overwrite=True)
    assert corrected.aliases == [*old.aliases, "my-h100"]
    for label in ("h100", "H100", "NVIDIA H100 80GB HBM3", "my h100"):
        assert get_device(label) is corrected, label
    # registrations are re-applied when the user folder changes: the aliases survive it
    registry_module._cache.clear()
    assert get_device("h100") is corrected


def test_overwrite_with_explicit_aliases_sets_them_exactly() -> None:
    old = get_device("H100 SXM")
    only = register_device(old.with_overrides(tdp_watts="600 W"), overwrite=True,
                           aliases=["lab h100"])
    assert only.aliases == ["lab h100"] and get_device("lab-h100") is only
    with pytest.raises(UnknownDeviceError):
        get_device("NVIDIA H100 80GB HBM3")  # dropped as asked
    assert get_device("H100 SXM") is only
    with pytest.raises(DeviceSpecError, match="list of strings"):
        register_device(device("Other"), aliases="x")  # type: ignore[arg-type]


def test_failed_overwrite_leaves_the_registry_unchanged() -> None:
    before = {spec.name: spec for spec in list_devices()}
    h100 = get_device("H100 SXM")
    # an alias taken by another device: rejected, and the H100 it meant to replace stays
    with pytest.raises(DeviceSpecError, match=r"field 'aliases'.*'A100 SXM 80GB'"):
        register_device(h100.with_overrides(aliases=["a100"]), overwrite=True)
    # a mapping that fails validation
    with pytest.raises(DeviceSpecError, match="bandwidth_bytes_per_s"):
        register_device({**h100.model_dump(), "bandwidth_bytes_per_s": "3 TFLOPS"}, overwrite=True)
    assert {spec.name: spec for spec in list_devices()} == before
    assert get_device("h100") is h100 and get_device("NVIDIA H100 80GB HBM3") is h100
    assert get_device("a100").name == "A100 SXM 80GB"


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


# ------------------------------------------------- clashes between sources (issue 22, item 8)
def _folder(tmp_path: Path, name: str, files: dict[str, Any]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for file_name, content in files.items():
        write_yaml(folder / file_name, content)
    return folder


@pytest.mark.usefixtures("isolated_registry")
def test_a_user_file_clashing_with_a_registered_device_is_skipped_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """register_device(), then a user folder whose file reuses its alias: the file is
    skipped with a warning naming it, and every other lookup keeps working."""
    proto = register_device(device("Prototype", aliases=["proto-1"]))
    folder = _folder(tmp_path, "later", {
        "clash.yaml": [device("Other GPU", aliases=["proto 1"]), device("Innocent GPU")],
        "good.yaml": device("Good GPU"),
    })
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(folder))
    with pytest.warns(DeviceFileWarning) as record:
        assert get_device("h100").name == "H100 SXM"
    assert len(record) == 1
    message = str(record[0].message)
    assert str(folder / "clash.yaml") in message and "field 'aliases'" in message
    assert "'proto 1'" in message and "'Prototype'" in message and "register_device()" in message
    names = {spec.name for spec in list_devices()}
    assert "Good GPU" in names and not {"Other GPU", "Innocent GPU"} & names  # whole file
    assert get_device("proto-1") is proto and get_device("Prototype") is proto
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        get_device("a100")  # reported once


@pytest.mark.usefixtures("isolated_registry")
def test_a_registered_device_clashing_with_two_user_files_skips_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proto = register_device(device("Prototype", aliases=["proto-1", "proto-2"]))
    folder = _folder(tmp_path, "two", {"a.yaml": device("A GPU", aliases=["proto 1"]),
                                       "b.yaml": device("B GPU", aliases=["PROTO-2"]),
                                       "c.yaml": device("C GPU")})
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(folder))
    with pytest.warns(DeviceFileWarning) as record:
        names = {spec.name for spec in list_devices()}
    assert sorted(Path(str(w.message).split(": ")[0].removeprefix("skipped device file ")).name
                  for w in record) == ["a.yaml", "b.yaml"]
    assert "C GPU" in names and not {"A GPU", "B GPU"} & names
    assert get_device("proto 2") is proto


@pytest.mark.usefixtures("isolated_registry")
def test_registering_then_changing_folders_and_registering_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _folder(tmp_path, "first", {"lab.yaml": device("Lab GPU", aliases=["lab-0"])})
    second = _folder(tmp_path, "second", {"clash.yaml": device("Rival GPU", aliases=["proto"])})
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(first))
    proto = register_device(device("Prototype", aliases=["proto"]))
    assert get_device("lab 0").name == "Lab GPU"
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(second))
    with pytest.warns(DeviceFileWarning, match="clash.yaml"):
        assert get_device("proto") is proto
    # registering in the new folder: checked against what is there now
    later = register_device(device("Later GPU", aliases=["later"]))
    with pytest.raises(DeviceSpecError, match=r"field 'aliases'.*'Prototype'.*register_device"):
        register_device(device("Copycat", aliases=["proto"]))
    assert get_device("later") is later and get_device("t4").name == "T4"
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(first))  # back: nothing clashes there
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_device("lab 0").name == "Lab GPU"
        assert get_device("proto") is proto and get_device("later") is later


@pytest.mark.usefixtures("isolated_registry")
def test_a_registered_device_replaces_a_user_device_of_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same name is a replacement, not a clash: the file's other devices stay."""
    lab = register_device(device("Lab GPU", memory_bytes="64 GB"))
    folder = _folder(tmp_path, "lab", {"lab.yaml": [device("Lab GPU", aliases=["lab-0"]),
                                                    device("Lab GPU 2")]})
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(folder))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_device("Lab GPU") is lab and get_device("Lab GPU 2").vendor == "Acme"


@pytest.mark.usefixtures("isolated_registry")
@pytest.mark.parametrize(("files", "skipped", "kept"), [
    ({"a.yaml": device("A GPU", aliases=["shared"]), "b.yaml": device("B GPU", aliases=["Shared"])},
     "b.yaml", "A GPU"),
    ({"a.yaml": device("A GPU", aliases=["t4"]), "b.yaml": device("B GPU")}, "a.yaml", "B GPU"),
])
def test_user_files_clashing_with_each_other_or_the_shipped_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, Any], skipped: str,
        kept: str) -> None:
    folder = _folder(tmp_path, "clashing", files)
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(folder))
    with pytest.warns(DeviceFileWarning) as record:
        assert get_device("h100").name == "H100 SXM"
    assert len(record) == 1 and str(folder / skipped) in str(record[0].message)
    assert get_device(kept).vendor == "Acme" and get_device("t4").name == "T4"
