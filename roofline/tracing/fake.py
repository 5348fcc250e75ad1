"""Fake-tensor execution: analyse a step without allocating its memory.

Parameters, buffers, optimizer state and inputs are swapped for fake tensors for
the duration of the step and put back afterwards, so the user's model is never
changed. ``meta`` tensors become fake CPU tensors (autocast then applies as on
the CPU).

Which modules to swap is not always visible from the callable (``lambda x: m(x)``
over a global ``m``), so three mechanisms work together:

* before the step, the modules reachable from the callable (the module itself, a bound
  method's ``self``, a ``functools.partial``'s function and arguments, a function's
  closure cells and defaults) are swapped;
* during the step, a module forward pre-hook swaps any other module at its first call
  (before its forward can read a parameter), so the optimizer's fake parameters are the
  ones the model uses, however it was reached;
* a dispatch mode notes every real leaf tensor that requires grad and still reaches an
  op (a parameter used without its module being called): its ``.grad`` is put back
  after the step (as is every optimizer parameter's), and if it is one of the
  optimizer's parameters the trace is refused (its optimizer phase would be missing).

Each covers what the others cannot: ``m.forward`` fires no hook for ``m`` itself (the
search finds it), a module reached through a global or a dict is found only when it runs
(the hook), and ``F.linear(x, m.weight)`` calls no module at all (the watch).

After the step every swapped module's ``_parameters``, ``_buffers``, ``_modules`` and
tensor-valued attributes are restored to their pre-step contents (a rotary cache or a
buffer registered in ``forward`` is removed again; tensors kept in attributes that are
neither tensors nor tuples, lists or dicts of them are not looked into), and so are the
optimizer's groups and state.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from roofline.tracing.tracer import FakeModeError


class NeedsValues(RuntimeError):
    """A Python-level call (``.numpy()``) that needs a fake tensor's values."""


# Raised when a step needs real values: by fake tensors for ops, by _NoValues for numpy.
DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException, NeedsValues)

# Module attributes that hold its state tables, restored table by table.
_TABLES = ("_parameters", "_buffers", "_modules")
# What every nn.Module holds (tables, hook dicts, flags): no tensor attributes in there.
_INTERNALS = frozenset(vars(nn.Module()))
# How many items of a container the search for modules looks at, and how deep it goes.
_MAX_ITEMS, _MAX_DEPTH = 256, 4


def modules_of(fn: Any, *, deep: bool = True) -> list[nn.Module]:
    """The ``nn.Module``\\ s behind a callable, outermost first.

    Without ``deep``: the module itself, a bound method's module, a ``functools.partial``
    of either. With ``deep`` also what a function or partial holds: closure cells,
    defaults, partial arguments, and the containers among them.
    """
    found: dict[int, nn.Module] = {}
    seen: set[int] = set()

    def visit(obj: Any, depth: int) -> None:
        if id(obj) in seen or depth > _MAX_DEPTH:
            return
        seen.add(id(obj))
        if isinstance(obj, nn.Module):
            found.setdefault(id(obj), obj)
        elif isinstance(obj, types.MethodType):
            visit(obj.__self__, depth + 1)
            if deep:
                visit(obj.__func__, depth + 1)
        elif isinstance(obj, functools.partial):
            visit(obj.func, depth + 1)
            if deep:
                for a in (*obj.args, *obj.keywords.values()):
                    visit(a, depth + 1)
        elif not deep:
            return
        elif isinstance(obj, types.FunctionType):
            cells = [_cell_contents(c) for c in obj.__closure__ or ()]
            for v in (*cells, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
                visit(v, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for v in obj[:_MAX_ITEMS]:
                visit(v, depth + 1)
        elif isinstance(obj, dict):
            for v in list(obj.values())[:_MAX_ITEMS]:
                visit(v, depth + 1)

    visit(fn, 0)
    return list(found.values())


def _cell_contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet assigned (a name bound after the closure was made)
        return None


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list, dict)):
        return any(isinstance(t, torch.Tensor) for t in tree_flatten(value)[0])
    return False


def _active_fake_mode() -> FakeTensorMode | None:
    """The user's own ``FakeTensorMode``, when the trace runs inside one."""
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    return mode if isinstance(mode, FakeTensorMode) else None


