"""``roofline.trace`` (tracing/step.py, tracing/run.py): one inference or training step.

Train and eval (issue 13, item 14), the loss, grad modes, autocast, errors that propagate and
leave no state, and when a real first step of the optimizer is said to create its state
(issue 22, item 7: plain SGD never has any; torch/optim/sgd.py touches ``self.state`` only
when ``group["momentum"] != 0``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from conftest import callable_forms, no_global_state
from torch import nn

import roofline
from roofline.zoo import get_model

# --- what a step is -----------------------------------------------------------------------

def test_empty_function_gives_empty_trace() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = roofline.trace(lambda: None)
    assert len(t) == 0 and t.total_flops == 0 and t.total_bytes == 0


def test_train_needs_a_scalar_loss() -> None:
    with pytest.raises(ValueError, match="scalar loss"):
        roofline.trace(nn.Linear(4, 4), torch.randn(2, 4), train=True)
    assert no_global_state()


def test_failing_model_propagates_and_leaves_no_state() -> None:
    class Boom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise KeyError("boom")

    for fake in (False, True):
        with pytest.raises(KeyError, match="boom"):
            roofline.trace(Boom(), torch.randn(2), fake=fake)
        assert no_global_state()
    assert roofline.trace(nn.Linear(2, 2), torch.randn(1, 2)).total_flops == 8


def test_autocast_dtype_is_recorded() -> None:
    # the norm sees the fp32 input; autocast casts the linear's operands to bf16
    model = nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16))
    x = torch.randn(4, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(model, x)
    dtypes = {op.category: op.dtype for op in t.ops if op.category in ("matmul", "normalization")}
    assert dtypes == {"matmul": "bfloat16", "normalization": "float32"}


def test_no_grad_and_inference_mode_are_counted() -> None:
    zm = get_model("mlp", batch_size=4)
    expected = roofline.trace(zm.model, *zm.inputs).total_flops
    with torch.no_grad():
        assert roofline.trace(zm.model, *zm.inputs).total_flops == expected
    with torch.inference_mode():
        assert roofline.trace(zm.model, *zm.inputs).total_flops == expected


# issue 13, item 13
@pytest.mark.parametrize("grad_off", [torch.no_grad, torch.inference_mode])
def test_training_under_disabled_grad_says_so(grad_off: Callable[[], Any]) -> None:
    model = nn.Linear(4, 4)
    grad = model.weight.grad = torch.ones(4, 4)
    with grad_off(), pytest.raises(RuntimeError, match="gradients are disabled"):
        roofline.trace(model, torch.randn(2, 4), train=True, loss_fn=lambda o: o.sum())
    assert no_global_state() and model.weight.grad is grad  # refused before any change


# --- train/eval defaults (issue 13, item 14) ----------------------------------------------

@pytest.mark.parametrize("form", ["module", "forward", "partial"])
def test_trace_runs_eval_without_train_and_train_with_it_then_restores(form: str) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5))
    model[2].eval()  # a mixed setting: every flag must come back as it was
    flags = [m.training for m in model.modules()]
    bn = model[1]
    mean = bn.running_mean.clone()
    x = torch.randn(5, 4)
    t = roofline.trace(callable_forms(model)[form], x)
    # eval(): no dropout mask, batch norm on running statistics (nothing updated)
    assert not [op for op in t.ops if op.category == "dropout"]
    assert torch.equal(bn.running_mean, mean) and int(bn.num_batches_tracked) == 0
    assert [m.training for m in model.modules()] == flags
    model.eval()
    t = roofline.trace(callable_forms(model)[form], x, train=True, loss_fn=lambda o: o.sum())
    assert len([op for op in t.ops if op.category == "dropout"]) == 1
    assert int(bn.num_batches_tracked) == 1  # train(): batch statistics, counted once
    assert not any(m.training for m in model.modules())


# --- no false "no state yet" warning (issue 22, item 7) -----------------------------------

def _state_warnings(opt_factory) -> list[str]:  # type: ignore[no-untyped-def]
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = opt_factory(model)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        roofline.trace(model, torch.randn(4, 8), train=True, optimizer=opt,
                       loss_fn=lambda o: o.sum())
    return [str(w.message) for w in seen if "no state" in str(w.message)]


def test_plain_sgd_never_has_state_and_is_not_warned_about() -> None:
    assert not _state_warnings(lambda m: torch.optim.SGD(m.parameters(), lr=0.1))


def test_a_first_step_that_creates_state_is_still_warned_about() -> None:
    """Momentum buffers are made by the first step: that warning is right (kept)."""
    assert _state_warnings(lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
    assert _state_warnings(lambda m: torch.optim.AdamW(m.parameters()))


def test_a_group_with_momentum_makes_the_first_step_create_state() -> None:
    assert _state_warnings(lambda m: torch.optim.SGD(
        [{"params": m[0].parameters(), "momentum": 0.9}, {"params": m[2].parameters()}],
        lr=0.1))


# --- issue 24, item 5: models as users bring them -----------------------------------------

def test_a_hugging_face_output_carries_its_loss() -> None:
    """``labels=`` makes a causal LM's output a ModelOutput with ``.loss``: a training step
    backpropagates it (cross-entropy over the logits) and the trace says where it came
    from."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=128,
                                  n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, 128, (2, 16))
    t = roofline.trace(model, input_ids=ids, labels=ids, train=True, fake=True)
    assert t.info.loss == "output.loss"
    assert any("(output.loss" in n for n in roofline.analyze(t, "a100").assumptions)
    names = {op.name for op in t.ops if op.phase == "backward"}
    assert "aten.nll_loss_backward.default" in names  # the loss was differentiated
    assert any(p.grad is None for p in model.parameters())  # the real model untouched


