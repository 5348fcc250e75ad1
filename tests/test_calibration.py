"""Calibration (hardware/calibration.py): real CPU microbenchmarks, errors, cache, efficiencies.

The three tests that run a real calibration are marked slow (a quick calibration takes
several seconds on 2 shared cores); the others replace the microbenchmarks by canned
numbers (the ``runs`` fixture) or a fake timer.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest
import torch
from torch import nn

import roofline
from roofline.hardware import DeviceSpec, UnknownDeviceError
from roofline.hardware.calibration import CalibrationError, as_efficiency, calibrate, efficiencies

# the module, for patching its internals
cal = importlib.import_module("roofline.hardware.calibration")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(scope="module")
def cpu_spec() -> DeviceSpec:
    """One real quick calibration at the current thread count, shared by several tests."""
    return calibrate("cpu", cache=False)


def fake(matrix: float = 5e10, vector: float = 5e9, bandwidth: float = 1e10) -> dict[str, Any]:
    return {"matrix_flops_per_s": {"fp32": matrix}, "vector_flops_per_s": {"fp32": vector},
            "bandwidth_bytes_per_s": bandwidth, "launch_overhead_seconds": 3e-6,
            "matmul_curve": {"fp32": [{"m": 64, "n": 64, "k": 64, "flops_per_s": matrix / 2}]},
            "memory_curve": [{"bytes": 6144, "bytes_per_s": bandwidth / 4},
                             {"bytes": 3 << 26, "bytes_per_s": bandwidth}],
            "notes": ["fake measurement"]}


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], int]]:
    """Replace the microbenchmarks by canned numbers; records (dtypes, threads) per run."""
    calls: list[tuple[list[str], int]] = []

    def run(self: Any, keys: list[str]) -> dict[str, Any]:
        calls.append((keys, self.threads))
        assert torch.get_num_threads() == self.threads  # measured at the requested count
        return fake()

    monkeypatch.setattr(cal._Bench, "run", run)
    return calls


def spec_with(matrix: dict[str, float], vector: dict[str, float], bandwidth: float,
              name: str = "Fake") -> DeviceSpec:
    return DeviceSpec(name=name, vendor="Test", kind="cpu", matrix_flops_per_s=matrix,
                      vector_flops_per_s=vector, bandwidth_bytes_per_s=bandwidth,
                      launch_overhead_seconds=1e-6)


# ---------------------------------------------------------------------- real measurements
def positive_finite(value: float) -> bool:
    return value > 0 and math.isfinite(value)


def check_plausible(spec: DeviceSpec, threads: int) -> None:
    """What a real calibration guarantees on any machine, however loaded.

    No rate floors: load on a shared machine only lowers measured rates, by any factor,
    and no floor follows from anything measured in the same run (the launch overhead, say,
    was timed at another moment under other load). The unit-prefix floors of the DeviceSpec
    validators (1 GFLOP/s, 1 GB/s) hold because a spec that exists passed them.
    """
    assert spec.measured and spec.kind == "cpu" and spec.vendor == "measured"
    assert spec.name == f"CPU ({threads} thread{'s' * (threads != 1)}, measured)"
    assert spec.compute_units == threads
    assert spec.matrix_flops_per_s["fp32"] >= 1e9 and spec.vector_flops_per_s["fp32"] >= 1e9
    assert spec.bandwidth_bytes_per_s >= 1e9
    assert positive_finite(spec.launch_overhead_seconds)
    assert spec.sources["compute"].startswith("measured by roofline.calibrate on ")
    # the curves: a full (m, n, k) grid, and copies from a few KiB past the last-level cache
    plan = cal._PLANS["cpu", True]
    assert {(p.m, p.n, p.k) for p in spec.matmul_curve["fp32"]} == {
        (m, n, k) for m in plan.curve_sizes for n in plan.curve_sizes for k in plan.curve_sizes}
    assert all(positive_finite(p.flops_per_s) for p in spec.matmul_curve["fp32"])
    sizes = [p.bytes for p in spec.memory_curve]
    assert sizes[0] == 3 * 2048 and sizes[-1] == 3 * plan.stream_bytes and sizes == sorted(sizes)
    assert all(positive_finite(p.bytes_per_s) for p in spec.memory_curve)
    for table in (spec.depthwise_flops_per_s, spec.depthwise_backward_flops_per_s):
        assert positive_finite(table["fp32"])
    notes = "\n".join(spec.notes)
    for text in ("fp32 matmul (torch.mm", "n=1024", "plateau", "LOWER BOUND", "bandwidth =",
                 "launch_overhead_seconds", torch.__version__, f"{threads} CPU thread(s)",
                 "fp32 matmul curve", "memory curve", "fp32 depthwise conv",
                 "backward (input and weight"):
        assert text in notes


@pytest.mark.slow  # runs a real calibration
def test_calibrate_cpu_is_plausible_and_leaves_nothing_behind(cpu_spec: DeviceSpec) -> None:
    check_plausible(cpu_spec, torch.get_num_threads())
    assert torch.is_grad_enabled()
    assert torch.get_float32_matmul_precision() == "highest"


def test_matmul_precision_context_restores_every_backend_flag() -> None:
    flags = [f for f in (getattr(torch.backends.cuda, "matmul", None),
                         getattr(torch.backends.mkldnn, "matmul", None))
             if hasattr(f, "fp32_precision")]
    saved = [f.fp32_precision for f in flags]
    try:
        for f in flags:
            f.fp32_precision = "none"  # a fresh process's state, whatever ran before
        before = ([f.fp32_precision for f in flags], torch.get_float32_matmul_precision(),
                  torch.backends.cuda.matmul.allow_tf32)
        for key in ("tf32", "fp32"):
            with cal._matmul_precision(key):
                pass
            assert ([f.fp32_precision for f in flags], torch.get_float32_matmul_precision(),
                    torch.backends.cuda.matmul.allow_tf32) == before
    finally:
        for f, value in zip(flags, saved, strict=True):
            f.fp32_precision = value


@pytest.mark.slow  # runs a real calibration
def test_calibrate_one_thread_restores_thread_count() -> None:
    before = torch.get_num_threads()
    spec = calibrate("cpu", threads=1, cache=False)
    assert torch.get_num_threads() == before
    check_plausible(spec, 1)


def test_threads_restored_when_measuring_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Any, keys: list[str]) -> dict[str, Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr(cal._Bench, "run", boom)
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="boom"):
        calibrate("cpu", threads=before + 1, cache=False)
    assert torch.get_num_threads() == before


@pytest.mark.slow  # runs a real calibration
def test_analyze_with_calibrated_spec(cpu_spec: DeviceSpec) -> None:
    trace = roofline.trace(nn.Linear(64, 32), torch.randn(8, 64))
    result = roofline.analyze(trace, cpu_spec)
    assert result.device is cpu_spec and result.seconds > 0
    base = spec_with({}, {"fp32": 2 * cpu_spec.vector_flops_per_s["fp32"]},
                     2 * cpu_spec.bandwidth_bytes_per_s)
    derated = roofline.analyze(trace, base, efficiency=as_efficiency(cpu_spec, base))
    assert derated.seconds > 0


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(("device", "message"), [
    pytest.param("cuda", "CUDA device", marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="a CUDA device exists here")),
    pytest.param("cuda:7", "CUDA device", marks=pytest.mark.skipif(
        torch.cuda.device_count() > 7, reason="cuda:7 exists here")),
    pytest.param("mps", "MPS is not available", marks=pytest.mark.skipif(
        torch.backends.mps.is_available(), reason="MPS exists here")),
    ("nonsense", "expected 'cpu', 'cuda', 'cuda:N' or 'mps'"),
    ("tpu", "expected 'cpu'"),
    ("cpu:1", "one CPU device"),
])
def test_missing_device_raises(device: str, message: str, runs: list[Any]) -> None:
    with pytest.raises(CalibrationError, match=message) as info:
        calibrate(device, cache=False)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    assert repr(device) in str(info.value) and not runs


@pytest.mark.parametrize("dtypes", [("int8",), ("tf32",), ("float32", "nonsense"), ()])
def test_unsupported_dtype_raises(dtypes: tuple[str, ...], runs: list[Any]) -> None:
    with pytest.raises(CalibrationError, match="dtype"):
        calibrate("cpu", dtypes=dtypes, cache=False)
    assert not runs


def test_bad_threads_raise() -> None:
    with pytest.raises(CalibrationError, match="threads"):
        calibrate("cpu", threads=0, cache=False)


def test_implausible_measurement_surfaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal._Bench, "run", lambda self, keys: fake(vector=1e6))
    with pytest.raises(CalibrationError, match=r"vector_flops_per_s\.fp32"):
        calibrate("cpu", cache=False)


def test_noisy_timings_are_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    class Noisy:
        times, median, iqr = [1.0, 1.2, 1.4, 1.6], 1.3, 0.3

    class FakeTimer:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def blocked_autorange(self, min_run_time: float) -> Noisy:
            return Noisy()

    monkeypatch.setattr(cal, "Timer", FakeTimer)
    bench = cal._Bench(torch.device("cpu"), cal._PLANS["cpu", True], 1)
    assert bench.time("pass", "copy") == 1.3
    assert bench.notes == ["noisy: copy: IQR/median 23%, 4 block(s)"]
    # curve points are counted and noted once per curve
    small = cal._Plan(matmul_sizes=(8,), stream_bytes=2048 * 16, vector_elements=64,
                      min_run_time=0.01, curve_sizes=(8, 16))
    bench = cal._Bench(torch.device("cpu"), small, 1)
    assert len(bench.memory_curve()) == 3  # 2 KiB, 8 KiB and the 32 KiB top
    assert len(bench.matmul_curve("fp32")) == 8
    assert bench.notes[0].endswith("noisy: 3 of 3 points with IQR/median > 10% (is something "
                                   "else running?)")
    assert "noisy: 8 of 8 points" in bench.notes[1]


# ---------------------------------------------------------------------- cache
def test_cache_hit_miss_and_key(cache_dir: Any, runs: list[Any]) -> None:
    first = calibrate("cpu", threads=1)
    assert len(runs) == 1 and len(list(cache_dir.glob("*.json"))) == 1
    assert calibrate("cpu", threads=1) == first and len(runs) == 1  # served from the cache
    assert calibrate("cpu", threads=1, dtypes=(torch.float32,)) == first  # same key
    calibrate("cpu", threads=2)  # other thread count: other key
    calibrate("cpu", threads=1, dtypes=("fp32", "fp64"))  # other dtypes
    calibrate("cpu", threads=1, quick=False)  # other quick flag
    assert [r[1] for r in runs] == [1, 2, 1, 1] and len(list(cache_dir.glob("*.json"))) == 4
    calibrate("cpu", threads=1, cache=False)  # forced fresh run, nothing written
    assert len(runs) == 5 and len(list(cache_dir.glob("*.json"))) == 4


@pytest.mark.parametrize("content", ["{not json", '{"name": "x"}', "implausible"])
def test_invalid_cache_entry_is_remeasured(content: str, cache_dir: Any, runs: list[Any]) -> None:
    calibrate("cpu", threads=1)
    (path,) = cache_dir.glob("*.json")
    if content == "implausible":
        content = path.read_text().replace("50000000000.0", "5.0")
        assert "5.0" in content
    path.write_text(content)
    spec = calibrate("cpu", threads=1)
    assert len(runs) == 2 and spec.matrix_flops_per_s["fp32"] == 5e10
    assert DeviceSpec.model_validate_json(path.read_text()) == spec  # rewritten


# ---------------------------------------------------------------------- efficiencies
def test_efficiencies_half_of_peak() -> None:
    measured = spec_with({"fp32": 4e10, "bf16": 8e10}, {"fp32": 5e9}, 2e10)
    base = spec_with({"fp32": 8e10, "bf16": 16e10}, {"fp32": 1e10}, 4e10)
    assert efficiencies(measured, base) == {"matrix_fp32": 0.5, "matrix_bf16": 0.5,
                                            "vector_fp32": 0.5, "memory": 0.5}
    assert as_efficiency(measured, base) == {"matrix": 0.5, "vector": 0.5, "memory": 0.5}


def test_efficiencies_fallback_cap_and_dtype_choice() -> None:
    measured = spec_with({"fp32": 4e10, "bf16": 8e10}, {"fp32": 5e9}, 2e10)
    # No fp32 matrix peak: fp32 matmuls are compared with the vector peak, as PyTorch runs them.
    base = spec_with({"bf16": 32e10}, {"fp32": 2e10}, 1e10)
    eff = efficiencies(measured, base)
    assert eff == {"matrix_fp32": 2.0, "matrix_bf16": 0.25, "vector_fp32": 0.25, "memory": 2.0}
    assert as_efficiency(measured, base) == {"matrix": 0.25, "vector": 0.25, "memory": 1.0}
    assert as_efficiency(measured, base, dtype=torch.float32)["matrix"] == 1.0  # capped


def test_a_gpu_vector_lower_bound_never_lowers_the_datasheet_ceiling() -> None:
    # On an H200 the in-cache addcmul ran at 0.6 TFLOP/s (fp32) and 0.44 (bf16): launch-bound.
    from roofline.hardware.calibration import _vector_floor

    base = spec_with({"bf16": 1e15}, {"fp32": 67e12}, 4.8e12)
    fixed = _vector_floor({"vector_flops_per_s": {"fp32": 6e11, "bf16": 4.4e11}, "notes": []},
                          base)
    # the datasheet's fp32 ceiling, and no bf16 ceiling, as the datasheet has none
    assert fixed["vector_flops_per_s"] == {"fp32": 67e12}
    assert "lower bound" in fixed["notes"][-1]
    # a measurement above the datasheet is kept as measured
    assert _vector_floor({"vector_flops_per_s": {"fp32": 7e13}, "notes": []}, base) == {}


def test_base_spec_adds_efficiency_notes(runs: list[Any]) -> None:
    base = spec_with({}, {"fp32": 1e11}, 2e10, name="Fake CPU")
    spec = calibrate("cpu", threads=1, base=base)
    assert spec.name == "Fake CPU (1 thread, measured)" and spec.vendor == "Test"
    assert "matrix fp32: 50.0% of peak (Fake CPU datasheet)" in spec.notes
    assert "memory: 50.0% of peak (Fake CPU datasheet)" in spec.notes
    with pytest.raises(UnknownDeviceError):
        calibrate("cpu", threads=1, base="no such device at all")
    # the architecture carries over with its source: parts of the time model key on it
    with_isa = base.with_overrides(isa="sm_90", sources={**base.sources, "isa": "a test"})
    measured = calibrate("cpu", threads=1, base=with_isa, cache=False)
    assert measured.isa == "sm_90" and measured.sources["isa"] == "a test"


def test_exported_from_hardware() -> None:
    from roofline.hardware import calibrate as exported

    assert exported is calibrate is cal.calibrate


def test_cli_calibrate_saves_a_spec_that_analyze_uses(runs: list[Any], tmp_path: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    path = tmp_path / "cpu.json"
    assert main(["calibrate", "--threads", "1", "--save", str(path)]) == 0
    out = capsys.readouterr().out
    assert "matrix fp32" in out and "50.0 GFLOP/s" in out and "10.0 GB/s" in out
    spec = DeviceSpec.model_validate_json(path.read_text())
    assert spec.measured and spec.bandwidth_bytes_per_s == 1e10
    assert spec.memory_curve[0].bytes_per_s == 2.5e9  # the curves travel through the file
    assert spec.matmul_curve["fp32"][0].flops_per_s == 2.5e10
    assert main(["analyze", "mlp", "--device", str(path), "--batch-size", "4", "--json"]) == 0
    assert spec.name in capsys.readouterr().out
    assert main(["analyze", "mlp", "--device", str(tmp_path / "missing.json")]) == 1
