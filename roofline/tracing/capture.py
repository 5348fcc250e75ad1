"""Capture: run PyTorch code under a dispatch mode and record every ATen op.

The recorder sits below autograd and autocast, so backward and optimizer ops are
the real kernels (not "2x forward") and carry the dtype they ran in. Modules are
attributed with :class:`torch.utils.module_tracker.ModuleTracker`, phases with
autograd's graph-task id and the optimizer's global step hooks.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch
from torch._ops import HigherOrderOperator
from torch.autograd.graph import register_multi_grad_hook
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.module_tracker import ModuleTracker

from roofline._errors import RooflineWarning, warn
from roofline.tracing import collectives as _collectives
from roofline.tracing import formulas as _formulas  # noqa: F401  (registers the formulas)
from roofline.tracing import higher_order as _higher
from roofline.tracing.norms import recorded_whole
from roofline.tracing.ops import OpInfo, lookup, nbytes
from roofline.tracing.records import (
    STORAGE_KINDS,
    Category,
    Collective,
    OpRecord,
    Storage,
    Trace,
    is_backward_kernel,
)

_SKIPPED_NAMESPACES = {"prim", "profiler"}
_DTENSOR_MODULE = "torch.distributed.tensor"


class Schema:
    """What the capture reads from an op's schema, once per overload.

    Which arguments the op writes (in-place: read + write; ``out=``: write only), the
    argument names and defaults (to hand formulas their arguments by name), and whether
    the op is a gradient kernel (for ops the registry does not know).
    """

    __slots__ = ("backward", "defaults", "inplace", "names", "out")

    def __init__(self, func: Any) -> None:
        self.inplace: list[tuple[int | str, bool]] = []
        self.out: set[str] = set()
        arguments = func._schema.arguments
        self.names = tuple(arg.name for arg in arguments)
        self.defaults = {arg.name: arg.default_value for arg in arguments
                         if arg.has_default_value()}
        self.backward = is_backward_kernel(func._schema.name)
        for i, arg in enumerate(arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            if arg.kwarg_only:
                self.out.add(arg.name)
                self.inplace.append((arg.name, True))
            else:
                self.inplace.append((i, False))

    def touched(self, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
                ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The distinct tensors a call reads (an ``out=`` argument is not read) and the
        ones it writes (in place, ``out=``, and its outputs)."""
        written: list[torch.Tensor] = []
        for key, _write_only in self.inplace:
            value = kwargs.get(key) if isinstance(key, str) else (
                args[key] if key < len(args) else None)
            written += _tensors(value)
        read_kwargs = ({k: v for k, v in kwargs.items() if k not in self.out} if self.out
                       else kwargs)
        return (_unique(_tensors(args) + _tensors(read_kwargs)),
                _unique(written + _tensors(out)))

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by schema name, defaults filled in."""
        bound = dict(self.defaults)
        bound.update(zip(self.names, args, strict=False))
        bound.update(kwargs)
        return bound


def _local(t: Any) -> Any:
    """The tensor whose storage holds ``t``'s data on this rank: a DTensor's local shard
    (its own storage reports the global size, which no rank holds), else ``t``."""
    local = getattr(t, "_local_tensor", None)
    return local if isinstance(local, torch.Tensor) else t


def _tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _unique(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    seen: set[int] = set()
    out = []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def _has_decomposition(func: Any) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), torch._C.DispatchKey.CompositeImplicitAutograd)
    except RuntimeError:  # ops outside the dispatcher (custom Python ops)
        return False


class _Tracker(ModuleTracker):
    """torch's ModuleTracker, with two corrections to where backward ops are attributed.

    1. A module that returns one of its inputs unchanged (``Dropout(p=0)`` returns its input
       itself, ``nn.Identity``) got an "enter in backward" hook on that tensor after the
       "leave in backward" hook its pre-hook had put on the same tensor: in backward it was
       left, then entered, and never left again, and every later backward op of the step was
       attributed to it. Outputs that are inputs get no enter hook here.
    2. ``parents`` is a set, and the deepest name is not always the module running.
       Siblings that share an input (the q, k, v projections of attention; w1 and w3 of a
       SwiGLU MLP) all stay entered in backward until that input's gradient is complete, and
       ranking them by name gave all their backward ops to one of them. ``order`` holds the
       epoch each module was entered in: modules entered with no op in between (a parent and
       the child whose output it returns, or a parent and its first child in forward) share
       one, and the deepest of them runs; a module entered after ops ran is running now.
    3. A module shared by two parents (one ``nn.Linear`` held by ``a`` and ``b``) has one
       name in torch's tracker, the last path it was registered under, so one parent got
       every call. Here each call is named by the path it was called through: the running
       module's child of that name, as fvcore and ``FlopCounterMode`` attribute it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.order: dict[str, int] = {}
        self.entries = 0  # modules entered so far (a cache key for the recorder)
        self.epoch = 0
        self.ran = False  # an op was recorded since the last module was entered
        self._calls: list[tuple[Any, str]] = []  # (module, name) of each forward running
        self._children: dict[int, dict[int, str]] = {}  # id(parent) -> id(child) -> name

    def _call_name(self, mod: Any) -> str:
        """The path ``mod`` is called through: its name under the running module when it is
        that module's child, else its registered name."""
        registered = self._get_mod_name(mod)  # type: ignore[misc]
        if not self._calls:
            return str(registered)
        parent, parent_name = self._calls[-1]
        children = self._children.get(id(parent))
        if children is None:
            children = self._children[id(parent)] = {}
            for child_name, child in parent.named_children():
                children.setdefault(id(child), child_name)
        child_name = children.get(id(mod))
        return f"{parent_name}.{child_name}" if child_name is not None else str(registered)

    def _fw_pre_hook(self, mod: Any, input: Any) -> None:
        name = self._call_name(mod)
        self._calls.append((mod, name))
        self._get_append_fn(name, False)()
        tensors = [a for a in tree_flatten(input)[0]
                   if isinstance(a, torch.Tensor) and a.requires_grad]
        if tensors:
            self._hooks.append(  # type: ignore[attr-defined]
                register_multi_grad_hook(tensors, self._get_pop_fn(name, True)))

    def _get_append_fn(self, name: str, is_bw: bool) -> Any:
        enter = super()._get_append_fn(name, is_bw)  # type: ignore[misc]

        def fn(*args: Any) -> None:
            enter(*args)
            if self.ran:
                self.epoch, self.ran = self.epoch + 1, False
            self.entries += 1
            self.order[name] = self.epoch

        return fn

    def _fw_post_hook(self, mod: Any, input: Any, output: Any) -> None:
        name = self._get_mod_name(mod)  # type: ignore[misc]
        if self._calls and self._calls[-1][0] is mod:
            name = self._calls.pop()[1]
        self._get_pop_fn(name, False)()  # type: ignore[misc]
        inputs = {id(t) for t in tree_flatten(input)[0] if isinstance(t, torch.Tensor)}
        tensors = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)
                   and t.requires_grad and id(t) not in inputs]
        if tensors:
            self._hooks.append(  # type: ignore[attr-defined]
                register_multi_grad_hook(tensors, self._get_append_fn(name, True)))