def test_an_output_with_a_loss_attribute_and_a_loss_fn() -> None:
    class Out:
        def __init__(self, y: torch.Tensor) -> None:
            self.logits, self.loss = y, y.square().mean()

    class Net(nn.Linear):
        def forward(self, x: torch.Tensor) -> Out:  # type: ignore[override]
            return Out(super().forward(x))

    assert roofline.trace(Net(8, 4), torch.randn(2, 8), train=True).info.loss == "output.loss"
    t = roofline.trace(Net(8, 4), torch.randn(2, 8), train=True,
                       loss_fn=lambda out: out.logits.sum())
    assert t.info.loss == "loss_fn"  # the user's choice wins
    assert "aten.pow.Tensor_Scalar" not in {op.name for op in t.ops if op.phase == "backward"}


@pytest.mark.filterwarnings("default")
def test_autocast_on_another_device_warns_at_the_users_line() -> None:
    model, x = nn.Linear(16, 16), torch.randn(4, 16)
    with pytest.warns(roofline.RooflineWarning, match=r"torch.autocast\('cpu', dtype=torch"
                      ) as caught, torch.autocast("cuda", dtype=torch.bfloat16):
        t = roofline.trace(model, x)
    (ours,) = [w for w in caught if issubclass(w.category, roofline.RooflineWarning)]
    assert ours.filename == __file__
    assert {op.dtype for op in t.ops} == {"float32"}  # what the warning says happened
    with warnings.catch_warnings():
        warnings.simplefilter("error", roofline.RooflineWarning)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # the right device: silent
            t = roofline.trace(model, x)
    assert "bfloat16" in {op.dtype for op in t.ops}
    assert no_global_state()


def _optimizer_ops(foreach: bool | None, fake: bool) -> list[str]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))  # 4 parameter tensors
    opt = torch.optim.AdamW(model.parameters(), foreach=foreach)
    if not fake:  # a steady state: the real first step makes the state
        model(torch.randn(2, 8)).sum().backward()
        opt.step()
    t = roofline.trace(model, torch.randn(2, 8), train=True, optimizer=opt,
                       loss_fn=lambda y: y.sum(), fake=fake)
    assert t.info.optimizer_foreach == (foreach is None and fake)
    return [op.name for op in t.ops if op.phase == "optimizer"]


def test_the_optimizer_runs_as_cuda_would_unless_told() -> None:
    """AdamW leaves foreach to PyTorch by default, which picks its foreach kernels on CUDA
    (torch/optim/optimizer.py, _default_to_fused_or_foreach) and a loop on the CPU: a fake
    trace runs the foreach kernels, one launch per op for all 4 tensors."""
    cuda_default = _optimizer_ops(None, fake=True)
    assert cuda_default == _optimizer_ops(True, fake=True)
    # and the host's reads of the step counters, and the 1.0 it wraps (adam.py)
    assert {n for n in cuda_default if "_foreach_" not in n} == {
        "aten._local_scalar_dense.default", "aten.lift_fresh.default"}
    looped = _optimizer_ops(False, fake=True)
    assert not [n for n in looped if "_foreach_" in n]
    assert len(looped) > 2 * len(cuda_default)
    assert not [n for n in _optimizer_ops(None, fake=False) if "_foreach_" in n]  # as run
