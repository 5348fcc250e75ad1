"""Fake tensors (tracing/fake.py, tracing/leaks.py): a fake trace counts what a real one
counts and never changes the user's model, optimizer or global state.

Issue 13 (items 1, 2, 13): fake training traces of callables other than the module, state
created during a fake forward, clear errors under fake tensors. Issue 22, item 5: fakes a
trace's snapshot does not reach (an ``lru_cache``, a hook's list, a global object's
attribute) are undone or named; item 6: optimizers that read values under fake tensors
(Adafactor reads ``param.norm().item()``, torch/optim/_adafactor.py:381 and 531) get
roofline's FakeModeError, while ASGD, whose values are its own 0-dim state scalars
(``mu.item()``, asgd.py:261), traces. Counts are derived by hand from layer shapes.
"""

from __future__ import annotations

import functools
import gc
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from conftest import callable_forms, no_global_state
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import roofline
from roofline.tracing import FakeModeError
from roofline.tracing.fake import _MAX_DEPTH
from roofline.zoo import get_model, list_models
from roofline.zoo.registry import _REGISTRY

# --- a fake trace counts what a real one counts -------------------------------------------

def test_fake_equals_real_and_leaves_the_model_untouched() -> None:
    zm = get_model("mlp", batch_size=8)
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    before = [p.detach().clone() for p in zm.model.parameters()]
    fake = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    assert all(torch.equal(a, p) for a, p in zip(before, zm.model.parameters(), strict=True))
    assert all(p.grad is None for p in zm.model.parameters()) and not opt.state
    real = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt)
    for phase in ("forward", "backward"):
        f = fake.filter(lambda o, p=phase: o.phase == p)
        r = real.filter(lambda o, p=phase: o.phase == p)
        assert f.total_flops == r.total_flops and f.total_bytes == r.total_bytes


def test_meta_model_needs_no_memory() -> None:
    zm = get_model("llama-tiny", batch_size=1, seq_len=16, device="meta")
    t = roofline.trace(zm.model, *zm.train_inputs, train=True, fake=True)
    assert t.total_flops > 0 and t.by_phase()["backward"].flops > 0


def test_data_dependent_ops_under_fake_are_refused() -> None:
    class Picky(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x.nonzero(as_tuple=True)]

    with pytest.raises(FakeModeError, match="real tensors"):
        roofline.trace(Picky(), torch.randn(8), fake=True)
    assert no_global_state()
    assert len(roofline.trace(Picky(), torch.randn(8))) > 0


# --- a fake training trace of any callable (issue 13, item 1) -----------------------------

def _is_real(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor)


def _optimizer_elements(t: roofline.Trace) -> int:
    """Elements the optimizer phase wrote in its largest op (a foreach op: all params)."""
    return max((sum(torch.Size(s).numel() for s in op.output_shapes)
                for op in t.ops if op.phase == "optimizer" and op.category == "optimizer"),
               default=0)


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
    t = roofline.trace(callable_forms(model)[form], x, train=True, loss_fn=lambda o: o.sum(),
                       optimizer=opt, fake=True)
    # the optimizer phase is there and updates every parameter (AdamW's foreach ops)
    assert _optimizer_elements(t) == n_params
    assert all(_is_real(p.grad) and torch.equal(p.grad, g)
               for p, g in zip(model.parameters(), grads, strict=True))
    assert not opt.state and no_global_state()


def test_fake_training_refuses_a_step_that_uses_optimizer_params_it_cannot_swap() -> None:
    w = nn.Parameter(torch.randn(3, 4))
    holder = {"w": w}  # reached by no module call, no closure of the callable itself
    opt = torch.optim.SGD([w], lr=0.1)
    with pytest.raises(FakeModeError, match="optimizer's parameters as real tensors"):
        roofline.trace(lambda x: F.linear(x, holder["w"]).sum(), torch.randn(2, 4),
                       train=True, optimizer=opt, fake=True)
    assert w.grad is None and no_global_state()
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


