"""Fake-tensor execution: analyse a step without allocating its memory.

Parameters, buffers, tensor attributes, optimizer state and inputs are swapped for fake
tensors for the duration of the step and put back afterwards, so the user's model is
never changed. ``meta`` tensors become fake CPU tensors (autocast then applies as on
the CPU).

Which modules to swap is not always visible from the callable (``lambda x: m(x)``
over a global ``m``), so four mechanisms work together:

* before the step, the modules and plain objects reachable from the callable are
  swapped: the module itself, a bound method's ``self``, a ``functools.partial``'s
  function and arguments, a function's closure cells and defaults, the attributes
  (``__dict__``, ``__slots__``) of plain objects (a ``Runner`` holding the model), and
  the containers among them, to a bounded depth;
* during the step, a module forward pre-hook swaps any other module at its first call
  (before its forward can read a parameter), so the optimizer's fake parameters are the
  ones the model uses, however it was reached;
* during the step, a write to a module not swapped yet (an attribute set or deleted, a
  buffer, parameter or submodule registered: a module reached through a global whose
  ``forward`` is called directly) first snapshots and swaps that module;
* a dispatch mode watches real tensors that still reach an op. A leaf that requires
  grad (a parameter used without its module being called) has its ``.grad`` hidden
  for the step and put back after it (as is every optimizer parameter's); if it is one
  of the optimizer's parameters the trace is refused (its optimizer phase would be
  missing). An in-place write into a real tensor is refused: it would change the
  user's data (the fake mode lets real tensors in, and writes them).

Each covers what the others cannot: ``m.forward`` fires no hook for ``m`` itself (the
search or the write watch finds it), a module reached through a global or a dict is
found only when it runs (the hook), and ``F.linear(x, m.weight)`` calls no module at
all (the leaf watch).

What is swapped is saved first: every attribute of every module and object reached,
and the contents of the lists, dicts and sets among them (shallow copies, to the same
depth). After the step attributes the step added are removed, replaced ones are put
back, and mutated containers get their contents back in place (other references to
the same list see it); so are the optimizer's groups and state. Then every object
reached is checked for fake tensors the trace made: one left where nothing was saved
(a container deeper than the search goes) is a :class:`FakeModeError` naming it.

Roofline's own work around the step (making fakes, the optimizer's warm-up step) runs
with every dispatch mode disabled: a capture around a trace sees the step's ops once,
and none of this bookkeeping.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import types
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.nn.modules import module as _module
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from roofline._errors import FakeModeError, NeedsValues
from roofline.tracing.leaks import Watch, holders

# Raised when a step needs real values: by fake tensors for ops, by _NoValues for numpy.
DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException, NeedsValues)

# How many items of a container the search and the snapshot look into, and how deep
# (attributes of attributes, items of items) they go from the callable or a module.
_MAX_ITEMS, _MAX_DEPTH = 256, 4
# Integer inputs up to this many elements keep their values as the fake's constant.
_INDEX_VALUES = 1024
# Containers a step can change in place: their contents are saved and refilled in place.
_MUTABLE = (list, dict, set)
# Not plain objects: code, classes, Python modules, weak references, what has its own
# branch, and optimizers (swapped apart: their state is keyed by the parameters).
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.MethodType,
           types.BuiltinFunctionType, functools.partial, weakref.ReferenceType,
           torch.optim.Optimizer, torch.Tensor, nn.Module, tuple, list, dict, set,
           frozenset, str, bytes)
_MISSING = object()
_SLOT_NAMES: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _slot_names(cls: type) -> tuple[str, ...]:
    if cls not in _SLOT_NAMES:
        names: list[str] = []
        for klass in cls.__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name not in ("__dict__", "__weakref__") and name not in names:
                    names.append(name)
        _SLOT_NAMES[cls] = tuple(names)
    return _SLOT_NAMES[cls]


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of a slot (read and written past any ``__setattr__``)."""
    return next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__)


