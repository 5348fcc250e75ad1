"""Unit slips in device data are rejected, not loaded as wrong numbers (issue 13, item
10): the plausibility checks (hardware/checks.py) and the parsing behind them (units.py's
bit rates, quantities.py's one key per dtype, the file loader's duplicate keys).

A 1000x prefix slip that each number alone survives, a key given twice in one mapping (or
twice under two spellings of one dtype), a launch overhead in ms for us, and a memory
bandwidth in bits for bytes all used to load silently. Every expectation below is derived
by hand from datasheet numbers or from the registry's own extremes, never from the
validators' output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from roofline.hardware import (
    DeviceSpec,
    DeviceSpecError,
    UnknownDeviceError,
    get_device,
    load_device,
    register_device,
)
from roofline.hardware import registry as registry_module
from roofline.hardware.spec import (
    BANDWIDTH_PER_CAPACITY_FLOORS,
    DEFAULT_LAUNCH_OVERHEAD_SECONDS,
    LAUNCH_OVERHEAD_BAND_SECONDS,
    MEMORY_BANDWIDTH_FLOORS,
    RIDGE_BANDS_FLOP_PER_BYTE,
    validate_device,
)
from roofline.hardware.units import parse_quantity

pytestmark = pytest.mark.usefixtures("isolated_registry")


SHIPPED = [spec for spec, _ in registry_module._builtin()]


WIDE = ("fp64", "fp32")


def gpu(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "Slip GPU", "vendor": "Test", "kind": "gpu",
                            "matrix_flops_per_s": {"bf16": "400 TFLOPS"},
                            "vector_flops_per_s": {"fp32": "50 TFLOPS"},
                            "bandwidth_bytes_per_s": "2 TB/s", "memory_type": "HBM3"}
    data.update(overrides)
    return data


def ridges(spec: DeviceSpec) -> list[tuple[str, str, str, float]]:
    """(band, table, dtype, FLOP/B) of every peak of a shipped device."""
    out = []
    for table in ("matrix_flops_per_s", "matrix_sparse_flops_per_s", "vector_flops_per_s"):
        for dtype, rate in getattr(spec, table).items():
            wide = table == "vector_flops_per_s" or dtype in WIDE
            out.append(("wide" if wide else "narrow", table, dtype,
                        rate / spec.bandwidth_bytes_per_s))
    if spec.fp16_accumulate_flops_per_s:
        out.append(("narrow", "fp16_accumulate_flops_per_s", "",
                    spec.fp16_accumulate_flops_per_s / spec.bandwidth_bytes_per_s))
    return out


def one_peak(spec: DeviceSpec, table: str, dtype: str, factor: float) -> dict[str, Any]:
    """``spec`` with only one peak, that one times ``factor`` (no sparse/dense pairing rules)."""
    data = spec.model_dump()
    data.update(matrix_flops_per_s={}, matrix_sparse_flops_per_s={}, vector_flops_per_s={},
                fp16_accumulate_flops_per_s=None, achievable=None)  # measured: test_achievable
    rate = getattr(spec, table)[dtype] if dtype else getattr(spec, table)
    if table == "fp16_accumulate_flops_per_s":
        data["matrix_flops_per_s"] = {"fp16": rate * factor / 2}  # the rate it speeds up
        data[table] = rate * factor
    else:
        data[table] = {dtype: rate * factor}
    return data


# --------------------------------------------------------------------------- ridge bands
#: Blackwell Ultra's dense int8, cut to 0.15 POPS (B300 19.8 FLOP/B, GB300 20.6): inside
#: the narrow band, not one of the full-rate peaks it is derived from (checks.py).
CUT_DOWN_INT8 = {("B300", "matrix_flops_per_s", "int8"),
                 ("GB300 (per GPU)", "matrix_flops_per_s", "int8")}


def test_ridge_bands_are_ten_times_beyond_the_registry() -> None:
    # The bands are derived from the shipped devices (see RIDGE_BANDS_FLOP_PER_BYTE): this
    # recomputes the extremes, so a new device beyond them fails here until it is re-derived.
    spans: dict[str, list[float]] = {"narrow": [], "wide": []}
    narrow_low, narrow_high = RIDGE_BANDS_FLOP_PER_BYTE["narrow"]
    for spec in SHIPPED:
        for band, table, dtype, ridge in ridges(spec):
            if (spec.name, table, dtype) in CUT_DOWN_INT8:  # inside, 5x above the low end
                assert 5 * narrow_low < ridge < narrow_high
                continue
            spans[band].append(ridge)
    assert narrow_low == pytest.approx(min(spans["narrow"]) / 10, rel=0.01)
    assert narrow_high == pytest.approx(max(spans["narrow"]) * 10, rel=0.01)
    wide_low, wide_high = RIDGE_BANDS_FLOP_PER_BYTE["wide"]
    assert wide_low == pytest.approx(min(spans["wide"]) / 100, rel=0.01)  # cut-down fp64 parts
    assert wide_high == pytest.approx(max(spans["wide"]) * 10, rel=0.01)
    # the datasheet extremes named in the comment, by hand
    assert min(spans["narrow"]) == pytest.approx(34.1e12 / 912e9)  # RTX 3080 Ti tf32: 37.4
    assert max(spans["narrow"]) == pytest.approx(2642.4e12 / 1008e9)  # RTX 4090 int4 2:4
    assert min(spans["wide"]) == pytest.approx(11e12 / 2.46e12)  # Gaudi 2 bf16 vector: 4.47
    assert max(spans["wide"]) == pytest.approx(65.3e12 / 576e9)  # RTX 5000 Ada fp32: 113


def test_tensor_core_peak_in_gflops_is_rejected() -> None:
    # H100 SXM bf16 is 989.4 TFLOPS on 3.35 TB/s (ridge 295); in GFLOPS the ridge is 0.295
    data = gpu(matrix_flops_per_s={"bf16": "989.4 GFLOPS"}, bandwidth_bytes_per_s="3.35 TB/s")
    with pytest.raises(DeviceSpecError, match=r"matrix_flops_per_s\['bf16'\].*ridge point"):
        validate_device(data, origin="test")
    validate_device(gpu(matrix_flops_per_s={"bf16": "989.4 TFLOPS"},
                        bandwidth_bytes_per_s="3.35 TB/s"), origin="test")  # the right unit


@pytest.mark.parametrize("spec", SHIPPED, ids=[s.name for s in SHIPPED])
def test_every_1000x_slip_of_a_tensor_core_peak_is_rejected(spec: DeviceSpec) -> None:
    for band, table, dtype, _ in ridges(spec):
        if band != "narrow":
            continue
        validate_device(one_peak(spec, table, dtype, 1.0), origin="test")  # alone it is fine
        for factor in (1e-3, 1e3):
            with pytest.raises(DeviceSpecError):
                validate_device(one_peak(spec, table, dtype, factor), origin="test")


@pytest.mark.parametrize("spec", SHIPPED, ids=[s.name for s in SHIPPED])
def test_1000x_slips_of_other_peaks_rejected_where_the_band_promises(spec: DeviceSpec) -> None:
    low, _ = RIDGE_BANDS_FLOP_PER_BYTE["wide"]
    for band, table, dtype, ridge in ridges(spec):
        if band != "wide":
            continue
        with pytest.raises(DeviceSpecError):  # upward: every one (ridge > high / 1000)
            validate_device(one_peak(spec, table, dtype, 1e3), origin="test")
        if ridge < 1000 * low:  # downward: only ridges below 44.7 FLOP/B (documented gap)
            with pytest.raises(DeviceSpecError):
                validate_device(one_peak(spec, table, dtype, 1e-3), origin="test")


def test_real_cut_down_fp64_part_passes() -> None:
    # B300: 1.25 TFLOPS fp64 on 8 TB/s HBM3e = 0.156 FLOP/B, far below the registry's 4.47
    b300 = gpu(matrix_flops_per_s={"fp64": "1.25 TFLOPS", "bf16": "2250 TFLOPS"},
               vector_flops_per_s={"fp64": "1.25 TFLOPS", "fp32": "75 TFLOPS"},
               bandwidth_bytes_per_s="8 TB/s", memory_type="HBM3e")
    assert validate_device(b300, origin="test").peak_flops_per_s("fp64") == 1.25e12


def test_measured_and_what_if_specs_skip_the_ridge_band() -> None:
    # calibration measures (a loaded CPU's vector rate can sit at 0.01 FLOP/B), it does not
    # transcribe; what-if devices may scale a peak by any factor
    slow = gpu(vector_flops_per_s={"fp32": "20 GFLOPS"}, measured=True)
    assert validate_device(slow, origin="test").vector_flops_per_s["fp32"] == 20e9
    with pytest.raises(DeviceSpecError, match="ridge point"):
        validate_device({**slow, "measured": False}, origin="test")
    fast = get_device("H100 SXM").scaled(flops_factor=1000)
    assert fast.peak_flops_per_s("bf16") == pytest.approx(989.4e15)


# --------------------------------------------------------------------------- bandwidth floors
@pytest.mark.parametrize(
    ("memory_type", "bandwidth", "ok"),
    [
        ("HBM3", "3.35 GB/s", False),  # H100's 3.35 TB/s in GB/s
        ("HBM3", "100 GB/s", False),  # below one HBM1 stack: 1024 pins x 1 Gb/s = 128 GB/s
        ("HBM", "128 GB/s", True),
        ("GDDR6X", "10 GB/s", False),  # below one x32 GDDR5 chip at 3.6 Gb/s: 14.4 GB/s
        ("GDDR6X", "15 GB/s", True),
        ("DDR5", "10 GB/s", True),  # a single narrow DDR channel: no floor
        ("LPDDR5", "10 GB/s", True),
        (None, "10 GB/s", True),
    ],
)
def test_bandwidth_floor_by_memory_type(memory_type: str | None, bandwidth: str,
                                        ok: bool) -> None:
    # peaks scaled with the bandwidth, so that only the floor can object (ridge 100 FLOP/B)
    rate = parse_quantity(bandwidth, "bandwidth") * 100
    data = gpu(memory_type=memory_type, bandwidth_bytes_per_s=bandwidth,
               matrix_flops_per_s={"bf16": rate}, vector_flops_per_s={"fp32": rate / 10})
    if ok:
        assert validate_device(data, origin="test").memory_type == memory_type
    else:
        with pytest.raises(DeviceSpecError, match=r"bandwidth_bytes_per_s.*below"):
            validate_device(data, origin="test")


def test_floors_match_the_jedec_derivations() -> None:
    assert MEMORY_BANDWIDTH_FLOORS["HBM"] == 1024 * 1e9 / 8  # JESD235: 1024 pins, 1 Gb/s
    assert MEMORY_BANDWIDTH_FLOORS["GDDR"] == pytest.approx(32 * 3.6e9 / 8)  # JESD212


@pytest.mark.parametrize("bad", ["HMB3", "GDDR", "SDRAM", "hbm3x2", ""])
def test_unknown_memory_type_rejected(bad: str) -> None:
    if bad == "GDDR":  # a bare family is allowed
        validate_device(gpu(memory_type=bad), origin="test")
        return
    with pytest.raises(DeviceSpecError, match="memory_type"):
        validate_device(gpu(memory_type=bad), origin="test")


def test_every_shipped_gpu_and_accelerator_names_its_memory() -> None:
    for spec in SHIPPED:
        assert spec.memory_type, spec.name
        if spec.kind in ("tpu", "accelerator") or "SXM" in (spec.form_factor or ""):
            assert spec.memory_type.startswith("HBM"), spec.name


# --------------------------------------------------------------------------- launch overhead
def test_launch_overhead_band_admits_microsecond_launches() -> None:
    low, high = LAUNCH_OVERHEAD_BAND_SECONDS
    assert low <= 1e-6 and high >= 100e-6  # launch costs are quoted in microseconds
    for default in DEFAULT_LAUNCH_OVERHEAD_SECONDS.values():  # and rejects its 1000x slips
        assert low <= default <= high and not low <= default * 1e3 <= high
        assert not low <= default / 1e3 <= high


@pytest.mark.parametrize(
    ("overhead", "ok"),
    [
        ("5 us", True), ("1 us", True), ("100 us", True), ("500 ns", True),
        ("5 ms", False),  # 5 us written in ms: every small op becomes overhead-bound
        ("2 ms", False),
        ("5 ns", False),  # 5 us written in ns
        (0, False),  # a pure roofline is the analysis option overhead=False, not a device
        (0.5, False),
    ],
)  # fmt: skip
def test_launch_overhead_outside_the_band_is_rejected(overhead: Any, ok: bool) -> None:
    data = gpu(launch_overhead_seconds=overhead)
    if ok:
        assert validate_device(data, origin="test").launch_overhead_seconds == \
            parse_quantity(overhead, "seconds")
        return
    with pytest.raises(DeviceSpecError, match=r"launch_overhead_seconds = .* is outside the "
                                              r"100 ns to 1 ms.*overhead=False"):
        register_device(data)
    with pytest.raises(UnknownDeviceError):  # nothing registered
        get_device("Slip GPU")


def test_measured_launch_overhead_is_not_held_to_the_band() -> None:
    # calibration on a loaded machine measures what it measures (a descheduled thread, a
    # slow host): a measured spec keeps it, as it keeps a ridge point outside the bands
    loaded = validate_device(gpu(launch_overhead_seconds="2 ms", measured=True), origin="test")
    assert loaded.launch_overhead_seconds == 2e-3
    what_if = validate_device(gpu(launch_overhead_seconds="2 ms"), origin="t", plausibility=False)
    assert what_if.launch_overhead_seconds == 2e-3


# --------------------------------------------------------------------------- bits for bytes
@pytest.mark.parametrize("text", ["3.35 Tb/s", "3.35 Tbps", "26.8 Tbps", "19 Gbps"])
def test_memory_bandwidth_in_bits_is_rejected(text: str) -> None:
    # "3.35 Tb/s" for H100's 3.35 TB/s would load as 419 GB/s; "19 Gbps" is a GDDR pin rate
    with pytest.raises(DeviceSpecError, match=r"bandwidth_bytes_per_s.*is a bit rate"):
        validate_device(gpu(bandwidth_bytes_per_s=text), origin="test")


def test_links_are_still_quoted_in_bits() -> None:
    # TPU v5p ICI: 4800 Gbps per direction = 600 GB/s (Cloud TPU v5p page)
    link = {"kind": "ICI", "bandwidth_bytes_per_s": "4800 Gbps", "direction": "unidirectional"}
    spec = validate_device(gpu(interconnect=link), origin="test")
    assert spec.interconnect is not None
    assert spec.interconnect.bandwidth_bytes_per_s == 4800e9 / 8


def hbm_or_gddr(spec: DeviceSpec) -> str:
    return next((f for f in BANDWIDTH_PER_CAPACITY_FLOORS if (spec.memory_type or "")
                 .startswith(f)), "")


def test_bandwidth_per_capacity_floors_follow_from_jedec_and_the_registry() -> None:
    hbm, gddr = BANDWIDTH_PER_CAPACITY_FLOORS["HBM"], BANDWIDTH_PER_CAPACITY_FLOORS["GDDR"]
    # JESD238: the tallest, densest HBM3 stack, 16 x 32 Gb = 64 GB on 1024 pins x 6.4 Gb/s
    assert hbm < (1024 * 6.4e9 / 8) / 64e9  # 12.8 GB/s per GB
    # JESD212: two 8 Gb GDDR5 chips in clamshell on one x32 channel at 3.6 Gb/s
    assert gddr < (32 * 3.6e9 / 8) / 2e9  # 7.2 GB/s per GB
    # the registry's spread, from datasheet numbers by hand
    ratios = {f: [s.bandwidth_bytes_per_s / s.memory_bytes for s in SHIPPED
                  if hbm_or_gddr(s) == f and s.memory_bytes] for f in ("HBM", "GDDR")}
    assert min(ratios["HBM"]) == pytest.approx(6e12 / 256e9)  # MI325X: 23.4
    assert max(ratios["HBM"]) == pytest.approx(900e9 / 16e9)  # V100 16GB: 56.3
    assert min(ratios["GDDR"]) == pytest.approx(300e9 / 24e9)  # L4: 12.5
    assert max(ratios["GDDR"]) == pytest.approx(760e9 / 10e9)  # RTX 3080: 76
    assert hbm < min(ratios["HBM"]) / 2 and gddr < min(ratios["GDDR"]) / 2
    assert hbm > max(ratios["HBM"]) / 8  # so that every shipped HBM part's 8x slip fails


def test_hbm_bandwidth_in_bits_as_a_bare_number_is_rejected() -> None:
    # H100 SXM: 3.35 TB/s on 80 GB; a bit-rate figure converted by hand is 8x low
    data = gpu(bandwidth_bytes_per_s=3.35e12 / 8, memory_bytes="80 GB", memory_type="HBM3",
               matrix_flops_per_s={"bf16": "100 TFLOPS"})
    with pytest.raises(DeviceSpecError, match=r"5.23 GB/s per GB, below the 10 GB/s per GB"):
        validate_device(data, origin="test")
    validate_device({**data, "bandwidth_bytes_per_s": "3.35 TB/s"}, origin="test")


@pytest.mark.parametrize("spec", [s for s in SHIPPED if hbm_or_gddr(s) and s.memory_bytes],
                         ids=lambda s: s.name)
def test_an_8x_bandwidth_slip_is_rejected_where_the_floor_promises(spec: DeviceSpec) -> None:
    data = spec.model_dump()
    data.update(matrix_flops_per_s={}, matrix_sparse_flops_per_s={}, vector_flops_per_s={},
                fp16_accumulate_flops_per_s=None, achievable=None)  # only the bandwidth checks
    validate_device(data, origin="test")
    slipped = {**data, "bandwidth_bytes_per_s": spec.bandwidth_bytes_per_s / 8}
    family = hbm_or_gddr(spec)
    ratio = spec.bandwidth_bytes_per_s / spec.memory_bytes  # type: ignore[operator]
    if ratio / 8 < BANDWIDTH_PER_CAPACITY_FLOORS[family]:  # every HBM part, fast GDDR cards
        with pytest.raises(DeviceSpecError, match="below"):
            validate_device(slipped, origin="test")
    else:  # slow GDDR (L4 .. RTX 6000 Ada at 12.5-45 GB/s per GB): the documented gap
        assert family == "GDDR"
        validate_device(slipped, origin="test")


# --------------------------------------------------------------------------- one dtype, two keys
@pytest.mark.parametrize(
    ("table", "first", "second"),
    [
        ("matrix_flops_per_s", ("bf16", "100 TFLOPS"), ("bfloat16", "200 TFLOPS")),
        ("matrix_sparse_flops_per_s", ("fp8", "800 TFLOPS"), ("float8_e4m3fn", "700 TFLOPS")),
        ("vector_flops_per_s", ("fp32", "50 TFLOPS"), ("float32", "40 TFLOPS")),
        ("depthwise_flops_per_s", ("fp16", "1 TFLOPS"), ("half", "2 TFLOPS")),
    ],
)
def test_two_keys_for_one_dtype_in_a_file_are_rejected(
    tmp_path: Path, table: str, first: tuple[str, str], second: tuple[str, str]
) -> None:
    # distinct keys to YAML (its duplicate-key check cannot see them), one peak to the model
    data = gpu(name="Twice GPU", **{table: dict([first, second])})
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(DeviceSpecError) as info:
        load_device(path)
    message = str(info.value)
    assert str(path) in message and "device 'Twice GPU'" in message
    assert f"field '{table}'" in message
    assert repr(first[0]) in message and repr(second[0]) in message


def test_register_device_with_two_keys_for_one_dtype_registers_nothing() -> None:
    data = gpu(name="Twice GPU", bandwidth_bytes_per_s="3.35 TB/s",
               matrix_flops_per_s={"bfloat16": "989.4 TFLOPS", "bf16": "900 TFLOPS"})
    with pytest.raises(DeviceSpecError, match=r"device 'Twice GPU'.*matrix_flops_per_s.*"
                                              r"'bfloat16' = '989.4 TFLOPS' and 'bf16'"):
        register_device(data)
    with pytest.raises(UnknownDeviceError):
        get_device("Twice GPU")


def test_two_keys_for_one_dtype_in_a_matmul_curve_are_rejected() -> None:
    point = {"m": 64, "n": 64, "k": 64, "flops_per_s": 1e12}
    data = gpu(matmul_curve={"fp32": [point], "float": [point]})
    with pytest.raises(DeviceSpecError, match=r"matmul_curve.*'fp32'.*'float'"):
        validate_device(data, origin="test")


# ---------------------------------------- decimal commas and duplicate keys in device files

def test_decimal_comma_in_a_device_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "eu.yaml"
    path.write_text(yaml.safe_dump(gpu(bandwidth_bytes_per_s="1,5 TB/s")), encoding="utf-8")
    with pytest.raises(DeviceSpecError, match=r"bandwidth_bytes_per_s.*'1.5'") as info:
        load_device(path)
    assert str(path) in str(info.value)


def test_duplicate_key_in_yaml_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(
        "name: Dup GPU\n"
        "vendor: Test\n"
        "kind: gpu\n"
        "bandwidth_bytes_per_s: 3.35 TB/s\n"
        "matrix_flops_per_s: {bf16: 989.4 TFLOPS}\n"
        "bandwidth_bytes_per_s: 335 GB/s\n",  # the last value used to win silently
        encoding="utf-8",
    )
    with pytest.raises(DeviceSpecError) as info:
        load_device(path)
    message = str(info.value)
    assert str(path) in message and "line 6" in message and "'bandwidth_bytes_per_s'" in message
    assert "first at line 4" in message


def test_duplicate_key_in_a_nested_mapping(tmp_path: Path) -> None:
    path = tmp_path / "nested.yaml"
    path.write_text("- name: Nested GPU\n  vendor: Test\n  kind: gpu\n"
                    "  bandwidth_bytes_per_s: 2 TB/s\n"
                    "  matrix_flops_per_s: {bf16: 400 TFLOPS, fp16: 400 TFLOPS, bf16: 4 TFLOPS}\n",
                    encoding="utf-8")
    with pytest.raises(DeviceSpecError, match=r"line 5: duplicate key 'bf16'"):
        load_device(path)


def test_duplicate_key_in_json(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    text = json.dumps(gpu())
    path.write_text(text[:-1] + ', "kind": "cpu"}', encoding="utf-8")
    with pytest.raises(DeviceSpecError, match="duplicate key 'kind'"):
        load_device(path)


def test_yaml_loader_is_still_safe(tmp_path: Path) -> None:
    path = tmp_path / "unsafe.yaml"
    path.write_text("name: !!python/object/apply:os.system ['true']\n", encoding="utf-8")
    with pytest.raises(DeviceSpecError, match="cannot parse"):
        load_device(path)


# --------------------------------------------------------------------------- kind
@pytest.mark.parametrize(("kind", "expected"), [("GPU", "'gpu' rather than 'GPU'"),
                                                (" Cpu", "'cpu' rather than ' Cpu'"),
                                                ("fpga", "Input should be 'gpu'"),
                                                (None, "Field required")])
def test_a_bad_kind_is_the_only_error(kind: str | None, expected: str) -> None:
    data = gpu(kind=kind)
    if kind is None:
        del data["kind"]
    with pytest.raises(DeviceSpecError) as info:
        register_device(data)
    message = str(info.value)
    assert "field 'kind'" in message and expected in message
    # the missing default overhead follows from the kind: not a second error
    assert "launch_overhead_seconds" not in message