# --- state created during a fake forward (issue 13, item 2) -------------------------------

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
    for form in callable_forms(model).values():
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
    for form in callable_forms(model).values():
        roofline.trace(form, torch.randn(3, 4), train=train, fake=True)
        # the same objects (other references see it), with their pre-step contents
        assert model.cache is cache and cache == []
        assert model.store is store and store == {}
        assert model.hist is hist and len(hist) == 1 and hist[0] is first
        assert _is_real(first) and torch.equal(first, torch.zeros(1))
    assert no_global_state()


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
    for form in callable_forms(model).values():
        t = roofline.trace(form, torch.randn(2, 4), train=True, loss_fn=lambda o: o.sum(),
                           fake=True)
        # the trace works (the writes ran on fakes and are recorded) ...
        assert sum(op.name in ("aten.add_.Tensor", "aten.mul_.Tensor") for op in t.ops) == 3
        # ... and the real tensors keep their identity and values
        assert model.count is count and model.stats[0] is stat and model.pair is pair
        assert torch.equal(count, torch.zeros(1)) and torch.equal(stat, torch.zeros(2))
        assert torch.equal(pair[0], torch.zeros(3))
    assert no_global_state()


_UNREACHED = torch.zeros(2)  # a global: no search, hook or module write can swap it


def test_fake_trace_refuses_an_in_place_write_into_a_real_tensor_it_cannot_swap() -> None:
    model = nn.Linear(2, 2)

    def step(x: torch.Tensor) -> torch.Tensor:
        _UNREACHED.add_(1)
        return model(x)

    with pytest.raises(FakeModeError, match="writes in place into a real tensor"):
        roofline.trace(step, torch.randn(3, 2), fake=True)
    assert torch.equal(_UNREACHED, torch.zeros(2)) and no_global_state()
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
    assert no_global_state()


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
    assert no_global_state()


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
    assert no_global_state()


# --- fakes that escape the callable (issue 22, item 5) ------------------------------------

def _fakes_alive() -> set[int]:
    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, FakeTensor)}


def _traced_or_named(step: Callable[[], object], where: str) -> bool:
    """Run a fake trace: True if it returned, False if it refused naming ``where``."""
    try:
        step()
    except FakeModeError as e:
        assert where in str(e), str(e)
        return False
    return True


@functools.cache
def causal_mask(n: int) -> torch.Tensor:
    return torch.ones(n, n).tril()


class Masked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return causal_mask(x.shape[1]) @ self.lin(x)


@pytest.mark.usefixtures("quiet")
def test_a_mask_cached_by_lru_cache_during_a_fake_trace() -> None:
    causal_mask.cache_clear()
    model, x = Masked(), torch.randn(2, 4, 8)
    if _traced_or_named(lambda: roofline.trace(model, x, fake=True), "causal_mask"):
        out = model(x)  # the user's next real forward
        assert not isinstance(out, FakeTensor)
        assert not isinstance(causal_mask(4), FakeTensor)
    causal_mask.cache_clear()


@pytest.mark.usefixtures("quiet")
def test_a_forward_hook_that_appends_to_a_list() -> None:
    seen: list[torch.Tensor] = []
    model = nn.Linear(8, 8)
    model.register_forward_hook(lambda mod, inp, out: seen.append(out))
    if _traced_or_named(lambda: roofline.trace(model, torch.randn(2, 8), fake=True),
                        "seen"):
        assert not any(isinstance(t, FakeTensor) for t in seen), seen
    seen.clear()


@pytest.mark.usefixtures("quiet")
def test_a_forward_pre_hook_that_keeps_its_input() -> None:
    """The input's fake is made before the step (by the trace, not by an op of it)."""
    kept: list[torch.Tensor] = []
    model = nn.Linear(8, 8)
    model.register_forward_pre_hook(lambda mod, inp: kept.append(inp[0]))
    if _traced_or_named(lambda: roofline.trace(model, torch.randn(2, 8), fake=True),
                        "kept"):
        assert not any(isinstance(t, FakeTensor) for t in kept), kept
    kept.clear()


class _Stats:
    last: torch.Tensor | None = None


STATS = _Stats()


class Logs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if STATS.last is not None:  # a running statistic kept across steps
            y = y + 0 * STATS.last
        STATS.last = y.detach()
        return y