class _Recorder(TorchDispatchMode):
    """Records one :class:`OpRecord` per ATen op (and per higher-order operator call)."""

    supports_higher_order_operators = True

    def __init__(self, tracker: _Tracker, annotate: bool = False) -> None:
        super().__init__()
        self.tracker = tracker
        self.annotate = annotate
        self.ops: list[OpRecord] = []
        self.in_optimizer = 0
        self.after_backward = False  # a backward ran since the last optimizer step
        self._graph_task = -1  # the autograd graph task of the last backward op
        self._schemas: dict[Any, Schema] = {}
        self._info: dict[Any, OpInfo | None] = {}
        self._composite: dict[Any, bool] = {}
        self._storage_ids: dict[int, int] = {}
        self.storages: list[Storage] = []  # by storage id
        self._weak_refs: list[int] = []  # released on exit (see _storage_id)
        self._cast_copies: dict[int, int] = {}  # storage id -> weak ref (see _note_casts)
        self._resized: set[int] = set()  # storages resized in place (see _storage_resizes)
        self._module_cache: tuple[frozenset[str], int, str] = (frozenset(), 0, "")
        self.quiet = 0

    def kernels(self, records: list[OpRecord], backward: bool, root: str) -> None:
        """Append a compiled graph's kernels (:mod:`roofline.tracing.inductor`) at this
        point of the step, in its phase; their modules are under ``root``."""
        phase = "backward" if backward else self._phase()
        for r in records:
            self.ops.append(replace(r, phase=phase,
                                    module=f"{root}.{r.module}" if r.module else root))

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        # dynamo compiles under this mode (a compiled trace: the eager capture disables
        # dynamo) and the mode sees the compiled graphs' ops when they run
        return True

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if self.quiet:  # a compiled graph's ATen ops: its kernels are recorded instead
            return func(*args, **kwargs)
        if isinstance(func, HigherOrderOperator):
            return self._higher_order(func, args, kwargs)
        if func.namespace in _SKIPPED_NAMESPACES:
            return func(*args, **kwargs)
        if _UNRECORDED.depth:  # DTensor's shape inference: not part of the step
            return func(*args, **kwargs)
        if any(t.__module__.startswith(_DTENSOR_MODULE) for t in types):
            # a DTensor op has global shapes: let DTensor run it, and record the local
            # ops (and collectives) it runs on this rank's shards instead
            return NotImplemented
        if func not in self._info:
            self._info[func] = lookup(func)
            self._schemas[func] = Schema(func)
        if self._decomposable(func):
            # under inference_mode composite ops (linear, matmul, reshape...) reach the mode
            # whole: count their ATen decomposition, as autograd would have run it
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        if self.annotate:  # a profiler range per op, named by its index in the trace
            with torch.profiler.record_function(f"roofline::{len(self.ops)}"):
                out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        self._record(func, args, kwargs, out)
        return out

    def _higher_order(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a higher-order operator below this mode and record it as one op."""
        out = func(*args, **kwargs)
        call = _higher.describe(func, args, kwargs, out)
        reads, writes = _unique(call.reads), _unique(call.writes)
        self._append(func, reads, writes, call.category, call.flops or 0,
                     sum(nbytes(t) for t in reads), sum(nbytes(t) for t in writes),
                     call.flops is not None, 1, func.name().endswith("_backward"))
        return out

    def _decomposable(self, func: Any) -> bool:
        if recorded_whole(func):  # the one kernel CUDA runs, not the CPU's composite
            return False
        if func not in self._composite:
            self._composite[func] = _has_decomposition(func)
        return self._composite[func]

    def _storage_id(self, t: torch.Tensor, written: bool) -> int:
        """The storage's id, noting the op (the next record) as its last use.

        Keyed by the StorageImpl's address, which a freed storage hands to the next one;
        a weak reference to each storage seen keeps its StorageImpl (not its data)
        allocated until the capture ends, so one id is one storage for the whole trace.
        """
        try:
            storage = t.untyped_storage()
            key = storage._cdata
        except (NotImplementedError, RuntimeError):  # tensor subclasses without storage
            storage, key = None, id(t)
        sid = self._storage_ids.get(key)
        if sid is None:
            sid = self._storage_ids[key] = len(self.storages)
            if storage is not None:
                self._weak_refs.append(storage._weak_ref())  # type: ignore[arg-type]
            size = storage.nbytes() if storage is not None else t.numel() * t.element_size()
            here = len(self.ops)
            made = written or key in self._resized  # a view of a storage resized just now
            self._resized.discard(key)
            self.storages.append(Storage(int(size), str(t.dtype).removeprefix("torch."),
                                         here, here, made))
        else:
            entry = self.storages[sid]
            if entry.first < 0:  # tagged (an optimizer's state) before an op used it
                entry.first = len(self.ops)
            entry.last = len(self.ops)
        return sid

    def resized(self, key: int) -> None:
        """A storage was resized in place: its next use is a new allocation, made here."""
        self._storage_ids.pop(key, None)
        self._resized.add(key)

    def _note_casts(self, func: Any, args: tuple[Any, ...], writes: list[torch.Tensor]) -> None:
        """Watch the copies autocast's cast cache may hold past their last use.

        ``cached_cast`` (aten/src/ATen/autocast_mode.cpp) keeps the low-precision copy of
        an fp32 leaf that requires grad (a parameter, in training) until the outermost
        autocast region exits (``torch.clear_autocast_cache``), so a second use casts
        nothing. The capture cannot see the region exit, so it watches such copies (an
        ``_to_copy`` of a leaf requiring grad to a lower-precision float) by a weak
        reference: one still alive at an op past its last use is held to that op. A copy
        made outside autocast, or not cached, is freed at its last use as any other.
        """
        if func is not torch.ops.aten._to_copy.default or len(writes) != 1 or not args:
            return
        src, out = args[0], writes[0]
        if not (isinstance(src, torch.Tensor) and src.is_leaf and src.requires_grad
                and src.is_floating_point() and out.is_floating_point()
                and out.element_size() < src.element_size()):
            return
        try:
            ref: int = out.untyped_storage()._weak_ref()  # type: ignore[assignment]
        except (NotImplementedError, RuntimeError):
            return
        self._cast_copies[self.ops[-1].output_ids[0]] = ref

    def _check_casts(self) -> None:
        """Before the next op: copies still alive are live through it, dead ones stop."""
        here = len(self.ops)
        for sid, ref in list(self._cast_copies.items()):
            if torch.UntypedStorage._expired(ref):
                torch.UntypedStorage._free_weak_ref(ref)
                del self._cast_copies[sid]
            else:
                self.storages[sid].held_to = here

    def tag(self, kind: str, tensors: Any) -> None:
        """Say what the storages of ``tensors`` hold (a parameter, a gradient...).

        The earlier kind in :data:`STORAGE_KINDS` wins (a tied weight is a parameter
        however often it is met). A storage no op touched is added with ``first=-1``:
        an unused parameter still takes memory.
        """
        rank = STORAGE_KINDS.index(kind)
        for t in map(_local, tensors):
            if not isinstance(t, torch.Tensor):
                continue
            try:
                key = t.untyped_storage()._cdata
            except (NotImplementedError, RuntimeError):
                key = id(t)
            sid = self._storage_ids.get(key)
            if sid is None:
                sid = self._storage_id(t, written=False)
                self.storages[sid].first = self.storages[sid].last = -1
            entry = self.storages[sid]
            if entry.kind == "temporary" or STORAGE_KINDS.index(entry.kind) > rank:
                entry.kind = kind

    def tag_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Tag an optimizer's parameters, their gradients and its state."""
        params = [p for g in optimizer.param_groups for p in g["params"]]
        self.tag("parameter", params)
        self.tag("gradient", [p.grad for p in params])
        self.tag("optimizer_state", [v for s in optimizer.state.values() for v in s.values()])

    def tag_modules(self, modules: Any) -> None:
        """Tag the parameters, buffers and gradients of ``modules`` (not recursive)."""
        params = [p for m in modules for p in m.parameters(recurse=False)]
        self.tag("parameter", params)
        self.tag("buffer", [b for m in modules for b in m.buffers(recurse=False)])
        self.tag("gradient", [p.grad for p in params])

    def storage_table(self) -> dict[int, Storage]:
        """The storages, with the kinds no tag gave: ``input`` for what existed before
        the step and forward or backward read, ``activation`` for what forward made and
        backward used, else ``temporary``. Releases the weak references."""
        last = len(self.ops) - 1
        for sid, ref in self._cast_copies.items():  # alive at the end: held to the end
            if not torch.UntypedStorage._expired(ref):
                self.storages[sid].held_to = last
            torch.UntypedStorage._free_weak_ref(ref)
        self._cast_copies.clear()
        for entry in self.storages:  # alive only while ops still used it: not held
            if entry.held_to <= entry.last:
                entry.held_to = -1
        for ref in self._weak_refs:
            torch.UntypedStorage._free_weak_ref(ref)
        self._weak_refs.clear()
        ops = self.ops
        for entry in self.storages:
            if entry.kind != "temporary" or entry.first < 0:
                continue
            if not entry.created:  # a scalar the optimizer wraps (torch.tensor(1.0)) is not
                entry.kind = "input" if ops[entry.first].phase != "optimizer" else "temporary"
            elif ops[entry.first].phase == "forward" and ops[entry.last].phase == "backward":
                entry.kind = "activation"
        return dict(enumerate(self.storages))

    def _module(self) -> str:
        """The module running: of those entered and not left, the deepest of the last
        entered (see :class:`_Tracker`)."""
        tracker = self.tracker
        tracker.ran = True
        parents = tracker.parents
        cached, entries, name = self._module_cache
        if parents != cached or entries != tracker.entries:
            active = [p for p in parents if p != "Global"]
            name = max(active, key=lambda p: (tracker.order.get(p, 0), p.count("."), p)) \
                if active else ""
            self._module_cache = (frozenset(parents), tracker.entries, name)
        return name

    def _phase(self) -> str:
        """``optimizer`` inside ``optimizer.step()``, ``backward`` inside autograd's engine.

        Two ops run outside both and are placed by what autograd did around them:

        * the seed of ``loss.backward()`` (``ones_like(loss)``) runs in Python just before
          the engine starts; when a new graph task's first op arrives, the ``ones_like``
          records right before it are relabelled ``backward``;
        * after a backward and until the next optimizer step ends, ops run with grad mode
          off (``clip_grad_norm_`` and the optimizer's own helpers are ``no_grad``) are
          ``optimizer``; a next micro-batch's forward runs with grad mode on.
        """
        if self.in_optimizer:
            return "optimizer"
        task = torch._C._current_graph_task_id()
        if task != -1:
            if task != self._graph_task:
                self._graph_task = task
                for op in reversed(self.ops):
                    if op.name != "aten.ones_like.default" or op.phase == "backward":
                        break
                    op.phase = "backward"
            self.after_backward = True
            return "backward"
        if self.after_backward and not torch.is_grad_enabled():
            return "optimizer"
        return "forward"

    def _record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                out: Any) -> None:
        info, schema = self._info[func], self._schemas[func]
        reads, writes = schema.touched(args, kwargs, out)
        collective = (_collectives.describe(func, args, kwargs, reads, writes)
                      if func.namespace in _collectives.NAMESPACES else None)
        if collective is not None:
            # no FLOPs, HBM bytes or kernels on the compute stream: the link sets its time
            self._append(func, reads, writes, Category.COLLECTIVE, 0, 0, 0, True, 0,
                         schema.backward, collective)
            return
        bound = schema.bind(args, kwargs)
        if info is not None and info.bytes_rule is not None:
            bytes_read, bytes_written = info.bytes_rule(bound, reads, writes)
        else:
            bytes_read = sum(nbytes(t) for t in reads)
            bytes_written = sum(nbytes(t) for t in writes)

        # None: no formula for this op, or none for the dtype it ran in
        flops = (info.count_flops(args, kwargs, bound, out, reads + writes)
                 if info is not None else None)

        self._append(func, reads, writes,
                     info.category if info is not None else Category.UNCOUNTED, flops or 0,
                     int(bytes_read), int(bytes_written), flops is not None,
                     info.kernels if info is not None else 1,
                     info.backward if info is not None else schema.backward)
        if self.ops[-1].category == Category.CONV and (
                layout := _layout_transposes(self.ops[-1], bound, reads + writes)):
            self.ops.append(layout)
        self._note_casts(func, args, writes)

    def _append(self, func: Any, reads: list[torch.Tensor], writes: list[torch.Tensor],
                category: Category, flops: int, bytes_read: int, bytes_written: int,
                counted: bool, kernels: int, backward: bool,
                collective: Collective | None = None) -> None:
        """Append the record of one op (phase, module, dtype and storages found here)."""
        dtype_src = next((t for t in reads if t.is_floating_point()),
                         writes[0] if writes else (reads[0] if reads else None))
        if self._cast_copies:
            self._check_casts()
        phase = self._phase()
        self.ops.append(OpRecord(
            name=str(func) if not isinstance(func, HigherOrderOperator)
            else f"higher_order.{func.name()}",
            category=category,
            phase=phase,
            module=self._module(),
            dtype=str(dtype_src.dtype).removeprefix("torch.") if dtype_src is not None else "",
            flops=flops,
            bytes_read=bytes_read,
            bytes_written=bytes_written,
            counted=counted,
            kernels=kernels,
            input_shapes=tuple(tuple(t.shape) for t in reads),
            output_shapes=tuple(tuple(t.shape) for t in writes),
            input_ids=tuple(self._storage_id(t, False) for t in reads),
            output_ids=tuple(self._storage_id(t, True) for t in writes),
            backward_kernel=backward,
            recompute=phase == "backward" and _recomputing(),
            collective=collective,
            channels_last=any(_channels_last(t) for t in reads),
        ))