class _Faker:
    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self.memo: dict[int, torch.Tensor] = {}

    def __call__(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if isinstance(t, FakeTensor):  # built inside the user's own fake mode
            if t.fake_mode is not self.mode:
                raise FakeModeError(
                    "fake=True was given a fake tensor of another FakeTensorMode; trace "
                    "inside the FakeTensorMode that made it (roofline then reuses it), or "
                    "pass real or meta tensors.")
            return t
        if id(t) not in self.memo:
            # the user's own fake mode may be active: the real tensor is read outside it
            with unset_fake_temporarily():
                self.memo[id(t)] = self._fake(t)
        return self.memo[id(t)]

    def _fake(self, t: torch.Tensor) -> torch.Tensor:
        if t.device.type == "meta":
            with self.mode:
                f = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
        else:
            f = self.mode.from_tensor(t.detach())
            if t.numel() <= 1:  # scalars such as optimizer steps keep their value for .item()
                f.constant = t.detach().clone()  # type: ignore[attr-defined]
        if isinstance(t, torch.nn.Parameter):
            return torch.nn.Parameter(f, requires_grad=t.requires_grad)
        return f.requires_grad_(True) if t.requires_grad else f


class _ModuleState:
    """One module's tables and tensor-valued attributes, as they were before the step."""

    def __init__(self, m: nn.Module) -> None:
        self.module = m
        self.tables = {name: dict(getattr(m, name)) for name in _TABLES}
        self.non_persistent = set(m._non_persistent_buffers_set)
        self.attrs = {k: v for k, v in vars(m).items()
                      if k not in _INTERNALS and _holds_tensor(v)}

    def restore(self) -> None:
        m = self.module
        for name, saved in self.tables.items():
            table = getattr(m, name)
            table.clear()
            table.update(saved)
        m._non_persistent_buffers_set.clear()
        m._non_persistent_buffers_set.update(self.non_persistent)
        state = vars(m)
        for k, v in list(state.items()):  # attributes the step added (a lazy cache)
            if k not in _INTERNALS and k not in self.attrs and _holds_tensor(v):
                del state[k]
        state.update(self.attrs)


class _Swap:
    """Swaps modules' parameters and buffers for fakes, remembering what to put back."""

    def __init__(self, fake: _Faker) -> None:
        self.fake = fake
        self.saved: dict[int, _ModuleState] = {}

    def module(self, root: nn.Module) -> None:
        for m in root.modules():
            if id(m) in self.saved:
                continue
            self.saved[id(m)] = _ModuleState(m)
            for table in (m._parameters, m._buffers):
                for name, t in table.items():
                    if t is not None:
                        table[name] = self.fake(t)

    def pre_hook(self, m: nn.Module, _args: Any) -> None:
        if id(m) not in self.saved:
            self.module(m)

    def restore(self) -> None:
        for state in reversed(self.saved.values()):
            state.restore()


class _RealLeaves(TorchDispatchMode):
    """Notes each real leaf tensor that requires grad and reaches an op, with its ``.grad``.

    Its first op is in the forward, before backward could have touched its ``.grad``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.grads: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self.used: set[int] = set()  # ids of the real leaves an op of the step read

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func.namespace != "prim":
            # ATen passes tensors as arguments or lists of them (foreach ops): a flat scan
            # is enough there, and cheaper than a pytree flatten on every op
            flat = [t for a in args for t in (a if isinstance(a, (list, tuple)) else (a,))]
            for t in flat + (tree_flatten(kwargs)[0] if kwargs else []):
                if (isinstance(t, torch.Tensor) and t.requires_grad and id(t) not in self.used
                        and not isinstance(t, FakeTensor) and t.is_leaf):
                    self.used.add(id(t))
                    self.grads.setdefault(id(t), (t, t.grad))
        return func(*args, **kwargs)

    def restore(self) -> None:
        for t, grad in self.grads.values():
            if t.grad is not grad:
                t.grad = grad


class _NoValues(TorchFunctionMode):
    """``.numpy()`` of a fake tensor fails before any ATen op: say why, as for ``.item()``."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if func in _NEEDS_VALUES and args and isinstance(args[0], FakeTensor):
            raise NeedsValues(f"Tensor.{func.__name__}()")
        return func(*args, **(kwargs or {}))


_NEEDS_VALUES = (torch.Tensor.numpy, torch.Tensor.__array__)


@contextlib.contextmanager
def fake_step(model: Any, optimizer: torch.optim.Optimizer | None,
              args: tuple[Any, ...], kwargs: dict[str, Any],
              ) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Run the body on fakes of ``model``/``optimizer``/inputs; yield the fake inputs.

    The fake mode is entered here: the user's own ``FakeTensorMode`` when one is active
    (a second mode would meet its tensors: "Mixing fake modes"), else a new one.
    """
    mode = _active_fake_mode() or FakeTensorMode(allow_non_fake_inputs=True)
    fake = _Faker(mode)
    swap = _Swap(fake)
    leaves = _RealLeaves()
    groups: list[dict[str, Any]] = []
    saved_groups: list[dict[str, Any]] = []
    saved_state: Any = None
    try:
        for m in modules_of(model):
            swap.module(m)
        if optimizer is not None:
            groups = list(optimizer.param_groups)
            saved_groups = [dict(g) for g in groups]
            saved_state = optimizer.state
            # the optimizer's own parameters are checked whether or not an op saw them
            leaves.grads.update({id(p): (p, p.grad) for g in groups for p in g["params"]
                                 if not isinstance(p, FakeTensor)})
            new_state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
            for p, s in saved_state.items():
                new_state[fake(p)] = {k: fake(v) for k, v in s.items()}
            for g in optimizer.param_groups:
                g["params"] = [fake(p) for p in g["params"]]
            optimizer.state = new_state
            if not saved_state:
                _warm_up(optimizer, mode)
        fargs, fkwargs = tree_map(fake, (args, kwargs))
        hook = nn.modules.module.register_module_forward_pre_hook(swap.pre_hook)
        try:
            with mode, leaves, _NoValues():
                yield fargs, fkwargs
        finally:
            hook.remove()
        if optimizer is not None:
            missed = len(leaves.used & {id(p) for g in saved_groups for p in g["params"]})
            if missed:
                raise FakeModeError(
                    f"fake=True: the step used {missed} of the optimizer's parameters as "
                    "real tensors (their module was neither the callable, reachable from "
                    "it, nor called as a module), so the fake optimizer step would miss "
                    "them. Pass the nn.Module itself, a bound method or functools.partial "
                    "of it, or a function that calls the module; or trace with fake=False.")
    finally:
        leaves.restore()
        swap.restore()
        if optimizer is not None and saved_state is not None:
            optimizer.param_groups[:] = groups
            for g, saved in zip(groups, saved_groups, strict=True):
                g.clear()
                g.update(saved)
            optimizer.state = saved_state


def _warm_up(optimizer: torch.optim.Optimizer, mode: FakeTensorMode) -> None:
    """Take one unrecorded fake step so the traced step is a steady-state one."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    with mode:
        for p in params:
            p.grad = torch.zeros_like(p)
        optimizer.step()
    for p in params:
        p.grad = None