@pytest.mark.usefixtures("quiet")
def test_an_attribute_set_on_a_global_object() -> None:
    STATS.last = None
    model = Logs()
    if _traced_or_named(lambda: roofline.trace(model, torch.randn(2, 8), fake=True),
                        "last"):
        assert not isinstance(STATS.last, FakeTensor)
        assert not isinstance(model(torch.randn(2, 8)), FakeTensor)
    STATS.last = None


@pytest.mark.usefixtures("quiet")
def test_a_clean_fake_training_step_leaves_no_fake_alive() -> None:
    """The check must not cry wolf: a plain training step with a stateful optimizer
    leaves no fake anywhere (a survivor scan has nothing to report)."""
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), foreach=True)
    before = _fakes_alive()  # (a failed test's traceback may keep its own alive)
    roofline.trace(model, torch.randn(2, 8), train=True, optimizer=opt,
                   loss_fn=lambda o: o.sum(), fake=True)
    assert not _fakes_alive() - before


# --- clear errors (issue 13, item 13) -----------------------------------------------------

@pytest.mark.parametrize("read", ["numpy", "item", "tolist"])
def test_reading_values_under_a_fake_trace_is_a_fake_mode_error(read: str) -> None:
    model = nn.Linear(4, 4)
    step = {"numpy": lambda x: model(x).detach().numpy(),
            "item": lambda x: model(x).sum().item(),
            "tolist": lambda x: model(x).tolist()}[read]
    with pytest.raises(FakeModeError, match=r"fake=False"):
        roofline.trace(step, torch.randn(2, 4), fake=True)
    assert no_global_state()


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
    assert no_global_state()


# --- optimizers that read values (issue 22, item 6) ---------------------------------------

def _fake_step(opt_class: type[torch.optim.Optimizer], **kw: object) -> roofline.Trace:
    model = nn.Linear(8, 4)
    opt = opt_class(model.parameters(), **kw)
    return roofline.trace(model, torch.randn(2, 8), train=True, optimizer=opt,
                          loss_fn=lambda o: o.sum(), fake=True)


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("foreach", [False, True])
def test_adafactor_gets_the_fake_mode_error(foreach: bool) -> None:
    """Adafactor scales its step by the parameter's and the update's norm (values): no
    fake step can take it; the error says to trace with real tensors."""
    with pytest.raises(FakeModeError, match="fake=False"):
        _fake_step(torch.optim.Adafactor, foreach=foreach)


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("opt_class", [torch.optim.Adafactor, torch.optim.ASGD])
def test_no_raw_data_dependent_exception_escapes(opt_class: type) -> None:
    """The issue's minimum: roofline's FakeModeError (or a trace), never torch's raw
    DataDependentOutputException."""
    from torch._subclasses.fake_tensor import DataDependentOutputException

    try:
        _fake_step(opt_class)
    except FakeModeError:
        pass
    except DataDependentOutputException as e:  # pragma: no cover - the defect
        pytest.fail(f"torch's raw {type(e).__name__} escaped: {e}")


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("foreach", [False, True])
def test_asgd_traces_on_fake_tensors(foreach: bool) -> None:
    """The issue's better fix, shown feasible by fake_optim_proto.py: ASGD reads only its
    own 0-dim state (step, eta, mu), which a warm-up can make with values (torch.tensor()
    constants, kept through in-place updates by FakeTensorMode). State: 4 x 8 + 4 = 36
    averaged elements (``ax``) and three fp32 scalars per parameter tensor."""
    t = _fake_step(torch.optim.ASGD, foreach=foreach)
    assert roofline.memory(t).optimizer_state_bytes == 4 * 36 + 2 * 3 * 4
    assert any(op.phase == "optimizer" for op in t.ops)


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


# slow: a real and 4 fake training steps of each zoo model (mobilenet ~10 s)
@pytest.mark.slow
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
        for form, fn in callable_forms(model).items():
            t = roofline.trace(fn, *zm.train_inputs, train=True, optimizer=opt, fake=True)
            assert t.by_phase()["optimizer"].count, form
            assert any(op.name == "aten.add_.Tensor" for op in t.ops), form  # the hook ran
            _assert_unchanged(before, model, opt)
            assert no_global_state(), form
    out = model(*zm.train_inputs)
    assert _is_real(out) and out.dim() == 0 and torch.isfinite(out)