def _instance_dict(obj: Any) -> dict[str, Any] | None:
    try:  # past any __getattr__ or __getattribute__ of the class
        state = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return state if isinstance(state, dict) else None


def _is_plain(obj: Any) -> bool:
    """An instance of a user class, whose attributes may hold modules and tensors."""
    if isinstance(obj, _OPAQUE):
        return False
    return _instance_dict(obj) is not None or bool(_slot_names(type(obj)))


def _attributes(obj: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """An object's ``__dict__`` (copied; None without one) and its set slots."""
    state = _instance_dict(obj)
    slots = {}
    for name in _slot_names(type(obj)):
        if (value := _get_slot(obj, name)) is not _MISSING:
            slots[name] = value
    return (dict(state) if state is not None else None), slots


def _get_slot(obj: Any, name: str) -> Any:
    try:
        return _slot(type(obj), name).__get__(obj, type(obj))
    except AttributeError:  # a slot never assigned
        return _MISSING


def _items(c: Any) -> Iterable[Any]:
    """The first items of a container the search looks into."""
    return itertools.islice(c.values() if isinstance(c, dict) else c, _MAX_ITEMS)


def _reach(fn: Any, deep: bool) -> tuple[list[nn.Module], list[Any]]:
    """The modules and plain objects behind a callable, outermost first."""
    modules: dict[int, nn.Module] = {}
    objects: dict[int, Any] = {}
    seen: set[int] = set()

    def visit(obj: Any, depth: int) -> None:
        if id(obj) in seen or depth > _MAX_DEPTH:
            return
        seen.add(id(obj))
        if isinstance(obj, nn.Module):
            modules.setdefault(id(obj), obj)
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
        elif isinstance(obj, (list, tuple, dict, set, frozenset)):
            for v in _items(obj):
                visit(v, depth + 1)
        elif _is_plain(obj):  # a callable object (a Runner), or one a closure holds
            objects.setdefault(id(obj), obj)
            state, slots = _attributes(obj)
            for v in itertools.islice(itertools.chain((state or {}).values(),
                                                      slots.values()), _MAX_ITEMS):
                visit(v, depth + 1)

    visit(fn, 0)
    return list(modules.values()), list(objects.values())


def modules_of(fn: Any, *, deep: bool = True) -> list[nn.Module]:
    """The ``nn.Module``\\ s behind a callable, outermost first.

    Without ``deep``: the module itself, a bound method's module, a ``functools.partial``
    of either. With ``deep`` also what a function, partial or plain object holds: closure
    cells, defaults, partial arguments, attributes, and the containers among them.
    """
    return _reach(fn, deep)[0]


def _cell_contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet assigned (a name bound after the closure was made)
        return None


def _active_fake_mode() -> FakeTensorMode | None:
    """The user's own ``FakeTensorMode``, when the trace runs inside one."""
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    return mode if isinstance(mode, FakeTensorMode) else None


class _Faker:
    """Makes (once per real tensor) the fake that stands for it during the step."""

    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self.memo: dict[int, torch.Tensor] = {}
        # fakes of the user's own mode the model already held before the step: theirs
        self.kept: set[int] = set()
        self.made: set[int] = set()  # ids of the fakes made here
        self.before_step = True
        self.watch = Watch()  # every fake made for the step, and by its ops

    def __call__(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if isinstance(t, FakeTensor):  # built inside the user's own fake mode
            if t.fake_mode is not self.mode:
                raise FakeModeError(
                    "fake=True was given a fake tensor of another FakeTensorMode; trace "
                    "inside the FakeTensorMode that made it (roofline then reuses it), or "
                    "pass real or meta tensors.")
            if self.before_step and id(t) not in self.made:
                self.kept.add(id(t))
            return t
        if id(t) not in self.memo:
            # bookkeeping, not part of the step: no mode sees it (an outer capture, the
            # recorder, the user's own fake mode, which must not meet the real tensor)
            with _disable_current_modes():
                self.memo[id(t)] = self._fake(t)
            self.made.add(id(self.memo[id(t)]))
            self.watch.add(self.memo[id(t)])
        return self.memo[id(t)]

    def _fake(self, t: torch.Tensor) -> torch.Tensor:
        if t.device.type == "meta":
            with self.mode:
                f = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
        else:
            f = self.mode.from_tensor(t.detach())
            if t.numel() <= 1 or (t.numel() <= _INDEX_VALUES and not t.is_floating_point()
                                  and not t.is_complex()):
                # scalars such as optimizer steps keep their value for .item(), and small
                # integer inputs theirs for the formulas that need them (the sequence
                # offsets of variable-length attention count each sequence)
                f.constant = t.detach().clone()  # type: ignore[attr-defined]
        if isinstance(t, torch.nn.Parameter):
            return torch.nn.Parameter(f, requires_grad=t.requires_grad)
        return f.requires_grad_(True) if t.requires_grad else f

    def leaked(self, t: Any) -> bool:
        """A fake of this trace's mode that the model did not hold before the step."""
        return (isinstance(t, FakeTensor) and t.fake_mode is self.mode
                and id(t) not in self.kept)


def _contents(c: Any) -> list[Any]:
    return list(c.items()) if isinstance(c, dict) else list(c)


def _changed(c: Any, saved: list[Any]) -> bool:
    now = _contents(c)
    if len(now) != len(saved):
        return True
    if isinstance(c, set):
        return {id(x) for x in now} != {id(x) for x in saved}
    if isinstance(c, dict):
        return any(k is not k0 or v is not v0 for (k, v), (k0, v0) in zip(now, saved, strict=True))
    return any(x is not x0 for x, x0 in zip(now, saved, strict=True))


def _refill(c: Any, saved: list[Any]) -> None:
    """Put a container's contents back in place (the base type's methods: a subclass may
    refuse ``update`` or keep its own bookkeeping, which the step changed only as well)."""
    if isinstance(c, list):
        list.__setitem__(c, slice(None), saved)
    elif isinstance(c, dict):
        dict.clear(c)
        dict.update(c, saved)
    else:
        set.clear(c)
        set.update(c, saved)


def _put_back(obj: Any, state: dict[str, Any] | None, slots: dict[str, Any]) -> None:
    """An object's attributes as saved: added ones removed, replaced ones put back."""
    if state is not None:
        now = vars(obj)
        for k in [k for k in now if k not in state]:  # a lazy cache the step created
            del now[k]
        for k, v in state.items():
            if now.get(k, _MISSING) is not v:
                now[k] = v
    for name in _slot_names(type(obj)):
        now = _get_slot(obj, name)
        if now is not slots.get(name, _MISSING):
            slot = _slot(type(obj), name)
            if name in slots:
                slot.__set__(obj, slots[name])
            else:
                slot.__delete__(obj)


class _Swap:
    """Swaps the tensors of modules and plain objects for fakes, saving them first.

    Each module's or object's attributes are saved (a shallow copy of ``__dict__`` and
    of the slots), and each list, dict and set met among them (a shallow copy of its
    contents), before any is changed; tensors in them become fakes (in place for lists
    and dicts, a new tuple for a tuple), as do the parameters and buffers in the
    modules' tables. A tensor in a set or in a tuple subclass of unknown construction
    stays real: it is read, and a write into it is refused by :class:`_RealLeaves`.
    """

    def __init__(self, fake: _Faker, skip: set[int]) -> None:
        self.fake = fake
        self.skip = skip  # ids of objects swapped apart (the optimizer)
        self.objects: dict[int, tuple[Any, dict[str, Any] | None, dict[str, Any]]] = {}
        self.contents: dict[int, tuple[Any, list[Any]]] = {}
        self.thread = threading.get_ident()

    def module(self, m: nn.Module) -> None:
        self.object(m, 0)

    def touch(self, m: nn.Module, *_: Any) -> None:
        """A module called or written to during the step: save and swap it first.

        The hooks are global: a module another thread runs meanwhile is not ours.
        """
        if id(m) not in self.objects and threading.get_ident() == self.thread \
                and not _UNWATCHED.depth:
            self.module(m)

    def object(self, obj: Any, depth: int) -> None:
        if id(obj) in self.objects or id(obj) in self.skip:
            return
        state, slots = _attributes(obj)
        self.objects[id(obj)] = (obj, state, slots)
        for k, v in (state or {}).items():
            new = self.value(v, depth + 1)
            if new is not v:
                vars(obj)[k] = new  # past nn.Module.__setattr__: the tables keep theirs
        for k, v in slots.items():
            new = self.value(v, depth + 1)
            if new is not v:
                _slot(type(obj), k).__set__(obj, new)

    def value(self, v: Any, depth: int) -> Any:
        """What stands for ``v`` during the step (``v`` itself when swapped in place)."""
        if isinstance(v, torch.Tensor):
            # swapped, not made read-only: the step's own in-place updates (a counter, a
            # cache) then run on the fake and are recorded; only a real tensor nothing
            # reached is refused a write (_RealLeaves), as the trace cannot swap it
            return self.fake(v)
        if isinstance(v, nn.Module):  # a submodule, or one held in a plain attribute
            self.object(v, 0)
            return v
        if depth > _MAX_DEPTH:
            return v
        if isinstance(v, tuple):
            return self._tuple(v, depth)
        if isinstance(v, _MUTABLE):
            self._container(v, depth)
            return v
        if _is_plain(v):
            self.object(v, depth)
        return v

    def _tuple(self, v: tuple[Any, ...], depth: int) -> tuple[Any, ...]:
        """A tuple with its first items swapped: a new one (a namedtuple of its own type),
        or ``v`` itself when nothing changed or its type cannot be rebuilt."""
        items = [self.value(x, depth + 1) for x in itertools.islice(v, _MAX_ITEMS)]
        if all(a is b for a, b in zip(items, v, strict=False)):  # the first items
            return v
        items += v[len(items):]
        if type(v) is tuple:
            return tuple(items)
        make = getattr(type(v), "_make", None)  # a namedtuple
        return make(items) if make is not None else v

    def _container(self, v: Any, depth: int) -> None:
        """Save a list, dict or set's contents once, then swap its first items in place."""
        if id(v) in self.contents:
            return
        self.contents[id(v)] = (v, _contents(v))
        if isinstance(v, list):
            for i, x in enumerate(v[:_MAX_ITEMS]):
                if (new := self.value(x, depth + 1)) is not x:
                    list.__setitem__(v, i, new)
        elif isinstance(v, dict):
            for k, x in list(itertools.islice(v.items(), _MAX_ITEMS)):
                if (new := self.value(x, depth + 1)) is not x:
                    dict.__setitem__(v, k, new)
        else:
            for x in list(itertools.islice(v, _MAX_ITEMS)):
                self.value(x, depth + 1)

    def restore(self) -> list[str]:
        """Put everything saved back; what could not be, as ``"Type.attr: why"``."""
        problems = []
        for obj, state, slots in reversed(self.objects.values()):
            try:
                _put_back(obj, state, slots)
            except Exception as e:  # a slot or __dict__ that refuses the write
                problems.append(f"{type(obj).__name__}: {e}")
        for c, saved in self.contents.values():
            if _changed(c, saved):
                try:
                    _refill(c, saved)
                except Exception as e:
                    problems.append(f"a {type(c).__name__} held by the model: {e}")
        return problems

    def leaks(self) -> list[str]:
        """Where a fake of this trace (or a fake ``.grad``) is still held, as paths."""
        found: list[str] = []
        seen: set[int] = set()

        def look(v: Any, path: str, depth: int) -> None:
            if isinstance(v, torch.Tensor):
                if self.fake.leaked(v):
                    found.append(path)
                elif (not isinstance(v, FakeTensor) and v.is_leaf and v.requires_grad
                      and self.fake.leaked(v.grad)):  # a user's fake keeps its gradient
                    found.append(f"{path}.grad")
                return
            # one level past what is saved, so a container just out of reach is named
            if depth > _MAX_DEPTH + 1 or id(v) in seen or id(v) in self.objects:
                return
            seen.add(id(v))
            if isinstance(v, dict):
                for k, x in itertools.islice(v.items(), _MAX_ITEMS):
                    look(x, f"{path}[{k!r}]", depth + 1)
            elif isinstance(v, (list, tuple, set)):
                for i, x in enumerate(_items(v)):
                    look(x, f"{path}[{i}]", depth + 1)
            elif _is_plain(v):
                attributes(v, path, depth)

        def attributes(obj: Any, path: str, depth: int) -> None:
            state, slots = _attributes(obj)
            for k, v in itertools.chain((state or {}).items(), slots.items()):
                look(v, f"{path}.{k}", depth + 1)

        for obj, _state, _slots in self.objects.values():
            attributes(obj, type(obj).__name__, 0)
        return found


class _Unwatched(threading.local):
    depth = 0


_UNWATCHED = _Unwatched()
# torch's own, for code that must not see the step's wrapped ones (_watch_module_writes)
_SETATTR, _DELATTR = nn.Module.__setattr__, nn.Module.__delattr__


@contextlib.contextmanager
def unwatched(writes: bool = False) -> Iterator[None]:
    """Modules made or written inside are not the step's (the compiler's own graph
    modules, when a compiled graph compiles its backward inside the step). With
    ``writes``, ``nn.Module.__setattr__``/``__delattr__`` are torch's own inside: dynamo
    traces through them, and the step's wrappers would be graph breaks of their own."""
    _UNWATCHED.depth += 1
    saved = nn.Module.__setattr__, nn.Module.__delattr__
    if writes:
        nn.Module.__setattr__, nn.Module.__delattr__ = _SETATTR, _DELATTR  # type: ignore[method-assign]
    try:
        yield
    finally:
        _UNWATCHED.depth -= 1
        nn.Module.__setattr__, nn.Module.__delattr__ = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def _watch_module_writes(swap: _Swap) -> Iterator[None]:
    """Save and swap a module the step writes to before the write lands.

    A module reached through a global and run via ``.forward`` fires no hook and is
    found by no search; its first write is seen here, however it was reached.
    ``nn.Module.__setattr__``/``__delattr__`` are wrapped for the step (plain attributes
    bypass the registration hooks); ``register_buffer`` and friends have global hooks.
    """
    setattr_, delattr_ = nn.Module.__setattr__, nn.Module.__delattr__

    def __setattr__(self: nn.Module, name: str, value: Any) -> None:
        swap.touch(self)
        setattr_(self, name, value)

    def __delattr__(self: nn.Module, name: str) -> None:
        swap.touch(self)
        delattr_(self, name)

    handles = []
    try:
        for register in (_module.register_module_buffer_registration_hook,
                         _module.register_module_parameter_registration_hook,
                         _module.register_module_module_registration_hook):
            handles.append(register(swap.touch))
        nn.Module.__setattr__ = __setattr__  # type: ignore[method-assign]
        nn.Module.__delattr__ = __delattr__  # type: ignore[method-assign]
        yield
    finally:
        nn.Module.__setattr__ = setattr_  # type: ignore[method-assign]
        nn.Module.__delattr__ = delattr_  # type: ignore[method-assign]
        for handle in handles:
            handle.remove()


class _RealLeaves(TorchDispatchMode):
    """Watches the real tensors that reach an op of the fake step (and lets dynamo compile
    under it: it then sees the compiled graphs' ops when they run).

    A leaf that requires grad has its ``.grad`` noted and hidden at its first op (in the
    forward, before backward could touch it: the step starts from no gradient, as a
    traced step does, and backward cannot accumulate a fake into the real gradient).
    An op that writes into a real tensor is refused: everything the trace could swap is
    fake, so the tensor is the user's own (a global), and the fake mode would write it.
    """

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __init__(self, watch: Watch | None = None) -> None:
        super().__init__()
        self.grads: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self.used: set[int] = set()  # ids of the real leaves an op of the step read
        self._writes: dict[Any, tuple[int | str, ...]] = {}
        self.watch = watch

    supports_higher_order_operators = True  # passed on whole (flex_attention)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func.namespace not in ("prim", "higher_order"):
            self._hide_grads(args, kwargs)
            self._refuse_real_writes(func, args, kwargs)
        out = func(*args, **kwargs)
        if self.watch is not None:
            for t in out if isinstance(out, (list, tuple)) else (out,):
                self.watch.add(t)
        return out

    def _hide_grads(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Note and hide the ``.grad`` of each real leaf requiring grad, at its first op."""
        # ATen passes tensors as arguments or lists of them (foreach ops): a flat scan is
        # enough there, and cheaper than a pytree flatten on every op
        flat = [t for a in args for t in (a if isinstance(a, (list, tuple)) else (a,))]
        for t in flat + (tree_flatten(kwargs)[0] if kwargs else []):
            if (isinstance(t, torch.Tensor) and t.requires_grad and id(t) not in self.used
                    and not isinstance(t, FakeTensor) and t.is_leaf):
                self.used.add(id(t))
                self.grads.setdefault(id(t), (t, t.grad))
                t.grad = None

    def _refuse_real_writes(self, func: Any, args: tuple[Any, ...],
                            kwargs: dict[str, Any]) -> None:
        """Raise if ``func`` writes in place into a real tensor (the user's own data)."""
        if func not in self._writes:
            self._writes[func] = tuple(
                arg.name if arg.kwarg_only else i
                for i, arg in enumerate(func._schema.arguments)
                if arg.alias_info is not None and arg.alias_info.is_write)
        for key in self._writes[func]:
            value = kwargs.get(key) if isinstance(key, str) else (
                args[key] if key < len(args) else None)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor):
                    raise FakeModeError(
                        f"fake=True: {func} writes in place into a real tensor of shape "
                        f"{tuple(t.shape)} that the trace could not swap for a fake (it "
                        "is neither reachable from the callable nor held by a module "
                        "the step called: a global?); the write would change your "
                        "data. Keep it on a module or object the callable holds, pass "
                        "it as an argument, or trace with fake=False.")

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


@dataclass
class FakeStep:
    """What :func:`fake_step` hands the step: the fake inputs, and whether the optimizer
    was switched to its foreach kernels (PyTorch's CUDA default); after the step, the
    check for fakes that outlived it (:meth:`check_survivors`)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    foreach: bool
    survivors: _Survivors | None = None

    def check_survivors(self) -> None:
        """Raise :class:`FakeModeError` naming where fakes of the step are still held.

        Call it once the caller holds no fake of the step (``args``/``kwargs`` are dropped
        here first)."""
        self.args, self.kwargs = (), {}
        survivors, self.survivors = self.survivors, None
        if survivors is not None:
            survivors.check()


class _Survivors:
    """The fakes a step made that are still alive, and the error that names them."""

    def __init__(self, watch: Watch, mode: FakeTensorMode, kept: set[int] | None) -> None:
        self.watch, self.mode, self.kept = watch, mode, kept

    def check(self) -> None:
        if self.kept is None:  # the user's own fake mode: its fakes are the user's
            return
        # a fake held only by what has no name (an outer capture's autograd hooks, which
        # go with it) is no user state; one held by a name is
        held = {id(t): holders(t) for t in self.watch.alive(self.mode, self.kept)}
        places = sorted({where for names in held.values() for where in names})
        if not places:
            return
        count = sum(1 for names in held.values() if names)
        raise FakeModeError(
            f"fake=True: {count} fake tensor(s) of the step outlived it, held by "
            + "; ".join(places[:8]) + (f" and {len(places) - 8} more" if len(places) > 8
                                      else "")
            + ". The step stored them where the trace cannot put things back (a cache, a "
            "hook's list, a global object): they are still there, and a real forward "
            "that reads them would get fakes. Clear them (e.g. cache_clear(), empty the "
            "list), or trace with fake=False.")


@contextlib.contextmanager
def fake_step(model: Any, optimizer: torch.optim.Optimizer | None,
              args: tuple[Any, ...], kwargs: dict[str, Any],
              ) -> Iterator[FakeStep]:
    """Run the body on fakes of ``model``/``optimizer``/inputs; yield the fake inputs.

    The fake mode is entered here: the user's own ``FakeTensorMode`` when one is active
    (a second mode would meet its tensors: "Mixing fake modes"), else a new one. An
    optimizer whose ``foreach`` is left to PyTorch runs its foreach kernels, as PyTorch's
    default does for CUDA tensors (on CPU tensors it loops over the parameters).
    """
    mode = _active_fake_mode() or FakeTensorMode(allow_non_fake_inputs=True)
    fake = _Faker(mode)
    swap = _Swap(fake, skip={id(optimizer)} if optimizer is not None else set())
    leaves = _RealLeaves(fake.watch)
    fake_optimizer = _FakeOptimizer(optimizer, fake)
    step = FakeStep((), {}, False)
    try:
        modules, objects = _reach(model, deep=True)
        for m in modules:
            swap.module(m)
        for obj in objects:
            swap.object(obj, 0)
        fake_optimizer.swap(leaves, mode)
        fargs, fkwargs = tree_map(fake, (args, kwargs))
        fake.before_step = False
        step = FakeStep(fargs, fkwargs, fake_optimizer.foreach)
        del fargs, fkwargs
        with _stepping(swap, mode, leaves):
            yield step
        fake_optimizer.check(leaves)
    finally:
        leaves.restore()
        problems = swap.restore()
        fake_optimizer.restore()
        problems += [f"{where} still holds a fake tensor" for where in swap.leaks()]
        if problems:
            raise FakeModeError(
                "fake=True could not put the model back as it was: "
                + "; ".join(problems[:8]) + (f" and {len(problems) - 8} more"
                                            if len(problems) > 8 else "")
                + ". The step stored tensors deeper than the trace saves (nested "
                "containers or objects); fix those by hand, or trace with fake=False.")
        # the trace's own references go; what is still alive is held by something else
        step.survivors = _Survivors(fake.watch, mode, fake.kept if mode is not
                                    _active_fake_mode() else None)
        fake.memo.clear()


@contextlib.contextmanager
def _stepping(swap: _Swap, mode: FakeTensorMode, leaves: _RealLeaves) -> Iterator[None]:
    """What watches the step: the module hooks that swap a module at its first call or
    write, the fake mode, the real-leaf watch and the refusal of ``.numpy()``."""
    hook = nn.modules.module.register_module_forward_pre_hook(swap.touch)
    try:
        with _watch_module_writes(swap), mode, leaves, _NoValues():
            yield
    finally:
        hook.remove()


class _FakeOptimizer:
    """An optimizer's groups and state swapped for fakes for the step, then put back."""

    def __init__(self, optimizer: torch.optim.Optimizer | None, fake: _Faker) -> None:
        self.optimizer, self.fake = optimizer, fake
        self.groups: list[dict[str, Any]] = []
        self.saved_groups: list[dict[str, Any]] = []
        self.saved_state: Any = None
        self.foreach = False

    def swap(self, leaves: _RealLeaves, mode: FakeTensorMode) -> None:
        """Save the groups and state, swap in fakes, and warm a stateless one up."""
        optimizer, fake = self.optimizer, self.fake
        if optimizer is None:
            return
        self.groups = list(optimizer.param_groups)
        self.saved_groups = [dict(g) for g in self.groups]
        self.saved_state = optimizer.state
        # the optimizer's own parameters are checked whether or not an op saw them
        leaves.grads.update({id(p): (p, p.grad) for g in self.groups for p in g["params"]
                             if not isinstance(p, FakeTensor)})
        new_state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for p, s in self.saved_state.items():
            new_state[fake(p)] = {k: fake(v) for k, v in s.items()}
        for g in optimizer.param_groups:
            g["params"] = [fake(p) for p in g["params"]]
        self.foreach = as_on_cuda(optimizer)
        optimizer.state = new_state
        if not self.saved_state:
            _warm_up(optimizer, mode)

    def check(self, leaves: _RealLeaves) -> None:
        """Refuse a step that used the optimizer's parameters as real tensors."""
        missed = len(leaves.used & {id(p) for g in self.saved_groups for p in g["params"]})
        if missed:
            raise FakeModeError(
                f"fake=True: the step used {missed} of the optimizer's parameters as "
                "real tensors (their module was neither the callable, reachable from "
                "it, nor called as a module), so the fake optimizer step would miss "
                "them. Pass the nn.Module itself, a bound method or functools.partial "
                "of it, or a function that calls the module; or trace with fake=False.")

    def restore(self) -> None:
        optimizer = self.optimizer
        if optimizer is None or self.saved_state is None:
            return
        optimizer.param_groups[:] = self.groups
        for g, saved in zip(self.groups, self.saved_groups, strict=True):
            g.clear()
            g.update(saved)
        optimizer.state = self.saved_state


def as_on_cuda(optimizer: torch.optim.Optimizer) -> bool:
    """Set ``foreach=True`` in the groups that leave it to PyTorch (``foreach=None``, not
    fused): PyTorch's default on CUDA tensors (``torch/optim/optimizer.py``,
    ``_default_to_fused_or_foreach``), where on CPU tensors it runs a per-parameter loop.
    Returns whether a group was changed; the caller restores the groups."""
    changed = False
    for group in optimizer.param_groups:
        if "foreach" in group and group["foreach"] is None and not group.get("fused"):
            group["foreach"] = True
            changed = True
    return changed


_SCALAR_FACTORIES = {torch.ops.aten.zeros.default: 0.0, torch.ops.aten.ones.default: 1.0}


class _ScalarConstants(TorchDispatchMode):
    """0-dim ``zeros``/``ones``/``full`` made as ``torch.tensor(value)``: the fake mode keeps
    the value of a tensor made that way (its ``constant``), and in-place updates keep it, so
    an optimizer whose step reads its own scalar state (ASGD's ``mu.item()``) runs fake."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        value = _SCALAR_FACTORIES.get(func)
        if func is torch.ops.aten.full.default and len(args) > 1:
            value = args[1]
        if value is not None and args and list(args[0]) == [] and isinstance(
                value, (int, float, bool)):
            return torch.tensor(value, dtype=kwargs.get("dtype") or torch.get_default_dtype(),
                                device=kwargs.get("device") or "cpu")
        return func(*args, **kwargs)


def _warm_up(optimizer: torch.optim.Optimizer, mode: FakeTensorMode) -> None:
    """Take one unrecorded fake step so the traced step is a steady-state one.

    Bookkeeping: no outer mode sees its ops, and no step hook runs (an outer capture's
    would count it as an optimizer step; the user's are for the user's steps).
    """
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    step: Callable[..., Any] = type(optimizer).step
    # Optimizer.__init__ wraps the class's step with the hook runner and marks it
    unhooked = step.__wrapped__ if getattr(step, "hooked", False) else None  # type: ignore[attr-defined]
    try:
        with _disable_current_modes(), mode, _ScalarConstants():
            for p in params:
                p.grad = torch.zeros_like(p)
            if unhooked is not None:
                unhooked(optimizer)
            else:
                optimizer.step()
    except DATA_DEPENDENT as e:
        raise FakeModeError(
            f"fake=True: {type(optimizer).__name__}.step() reads tensor values ({e}: an "
            ".item() on its state or on a parameter's norm), which fake tensors do not "
            "have. Trace with real tensors (fake=False) at a size that fits this machine") \
            from e
    finally:
        for p in params:
            p.grad = None
