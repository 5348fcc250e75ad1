"""Capture you can trust: a trace never changes the user's model, optimizer or global state.

Regression tests for the capture-layer defects of issue 13: fake training traces of
callables other than the module, state created during a fake forward, re-entering a
``Capture``, errors under fake tensors and grad modes, train/eval defaults and the
phase of the backward seed and of gradient clipping.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import _get_current_dispatch_mode

import roofline
from roofline.tracing import FakeModeError
from roofline.tracing.fake import _MAX_DEPTH
from roofline.zoo import get_model, list_models
from roofline.zoo.registry import _REGISTRY

_MODULE_SETATTR, _MODULE_DELATTR = nn.Module.__setattr__, nn.Module.__delattr__


def _no_global_state() -> bool:
    import torch._dynamo
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o

    return (_get_current_dispatch_mode() is None and not m._global_forward_hooks
            and not m._global_forward_pre_hooks and not o._global_optimizer_pre_hooks
            and nn.Module.__setattr__ is _MODULE_SETATTR
            and nn.Module.__delattr__ is _MODULE_DELATTR
            and not m._global_buffer_registration_hooks
            and not m._global_parameter_registration_hooks
            and not m._global_module_registration_hooks
            and not o._global_optimizer_post_hooks and not torch.is_autocast_enabled("cpu")
            and torch._C._len_torch_function_stack() == 0
            and not torch._dynamo.config.disable)


def _forms(model: nn.Module) -> dict[str, Callable[..., Any]]:
    """The same step as the four callables users pass."""
    return {"module": model, "forward": model.forward,
            "lambda": lambda *a: model(*a), "partial": functools.partial(model)}


def _is_real(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor)


def _optimizer_elements(t: roofline.Trace) -> int:
    """Elements the optimizer phase wrote in its largest op (a foreach op: all params)."""
    return max((sum(torch.Size(s).numel() for s in op.output_shapes)
                for op in t.ops if op.phase == "optimizer" and op.category == "optimizer"),
               default=0)


# --- 1: a fake training trace of any callable --------------------------------------------


@pytest.mark.parametrize("form", ["module", "forward", "lambda", "partial"])
def test_fake_training_of_any_callable_steps_the_optimizer_and_keeps_real_grads(
        form: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    n_params = 6 * 5 + 5 + 5 * 3 + 3
    opt = torch.optim.AdamW(model.parameters(), foreach=True)
    for p in model.parameters():  # a real gradient the next real step would use
        p.grad = torch.randn_like(p)
    grads = [p.grad.clone() for p in model.parameters()]
    x = torch.randn(4, 6)
    t = roofline.trace(_forms(model)[form], x, train=True, loss_fn=lambda o: o.sum(),
                       optimizer=opt, fake=True)
    # the optimizer phase is there and updates every parameter (AdamW's foreach ops)
    assert _optimizer_elements(t) == n_params
    assert all(_is_real(p.grad) and torch.equal(p.grad, g)
               for p, g in zip(model.parameters(), grads, strict=True))
    assert not opt.state and _no_global_state()


def test_fake_training_refuses_a_step_that_uses_optimizer_params_it_cannot_swap() -> None:
    w = nn.Parameter(torch.randn(3, 4))
    holder = {"w": w}  # reached by no module call, no closure of the callable itself
    opt = torch.optim.SGD([w], lr=0.1)
    with pytest.raises(FakeModeError, match="optimizer's parameters as real tensors"):
        roofline.trace(lambda x: F.linear(x, holder["w"]).sum(), torch.randn(2, 4),
                       train=True, optimizer=opt, fake=True)
    assert w.grad is None and _no_global_state()
    # without an optimizer the counts are right and the real gradient is put back
    t = roofline.trace(lambda x: F.linear(x, holder["w"]).sum(), torch.randn(2, 4),
                       train=True, fake=True)
    assert t.by_phase()["backward"].flops > 0 and w.grad is None


def test_fake_training_swaps_a_module_the_callable_reaches_only_at_run_time() -> None:
    torch.manual_seed(0)
    registry = {"net": nn.Linear(4, 4)}  # a dict lookup: found when the module is called
    net = registry["net"]
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, foreach=True)
    t = roofline.trace(lambda x: registry["net"](x).sum(), torch.randn(2, 4), train=True,
                       optimizer=opt, fake=True)
    assert _optimizer_elements(t) == 4 * 4 + 4
    assert all(p.grad is None for p in net.parameters()) and not opt.state


# --- 2: state created during a fake forward -----------------------------------------------


class _LazyRotary(nn.Module):
    """Creates its caches on first use, as rotary embeddings commonly do."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("table", torch.arange(8.0))
        self.scale = torch.tensor(2.0)  # a plain tensor attribute, not a buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if "cos" not in self._buffers:
            self.register_buffer("cos", torch.arange(8.0).cos(), persistent=False)
        self.sin_cached = (torch.arange(8.0).sin(),)
        self.table = self.table + 1  # a buffer replaced in forward
        self.scale = self.scale * 3  # an attribute replaced in forward
        return self.proj(x) * self.cos * self.scale + self.table


