"""Trace one rank of a data- or tensor-parallel step, without a cluster.

``roofline.trace(model, *inputs, train=True, parallel="ddp", gpus=8)`` runs the step as
rank 0 of a world of 8 on this machine: torch.distributed's fake process group (the
``"fake"`` backend of ``torch.testing._internal.distributed.fake_pg``: every collective
returns at once, moving nothing) stands in for the others, and fake tensors for the
data. The model is wrapped as the user would wrap it, by torch itself:

* ``"ddp"``: ``DistributedDataParallel`` (its C++ reducer: 25 MiB buckets, a first bucket
  of 1 MiB, rebuilt in the order gradients became ready after one step);
* ``"fsdp"``: FSDP2's ``fully_shard`` on each block (the children of every
  ``nn.ModuleList``, else the root's children that hold parameters) and on the root;
* ``"tp"``: ``parallelize_module`` with a Megatron-style plan: each pair of sibling
  ``nn.Linear`` layers where the first widens (``in < out``) and the second takes its
  output is split column-wise then row-wise; or the plan given as
  ``Parallel("tp", plan={...})``.

The capture records every collective as an op of its own (see
:mod:`roofline.tracing.collectives`), between the compute ops it ran among.

What this module works around, and how:

* DDP's default all-reduce hook expects the work's future to hold the reduced tensor; the
  fake group's future holds None, and the reducer asserts. The wrapper registers
  :func:`fake_allreduce_hook`, which does what the default hook does (divide the bucket
  by the world size, all-reduce it) and returns the bucket. It also counts the buckets,
  so the trace is checked to hold one all-reduce per bucket (nothing missed).
* DDP reads real data at construction (``_verify_param_shape_across_processes``: skipped
  with ``init_sync=False``, there is nothing to verify on one process) and when it
  rebuilds its buckets (it writes the bucket order into an int tensor it then reads):
  that rebuild runs once, after an unrecorded warm-up step, with integer tensors made
  real (:class:`_RealIndices`); the gradient buckets stay fake.
* ``DeviceMesh`` cannot be built under a fake mode (it reads its rank tensor); it is
  built before the step, outside it.

Nothing is left behind: the model is deep-copied with its parameters and buffers as fake
tensors (the user's model, optimizer and tensors are not touched); a process group made
here is destroyed afterwards, and one the user made is used and left as it was.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from roofline.tracing.attention import AttentionAs, AttentionMode
from roofline.tracing.fake import DATA_DEPENDENT, _active_fake_mode, _Faker
from roofline.tracing.records import Trace
from roofline.tracing.tracer import Capture, FakeModeError

#: The parallelisms :func:`roofline.trace` can wrap a model in.
KINDS = ("ddp", "fsdp", "tp")


@dataclass
class Parallel:
    """How to wrap a model for a parallel trace (``parallel=`` of :func:`roofline.trace`).

    Attributes
    ----------
    kind : ``"ddp"``, ``"fsdp"`` or ``"tp"``.
    plan : for ``"tp"``, a ``parallelize_module`` plan (module name -> ``ColwiseParallel()``,
        ``RowwiseParallel()``...); None: the Megatron-style pairs of sibling Linear layers.
    shard : for ``"fsdp"``, the names of the submodules to ``fully_shard`` (the root always
        is); None: the children of every ``nn.ModuleList``, else the root's children.
    bucket_cap_mb : for ``"ddp"``, DDP's ``bucket_cap_mb`` (None: DDP's 25 MiB default and
        its 1 MiB first bucket).
    """

    kind: str
    plan: dict[str, Any] | None = None
    shard: list[str] | None = None
    bucket_cap_mb: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"parallel={self.kind!r}: choose one of {', '.join(KINDS)}")


def as_parallel(parallel: str | Parallel) -> Parallel:
    """``parallel=`` as a :class:`Parallel`."""
    if isinstance(parallel, Parallel):
        return parallel
    if not isinstance(parallel, str):
        raise TypeError(f"parallel= takes 'ddp', 'fsdp', 'tp' or a roofline.Parallel, got "
                        f"{type(parallel).__name__}")
    return Parallel(parallel)


# --- the process group ---------------------------------------------------------------

def _dist() -> Any:
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed: a parallel trace "
                           "needs it")
    return dist


@contextlib.contextmanager
def process_group(gpus: int | None) -> Iterator[int]:
    """The world to trace in: the user's initialised group, else a fake one of ``gpus``.

    Yields the world size. A group made here is destroyed on exit; the user's is left.
    """
    dist = _dist()
    if dist.is_initialized():
        world = dist.get_world_size()
        if gpus is not None and gpus != world:
            raise ValueError(
                f"gpus={gpus}, but the process group already initialised has "
                f"{world} ranks; pass gpus={world} (or none), or trace outside it")
        yield world
        return
    if gpus is None:
        raise ValueError("a parallel trace needs gpus=N (the world size) when no process "
                         "group is initialised; roofline then plays rank 0 of a fake group "
                         "of N")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus= must be a whole number >= 1, got {gpus!r}")
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=gpus)
    try:
        yield gpus
    finally:
        dist.destroy_process_group()


# --- DDP -------------------------------------------------------------------------------

@dataclass
class _Buckets:
    """The gradient buckets DDP handed to the comm hook: bytes each, in order."""

    sizes: list[int] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)


def fake_allreduce_hook(state: Any, bucket: Any) -> torch.futures.Future[torch.Tensor]:
    """A DDP comm hook that does what DDP's default one does, on any process group.

    Divides the bucket by the world size and all-reduces it (``dist.all_reduce``, which
    the capture records), then returns the bucket in a completed future. The default hook
    returns the work's own future, which the fake process group leaves empty; register
    this one (``ddp.register_comm_hook(None, fake_allreduce_hook)``) to trace your own DDP
    model on a fake group. ``state`` may be a :class:`_Buckets` that notes each bucket.
    """
    dist = _dist()
    buffer = bucket.buffer()
    if isinstance(state, _Buckets):
        state.sizes.append(buffer.numel() * buffer.element_size())
        state.dtypes.append(str(buffer.dtype).removeprefix("torch."))
    buffer.div_(dist.get_world_size())
    dist.all_reduce(buffer)
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future


def _annotate_hook() -> None:
    """DDP checks a hook's annotations (``GradBucket`` in, ``Future[Tensor]`` out) as
    objects; this module's are strings (``from __future__ import annotations``)."""
    dist = _dist()
    fake_allreduce_hook.__annotations__.update(
        state=object, bucket=dist.GradBucket, **{"return": torch.futures.Future[torch.Tensor]})