_SIXTEEN_BIT = (torch.float16, torch.bfloat16)
_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def _channels_last(t: torch.Tensor) -> bool:
    fmt = _LAST.get(t.dim())
    return fmt is not None and t.is_contiguous(memory_format=fmt) and not t.is_contiguous()


def _layout_transposes(conv: OpRecord, bound: dict[str, Any],
                       tensors: list[torch.Tensor]) -> OpRecord | None:
    """The NCHW <-> NHWC transposes cuDNN runs around a 16-bit channels-first convolution.

    cuDNN's tensor-core convolution kernels work in NHWC; given channels-first tensors it
    transposes each 4-D tensor the convolution reads or writes (NVIDIA's "Tensor Layouts In
    Memory: NCHW vs NHWC", cuDNN performance guide; MosaicML Composer's channels-last
    method card: "every time a convolution ... is called ... cuDNN performs a transpose").
    Each transpose reads and writes its tensor once. Not for a ``channels_last`` model, not
    for depthwise or grouped convolutions (run by channels-first kernels of their own), not
    in fp32 (TF32 kernels exist in NCHW). The analysis costs these only on NVIDIA GPUs.
    """
    if bound.get("groups", 1) != 1:
        return None
    four_d = [t for t in tensors if t.dim() == 4]
    if not four_d or four_d[0].dtype not in _SIXTEEN_BIT or any(
            t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
            for t in four_d):
        return None
    moved = sum(nbytes(t) for t in four_d)
    return OpRecord(
        name="cudnn.nchw_nhwc_transpose", category=Category.LAYOUT, phase=conv.phase,
        module=conv.module, dtype=conv.dtype, flops=0, bytes_read=moved,
        bytes_written=moved, kernels=len(four_d),
        input_shapes=tuple(tuple(t.shape) for t in four_d),
        output_shapes=tuple(tuple(t.shape) for t in four_d),
        backward_kernel=conv.backward_kernel, recompute=conv.recompute)