def test_fake_trace_removes_buffers_and_attributes_created_in_forward() -> None:
    torch.manual_seed(0)
    model = _LazyRotary()
    table, scale = model.table, model.scale
    x = torch.randn(2, 8)
    for form in _forms(model).values():
        roofline.trace(form, x, train=True, loss_fn=lambda o: o.sum(), fake=True)
        assert "cos" not in model._buffers and "cos" not in model._non_persistent_buffers_set
        assert not hasattr(model, "sin_cached")
        assert model.table is table and model.scale is scale
    out = model(x)  # the real model still computes with real tensors
    assert _is_real(out)
    expected = model.proj(x) * torch.arange(8.0).cos() * 6.0 + (torch.arange(8.0) + 1)
    assert torch.allclose(out, expected)


class _Containers(nn.Module):
    """Keeps outputs in list, dict and (pre-filled) list attributes, as caches do."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.cache: list[torch.Tensor] = []
        self.store: dict[str, torch.Tensor] = {}
        self.hist = [torch.zeros(1)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        self.cache.append(y)
        self.store["k"] = y
        self.hist.append(y)
        return y.sum()


@pytest.mark.parametrize("train", [False, True])
def test_fake_trace_puts_container_attributes_back_in_place(train: bool) -> None:
    model = _Containers()
    cache, store, hist = model.cache, model.store, model.hist
    first = hist[0]
    for form in _forms(model).values():
        roofline.trace(form, torch.randn(3, 4), train=train, fake=True)
        # the same objects (other references see it), with their pre-step contents
        assert model.cache is cache and cache == []
        assert model.store is store and store == {}
        assert model.hist is hist and len(hist) == 1 and hist[0] is first
        assert _is_real(first) and torch.equal(first, torch.zeros(1))
    assert _no_global_state()


class _Counter(nn.Module):
    """Updates plain tensor attributes (not buffers) in place, in and out of containers."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.count = torch.zeros(1)
        self.stats = [torch.zeros(2)]
        self.pair = (torch.zeros(3), 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        self.stats[0].add_(1)
        self.pair[0].mul_(2)
        return self.proj(x)


def test_fake_trace_never_writes_a_real_tensor_attribute() -> None:
    model = _Counter()
    count, stat, pair = model.count, model.stats[0], model.pair
    for form in _forms(model).values():
        t = roofline.trace(form, torch.randn(2, 4), train=True, loss_fn=lambda o: o.sum(),
                           fake=True)
        # the trace works (the writes ran on fakes and are recorded) ...
        assert sum(op.name in ("aten.add_.Tensor", "aten.mul_.Tensor") for op in t.ops) == 3
        # ... and the real tensors keep their identity and values
        assert model.count is count and model.stats[0] is stat and model.pair is pair
        assert torch.equal(count, torch.zeros(1)) and torch.equal(stat, torch.zeros(2))
        assert torch.equal(pair[0], torch.zeros(3))
    assert _no_global_state()


_UNREACHED = torch.zeros(2)  # a global: no search, hook or module write can swap it


def test_fake_trace_refuses_an_in_place_write_into_a_real_tensor_it_cannot_swap() -> None:
    model = nn.Linear(2, 2)

    def step(x: torch.Tensor) -> torch.Tensor:
        _UNREACHED.add_(1)
        return model(x)

    with pytest.raises(FakeModeError, match="writes in place into a real tensor"):
        roofline.trace(step, torch.randn(3, 2), fake=True)
    assert torch.equal(_UNREACHED, torch.zeros(2)) and _no_global_state()
    assert all(_is_real(p) for p in model.parameters())


class _LazyCos(nn.Module):
    """Creates a tensor attribute on its first call."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "cos"):
            self.cos = torch.ones(4)
        return self.proj(x) * self.cos


class _Runner:
    """A callable object that runs its model's ``forward`` directly (no module call)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.model.forward(x).sum()


@pytest.mark.parametrize("with_optimizer", [False, True])
def test_fake_trace_of_a_runner_object_leaves_no_fake_on_its_model(
        with_optimizer: bool) -> None:
    model = _LazyCos()
    runner = _Runner(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True) \
        if with_optimizer else None
    x = torch.randn(2, 4)
    t = roofline.trace(runner, x, train=True, optimizer=opt, fake=True)
    if opt is not None:
        assert _optimizer_elements(t) == 4 * 4 + 4 and not opt.state
    assert not hasattr(model, "cos") and runner.calls == 0  # the runner too is put back
    assert all(_is_real(p) and p.grad is None for p in model.parameters())
    out = model(x)
    assert _is_real(out) and torch.allclose(out, model.proj(x))
    assert _no_global_state()


class _OwnWeight(_LazyCos):
    """A module with a parameter of its own, used in its forward before any write."""

    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x * self.gain)


