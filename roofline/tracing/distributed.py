"""Trace one rank of a data- or tensor-parallel step, without a cluster.

``roofline.trace(model, *inputs, train=True, parallel="ddp", gpus=8)`` runs the step as
rank 0 of a world of 8 on this machine: torch.distributed's fake process group (the
``"fake"`` backend of ``torch.testing._internal.distributed.fake_pg``: every collective
returns at once, moving nothing) stands in for the others, and fake tensors for the
data. The model is wrapped as the user would wrap it, by torch itself, as its
:class:`~roofline.tracing.strategies.Strategy` says (DDP, FSDP2, tensor parallel; see
:mod:`roofline.tracing.strategies`).

The capture records every collective as an op of its own (see
:mod:`roofline.tracing.collectives`), between the compute ops it ran among.
``DeviceMesh`` cannot be built under a fake mode (it reads its rank tensor); it is built
before the step, outside it.

Nothing is left behind: the model is deep-copied with its parameters and buffers as fake
tensors (the user's model, optimizer and tensors are not touched); a process group made
here is destroyed afterwards, and one the user made is used and left as it was.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from roofline._errors import FakeModeError
from roofline.tracing.attention import AttentionAs, AttentionMode
from roofline.tracing.capture import Capture
from roofline.tracing.fake import (
    DATA_DEPENDENT,
    _active_fake_mode,
    _Faker,
    as_on_cuda,
    modules_of,
)
from roofline.tracing.records import Trace
from roofline.tracing.run import captured_info, leading_dim, model_name, run_step
from roofline.tracing.strategies import (
    Buckets,
    Parallel,
    RealIndices,
    Strategy,
    Wrapping,
    _dist,
    as_parallel,
)

# --- the process group ---------------------------------------------------------------

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


def _rebuilt_optimizer(optimizer: torch.optim.Optimizer | None, model: nn.Module,
                       wrapped: nn.Module) -> torch.optim.Optimizer | None:
    """The user's optimizer, its class, defaults and param groups, on the wrapped model.

    Each group keeps its own settings (lr, momentum...) and holds the wrapped model's
    parameters that stand for its own, found by name (DDP prefixes ``module.``; FSDP2 and
    tensor parallelism keep the names): an optimizer over the head alone stays one. A
    group whose parameters are partly DTensors (tensor parallelism splits some layers and
    leaves the rest whole) becomes two groups of the same settings, one of each kind: a
    foreach kernel runs per group, and DTensor refuses one over both kinds.
    """
    if optimizer is None:
        return None
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    placed = {n.removeprefix("module."): p
              for n, p in wrapped.named_parameters(remove_duplicate=False)}
    groups = []
    for group in optimizer.param_groups:
        params = []
        for p in group["params"]:
            name = names.get(id(p))
            if name is None or name not in placed:
                raise ValueError(
                    f"the optimizer holds a parameter of shape {tuple(p.shape)} that is not "
                    f"one of {type(model).__name__}'s: a parallel trace rebuilds the "
                    "optimizer on the wrapped model's parameters, so it must optimise the "
                    "traced model's own")
            params.append(placed[name])
        settings = {k: v for k, v in group.items() if k != "params"}
        for kind in (True, False):
            share = [p for p in params if _is_dtensor(p) is kind]
            if share:
                groups.append({**settings, "params": share})
    accepted = inspect.signature(type(optimizer).__init__).parameters
    defaults = {k: v for k, v in optimizer.defaults.items() if k in accepted}
    return type(optimizer)(groups, **defaults)


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__module__.startswith("torch.distributed.tensor")


def _wrapper(fn: Any) -> str | None:
    """The class name of the DDP or FSDP wrapper among the modules ``fn`` holds, if any."""
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

    The step runs on fake tensors; the trace's ``info`` says ``parallel``, ``world_size``,
    ``batch`` (global) and ``rank_batch``, and for DDP ``buckets`` (bytes each). With
    ``rank_inputs`` the inputs are already one rank's share (not split).
    """
    options = as_parallel(parallel)
    strategy = options.strategy
    if not isinstance(model, nn.Module):
        raise TypeError(f"parallel= wraps an nn.Module, got {type(model).__name__}")
    check_not_wrapped(model)
    if strategy.needs_train and not train:
        raise ValueError(f"parallel={options.kind!r} traces a training step (its collectives "
                         "are in backward): pass train=True")
    name = model_name(model)
    with process_group(gpus) as world:
        args, kwargs, batch, rank_batch = _rank_share(strategy, args, kwargs, world,
                                                      rank_inputs)
        mesh = _mesh(world) if strategy.needs_mesh else None
        mode = _active_fake_mode() or torch._subclasses.fake_tensor.FakeTensorMode(
            allow_non_fake_inputs=True)
        fake = _Faker(mode)
        copied = _fake_copy(model, fake)
        fargs, fkwargs = tree_map(fake, (args, kwargs))
        buckets = Buckets()
        with _disable_current_modes(), mode:
            wrapped = strategy.wrap(copied, options, Wrapping(world, mesh, buckets))
            opt = _rebuilt_optimizer(optimizer, model, wrapped)
            foreach = opt is not None and as_on_cuda(opt)
            if train:  # inference has nothing to warm, and a second step would write the
                # KV cache it is given twice (a prefill would see its prompt twice)
                _warm_up(name, strategy, wrapped, fargs, fkwargs, train, loss_fn, opt, buckets)
        cap = Capture(warn=True)
        cap.modules = [wrapped]
        attend = AttentionAs(attention, fake=True)
        with contextlib.ExitStack() as stack:
            stack.enter_context(mode)
            if attention != "as-run":
                stack.enter_context(attend)
            with cap:
                loss = _run(name, wrapped, fargs, fkwargs, train, loss_fn, opt)
    trace = cap.trace
    trace.info = captured_info(
        name, train=train, fake=True, attend=attend, parallel=options.kind, world_size=world,
        batch=batch or None, rank_batch=rank_batch if batch else None,
        buckets=list(buckets.sizes) if strategy.bucketed else [], loss=loss,
        optimizer_foreach=foreach)
    if strategy.bucketed:
        check_buckets(trace, buckets.sizes)
    return trace