def _recomputing() -> bool:
    """Whether ``torch.utils.checkpoint`` (non-reentrant) is rerunning a forward in backward.

    It reruns the checkpointed function with grad mode on under its own saved-tensors
    hooks, ``_recomputation_hook``; the top hooks say so. The reentrant variant
    (``use_reentrant=True``) reruns it under no hooks, and is not recognised.
    """
    if not torch.is_grad_enabled():
        return False
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)
    pack = getattr(hooks[0], "__qualname__", "") if hooks else ""
    return pack.startswith("_recomputation_hook.")


class _Unrecorded(threading.local):
    """How deep this thread is in work whose ops belong to no step (see below)."""

    depth = 0
    patched = 0  # captures that hold the patch (nested captures share one)
    original: Any = None


_UNRECORDED = _Unrecorded()


@contextlib.contextmanager
def _dtensor_inference_unrecorded() -> Iterator[None]:
    """Keep DTensor's sharding propagation out of the trace.

    To learn an op's global output shape, DTensor runs the op once more on fake tensors
    of the global shapes (``ShardingPropagator._propagate_tensor_meta_non_cached``); the
    capture's dispatch mode would see those ops as if they ran. While a capture records,
    that method runs with recording paused; it is put back when the capture ends. Nothing
    is patched unless DTensor is imported.
    """
    module = sys.modules.get("torch.distributed.tensor._sharding_prop")
    if module is None:
        yield
        return
    cls = module.ShardingPropagator
    state = _UNRECORDED
    if not state.patched:
        state.original = original = cls._propagate_tensor_meta_non_cached

        def unrecorded(self: Any, *args: Any, **kwargs: Any) -> Any:
            state.depth += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                state.depth -= 1

        cls._propagate_tensor_meta_non_cached = unrecorded
    state.patched += 1
    try:
        yield
    finally:
        state.patched -= 1
        if not state.patched:
            cls._propagate_tensor_meta_non_cached = state.original
            state.original = None