_GLOBAL_LAZY = _LazyCos()
_GLOBAL_OWN = _OwnWeight()


def test_fake_trace_puts_back_a_module_reached_only_through_a_global() -> None:
    x = torch.randn(2, 4)
    # no search finds the global, and m.forward fires no hook for it: its own write does
    t = roofline.trace(lambda x: _GLOBAL_LAZY.forward(x).sum(), x, train=True, fake=True)
    assert t.by_phase()["backward"].flops > 0
    assert not hasattr(_GLOBAL_LAZY, "cos") and _is_real(_GLOBAL_LAZY(x))
    del _GLOBAL_LAZY.cos  # the real call above made a real one
    # refused (its own parameter ran as a real tensor), and still put back
    opt = torch.optim.SGD(_GLOBAL_OWN.parameters(), lr=0.1)
    with pytest.raises(FakeModeError, match="optimizer's parameters as real tensors"):
        roofline.trace(lambda x: _GLOBAL_OWN.forward(x).sum(), x, train=True,
                       optimizer=opt, fake=True)
    assert not hasattr(_GLOBAL_OWN, "cos")
    assert all(_is_real(p) and p.grad is None for p in _GLOBAL_OWN.parameters())
    assert _no_global_state()


class _Deep(nn.Module):
    """Appends to a list nested deeper than a fake trace saves."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.deep: list[Any] = []
        for _ in range(_MAX_DEPTH):  # the innermost list is _MAX_DEPTH + 1 levels down
            self.deep = [self.deep]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        inner = self.deep
        for _ in range(_MAX_DEPTH):
            inner = inner[0]
        inner.append(y)
        return y


def test_fake_trace_names_a_fake_it_cannot_put_back() -> None:
    model = _Deep()
    path = "_Deep.deep" + "[0]" * (_MAX_DEPTH + 1)
    with pytest.raises(FakeModeError, match=re.escape(f"{path} still holds a fake tensor")):
        roofline.trace(model, torch.randn(2, 4), fake=True)
    assert _no_global_state()


# --- a capture around a trace sees the step, and none of roofline's bookkeeping -----------


@pytest.mark.parametrize("fake", [True, False])
def test_a_capture_around_a_trace_sees_its_step_once_and_no_bookkeeping(fake: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), foreach=True)  # no state: a fake warm-up
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a real first step's "no state yet" note
        with roofline.capture() as outer:
            inner = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(),
                                   optimizer=opt, fake=fake)
    assert [(op.name, op.phase) for op in outer.ops] == [
        (op.name, op.phase) for op in inner.ops]
    assert inner.by_phase()["optimizer"].count and _no_global_state()


# --- 4: a Capture records one block --------------------------------------------------------


def test_capture_refuses_reentry_without_leaving_state_behind() -> None:
    x = torch.randn(4, 4)
    cap = roofline.capture()
    with cap as t:
        x + x
        with pytest.raises(RuntimeError, match="already recording"), cap:
            pass
        x * x
    assert _no_global_state()
    assert [op.name for op in t.ops] == ["aten.add.Tensor", "aten.mul.Tensor"]
    with pytest.raises(RuntimeError, match="single-use"), cap:
        x - x
    assert _no_global_state()
    assert len(t.ops) == 2 and cap.trace is t  # the first trace is not overwritten


# --- 13: clear errors -----------------------------------------------------------------------


@pytest.mark.parametrize("read", ["numpy", "item", "tolist"])
def test_reading_values_under_a_fake_trace_is_a_fake_mode_error(read: str) -> None:
    model = nn.Linear(4, 4)
    step = {"numpy": lambda x: model(x).detach().numpy(),
            "item": lambda x: model(x).sum().item(),
            "tolist": lambda x: model(x).tolist()}[read]
    with pytest.raises(FakeModeError, match=r"fake=False"):
        roofline.trace(step, torch.randn(2, 4), fake=True)
    assert _no_global_state()


def test_fake_trace_inside_the_users_fake_mode_uses_that_mode() -> None:
    real = nn.Linear(4, 3)
    weight = real.weight.detach().clone()
    with FakeTensorMode() as mode:
        x = torch.randn(2, 4)
        built_fake = nn.Linear(4, 3)
        t1 = roofline.trace(real, x, fake=True)
        t2 = roofline.trace(built_fake, x, train=True, loss_fn=lambda o: o.sum(), fake=True)
    flops = 2 * 2 * 4 * 3  # one (2 x 4) @ (4 x 3) matmul
    assert sum(op.flops for op in t1.ops if op.category == "matmul") == flops
    assert sum(op.flops for op in t2.ops
               if op.category == "matmul" and op.phase == "forward") == flops
    assert torch.equal(real.weight, weight) and real.weight.grad is None
    with pytest.raises(FakeModeError, match="another FakeTensorMode"):
        roofline.trace(real, mode.from_tensor(torch.randn(2, 4)), fake=True)
    assert _no_global_state()


@pytest.mark.parametrize("grad_off", [torch.no_grad, torch.inference_mode])
def test_training_under_disabled_grad_says_so(grad_off: Callable[[], Any]) -> None:
    model = nn.Linear(4, 4)
    grad = model.weight.grad = torch.ones(4, 4)
    with grad_off(), pytest.raises(RuntimeError, match="gradients are disabled"):
        roofline.trace(model, torch.randn(2, 4), train=True, loss_fn=lambda o: o.sum())
    assert _no_global_state() and model.weight.grad is grad  # refused before any change


# --- 14: train/eval defaults and phases -----------------------------------------------------


@pytest.mark.parametrize("form", ["module", "forward", "partial"])
def test_trace_runs_eval_without_train_and_train_with_it_then_restores(form: str) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5))
    model[2].eval()  # a mixed setting: every flag must come back as it was
    flags = [m.training for m in model.modules()]
    bn = model[1]
    mean = bn.running_mean.clone()
    x = torch.randn(5, 4)
    t = roofline.trace(_forms(model)[form], x)
    # eval(): no dropout mask, batch norm on running statistics (nothing updated)
    assert not [op for op in t.ops if op.category == "dropout"]
    assert torch.equal(bn.running_mean, mean) and int(bn.num_batches_tracked) == 0
    assert [m.training for m in model.modules()] == flags
    model.eval()
    t = roofline.trace(_forms(model)[form], x, train=True, loss_fn=lambda o: o.sum())
    assert len([op for op in t.ops if op.category == "dropout"]) == 1
    assert int(bn.num_batches_tracked) == 1  # train(): batch statistics, counted once
    assert not any(m.training for m in model.modules())


def test_backward_seed_is_backward_and_grad_clipping_is_optimizer() -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)
    with roofline.capture() as t:
        for _ in range(2):  # gradient accumulation: the second forward is still forward
            model(x).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model(x)
    forward = [op.name for op in t.ops if op.phase == "forward"]
    # linear = transpose + addmm, then the sum: twice, and the last forward without sum
    step = ["aten.t.default", "aten.addmm.default", "aten.sum.default"]
    assert forward == step + step + step[:2]
    seeds = [op for op in t.ops if op.name == "aten.ones_like.default"]
    assert len(seeds) == 2 and all(op.phase == "backward" for op in seeds)
    norms = [op for op in t.ops if "norm" in op.name]
    assert norms and all(op.phase == "optimizer" for op in norms)
    api = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum())
    assert next(op for op in api.ops if op.name == "aten.ones_like.default").phase == "backward"


# --- the property: a fake training trace leaves every zoo model as it was -----------------


def _small(name: str) -> dict[str, Any]:
    """The smallest configuration of each zoo architecture (kept GQA where it has it)."""
    build, d = _REGISTRY[name].build, _REGISTRY[name].defaults
    from roofline.zoo import bert, gpt2, llama, mlp, mobilenet, resnet, transformer, vit

    if build is mlp.build:
        return {"batch_size": 2, "in_features": 8, "hidden": 8, "n_layers": 2}
    if build is resnet.build:
        return {"batch_size": 2, "image_size": 32, "layers": (1, 1, 1, 1), "width": 4,
                "num_classes": 4}
    if build is mobilenet.build:
        return {"batch_size": 2, "image_size": 32, "width_mult": 0.1, "num_classes": 4}
    if build is gpt2.build:
        return {"batch_size": 2, "seq_len": 8, "vocab_size": 32, "n_positions": 8,
                "n_layer": 1, "n_head": 2, "n_embd": 16}
    if build is bert.build:
        return {"batch_size": 2, "seq_len": 8, "vocab_size": 32, "max_position_embeddings": 8,
                "hidden": 16, "n_layer": 1, "n_head": 2, "ffn": 32}
    if build is vit.build:
        return {"batch_size": 2, "image_size": 32, "dim": 16, "n_layer": 1, "n_head": 2,
                "mlp_dim": 32, "num_classes": 4}
    if build is llama.build:
        kv = 4 if d["n_kv_heads"] == d["n_heads"] else 2
        return {"batch_size": 2, "seq_len": 8, "vocab_size": 32, "dim": 32, "n_layers": 1,
                "n_heads": 4, "n_kv_heads": kv, "hidden_dim": 32, "max_seq_len": 16}
    if build is transformer.build:
        return {"batch_size": 2, "seq_len": 8, "vocab_size": 32, "d_model": 16, "n_head": 2,
                "d_ff": 32, "n_enc_layers": 1, "n_dec_layers": 1, "max_len": 16}
    raise AssertionError(f"no small configuration for zoo model {name!r}")


def _state(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    """Everything a fake trace must leave alone, by identity and as clones."""
    tensors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    keys: dict[str, Any] = {}
    for mname, m in model.named_modules():
        for k, v in vars(m).items():
            if isinstance(v, torch.Tensor):
                tensors[f"{mname}.{k}"] = (v, v.detach().clone())
            elif isinstance(v, (list, tuple, dict, set)):  # containers: identity, contents
                items = list(v.items()) if isinstance(v, dict) else [(i, x) for i, x in
                                                                     enumerate(v)]
                keys[f"{mname}.{k}"] = (id(v), [(repr(i), id(x)) for i, x in items])
                for i, x in items:
                    if isinstance(x, torch.Tensor):
                        tensors[f"{mname}.{k}[{i!r}]"] = (x, x.detach().clone())
        for table in ("_parameters", "_buffers", "_modules"):
            keys[f"{mname}.{table}"] = {k: id(v) for k, v in getattr(m, table).items()}
        keys[f"{mname}.attrs"] = sorted(vars(m))
        for k, v in [*m._parameters.items(), *m._buffers.items()]:
            if v is not None:
                tensors[f"{mname}.{k}"] = (v, v.detach().clone())
    for i, p in enumerate(model.parameters()):
        tensors[f"grad{i}"] = (p.grad, p.grad.clone())
    for i, s in enumerate(opt.state.values()):
        for k, v in s.items():
            tensors[f"state{i}.{k}"] = (v, v.clone())
    keys["groups"] = [{k: v for k, v in g.items() if k != "params"} | {
        "params": [id(p) for p in g["params"]]} for g in opt.param_groups]
    keys["state"] = [id(p) for p in opt.state]
    keys["training"] = [m.training for m in model.modules()]
    return {"tensors": tensors, "keys": keys}


def _assert_unchanged(before: dict[str, Any], model: nn.Module,
                      opt: torch.optim.Optimizer) -> None:
    after = _state(model, opt)
    assert after["keys"] == before["keys"]
    assert after["tensors"].keys() == before["tensors"].keys()
    for k, (obj, clone) in before["tensors"].items():
        now = after["tensors"][k][0]
        assert now is obj and _is_real(now), k
        assert torch.equal(now, clone), k


@pytest.mark.parametrize("name", list_models())
def test_fake_training_leaves_every_zoo_model_bitwise_unchanged(name: str) -> None:
    zm = get_model(name, device="cpu", **_small(name))
    model = zm.model
    # a cache in list and tensor attributes, as hooks and lazy caches keep (every form
    # calls the first submodule as a module, so the hook runs in each)
    first = next(model.children())
    first.seen, first.calls = [], torch.zeros(())

    def keep(mod: nn.Module, _args: Any, out: Any) -> None:
        mod.seen.append(out)
        mod.calls.add_(1)

    first.register_forward_hook(keep)
    opt = torch.optim.AdamW(model.parameters(), foreach=True)
    model(*zm.train_inputs).backward()  # real gradients and real optimizer state
    opt.step()
    before = _state(model, opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uncounted-op notes are not the point here
        for form, fn in _forms(model).items():
            t = roofline.trace(fn, *zm.train_inputs, train=True, optimizer=opt, fake=True)
            assert t.by_phase()["optimizer"].count, form
            assert any(op.name == "aten.add_.Tensor" for op in t.ops), form  # the hook ran
            _assert_unchanged(before, model, opt)
            assert _no_global_state(), form
    out = model(*zm.train_inputs)
    assert _is_real(out) and out.dim() == 0 and torch.isfinite(out)


# ------------------------------------------------- backward ops land in their own modules
class _Block(torch.nn.Module):
    """q, k, v projections of one input (siblings sharing it), then a Dropout(p=0), which
    returns its input itself, as a transformer block with dropout off does."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.q = torch.nn.Linear(d, 2 * d, bias=False)
        self.k = torch.nn.Linear(d, 3 * d, bias=False)
        self.v = torch.nn.Linear(d, 5 * d, bias=False)
        self.drop = torch.nn.Dropout(0.0)
        self.out = torch.nn.Linear(10 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.out(torch.cat([self.q(x), self.k(x), self.v(x)], dim=-1)))


@pytest.mark.parametrize("fake", [False, True])
def test_backward_matmuls_are_attributed_to_their_own_modules(fake: bool) -> None:
    n, d = 16, 8
    model = torch.nn.Sequential(_Block(d), torch.nn.Linear(d, d, bias=False))
    t = roofline.trace(model, torch.randn(n, d), train=True, loss_fn=lambda o: o.sum(),
                       fake=fake)
    backward: dict[str, int] = {}
    for op in t.ops:
        if op.phase == "backward" and op.category == "matmul":
            backward[op.module] = backward.get(op.module, 0) + op.flops
    # a Linear (n x i) @ (i x o) costs 2 n i o FLOPs per gradient: of its weight, and of its
    # input unless the input is the model's own (which needs none)
    first = 2 * n * d
    assert backward == {
        "Sequential.0.q": first * 2 * d, "Sequential.0.k": first * 3 * d,
        "Sequential.0.v": first * 5 * d, "Sequential.0.out": 2 * 2 * n * 10 * d * d,
        "Sequential.1": 2 * 2 * n * d * d}