class _RealIndices(TorchDispatchMode):
    """Integer tensors made real: the bucket order DDP's reducer writes and reads back.

    Under it, factory ops of integer dtype run with no mode (real, a few bytes each);
    every other op goes on to the fake mode.
    """

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        dtype = kwargs.get("dtype")
        if (func in (torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default)
                and dtype is not None and not dtype.is_floating_point
                and not dtype.is_complex):
            with _disable_current_modes():
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def _ddp(model: nn.Module, options: Parallel, buckets: _Buckets) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    _annotate_hook()
    with _RealIndices():
        wrapped = DistributedDataParallel(
            model, init_sync=False,
            bucket_cap_mb=options.bucket_cap_mb)  # type: ignore[arg-type]  # None: 25 MiB
    wrapped.register_comm_hook(buckets, fake_allreduce_hook)
    return wrapped


def _rebuild_ddp_buckets(wrapped: nn.Module) -> None:
    """DDP's one-off bucket rebuild (in gradient order), done before the traced step."""
    reducer = getattr(wrapped, "reducer", None)
    if reducer is None:
        return
    with _RealIndices():
        if reducer._rebuild_buckets():
            wrapped._has_rebuilt_buckets = True  # type: ignore[assignment]  # as _pre_forward


# --- FSDP and TP -----------------------------------------------------------------------