@contextlib.contextmanager
def _storage_resizes(recorder: _Recorder) -> Iterator[None]:
    """Each allocation of a storage that is resized in place is a storage of its own.

    FSDP2 keeps one unsharded tensor per parameter and gives it memory only while it is
    needed: ``storage.resize_(n)`` after the all-gather, ``resize_(0)`` once the layer is
    done (``_fully_shard/_fsdp_param.py``: ``alloc_storage``, ``free_storage``). Those are
    no ATen ops, so ``UntypedStorage.resize_`` is watched while the capture records: a
    resize ends the storage's current entry, and its next use starts a new one, which
    lives from the op that writes it to its last use, as an allocation does.
    """
    original = torch.UntypedStorage.resize_

    def resize_(self: torch.UntypedStorage, size: int) -> Any:
        recorder.resized(self._cdata)
        return original(self, size)

    torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.UntypedStorage.resize_ = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _dynamo_disabled() -> Iterator[None]:
    """Run ``torch.compile``d code eagerly, so its ops are seen once, at ATen level."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        yield
        return
    # eager flex_attention wraps its operator in torch.compile(fullgraph=True), which with
    # dynamo disabled raises "found no compiled frames"; its debug flag calls it directly
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    flag = getattr(flex, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", None)
    try:
        if flag is not None:
            flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True  # type: ignore[union-attr]
        with dynamo.config.patch(disable=True):
            yield
    finally:
        if flag is not None:
            flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = flag  # type: ignore[union-attr]


class Capture:
    """Context manager behind :func:`capture`; ``.trace`` is filled on exit.

    A ``Capture`` records one ``with`` block: entering it again (nested or after it
    finished) raises ``RuntimeError``; call :func:`capture` again for a new trace.
    """

    def __init__(self, meta: dict[str, Any] | None = None, warn: bool = True,
                 annotate: bool = False, compiled: bool = False) -> None:
        self.trace = Trace(meta=dict(meta or {}))
        self._compiled = compiled  # dynamo stays on: the compiled trace's capture
        self._warn = warn
        self._annotate = annotate
        self._stack: contextlib.ExitStack | None = None
        # modules whose parameters and buffers count as such even if no op used them
        self.modules: list[torch.nn.Module] = []
        self._state = "new"  # -> "recording" -> "done"

    def __enter__(self) -> Trace:
        # checked before anything is entered, so a refused entry leaves no mode or hook
        if self._state != "new":
            what = ("is already recording (a Capture cannot be nested in itself)"
                    if self._state == "recording" else "has already recorded its block")
            raise RuntimeError(
                f"this Capture {what}; a Capture is single-use: call roofline.capture() "
                "again for a new trace.")
        stack = contextlib.ExitStack()
        try:
            if not self._compiled:
                stack.enter_context(_dynamo_disabled())
            stack.enter_context(_dtensor_inference_unrecorded())
            tracker = stack.enter_context(_Tracker())
            recorder = _Recorder(tracker, self._annotate)

            def pre(optimizer: torch.optim.Optimizer, *_: Any) -> None:
                recorder.in_optimizer += 1
                recorder.tag_optimizer(optimizer)  # before a step could drop the gradients

            def post(optimizer: torch.optim.Optimizer, *_: Any) -> None:
                recorder.tag_optimizer(optimizer)  # the state a first step made
                recorder.in_optimizer -= 1
                if not recorder.in_optimizer:  # the step consumed the gradients
                    recorder.after_backward = False

            stack.callback(register_optimizer_step_pre_hook(pre).remove)
            stack.callback(register_optimizer_step_post_hook(post).remove)
            stack.enter_context(_storage_resizes(recorder))
            stack.enter_context(recorder)
        except BaseException:
            stack.close()
            raise
        self.recorder = recorder
        self._stack = stack
        self._tracker = tracker
        self._state = "recording"
        return self.trace

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._stack is None:
            raise RuntimeError("Capture.__exit__ without a matching __enter__")
        try:  # the modules that ran still hold the step's tensors (fakes, in a fake step)
            self.recorder.tag_modules([*(m for root in self.modules for m in root.modules()),
                                        *self._tracker._known_modules.keys()])
        finally:
            self._stack.close()
        self._stack = None
        self._state = "done"
        self.trace.ops = self.recorder.ops
        self.trace.storages = self.recorder.storage_table()
        self.trace.info.torch = torch.__version__
        if exc_type is None and self._warn:
            _warn_uncounted(self.trace)


def capture(meta: dict[str, Any] | None = None) -> Capture:
    """Capture every op run inside a ``with`` block (one block per capture).

    Captures nest: an inner capture, or a :func:`roofline.trace` inside the block,
    records its ops and the outer capture records them too, once each (a trace's
    own bookkeeping, such as making fake tensors, is seen by neither).

    Examples
    --------
    >>> model = nn.Linear(64, 10)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> with roofline.capture() as t:
    ...     loss = model(torch.randn(32, 64)).sum(); loss.backward(); opt.step()
    >>> sorted({op.phase for op in t.ops})
    ['backward', 'forward', 'optimizer']
    """
    return Capture(meta)


def _warn_uncounted(trace: Trace) -> None:
    gaps = trace.uncounted
    if not gaps:
        return
    listed = ", ".join(f"{name} x{t.count}" for name, t in list(gaps.items())[:8])
    more = f" and {len(gaps) - 8} more" if len(gaps) > 8 else ""
    share = sum(t.bytes for t in gaps.values()) / max(trace.total_bytes, 1)
    warn(
        f"{sum(t.count for t in gaps.values())} op calls ran without a FLOP formula and are "
        f"counted as 0 FLOPs (their bytes, {share:.1%} of the total, are counted): "
        f"{listed}{more}. See trace.uncounted.",
        RooflineWarning)


__all__ = ["Capture", "capture"]
