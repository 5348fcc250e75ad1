"""The parallel strategies a trace can wrap a model in, and what each one is.

One :class:`Strategy` per way of spreading a step over GPUs, in :data:`STRATEGIES`: whether
it splits the batch, whether a trace of it can be re-costed at another GPU count, whether
it needs a training step, how the model is wrapped (by torch itself) and what its
schedule leaves exposed. Everything else (the trace, the cost, the CLI, the words) reads
these attributes; adding pipeline parallelism is one more entry and its wrapper.

* ``"ddp"``: ``DistributedDataParallel`` (its C++ reducer: 25 MiB buckets, a first bucket
  of 1 MiB, rebuilt in the order gradients became ready after one step);
* ``"fsdp"``: FSDP2's ``fully_shard`` on each block (the children of every
  ``nn.ModuleList``, else the root's children that hold parameters) and on the root;
* ``"tp"``: ``parallelize_module`` with a Megatron-style plan: each pair of sibling
  ``nn.Linear`` layers where the first widens (``in < out``) and the second takes its
  output is split column-wise then row-wise; or the plan given as
  ``Parallel("tp", plan={...})``.

What the wrappers work around on a fake process group:

* DDP's default all-reduce hook expects the work's future to hold the reduced tensor; the
  fake group's future holds None, and the reducer asserts. The wrapper registers
  :func:`fake_allreduce_hook`, which does what the default hook does (divide the bucket
  by the world size, all-reduce it) and returns the bucket. It also counts the buckets,
  so the trace is checked to hold one all-reduce per bucket (nothing missed).
* DDP reads real data at construction (``_verify_param_shape_across_processes``: skipped
  with ``init_sync=False``, there is nothing to verify on one process) and when it
  rebuilds its buckets (it writes the bucket order into an int tensor it then reads):
  that rebuild runs once, after an unrecorded warm-up step, with integer tensors made
  real (:class:`RealIndices`); the gradient buckets stay fake.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from roofline._checks import number
from roofline._errors import RooflineWarning, warn


@dataclass
class Parallel:
    """How to wrap a model for a parallel trace (``parallel=`` of :func:`roofline.trace`).

    Attributes
    ----------
    kind : a name in :data:`STRATEGIES`: ``"ddp"``, ``"fsdp"`` or ``"tp"``.
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
        if self.kind not in STRATEGIES:
            raise ValueError(f"parallel={self.kind!r}: choose one of {', '.join(STRATEGIES)}")
        strategy = STRATEGIES[self.kind]
        for name in ("plan", "shard", "bucket_cap_mb"):
            if getattr(self, name) is not None and name not in strategy.options:
                owner = next(s.name for s in STRATEGIES.values() if name in s.options)
                raise ValueError(f"Parallel({self.kind!r}, {name}=...): {name} is for "
                                 f"{owner!r}; {self.kind!r} does not use it")
        if self.bucket_cap_mb is not None:
            number("Parallel bucket_cap_mb", self.bucket_cap_mb, above=0)
        if self.plan is not None and not isinstance(self.plan, dict):
            raise TypeError(f"Parallel('tp', plan=...) takes a dict of module name -> "
                            f"ColwiseParallel()/RowwiseParallel(), got {type(self.plan).__name__}")
        if self.shard is not None and (isinstance(self.shard, str) or not all(
                isinstance(n, str) for n in self.shard)):
            raise TypeError(f"Parallel('fsdp', shard=...) takes a list of submodule names, "
                            f"got {self.shard!r}")

    @property
    def strategy(self) -> Strategy:
        return STRATEGIES[self.kind]


def as_parallel(parallel: str | Parallel) -> Parallel:
    """``parallel=`` as a :class:`Parallel`."""
    if isinstance(parallel, Parallel):
        return parallel
    if not isinstance(parallel, str):
        raise TypeError(f"parallel= takes 'ddp', 'fsdp', 'tp' or a roofline.Parallel, got "
                        f"{type(parallel).__name__}")
    return Parallel(parallel)


@dataclass
class Buckets:
    """The gradient buckets DDP handed to the comm hook: bytes each, in order."""

    sizes: list[int] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Wrapping:
    """What a wrapper may need: the world, its device mesh and the bucket log."""

    world: int
    mesh: Any
    buckets: Buckets