def _rank_share(strategy: Strategy, args: tuple[Any, ...], kwargs: dict[str, Any],
                world: int, rank_inputs: bool,
                ) -> tuple[tuple[Any, ...], dict[str, Any], int, int]:
    """Rank 0's inputs, the global batch and the rank's batch (0 and 0: no batch)."""
    if strategy.splits_batch and not rank_inputs:
        args, kwargs, batch = split_batch(args, kwargs, world)
        return args, kwargs, batch, batch // world
    rank_batch = leading_dim(args, kwargs)
    return args, kwargs, rank_batch * (world if strategy.splits_batch else 1), rank_batch


def _mesh(world: int) -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    with _disable_current_modes():
        return init_device_mesh("cpu", (world,))


def _warm_up(name: str, strategy: Strategy, wrapped: nn.Module, args: tuple[Any, ...],
             kwargs: dict[str, Any], train: bool, loss_fn: Any,
             optimizer: torch.optim.Optimizer | None, buckets: Buckets) -> None:
    """An unrecorded step: DDP's bucket rebuild, the optimizer's state, FSDP's lazy
    initialisation; the traced step is then a steady-state one."""
    with RealIndices():
        _run(name, wrapped, args, kwargs, train, loss_fn, optimizer)
    if strategy.after_warmup is not None:
        strategy.after_warmup(wrapped)
    for p in wrapped.parameters():
        p.grad = None
    buckets.sizes.clear()
    buckets.dtypes.clear()


def _run(name: str, wrapped: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
         train: bool, loss_fn: Any, optimizer: torch.optim.Optimizer | None) -> str:
    try:
        return run_step(wrapped, args, kwargs, train=train, loss_fn=loss_fn,
                        optimizer=optimizer)
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
