"""The command line, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from roofline.presentation.cli import main


def test_analyze_prints_table_and_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "mlp", "--device", "h100", "--compare", "a100", "--train"]) == 0
    out = capsys.readouterr().out
    assert "by bound:" in out and "predicted speedup" in out and "addmm" in out


def test_what_if_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "what-if", "mlp", "--device", "a100", "--flops", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert 1.0 <= data["speedup"] <= 2.0 and data["explanation"]


def test_fp16_accumulate_flag_speeds_up_fp16_on_geforce_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    def seconds(*argv: str) -> float:
        assert main(["--json", "analyze", "mlp", "--dtype", "fp16", "--batch-size", "4096",
                     *argv]) == 0
        return float(json.loads(capsys.readouterr().out)["seconds"])

    assert seconds("--device", "RTX 4090", "--fp16-accumulate") < seconds("--device", "RTX 4090")
    assert seconds("--device", "a100", "--fp16-accumulate") == seconds("--device", "a100")


def test_attention_flag_orders_fused_eager_and_cpu_path(
        capsys: pytest.CaptureFixture[str]) -> None:
    def seconds(attention: str, device: str = "a100") -> float:
        flag = ["--attention", attention] if attention else []
        assert main(["--json", "analyze", "gpt2", "--device", device, "--train", "--dtype",
                     "bf16", "--batch-size", "2", "--seq-len", "512", *flag]) == 0
        return float(json.loads(capsys.readouterr().out)["seconds"])

    # T x T scores through memory cost more than the fused kernel; in fp32 on the vector
    # units (the CPU's path) more again
    fused, eager, cpu = seconds("fused"), seconds("eager"), seconds("as-run")
    assert fused < eager < cpu
    assert seconds("") == fused  # "" drops the flag: the default for a GPU is "fused"
    xeon = "Xeon Platinum 8480+"  # and for a CPU, the CPU's own path
    assert seconds("", xeon) == seconds("as-run", xeon) > seconds("fused", xeon)


def test_devices_json_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--json"]) == 0
    names = {d["name"] for d in json.loads(capsys.readouterr().out)}
    assert {"H100 SXM", "A100 SXM 80GB", "MI300X"} <= names


@pytest.mark.parametrize("argv, needle", [
    (["analyze", "mlp", "--device", "h1000"], "H100"),
    (["analyze", "gpt3", "--device", "h100"], "gpt2"),
    (["what-if", "mlp", "--device", "a100", "--flops", "0"], "flops"),
    (["analyze", "mlp", "--device", "a100", "--dtype", "fp9"], "fp9"),
])
def test_errors_are_one_line(argv: list[str], needle: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("roofline: error:") and needle in err[-1]
    assert not any("Traceback" in line for line in err)


def test_python_dash_m_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "roofline", "devices", "--vendor", "amd"],
                         capture_output=True, text=True, check=True).stdout
    assert "MI300X" in out
