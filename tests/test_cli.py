"""The command line (presentation/cli.py, presentation/models.py), as a user runs it:
parsing, device resolution, model loading, output shape, exit codes.

argparse rejects a bad argument with exit code 2 and ``roofline <command>: error: argument
--flag: ...``; any other error is exit code 1 and one line ``roofline: error: ...``. The
library's numbers are tested elsewhere; these run the ``mlp`` zoo model or a one-layer GPT-2
(fake traces of a few hundred ops), one trace per mode. Issue 13 (items 5, 6, 13, 14):
arguments without a prediction, factors not given, fake by default, eval for inference.
Issue 22 (items 2 and 9): tensor parallelism of every zoo model, and ``memory --plot/--html``
written or refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

import roofline
import roofline.presentation.models
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
    assert main(["analyze", "mlp", "--device", "h100", "--compare", "a100", "--train",
                 "--dtype", "bf16", "--top", "100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mlp (batch 64, bf16, training step) on H100 SXM: ")
    assert "H100 SXM -> A100 SXM 80GB: predicted speedup" in out
    assert "by bound:" in out and "addmm" in out


# --- issue 24, item 2: the answer first ---------------------------------------------------

def _mlp_trace(dtype: torch.dtype | None) -> roofline.Trace:
    """The CLI's ``mlp --train`` step (AdamW, foreach), traced through the Python API."""
    zm = get_model("mlp")
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    if dtype is None:
        return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                              fake=True)
    with torch.autocast("cpu", dtype=dtype):
        return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                              fake=True)


