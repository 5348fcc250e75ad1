"""Command-line defects of issue 13 (items 5, 6, 13, 14), one test each, exact codes and text.

argparse rejects a bad argument with exit code 2 and ``roofline <command>: error: argument
--flag: ...``; any other error is exit code 1 and one line ``roofline: error: ...``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

import roofline.presentation.models
from roofline.presentation.cli import main

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


# item 5: arguments that cannot give a number are refused as they are parsed ...
@pytest.mark.parametrize("flag, value, message", [
    ("--host-seconds", "nan", "must be a finite number of seconds >= 0, got nan"),
    ("--host-seconds", "inf", "must be a finite number of seconds >= 0, got inf"),
    ("--host-seconds", "-1", "must be a finite number of seconds >= 0, got -1"),
    ("--batch-size", "0", "must be >= 1, got 0"),
    ("--batch-size", "-2", "must be >= 1, got -2"),
    ("--seq-len", "0", "must be >= 1, got 0"),
    ("--batch-size", "1.5", "expected a whole number >= 1, got '1.5'"),
])
def test_item5_arguments_without_a_prediction_are_refused(
        flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["analyze", "gpt2", "--device", "a100", f"{flag}={value}"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == f"roofline analyze: error: argument {flag}: {message}"


# ... and a prediction that is not a number is an error, never "infx" with exit 0
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow warning
def test_item5_a_non_finite_prediction_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # 1e-320 is a (denormal) factor > 0, so it parses; but the mlp's first matmul on an
    # A100 at 1e-320x its FLOP/s takes 2*64*784*1024 = 1.0e8 FLOP / (19.5e12 * 1e-320
    # FLOP/s) = 5e314 s, past the largest float (1.8e308): inf
    assert main(["what-if", "mlp", "--device", "a100", "--flops", "1e-320"]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # after the progress lines, the error is the last one
    assert err.splitlines()[-1] == (
        "roofline: error: the predicted seconds is inf, not a finite number; check the "
        "what-if factors, the device file and the model's sizes (--debug shows where)")


# item 6: one factor given, the other stays 1x; neither, the seed question (2x FLOP/s)
def test_item6_what_if_bandwidth_alone_keeps_the_flops(
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


# item 13: fake (the default, --fake) builds on meta and traces fake; --real is real
def test_item13_fake_is_the_default_and_real_traces_real_tensors(
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


def test_item13_a_factory_that_cannot_run_on_meta_is_built_as_it_builds_itself() -> None:
    _seen.clear()
    assert main(["analyze", f"{__name__}:reads_values", "--device", "a100"]) == 0
    assert _seen == {"built_on": "cpu"}


def test_item13_zoo_and_transformers_models_are_built_on_meta_for_a_fake_trace(
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


def test_item13_transformers_llama_config_costs_no_memory() -> None:
    pytest.importorskip("transformers")
    zm = roofline.presentation.models.load_model("transformers:LlamaConfig", device="meta")
    # Llama-2-7B: 32 x (4 x 4096^2 attention + 3 x 4096 x 11008 SwiGLU + 2 x 4096 norms)
    # + 2 x 32000 x 4096 (embedding, untied head) + 4096 (final norm)
    per_layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert sum(p.numel() for p in zm.model.parameters()) == (
        32 * per_layer + 2 * 32000 * 4096 + 4096)  # 6,738,415,616
    assert {p.device.type for p in zm.model.parameters()} == {"meta"}
    assert zm.inputs[0].device.type == "meta"


def test_item13_the_fake_mode_error_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
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
def test_item13_error_messages_keep_their_quotes(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    assert capsys.readouterr().err == f"roofline: error: {message}\n"


# item 14: inference runs the model in eval(), as roofline.trace(train=False), and says so
def test_item14_inference_runs_in_eval_mode(capsys: pytest.CaptureFixture[str]) -> None:
    for flags, training in (([], False), (["--train"], True)):
        _seen.clear()
        assert main(["analyze", f"{__name__}:probe", "--device", "a100", *flags]) == 0
        assert _seen["training"] is training
    assert _exit_code(["analyze", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "inference: no_grad, with the model in eval() (dropout off" in help_text