def _fsdp_targets(model: nn.Module, names: list[str] | None) -> list[nn.Module]:
    """The submodules to ``fully_shard`` before the root, innermost last."""
    table = dict(model.named_modules())
    if names is not None:
        missing = [n for n in names if n not in table]
        if missing:
            raise ValueError(f"Parallel('fsdp', shard=...): no submodule named {missing} in "
                             f"{type(model).__name__}")
        return [table[n] for n in names]
    blocks = [child for m in model.modules() if isinstance(m, nn.ModuleList)
              for child in m.children()]
    if blocks:
        return blocks
    return [c for c in model.children() if any(True for _ in c.parameters())]


def _fsdp(model: nn.Module, options: Parallel, mesh: Any) -> nn.Module:
    from torch.distributed.fsdp import fully_shard

    from roofline.tracing.ops import lookup, register_no_flops

    # FSDP2's own copy kernels (pack the shards to gather, unpack the gathered buffer,
    # pack the gradients to reduce-scatter): data movement, no FLOPs
    copies = [torch.ops.fsdp.all_gather_copy_in, torch.ops.fsdp.split_with_sizes_copy,
              torch.ops.fsdp.chunk_cat]
    new = [op for op in copies if lookup(op.default) is None]
    if new:
        register_no_flops("memory", *new)

    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(f"FSDP cannot wrap {type(model).__name__}: it has no parameters "
                         "that require grad (nothing to shard)")
    try:
        for sub in _fsdp_targets(model, options.shard):
            fully_shard(sub, mesh=mesh)
        fully_shard(model, mesh=mesh)
    except (ValueError, TypeError, RuntimeError, AssertionError) as e:
        raise ValueError(f"FSDP (fully_shard) cannot wrap {type(model).__name__}: {e}") from e
    return model


def tp_plan(model: nn.Module) -> dict[str, Any]:
    """The Megatron-style plan of a model: sibling Linear pairs (widen, then narrow).

    In each module, consecutive ``nn.Linear`` children ``a``, ``b`` with
    ``a.in_features < a.out_features == b.in_features`` (an MLP's up and down
    projections) become ``a: ColwiseParallel()``, ``b: RowwiseParallel()``: one all-reduce
    in forward, one in backward per pair.
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan: dict[str, Any] = {}
    for prefix, module in model.named_modules():
        linears = [(name, c) for name, c in module.named_children()
                   if any(True for _ in c.parameters())]
        for (na, a), (nb, b) in itertools.pairwise(linears):
            if (isinstance(a, nn.Linear) and isinstance(b, nn.Linear)
                    and a.in_features < a.out_features == b.in_features
                    and f"{prefix}.{na}".lstrip(".") not in plan):
                plan[f"{prefix}.{na}".lstrip(".")] = ColwiseParallel()
                plan[f"{prefix}.{nb}".lstrip(".")] = RowwiseParallel()
    return plan


def _tp(model: nn.Module, options: Parallel, mesh: Any, world: int) -> nn.Module:
    from torch.distributed.tensor.parallel import parallelize_module

    plan = options.plan if options.plan is not None else tp_plan(model)
    if not plan:
        raise ValueError(
            f"tensor parallel: found no pair of sibling Linear layers to split in "
            f"{type(model).__name__} (an MLP's up- then down-projection); pass the plan: "
            "roofline.Parallel('tp', plan={'mlp.fc1': ColwiseParallel(), 'mlp.fc2': "
            "RowwiseParallel()})")
    for name in plan:
        target = model.get_submodule(name) if name else model
        for width in (getattr(target, "out_features", None), getattr(target, "in_features", None)):
            if isinstance(width, int) and width % world:
                raise ValueError(f"tensor parallel over {world} GPUs: {name} has {width} "
                                 f"features, not divisible by {world}")
    return parallelize_module(model, mesh, plan)


# --- the step --------------------------------------------------------------------------

def split_batch(args: tuple[Any, ...], kwargs: dict[str, Any], world: int,
                ) -> tuple[tuple[Any, ...], dict[str, Any], int]:
    """Rank 0's share of a global batch: every tensor whose first dimension is the batch
    (the first tensor's) cut to ``batch / world`` rows. Returns the inputs and the batch."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
               and t.dim() > 0]
    if not tensors:
        raise ValueError("a data-parallel trace splits the batch of the inputs, but no input "
                         "is a tensor with a batch dimension")
    batch = tensors[0].shape[0]
    if batch % world:
        raise ValueError(
            f"the global batch of {batch} does not split over {world} GPUs (data parallel "
            f"gives each rank batch / {world}); pass a batch divisible by {world}")
    per_rank = batch // world

    def cut(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] == batch:
            return x[:per_rank]
        return x

    with _disable_current_modes():  # views, made before the step: bookkeeping
        args, kwargs = tree_map(cut, (args, kwargs))
    return args, kwargs, batch