def test_the_first_lines_carry_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """At most six lines before the first blank one: the step and its split, 2x FLOP/s and
    2x bandwidth with the Amdahl ceilings, the device swap; the numbers are the Python
    API's. The assumptions are printed once."""
    assert main(["analyze", "mlp", "--device", "a100", "--compare", "h100", "--train",
                 "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    box = out.split("\n\n")[0].splitlines()
    assert len(box) <= 6
    t = _mlp_trace(torch.bfloat16)
    a = roofline.analyze(t, "a100")
    flops2, bw2 = (roofline.what_if(t, "a100", flops=2).speedup,
                   roofline.what_if(t, "a100", bandwidth=2).speedup)
    limits = roofline.compare(t, "a100", "a100").speedup_limits()
    swap = roofline.compare(t, "a100", "h100").speedup
    split = ", ".join(f"{b} {v['fraction']:.0%}" for b, v in a.by_bound().items()
                      if v["seconds"])  # bounds that hold no time are left out
    assert box[0] == (f"mlp (batch 64, bf16, training step) on A100 SXM 80GB: "
                      f"{a.seconds * 1e6:.4g} us per step ({split})")
    assert box[1] == (f"2x FLOP/s: {flops2:.2f}x   2x bandwidth: {bw2:.2f}x   at most "
                      f"{limits['infinite_flops']:.2f}x with infinite FLOP/s, "
                      f"{limits['infinite_bandwidth']:.2f}x with infinite bandwidth")
    assert box[2].startswith(f"A100 SXM 80GB -> H100 SXM: {swap:.2f}x (")
    assert out.count("assumptions:") == 1


def test_verbose_lists_every_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    """GPT-2 with dropout: attention and dropout traced as CUDA runs them, and both
    devices' figures; the short form shows some and counts the rest."""
    argv = ["analyze", "gpt2", "--device", "a100", "--compare", "h100", "--train", "--dtype",
            "bf16", "--batch-size", "1", "--seq-len", "64"]
    assert main(argv) == 0
    short = capsys.readouterr().out.split("assumptions:\n")[1].splitlines()
    assert main([*argv, "-v"]) == 0
    full = capsys.readouterr().out.split("assumptions:\n")[1].splitlines()
    shown = [line for line in short if line.startswith("  - ")]
    (more,) = [line for line in short if line.startswith("  ... and ")]
    hidden = int(more.split()[2])
    assert len(full) == len(shown) + hidden and hidden >= 1
    assert set(shown) < set(full) and not [ln for ln in full if "-v lists" in ln]


@pytest.mark.parametrize("command", ["analyze", "what-if"])
def test_a_gpu_in_fp32_by_default_says_so_first(command: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "mlp", "--device", "a100"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("note: analysed in fp32, the default") and "--dtype bf16" in first
    assert main([command, "mlp", "--device", "a100", "--dtype", "fp32"]) == 0
    assert not capsys.readouterr().out.startswith("note:")  # asked for: no note


def test_what_if_answers_the_question_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-if", "mlp", "--device", "a100", "--bandwidth", "2", "--train",
                 "--dtype", "bf16"]) == 0
    box = capsys.readouterr().out.split("\n\n")[0].splitlines()
    asked = roofline.what_if(_mlp_trace(torch.bfloat16), "a100", bandwidth=2)
    assert box[1].startswith(f"what if A100 SXM 80GB (2x bandwidth): {asked.speedup:.2f}x (")


# --- issue 24, item 4: the op table --------------------------------------------------------

def test_the_op_table_groups_calls_by_op_and_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    """GPT-2 small, 2 x 64 tokens: each of the 12 blocks runs its MLP's up-projection
    (128 x 768 @ 768 x 3072, bias 3072) once, so that is one row of 12 calls; the LM head
    (tied to the 50257 x 768 embedding) one row of 1."""
    assert main(["analyze", "gpt2", "--device", "a100", "--batch-size", "2", "--seq-len",
                 "64", "--top", "200"]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        label, _, rest = line.partition("  ")
        if rest and rest.split()[0].isdigit():
            rows[label] = int(rest.split()[0])
    assert rows["addmm 3072 128x768 768x3072"] == 12
    assert rows["mm 128x768 768x50257"] == 1


@pytest.mark.parametrize("group_by", ["op", "module", "category"])
def test_group_by_and_csv_agree_with_the_python_groups(group_by: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    import pandas as pd

    from roofline.presentation.groups import grouped

    path = tmp_path / "ops.csv"
    assert main(["analyze", "mlp", "--device", "a100", "--train", "--dtype", "bf16",
                 "--group-by", group_by, "--csv", str(path)]) == 0
    capsys.readouterr()
    df = pd.read_csv(path)
    groups = grouped(roofline.analyze(_mlp_trace(torch.bfloat16), "a100"), group_by)
    assert len(df) == len(groups)
    assert df["count"].sum() == sum(g.count for g in groups.values())
    assert df["flops"].sum() == sum(g.flops for g in groups.values())
    assert set(df["label"]) == {g.label for g in groups.values()}


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


# --- factories and models (issue 13, items 5, 6, 13, 14) ----------------------------------

# what the test factories below saw, for the test that ran them
_seen: dict[str, Any] = {}


class _Probe(nn.Module):
    """A linear layer that notes its mode and whether it runs on fake tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _seen["training"] = self.training
        _seen["fake"] = isinstance(x, FakeTensor)
        return self.fc(x).sum()  # a scalar: also a loss for --train


def probe(batch_size: int = 4) -> tuple[nn.Module, torch.Tensor]:
    """``package.module:factory``: notes the device it is built on."""
    _seen["built_on"] = torch.empty(()).device.type
    return _Probe(), torch.randn(batch_size, 8)


class _Positives(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[x > 0].sum()  # the output's size depends on the values


def positives() -> tuple[nn.Module, torch.Tensor]:
    return _Positives(), torch.randn(16)


def reads_values() -> tuple[nn.Module, torch.Tensor]:
    """A factory that reads a tensor's value (meta tensors have none)."""
    width = int(torch.tensor(8).item())
    _seen["built_on"] = torch.empty(()).device.type
    return nn.Linear(width, 2), torch.randn(4, width)


def missing_key() -> Any:
    raise KeyError("'n_layer' is not a key of the config; pass n_layer=")


def _exit_code(argv: list[str]) -> int | str | None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code


# issue 13, item 5: arguments that cannot give a number are refused as they are parsed ...
@pytest.mark.parametrize("flag, value, message", [
    ("--host-seconds", "nan", "must be a finite number of seconds >= 0, got nan"),
    ("--host-seconds", "inf", "must be a finite number of seconds >= 0, got inf"),
    ("--host-seconds", "-1", "must be a finite number of seconds >= 0, got -1"),
    ("--batch-size", "0", "must be >= 1, got 0"),
    ("--batch-size", "-2", "must be >= 1, got -2"),
    ("--seq-len", "0", "must be >= 1, got 0"),
    ("--batch-size", "1.5", "expected a whole number >= 1, got '1.5'"),
])
def test_arguments_without_a_prediction_are_refused(
        flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["analyze", "gpt2", "--device", "a100", f"{flag}={value}"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == f"roofline analyze: error: argument {flag}: {message}"


# ... and a prediction that is not a number is an error, never "infx" with exit 0
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow warning
def test_a_non_finite_prediction_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # 1e-320 is a (denormal) factor > 0, so it parses; but the mlp's first matmul on an
    # A100 at 1e-320x its FLOP/s takes 2*64*784*1024 = 1.0e8 FLOP / (19.5e12 * 1e-320
    # FLOP/s) = 5e314 s, past the largest float (1.8e308): inf
    assert main(["what-if", "mlp", "--device", "a100", "--flops", "1e-320"]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # after the progress lines, the error is the last one
    assert err.splitlines()[-1] == (
        "roofline: error: the predicted seconds is inf, not a finite number; check the "
        "what-if factors, the device file and the model's sizes (--debug shows where)")


# issue 13, item 6: one factor given, the other stays 1x; neither, the seed question (2x FLOP/s)
def test_what_if_bandwidth_alone_keeps_the_flops(
        capsys: pytest.CaptureFixture[str]) -> None:
    def what_if(*factors: str) -> Any:
        assert main(["--json", "what-if", "mlp", "--device", "a100", *factors]) == 0
        return json.loads(capsys.readouterr().out)

    data = what_if("--bandwidth", "2")
    assert data["dst"]["device"] == "A100 SXM 80GB (2x bandwidth)"
    compute = data["by_bound"]["compute"]  # the mlp's matmuls (28 FLOP/B > 9.75 ridge)
    assert compute["src_seconds"] > 0 and compute["dst_seconds"] == compute["src_seconds"]
    assert what_if("--flops", "3")["dst"]["device"] == "A100 SXM 80GB (3x FLOP/s)"
    assert what_if()["dst"]["device"] == "A100 SXM 80GB (2x FLOP/s)"


# issue 13, item 13: fake (the default, --fake) builds on meta and traces fake; --real is real
def test_fake_is_the_default_and_real_traces_real_tensors(
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{__name__}:probe"
    for flags, built_on, fake, tensors in (([], "meta", True, "fake"),
                                           (["--fake"], "meta", True, "fake"),
                                           (["--real"], "cpu", False, "real")):
        _seen.clear()
        assert main(["analyze", spec, "--device", "a100", *flags]) == 0
        assert _seen == {"built_on": built_on, "fake": fake, "training": False}
        assert f"(inference, fp32, {tensors} tensors)" in capsys.readouterr().err
    assert _exit_code(["analyze", spec, "--device", "a100", "--fake", "--real"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "roofline analyze: error: argument --real: not allowed with argument --fake")


def test_a_factory_that_cannot_run_on_meta_is_built_as_it_builds_itself() -> None:
    _seen.clear()
    assert main(["analyze", f"{__name__}:reads_values", "--device", "a100"]) == 0
    assert _seen == {"built_on": "cpu"}


def test_zoo_and_transformers_models_are_built_on_meta_for_a_fake_trace(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    devices: list[str | None] = []
    load = roofline.presentation.models.load_model

    def spy(spec: str, **kwargs: Any) -> Any:
        devices.append(kwargs["device"])
        return load(spec, **kwargs)

    monkeypatch.setattr(roofline.presentation.models, "load_model", spy)
    assert main(["analyze", "mlp", "--device", "a100"]) == 0
    assert main(["analyze", "mlp", "--device", "a100", "--real"]) == 0
    assert devices == ["meta", None]
    # llama-7b has no real weights to run: --real says so instead of failing in the trace
    assert main(["analyze", "llama-7b", "--device", "a100", "--real"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "roofline: error: llama-7b is built on the meta device (it has no weights to run real "
        "tensors through); trace it on fake tensors: drop --real")


def test_transformers_llama_config_costs_no_memory() -> None:
    pytest.importorskip("transformers")
    zm = roofline.presentation.models.load_model("transformers:LlamaConfig", device="meta")
    # Llama-2-7B: 32 x (4 x 4096^2 attention + 3 x 4096 x 11008 SwiGLU + 2 x 4096 norms)
    # + 2 x 32000 x 4096 (embedding, untied head) + 4096 (final norm)
    per_layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert sum(p.numel() for p in zm.model.parameters()) == (
        32 * per_layer + 2 * 32000 * 4096 + 4096)  # 6,738,415,616
    assert {p.device.type for p in zm.model.parameters()} == {"meta"}
    assert zm.inputs[0].device.type == "meta"


def test_the_fake_mode_error_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{__name__}:positives"
    assert main(["analyze", spec, "--device", "a100"]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("roofline: error: _Positives ran an op whose result depends on "
                          "tensor values (")
    assert err.endswith("Trace it with real tensors (fake=False). On the command line: "
                        "--real.")
    assert main(["analyze", spec, "--device", "a100", "--real"]) == 0  # and the flag works


@pytest.mark.parametrize("argv, message", [
    (["analyze", "mlp", "--device", "a100", "--seq-len", "16"],
     "'mlp' has no parameter 'seq_len'; valid: batch_size, in_features, hidden, "
     "num_classes, n_layers"),
    (["analyze", f"{__name__}:missing_key", "--device", "a100"],  # a KeyError: not its repr
     "'n_layer' is not a key of the config; pass n_layer="),
])
def test_error_messages_keep_their_quotes(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    assert capsys.readouterr().err == f"roofline: error: {message}\n"


# issue 13, item 14: inference runs the model in eval(), as roofline.trace(train=False), and says so
def test_inference_runs_in_eval_mode(capsys: pytest.CaptureFixture[str]) -> None:
    for flags, training in (([], False), (["--train"], True)):
        _seen.clear()
        assert main(["analyze", f"{__name__}:probe", "--device", "a100", *flags]) == 0
        assert _seen["training"] is training
    assert _exit_code(["analyze", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "inference: no_grad, with the model in eval() (dropout off" in help_text


# --- memory -------------------------------------------------------------------------------

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
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("memory: ")]
    assert line.startswith("memory: peak ") and "fits A100 SXM 80GB's 80 GB" in line
    data = _json(capsys, "analyze", "mlp", "--device", "a100", "--train")
    assert data["memory"]["fits"] and data["memory"]["peak_bytes"] > 16 * MLP_PARAMS
    assert main(["analyze", "mlp", "--device", "Xeon Platinum 8480+"]) == 0
    assert "has no memory size in the registry: no fit checked" in capsys.readouterr().out


# issue 22, item 9: written or refused, never ignored
def _written(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


@pytest.mark.parametrize("flags", [["--plot"], ["--html"], ["--plot", "--html"]])
def test_memory_plot_and_html_are_written_or_refused(tmp_path: Path, flags: list[str],
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    files = {"--plot": tmp_path / "m.png", "--html": tmp_path / "m.html"}
    argv = ["memory", "mlp", "--device", "h100"]
    for flag in flags:
        argv += [flag, str(files[flag])]
    code = main(argv)
    err = capsys.readouterr().err
    if code == 0:
        for flag in flags:
            assert _written(files[flag]), f"{flag} exited 0 and wrote nothing"
    else:
        assert any(flag in err for flag in flags), err
        assert not any(_written(files[f]) for f in flags)


def test_memory_max_batch_plot_is_written_or_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    png = tmp_path / "batch.png"
    code = main(["memory", "mlp", "--device", "rtx 4090", "--max-batch", "--plot", str(png)])
    err = capsys.readouterr().err
    assert _written(png) if code == 0 else "--plot" in err


# --- parallel -----------------------------------------------------------------------------

@pytest.mark.usefixtures("quiet")
def test_cli_parallel(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "mlp", "--device", "h100", "--train", "--gpus", "4",
                 "--parallel", "ddp", "--batch-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "4 H100 SXMs (ddp over NVLink 4)" in out and "all_reduce" in out
    assert main(["analyze", "mlp", "--device", "h100", "--train", "--gpus", "4",
                 "--nodes", "3"]) == 1
    assert "does not spread evenly" in capsys.readouterr().err


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize(("argv", "message"), [
    (["--parallel", "tp"], "pass --gpus N"),
    (["--nodes", "2"], "pass --gpus N"),
    (["--gpus", "4", "--compare", "a100", "--train"], "--compare"),
    (["--gpus", "4"], "add --train"),
    (["--gpus", "4", "--train", "--html", "x.html"], "--html"),
])
def test_cli_refuses_parallel_flags_it_would_ignore(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["analyze", "mlp", "--device", "h100", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "traced" not in err  # refused before any tracing


@pytest.mark.usefixtures("quiet")
def test_cli_json_names_the_device_and_links(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "analyze", "mlp", "--device", "h100", "--train", "--gpus", "4",
                 "--batch-size", "16"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "H100 SXM" and data["gpus_per_node"] == 4
    assert data["links"]["intra_node"]["kind"] == "NVLink 4"
    assert data["collectives"][0]["link"] == "NVLink 4"
    assert data["one_gpu_seconds"] > 0


# issue 22, item 2: tensor parallelism of every zoo model the CLI offers (AdamW(foreach=True))
TP = ["--device", "h100", "--train", "--gpus", "2", "--parallel", "tp"]


@pytest.mark.parametrize("argv", [
    ["mlp"],
    ["gpt2", "--seq-len", "64", "--batch-size", "2"],
    ["bert-base", "--seq-len", "64", "--batch-size", "2"],
    ["vit-b16", "--batch-size", "2"],
    ["llama-tiny", "--seq-len", "64", "--batch-size", "2"],
], ids=lambda a: a[0])
def test_tensor_parallel_from_the_cli(argv: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", *argv, *TP]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "(tp over NVLink 4)" in out and "all_reduce" in out


@pytest.mark.parametrize("model", ["resnet50", "mobilenet"])
def test_tensor_parallel_of_a_cnn_from_the_cli(model: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """It traces, everything replicated, and the warning names what to run instead
    (a Python plan is not something the command line can act on)."""
    assert main(["analyze", model, "--batch-size", "2", *TP]) == 0
    err = capsys.readouterr().err
    assert "parallel='ddp' or 'fsdp' (--parallel ddp|fsdp)" in err
    assert "pass the plan" not in err and "Parallel(" not in err


def test_gpus_output_opens_with_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "mlp", "--device", "h100", "--train", "--dtype", "bf16",
                 "--gpus", "8", "--parallel", "ddp"]) == 0
    out = capsys.readouterr().out
    first, second = out.splitlines()[:2]
    # the zoo MLP's batch of 64 per GPU: 512 over eight
    assert first.startswith("mlp (batch 512, bf16, training step) on 8x H100 SXM (ddp over "
                            "NVLink 4): ")
    assert "per step" in first and "samples/s" in first
    assert "x one GPU (" in second and "exposed" in second
    assert "ParallelAnalysis(" not in out and out.count("assumptions:") <= 1