@dataclass(frozen=True)
class Strategy:
    """One way to spread a training step over GPUs.

    Attributes
    ----------
    name : the key in :data:`STRATEGIES` (``parallel="ddp"``).
    description : one line, for help texts.
    splits_batch : data parallel: each of ``n`` ranks runs ``batch / n`` of the global batch
        (tensor parallelism gives every rank the whole batch).
    recostable : the sizes of its collectives do not depend on the GPU count, so one trace
        is re-costed at any count (DDP's gradient buckets); else trace at each count.
    needs_train : its collectives are in backward: an inference trace has none.
    needs_mesh : it is wrapped on a ``DeviceMesh``.
    options : the :class:`Parallel` fields that apply to it.
    bucketed : gradients are all-reduced in buckets by a comm hook, and the trace is checked
        to hold one all-reduce per bucket.
    gradient_collective : the collective that reduces its gradients, named so in the words
        ("gradient all-reduce"); None when gradients need none of their own.
    schedule_note : what the two-stream schedule leaves out for it, said in the analysis.
    wrap : ``wrap(model, parallel, wrapping) -> module``: the model as torch wraps it.
    after_warmup : run once after the unrecorded warm-up step (DDP's bucket rebuild).
    """

    name: str
    description: str
    splits_batch: bool
    recostable: bool
    needs_train: bool
    needs_mesh: bool
    options: tuple[str, ...]
    bucketed: bool
    gradient_collective: str | None
    schedule_note: str | None
    wrap: Callable[[nn.Module, Parallel, Wrapping], nn.Module]
    after_warmup: Callable[[nn.Module], None] | None = None


# --- DDP ---------------------------------------------------------------------------

def _dist() -> Any:
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed: a parallel trace "
                           "needs it")
    return dist


def fake_allreduce_hook(state: Any, bucket: Any) -> torch.futures.Future[torch.Tensor]:
    """A DDP comm hook that does what DDP's default one does, on any process group.

    Divides the bucket by the world size and all-reduces it (``dist.all_reduce``, which
    the capture records), then returns the bucket in a completed future. The default hook
    returns the work's own future, which the fake process group leaves empty; register
    this one (``ddp.register_comm_hook(None, fake_allreduce_hook)``) to trace your own DDP
    model on a fake group. ``state`` may be a :class:`Buckets` that notes each bucket.
    """
    dist = _dist()
    buffer = bucket.buffer()
    if isinstance(state, Buckets):
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


class RealIndices(TorchDispatchMode):
    """Integer tensors made real: the bucket order DDP's reducer writes and reads back.

    Under it, factory ops of integer dtype run with no mode (real, a few bytes each);
    every other op goes on to the fake mode.
    """

    supports_higher_order_operators = True  # passed on whole

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


def _ddp(model: nn.Module, options: Parallel, wrapping: Wrapping) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    _annotate_hook()
    with RealIndices():
        wrapped = DistributedDataParallel(
            model, init_sync=False,
            bucket_cap_mb=options.bucket_cap_mb)  # type: ignore[arg-type]  # None: 25 MiB
    wrapped.register_comm_hook(wrapping.buckets, fake_allreduce_hook)
    return wrapped


def _rebuild_ddp_buckets(wrapped: nn.Module) -> None:
    """DDP's one-off bucket rebuild (in gradient order), done before the traced step."""
    reducer = getattr(wrapped, "reducer", None)
    if reducer is None:
        return
    with RealIndices():
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


def _fsdp(model: nn.Module, options: Parallel, wrapping: Wrapping) -> nn.Module:
    from torch.distributed.fsdp import fully_shard

    from roofline.tracing.ops import lookup, register_no_flops

    # FSDP2's own copy kernels (pack the shards to gather, unpack the gathered buffer,
    # pack the gradients to reduce-scatter): data movement, no FLOPs
    copies = [torch.ops.fsdp.all_gather_copy_in, torch.ops.fsdp.split_with_sizes_copy,
              torch.ops.fsdp.chunk_cat]
    new = [op for op in copies if lookup(op.default) is None]
    if new:
        register_no_flops("copy", *new)

    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(f"FSDP cannot wrap {type(model).__name__}: it has no parameters "
                         "that require grad (nothing to shard)")
    try:
        for sub in _fsdp_targets(model, options.shard):
            fully_shard(sub, mesh=wrapping.mesh)
        fully_shard(model, mesh=wrapping.mesh)
    except (ValueError, TypeError, RuntimeError, AssertionError) as e:
        raise ValueError(f"FSDP (fully_shard) cannot wrap {type(model).__name__}: {e}") from e
    return model


