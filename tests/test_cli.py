"""The command line, as a user runs it: parsing, device resolution, output shape, exit codes.

The library's numbers are tested elsewhere; these run the ``mlp`` zoo model or a one-layer
GPT-2 (fake traces of a few hundred ops), one trace per mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import roofline.tracing
from roofline.hardware import get_device
from roofline.presentation.cli import main
from roofline.zoo import ZooModel, get_model


def tiny_gpt2(batch_size: int = 2, seq_len: int = 64) -> ZooModel:
    """One GPT-2 block (64 wide) with dropout: attention as each ``--attention`` mode sees it."""
    return get_model("gpt2", batch_size=batch_size, seq_len=seq_len, n_layer=1, n_head=2,
                     n_embd=64, vocab_size=256, n_positions=64)


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(["--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_analyze_prints_table_and_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "mlp", "--device", "h100", "--compare", "a100", "--train"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("H100 SXM: predicted step")
    assert "H100 SXM -> A100 SXM 80GB: predicted speedup" in out
    assert "by bound:" in out and "addmm" in out


def test_analyze_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "analyze", "mlp", "--device", "a100", "--top", "2")
    assert {"device", "seconds", "device_seconds", "host_seconds", "total_flops", "total_bytes",
            "achieved_flops_per_s", "mfu", "by_bound", "by_category", "by_phase",
            "assumptions", "uncounted", "top_ops"} <= set(data)
    assert data["device"] == "A100 SXM 80GB"
    assert len(data["top_ops"]) == 2  # --top
    assert set(data["by_phase"]) == {"forward"}  # no --train: inference only
    assert data["seconds"] == pytest.approx(data["device_seconds"] + data["host_seconds"])


def test_what_if_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "what-if", "mlp", "--device", "a100", "--flops", "2")
    assert {"src", "dst", "speedup", "by_category", "by_bound", "limits",
            "explanation"} <= set(data)
    assert data["dst"]["device"] == "A100 SXM 80GB (2x FLOP/s)"
    assert 1.0 <= data["speedup"] <= 2.0 and data["explanation"]


def test_fp16_accumulate_flag_speeds_up_fp16_on_geforce_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    def src_dst(*flag: str) -> tuple[float, float]:
        data = _json(capsys, "analyze", "mlp", "--dtype", "fp16", "--batch-size", "4096",
                     "--device", "RTX 4090", "--compare", "a100", *flag)
        return data["src"]["seconds"], data["dst"]["seconds"]

    (geforce, a100), (geforce_acc, a100_acc) = src_dst(), src_dst("--fp16-accumulate")
    assert geforce_acc < geforce and a100_acc == a100


def test_attention_flag_orders_fused_eager_and_cpu_path(
        capsys: pytest.CaptureFixture[str]) -> None:
    def seconds(attention: str) -> float:
        data = _json(capsys, "analyze", f"{__name__}:tiny_gpt2", "--device", "a100", "--train",
                     "--dtype", "bf16", "--attention", attention)
        return float(data["seconds"])

    # T x T scores through memory cost more than the fused kernel; in fp32 on the vector
    # units (the CPU's path) more again
    assert seconds("fused") < seconds("eager") < seconds("as-run")


def test_attention_default_follows_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = roofline.tracing.trace

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["attention"])
        return real(*args, **kwargs)

    monkeypatch.setattr(roofline.tracing, "trace", spy)
    for device in ("a100", "Xeon Platinum 8480+"):
        assert main(["analyze", "mlp", "--device", device]) == 0
    assert main(["analyze", "mlp", "--device", "Xeon Platinum 8480+", "--attention",
                 "eager"]) == 0
    assert asked == ["fused", "as-run", "eager"]  # a GPU's kernel, a CPU's path, as asked


def test_device_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = get_device("a100").model_dump(mode="json")
    one = tmp_path / "mine.json"
    one.write_text(json.dumps({**spec, "name": "My A100", "aliases": []}))
    assert _json(capsys, "analyze", "mlp", "--device", str(one))["device"] == "My A100"

    two = tmp_path / "two.json"
    two.write_text(json.dumps([{**spec, "name": n, "aliases": []} for n in ("x1", "x2")]))
    assert main(["analyze", "mlp", "--device", str(two)]) == 1
    assert capsys.readouterr().err == (
        f"roofline: error: {two} holds 2 devices; pass a file with one\n")


def test_devices_json_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    names = {d["name"] for d in _json(capsys, "devices")}
    assert {"H100 SXM", "A100 SXM 80GB", "MI300X"} <= names


@pytest.mark.parametrize("argv, needle", [
    (["analyze", "mlp", "--device", "h1000"], "H100"),
    (["analyze", "gpt3", "--device", "h100"], "gpt2"),
    (["analyze", "mlp", "--device", "a100", "--dtype", "fp9"], "fp9"),
])
def test_errors_are_one_line(argv: list[str], needle: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("roofline: error:") and needle in err[0]


def test_bad_arguments_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["what-if", "mlp", "--device", "a100", "--flops", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "roofline what-if: error: argument --flops: must be a finite number > 0, got 0")


def test_python_dash_m_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "roofline", "devices", "--vendor", "amd"],
                         capture_output=True, text=True, check=True).stdout
    assert "MI300X" in out


# --- memory ---------------------------------------------------------------------------

# the zoo's mlp: Linear(784, 1024), Linear(1024, 1024), Linear(1024, 10), fp32
MLP_PARAMS = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10


def test_memory_tables_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "mlp", "--device", "a100", "--train"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("peak live tensors: ") and "(op " in out
    for row in ("parameter", "gradient", "optimizer_state", "activation", "temporary",
                "A100 SXM 80GB: fits", "cuda context", "cublas workspace", "assumptions:"):
        assert row in out
    data = _json(capsys, "memory", "mlp", "--device", "a100", "--train")
    kinds = data["bytes_by_kind"]
    # fp32 AdamW: 4 bytes each of weights and gradients, 8 of the two moments (+ 3 steps)
    assert kinds["parameter"] == kinds["gradient"] == 4 * MLP_PARAMS
    assert kinds["optimizer_state"] == 8 * MLP_PARAMS + 4 * 6
    assert data["peak"]["phase"] in ("forward", "backward", "optimizer")
    fit = data["fit"]
    assert fit["fits"] and fit["capacity_bytes"] == 80 * 10**9
    assert fit["required_bytes"] == fit["tensor_bytes"] + sum(fit["overheads"].values())


def test_memory_max_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = get_device("a100").model_dump(mode="json")
    small = tmp_path / "small.json"  # an A100 with 1 GB: the mlp's batch is found quickly
    small.write_text(json.dumps({**spec, "name": "A100 1GB", "aliases": [],
                                 "memory_bytes": 10**9}))
    data = _json(capsys, "memory", "mlp", "--device", str(small), "--train", "--max-batch")
    m = data["max_batch"]
    traced = {int(b): v for b, v in m["traced"].items()}
    batch = m["batch"]
    # both sides of the boundary were traced, against the file's 1 GB
    assert traced[batch]["required_bytes"] <= 10**9 < traced[batch + 1]["required_bytes"]
    assert m["samples_per_s"] == pytest.approx(batch / m["seconds"])
    assert m["affine"] and data["fit"]["fits"]
    # fp32 AdamW state is 16 B per parameter; what is left is per-sample memory
    assert 16 * MLP_PARAMS + batch * m["bytes_per_sample"] < 10**9
    assert main(["memory", "mlp", "--device", str(small), "--train", "--max-batch"]) == 0
    assert capsys.readouterr().out.startswith(f"largest batch on A100 1GB: {batch} (")
    assert main(["memory", "mlp", "--device", "a100", "--max-batch", "--batch-size", "4"]) == 1
    assert "--max-batch searches the batch: drop --batch-size" in capsys.readouterr().err


def test_analyze_has_a_memory_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "mlp", "--device", "a100", "--train"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("memory: peak ") and "fits A100 SXM 80GB's 80 GB" in last
    data = _json(capsys, "analyze", "mlp", "--device", "a100", "--train")
    assert data["memory"]["fits"] and data["memory"]["peak_bytes"] > 16 * MLP_PARAMS
    assert main(["analyze", "mlp", "--device", "Xeon Platinum 8480+"]) == 0
    assert "has no memory size in the registry: no fit checked" in capsys.readouterr().out


def test_one_table_renderer_aligns_every_table() -> None:
    """The analysis, device, memory and collective tables share tables._table: names
    left-aligned, numbers right-aligned, a rule under the header only when asked for, and
    a given width kept as a format spec keeps it."""
    from roofline.presentation.tables import _table

    assert _table(["op", "time"], [["mm", "1 ms"], ["add", "12 us"]], left=1) == (
        "op    time\n---  -----\nmm    1 ms\nadd  12 us")
    assert _table(["kind", "bytes"], [["input", "8 B"]], left=1, sep=" ", indent="  ",
                  rule=False, widths=(6, 6)) == ("  kind    bytes\n  input     8 B")
    assert _table(None, [["tensors", "1 GB"]], left=1, widths=(3, 5)) == "tensors   1 GB"


def test_the_memory_peak_is_named_in_one_phrase() -> None:
    from roofline.analysis import MemoryReport

    def report(module: str) -> MemoryReport:
        return MemoryReport({}, 10, 28, "aten.mm.default", module, "backward", {}, [], {})

    assert report("MLP.net.3").where == "aten.mm.default (op 28, backward, MLP.net.3)"
    assert report("").where == "aten.mm.default (op 28, backward)"