def _leading(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The first dimension of the first tensor input (0: none)."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
               and t.dim() > 0]
    return int(tensors[0].shape[0]) if tensors else 0


def _fake_copy(model: nn.Module, fake: _Faker) -> nn.Module:
    """A deep copy of ``model`` whose parameters and buffers are fakes (the model is not
    touched; meta parameters become fake CPU ones)."""
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = fake(p)
    for b in model.buffers():
        memo[id(b)] = fake(b)
    with _disable_current_modes():
        return copy.deepcopy(model, memo)


def _rebuilt_optimizer(optimizer: torch.optim.Optimizer | None,
                       params: list[nn.Parameter]) -> torch.optim.Optimizer | None:
    """The user's optimizer class and defaults, on the wrapped model's parameters."""
    if optimizer is None:
        return None
    import inspect

    accepted = inspect.signature(type(optimizer).__init__).parameters
    defaults = {k: v for k, v in optimizer.defaults.items() if k in accepted}
    return type(optimizer)(params, **defaults)


def _wrapper(fn: Any) -> str | None:
    """The class name of the DDP or FSDP wrapper among the modules ``fn`` holds, if any."""
    from roofline.tracing.fake import modules_of

    for m in modules_of(fn, deep=False):
        kind = type(m).__name__
        if kind == "DistributedDataParallel" or kind.startswith("FSDP"):
            return kind
    return None


def check_not_wrapped(fn: Any) -> None:
    """Refuse a model that is already DDP/FSDP-wrapped with ``parallel=``."""
    if (kind := _wrapper(fn)) is not None:
        raise ValueError(
            f"{kind} is already wrapped: trace it as it is, without parallel= (in its "
            "initialised process group, on real tensors), or pass the unwrapped model "
            "with parallel=")


def check_fake_wrapped(fn: Any) -> None:
    """A model the user wrapped holds its process group's real state: no fake trace."""
    if (kind := _wrapper(fn)) is not None:
        raise FakeModeError(
            f"fake=True cannot trace a model you wrapped in {kind}: its reducer and "
            "shards belong to the real parameters. Trace it with fake=False, or pass "
            "the unwrapped model with parallel='ddp'|'fsdp'|'tp' and gpus=N")


