"""What-if devices (hardware/variants.py): ``DeviceSpec.scaled`` and ``.with_overrides``,
and the measured figures that follow their peaks.

Expected values are datasheet figures times the factor (H100 SXM: 989.4 TFLOPS bf16, 66.9
fp32 vector, 3957.8 fp8 sparse, 1980 MHz boost, 132 SMs; A100 SXM 80GB: 312 bf16, 156 TF32,
9.7 fp64 vector, 108 SMs) and the measured shares of test_achievable.py's sources (H100
bf16 794.5 of 989.4 TFLOPS, MAMF; A40's sustained 1717.5 of 1740 MHz, gpu-benches).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline
from roofline.hardware import DeviceSpecError, get_device
from roofline.hardware.achievable import figures

pytestmark = pytest.mark.usefixtures("isolated_registry")


# --- scaled and with_overrides ------------------------------------------------------------

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


@pytest.mark.parametrize("name", ["flops_factor", "bandwidth_factor", "clock_factor",
                                  "cores_factor"])
def test_scaled_rejects_bad_factors(name: str) -> None:
    """Every factor of ``scaled`` must be a positive finite number (the review's D15: one
    test for the four factors, where test_hardware.py and test_achievable.py had one each)."""
    for factor in (0, -1, float("nan"), float("inf"), True, "2"):
        with pytest.raises(ValueError, match=name):
            get_device("h100").scaled(**{name: factor})


@given(st.floats(min_value=0.01, max_value=100))
def test_scaled_multiplies_every_peak(factor: float) -> None:
    a100 = get_device("A100 SXM 80GB")
    scaled = a100.scaled(flops_factor=factor)
    for table in ("matrix_flops_per_s", "matrix_sparse_flops_per_s", "vector_flops_per_s"):
        for dtype, value in getattr(a100, table).items():
            assert getattr(scaled, table)[dtype] == pytest.approx(value * factor)


def test_with_overrides() -> None:
    h100 = get_device("H100 SXM")
    h200_like = h100.with_overrides(name="H100 HBM3e", bandwidth_bytes_per_s="4.8 TB/s")
    assert h200_like.bandwidth_bytes_per_s == 4.8e12
    assert h200_like.peak_flops_per_s("bf16") == h100.peak_flops_per_s("bf16")
    assert h100.bandwidth_bytes_per_s == 3.35e12  # original untouched
    calibrated = h100.with_overrides(efficiency={"matrix": 0.7}, measured=True)
    assert calibrated.measured and calibrated.efficiency == {"matrix": 0.7}
    assert calibrated.aliases == h100.aliases  # same device, same names


@pytest.mark.usefixtures("isolated_registry")
def test_a_renamed_copy_drops_the_originals_aliases_and_registers() -> None:
    h100 = get_device("H100 SXM")
    assert "h100" in h100.aliases
    mine = h100.with_overrides(name="H100 at 600 W")
    assert mine.aliases == []
    roofline.register_device(mine)
    assert get_device("H100 at 600 W") == mine and get_device("h100") == h100
    assert h100.with_overrides(name="X", aliases=["x1"]).aliases == ["x1"]


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


# --- measured figures follow their peaks --------------------------------------------------

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