def tp_plan(model: nn.Module) -> dict[str, Any]:
    """The Megatron-style plan of a model: up-projections split by columns, the projection
    after them by rows (one all-reduce in forward and one in backward per split pair).

    A module whose class declares ``tp_plan = {child: "colwise" | "rowwise"}`` (the zoo's
    attention and MLP blocks: their attention counts heads from the projections' widths,
    so a rank runs its share) gives its own entries. Elsewhere, among a module's
    ``nn.Linear`` children: those that widen (``in < out``) to one width, followed by the
    one that narrows it back (an MLP; SwiGLU's w1, w3 and w2), else each consecutive pair
    ``a``, ``b`` with ``a.in_features < a.out_features == b.in_features``. Everything
    else stays whole on every rank (replicated). Attention the model does not declare is
    not split: its head count is fixed in the model's code.
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    plan: dict[str, Any] = {}
    for prefix, module in model.named_modules():
        declared = getattr(type(module), "tp_plan", None)
        entries = (declared if isinstance(declared, dict)
                   else _derived(dict(module.named_children())))
        for child, style in entries.items():
            if style not in styles:
                raise ValueError(f"{type(module).__name__}.tp_plan[{child!r}] = {style!r}: "
                                 "expected 'colwise' or 'rowwise'")
            plan.setdefault(f"{prefix}.{child}".lstrip("."), styles[style]())
    return plan


def _derived(children: dict[str, nn.Module]) -> dict[str, str]:
    """The split of one module's Linear children (see :func:`tp_plan`)."""
    linears = {n: c for n, c in children.items() if isinstance(c, nn.Linear)}
    up = {n: c for n, c in linears.items() if c.in_features < c.out_features}
    widths = {(c.in_features, c.out_features) for c in up.values()}
    if len(widths) == 1:
        (narrow, wide), = widths
        down = [n for n, c in linears.items() if (c.in_features, c.out_features) == (wide,
                                                                                    narrow)]
        if len(down) == 1:
            return {**dict.fromkeys(up, "colwise"), down[0]: "rowwise"}
    entries: dict[str, str] = {}
    named = [(n, c) for n, c in children.items() if any(True for _ in c.parameters())]
    for (na, a), (nb, b) in itertools.pairwise(named):
        if (isinstance(a, nn.Linear) and isinstance(b, nn.Linear)
                and a.in_features < a.out_features == b.in_features and na not in entries):
            entries[na], entries[nb] = "colwise", "rowwise"
    return entries


def _tp(model: nn.Module, options: Parallel, wrapping: Wrapping) -> nn.Module:
    from torch.distributed.tensor.parallel import parallelize_module

    plan = options.plan if options.plan is not None else tp_plan(model)
    world = wrapping.world
    for name in plan:
        target = model.get_submodule(name) if name else model
        for width in (getattr(target, "out_features", None), getattr(target, "in_features", None)):
            if isinstance(width, int) and width % world:
                raise ValueError(f"tensor parallel over {world} GPUs: {name} has {width} "
                                 f"features, not divisible by {world}")
    if not plan:
        warn(
            f"tensor parallel: found no layer to split in {type(model).__name__} (torch's "
            "tensor-parallel styles split nn.Linear layers; none widens and narrows back): "
            "every GPU holds the whole model and runs the whole step, so tensor parallelism "
            "gives no speedup. Use parallel='ddp' or 'fsdp' (--parallel ddp|fsdp), or pass "
            "a plan", RooflineWarning)
        return model
    tied = _tied(model)
    wrapped = parallelize_module(model, wrapping.mesh, plan)
    _retie(tied)
    return wrapped


def _tied(model: nn.Module) -> list[list[tuple[nn.Module, str]]]:
    """Parameters held by more than one module (tied embeddings): (module, name) each."""
    owners: dict[int, list[tuple[nn.Module, str]]] = {}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            owners.setdefault(id(p), []).append((module, name))
    return [group for group in owners.values() if len(group) > 1]


def _retie(tied: list[list[tuple[nn.Module, str]]]) -> None:
    """Tie again what ``parallelize_module`` split into one shard per module (it registers
    each module's sharded weight anew): an embedding split by vocabulary rows and a head
    split by its output rows hold the same shard, once."""
    for (first, name), *rest in tied:
        kept = getattr(first, name)
        for module, other in rest:
            p = getattr(module, other)
            if p is not kept and p.shape == kept.shape and getattr(
                    p, "placements", None) == getattr(kept, "placements", None):
                setattr(module, other, kept)


#: The strategies :func:`roofline.trace` can wrap a model in, by name.
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("ddp", "data parallel: DistributedDataParallel, gradients all-reduced in "
             "buckets", splits_batch=True, recostable=True, needs_train=True,
             needs_mesh=False, options=("bucket_cap_mb",), bucketed=True,
             gradient_collective="all_reduce", schedule_note=None, wrap=_ddp,
             after_warmup=_rebuild_ddp_buckets),
    Strategy("fsdp", "fully sharded data parallel: FSDP2's fully_shard per block",
             splits_batch=True, recostable=False, needs_train=True, needs_mesh=True,
             options=("shard",), bucketed=False, gradient_collective="reduce_scatter",
             schedule_note="FSDP all-gathers start after the compute op before them in the "
             "trace (no CPU run-ahead): forward all-gathers not prefetched are exposed",
             wrap=_fsdp),
    Strategy("tp", "tensor parallel: parallelize_module, Megatron-style column/row pairs",
             splits_batch=False, recostable=False, needs_train=False, needs_mesh=True,
             options=("plan",), bucketed=False, gradient_collective=None,
             schedule_note=None, wrap=_tp),
)}