def parallel_step(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                  parallel: str | Parallel, gpus: int | None, train: bool,
                  loss_fn: Callable[[Any], torch.Tensor] | None,
                  optimizer: torch.optim.Optimizer | None,
                  attention: AttentionMode = "fused", rank_inputs: bool = False) -> Trace:
    """Trace rank 0 of ``model`` wrapped for ``parallel`` in a world of ``gpus`` ranks.

    The step runs on fake tensors; the trace's ``meta`` says ``parallel``, ``world_size``,
    ``batch`` (global) and ``rank_batch``, and for DDP ``buckets`` (bytes each). With
    ``rank_inputs`` the inputs are already one rank's share (not split).
    """
    from roofline.tracing.step import run_step

    options = as_parallel(parallel)
    if not isinstance(model, nn.Module):
        raise TypeError(f"parallel= wraps an nn.Module, got {type(model).__name__}")
    check_not_wrapped(model)
    if options.kind in ("ddp", "fsdp") and not train:
        raise ValueError(f"parallel={options.kind!r} traces a training step (its collectives "
                         "are in backward): pass train=True")
    name = type(model).__name__
    with process_group(gpus) as world:
        if options.kind == "tp" or rank_inputs:
            rank_batch = _leading(args, kwargs)
            batch = rank_batch * (world if options.kind != "tp" and rank_batch else 1)
        else:
            args, kwargs, batch = split_batch(args, kwargs, world)
            rank_batch = batch // world
        mesh = None
        if options.kind != "ddp":
            from torch.distributed.device_mesh import init_device_mesh

            with _disable_current_modes():
                mesh = init_device_mesh("cpu", (world,))
        mode = _active_fake_mode() or torch._subclasses.fake_tensor.FakeTensorMode(
            allow_non_fake_inputs=True)
        fake = _Faker(mode)
        copied = _fake_copy(model, fake)
        fargs, fkwargs = tree_map(fake, (args, kwargs))
        buckets = _Buckets()
        with _disable_current_modes(), mode:
            if options.kind == "ddp":
                wrapped = _ddp(copied, options, buckets)
            elif options.kind == "fsdp":
                wrapped = _fsdp(copied, options, mesh)
            else:
                wrapped = _tp(copied, options, mesh, world)
            opt = _rebuilt_optimizer(optimizer, list(wrapped.parameters()))
            # an unrecorded step: DDP's bucket rebuild, the optimizer's state, FSDP's
            # lazy initialisation; the traced step is a steady-state one
            with _RealIndices():
                _run(name, run_step, wrapped, fargs, fkwargs, train, loss_fn, opt)
            if options.kind == "ddp":
                _rebuild_ddp_buckets(wrapped)
            for p in wrapped.parameters():
                p.grad = None
            buckets.sizes.clear()
            buckets.dtypes.clear()
        meta: dict[str, Any] = {"model": name, "train": train, "fake": True,
                                "parallel": options.kind, "world_size": world}
        if batch:
            meta.update(batch=batch, rank_batch=rank_batch)
        cap = Capture(meta, warn=True)
        cap.modules = [wrapped]
        attend = AttentionAs(attention, fake=True)
        with contextlib.ExitStack() as stack:
            stack.enter_context(mode)
            if attention != "as-run":
                stack.enter_context(attend)
            with cap:
                _run(name, run_step, wrapped, fargs, fkwargs, train, loss_fn, opt)
    trace = cap.trace
    if attend.calls or attend.unfused:
        trace.meta.update(attention=attention, attention_calls=attend.calls,
                          attention_unfused=attend.unfused)
    if options.kind == "ddp":
        trace.meta["buckets"] = list(buckets.sizes)
        check_buckets(trace, buckets.sizes)
    return trace


def _run(name: str, run_step: Any, wrapped: nn.Module, args: tuple[Any, ...],
         kwargs: dict[str, Any], train: bool, loss_fn: Any,
         optimizer: torch.optim.Optimizer | None) -> None:
    try:
        run_step(wrapped, args, kwargs, train=train, loss_fn=loss_fn, optimizer=optimizer)
    except DATA_DEPENDENT as e:
        raise FakeModeError(
            f"{name} ran an op whose result depends on tensor values ({e}); a parallel "
            "trace runs on fake tensors, which have none") from e


def check_buckets(trace: Trace, sizes: list[int]) -> None:
    """Every gradient bucket DDP handed to its comm hook is an all-reduce in the trace.

    Raises RuntimeError naming the difference: a collective the capture missed would
    make the communication cost silently low.
    """
    reduced = [op.collective.bytes for op in trace.ops if op.collective is not None
               and op.collective.kind == "all_reduce" and op.phase == "backward"]
    if sorted(reduced) != sorted(sizes):
        raise RuntimeError(
            f"the trace holds {len(reduced)} gradient all-reduces ({sum(reduced)} bytes) but "
            f"DDP reduced {len(sizes)} buckets ({sum(sizes)} bytes): the capture missed a "
            "collective; please report this with the model")
