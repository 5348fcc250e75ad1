"""Fake tensors that outlive a fake trace, and where they are held.

A fake step swaps what the callable reaches for fakes and puts it back (see
:mod:`roofline.tracing.fake`), but a step can store a tensor anywhere: a
``functools.lru_cache`` of a mask factory, a list a forward hook appends to, an attribute
of a global object. The user's next real forward would then meet a fake. So every fake the
trace makes is watched by a weak reference; once the trace has dropped its own references,
one still alive is held by something outside the trace, and :func:`holders` names it from
the garbage collector's referrers (a module global, an lru cache, an object's attribute, a
variable a closure holds), so the trace can refuse to claim the model is as it was.
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

#: How far up the chain of referrers :func:`holders` looks for a name.
_DEPTH = 5


class Watch:
    """Weak references to the fakes a trace made, and which of them are still alive."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref[torch.Tensor]] = []

    def add(self, t: Any) -> None:
        if isinstance(t, FakeTensor):
            self.refs.append(weakref.ref(t))

    def alive(self, mode: Any, kept: set[int]) -> list[torch.Tensor]:
        """The watched fakes of ``mode`` still alive after a full collection (not the
        ones in ``kept``: the user's own)."""
        if torch.is_autocast_enabled() or torch.is_autocast_enabled("cpu"):
            torch.clear_autocast_cache()  # its casts of the fake parameters die with it
        # A collection only frees: with no watched fake alive now, none is after one. It
        # is skipped then, since a full collection costs time in the size of the heap.
        if self._alive(mode, kept):
            gc.collect()
        found = self._alive(mode, kept)
        self.refs.clear()
        return found

    def _alive(self, mode: Any, kept: set[int]) -> list[torch.Tensor]:
        found: dict[int, torch.Tensor] = {}
        for ref in self.refs:
            t = ref()
            if t is not None and getattr(t, "fake_mode", None) is mode and id(t) not in kept:
                found.setdefault(id(t), t)
        return list(found.values())


def holders(obj: Any) -> list[str]:
    """Where ``obj`` is held, as paths from something with a name (``module.NAME[0]``,
    ``f's functools.lru_cache``, ``the variable 'kept' that g closes over``); empty when
    nothing that holds it has a name (autograd's own bookkeeping, a dispatch mode's)."""
    return sorted(set(_paths(obj, 0, {id(obj)})))


def _paths(obj: Any, depth: int, seen: set[int]) -> list[str]:
    if depth > _DEPTH:
        return []
    if depth and (names := _global_names(obj)):
        return names
    found: list[str] = []
    for ref in gc.get_referrers(obj):
        if id(ref) in seen or isinstance(ref, (types.FrameType, weakref.ref)):
            continue
        seen.add(id(ref))
        found += _through(ref, obj, depth, seen)
    return found


def _through(ref: Any, obj: Any, depth: int, seen: set[int]) -> list[str]:
    """The paths to ``obj`` through one referrer ``ref``."""
    if isinstance(ref, types.CellType):
        return _closures(ref)
    if type(ref).__name__ == "_lru_cache_wrapper":
        return [f"{ref.__module__}.{ref.__qualname__}'s functools.lru_cache"]
    if isinstance(ref, list):
        at = next((i for i, v in enumerate(ref) if v is obj), None)
        return [] if at is None else [f"{p}[{at}]" for p in _paths(ref, depth + 1, seen)]
    if isinstance(ref, dict):
        return _in_dict(ref, obj, depth, seen)
    if isinstance(ref, tuple):
        return _paths(ref, depth + 1, seen)
    attributes = getattr(ref, "__dict__", None)  # an object holding it as an attribute
    if isinstance(attributes, dict) and not isinstance(ref, types.ModuleType):
        return [f"{p}.{key}" for key, value in attributes.items() if value is obj
                for p in (_paths(ref, depth + 1, seen) or [f"a {type(ref).__name__}"])]
    return []


def _in_dict(ref: dict[Any, Any], obj: Any, depth: int, seen: set[int]) -> list[str]:
    """The paths to ``obj`` through a dict: an object's attributes, or a dict itself (a
    module's globals are found by name)."""
    key = next((k for k, v in ref.items() if v is obj), None)
    if key is None or _is_module_dict(ref):
        return []
    owners = [o for o in gc.get_referrers(ref) if getattr(o, "__dict__", None) is ref]
    if owners:
        return [f"{p}.{key}" for p in _paths(owners[0], depth + 1, seen)] or \
            [f"a {type(owners[0]).__name__}'s attribute {key!r}"]
    return [f"{p}[{key!r}]" for p in _paths(ref, depth + 1, seen)]


def _closures(cell: types.CellType) -> list[str]:
    found = []
    for cells in gc.get_referrers(cell):
        if not isinstance(cells, tuple):
            continue
        for fn in gc.get_referrers(cells):
            if isinstance(fn, types.FunctionType) and fn.__closure__ is cells:
                var = fn.__code__.co_freevars[cells.index(cell)]
                found.append(f"the variable {var!r} that {fn.__qualname__} closes over")
    return found


def _is_module_dict(d: dict[str, Any]) -> bool:
    return any(d is getattr(m, "__dict__", None) for m in list(sys.modules.values()))


def _global_names(obj: Any) -> list[str]:
    names = []
    for module in list(sys.modules.values()):
        for key, value in list(getattr(module, "__dict__", {}).items()):
            if value is obj:
                names.append(f"{module.__name__}.{key}")
    return names
