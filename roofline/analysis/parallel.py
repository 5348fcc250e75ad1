"""Are N GPUs N times as fast? A parallel trace costed on two streams.

``roofline.parallel(trace, device)`` takes a trace of one rank of a parallel step
(``roofline.trace(..., parallel="ddp", gpus=8)``) and predicts its step time:

* every compute op takes the time :func:`roofline.analyze` gives it, on the compute stream,
  in trace order;
* every collective takes the time NCCL would take on the link
  (:mod:`roofline.analysis.collectives`) on a second stream, the communication stream
  (one collective at a time, in trace order);
* a collective starts when the communication stream is free and the compute op before it
  in the trace has finished (its inputs are ready then); a compute op that reads a
  collective's output (by storage) waits for it to finish.

The step is the critical path of the two streams; the *exposed* communication is the time
the compute stream waits, the part of the communication no compute hides. What each
strategy (DDP, FSDP, TP) does to the batch and the schedule is its
:class:`~roofline.tracing.strategies.Strategy`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from roofline._checks import is_number, whole
from roofline._errors import RooflineWarning, warn
from roofline._si import si
from roofline.analysis.collectives import CollectiveCost, collective_cost
from roofline.analysis.options import Options
from roofline.analysis.timing import Analysis, analyze, analyze_step
from roofline.hardware import DeviceSpec, get_device
from roofline.hardware.topology import (
    DEFAULT_NIC_BITS_PER_S,
    DEFAULT_NICS,
    Topology,
    topology,
)
from roofline.tracing.distributed import parallel_step
from roofline.tracing.records import Trace
from roofline.tracing.step import trace as trace_step
from roofline.tracing.strategies import STRATEGIES, Strategy, as_parallel


@dataclass
class ParallelAnalysis:
    """One rank's parallel step on ``gpus`` GPUs: two streams, their critical path.

    Per-op arrays line up with ``trace.ops``: ``compute_seconds`` (0 for collectives),
    ``comm_seconds`` (0 for compute ops), ``start`` and ``end`` (when each op ran on its
    stream, from the step's start).

    Attributes
    ----------
    seconds : predicted step time (device critical path plus host time).
    samples_per_s : global batch (all ranks) over ``seconds``.
    compute_total_seconds : the compute stream's busy time.
    communication_seconds : the communication stream's busy time (all collectives).
    exposed_communication_seconds : time the compute stream waits for communication.
    exposed_share : ``exposed_communication_seconds / seconds``.
    one_gpu_seconds, one_gpu_batch : the single-GPU step it is compared with (None: no
        baseline given, no speedup).
    """

    trace: Trace
    device: DeviceSpec
    topology: Topology
    analysis: Analysis
    parallel: str
    gpus: int
    batch: int | None
    costs: list[CollectiveCost | None]
    compute_seconds: np.ndarray
    comm_seconds: np.ndarray
    start: np.ndarray
    end: np.ndarray
    seconds: float
    compute_total_seconds: float
    communication_seconds: float
    exposed_communication_seconds: float
    one_gpu_seconds: float | None = None
    one_gpu_batch: int | None = None
    assumptions: list[str] = field(default_factory=list)
    #: the keywords ``parallel`` was called with beyond the trace and device (network,
    #: analysis options), so that a re-costing at another GPU count keeps them
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def strategy(self) -> Strategy | None:
        """The parallel strategy of the trace (None for a model you wrapped yourself)."""
        return STRATEGIES.get(self.parallel)

    @property
    def nodes(self) -> int:
        return self.topology.nodes

    @property
    def exposed_share(self) -> float:
        return self.exposed_communication_seconds / self.seconds if self.seconds else 0.0

    @property
    def hidden_communication_seconds(self) -> float:
        """Communication that ran while the compute stream was busy."""
        return max(self.communication_seconds - self.exposed_communication_seconds, 0.0)

    @property
    def samples_per_s(self) -> float | None:
        return self.batch / self.seconds if self.batch and self.seconds else None

    @property
    def speedup_vs_one_gpu(self) -> float | None:
        """Samples/s over those of one GPU (None without a baseline)."""
        if self.one_gpu_seconds is None or not self.one_gpu_batch or not self.samples_per_s:
            return None
        return self.samples_per_s / (self.one_gpu_batch / self.one_gpu_seconds)

    @property
    def efficiency(self) -> float | None:
        """Speedup over the GPU count (1.0: N GPUs are N times as fast)."""
        s = self.speedup_vs_one_gpu
        return s / self.gpus if s is not None else None

    def collectives(self) -> list[dict[str, Any]]:
        """One row per collective: index, kind, phase, module, bytes, group size, seconds,
        algorithm, protocol, link, ``bus_bytes_per_s``, ``algorithm_bytes_per_s``, start,
        end."""
        rows = []
        for i, (op, cost) in enumerate(zip(self.trace.ops, self.costs, strict=True)):
            if cost is None or op.collective is None or op.collective.kind == "wait":
                continue
            c = op.collective
            rows.append({"index": i, "kind": c.kind, "phase": op.phase, "module": op.module,
                         "bytes": c.bytes, "group_size": c.group_size, "dtype": c.dtype,
                         "seconds": cost.seconds, "algorithm": cost.algorithm,
                         "protocol": cost.protocol, "link": cost.link,
                         "bus_bytes_per_s": cost.bus_bytes_per_s,
                         "algorithm_bytes_per_s": cost.algorithm_bytes_per_s,
                         "start": float(self.start[i]), "end": float(self.end[i])})
        return rows

    def by_kind(self) -> dict[str, dict[str, float]]:
        """Count, bytes and seconds per collective kind."""
        out: dict[str, dict[str, float]] = {}
        for row in self.collectives():
            entry = out.setdefault(row["kind"], {"count": 0, "bytes": 0, "seconds": 0.0})
            entry["count"] += 1
            entry["bytes"] += row["bytes"]
            entry["seconds"] += row["seconds"]
        return out

    def _summary(self) -> list[tuple[str, str]]:
        rows = [("step", si(self.seconds, "s")),
                ("compute", si(self.compute_total_seconds, "s")),
                ("communication", si(self.communication_seconds, "s")),
                ("exposed communication",
                 f"{si(self.exposed_communication_seconds, 's')} ({self.exposed_share:.0%})")]
        if self.samples_per_s:
            rows.append(("samples/s", f"{self.samples_per_s:.4g}"))
        if (s := self.speedup_vs_one_gpu) is not None:
            rows.append(("speedup vs 1 GPU", f"{s:.2f}x ({self.efficiency:.0%} efficiency)"))
        return rows

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in self._summary())
        return (f"ParallelAnalysis({self.gpus}x {self.device.name} {self.parallel} over "
                f"{self.topology.intra.kind}" + (f", {self.nodes} nodes" if self.nodes > 1
                                                 else "") + f": {parts})")

    def _repr_html_(self) -> str:
        from roofline._table import html_table

        title = f"{self.gpus}x {self.device.name} ({self.parallel})"
        return html_table(["ParallelAnalysis", title], [list(r) for r in self._summary()])


def _baseline(one_gpu: Trace | Analysis | float | None, one_gpu_batch: int | None,
              rank_batch: int | None, device: DeviceSpec, options: dict[str, Any],
              ) -> tuple[float | None, int | None]:
    """The single-GPU step's seconds and batch (the batch a trace or analysis ran, else
    ``one_gpu_batch``, else the parallel trace's per-rank batch)."""
    if one_gpu_batch is not None:
        one_gpu_batch = whole("one_gpu_batch", one_gpu_batch)
        if one_gpu is None:
            warn("one_gpu_batch= is the batch of the one_gpu= step, and no one_gpu= "
                          "was given: it is not used (no speedup over one GPU)",
                          RooflineWarning)
    seconds, traced = _one_gpu_step(one_gpu, device, options)
    if traced and one_gpu_batch is not None and one_gpu_batch != traced:
        raise ValueError(f"one_gpu_batch={one_gpu_batch}, but the single-GPU trace ran a batch "
                         f"of {traced}; leave one_gpu_batch out (the trace says its batch)")
    return seconds, one_gpu_batch or traced or rank_batch or None


def _one_gpu_step(one_gpu: Trace | Analysis | float | None, device: DeviceSpec,
                  options: dict[str, Any]) -> tuple[float | None, int | None]:
    """Seconds of the single-GPU step, and the batch it ran when it says so."""
    if one_gpu is None:
        return None, None
    if isinstance(one_gpu, Analysis):
        return one_gpu.seconds, one_gpu.trace.info.batch
    if isinstance(one_gpu, Trace):
        return analyze(one_gpu, device, **options).seconds, one_gpu.info.batch
    if is_number(one_gpu) and math.isfinite(one_gpu) and one_gpu > 0:
        return float(one_gpu), None
    raise TypeError(f"one_gpu= takes a Trace, an Analysis or finite seconds > 0, got "
                    f"{one_gpu!r}")


def parallel(trace: Trace, device: str | DeviceSpec, *, nodes: int = 1,
             gpus: int | None = None, one_gpu: Trace | Analysis | float | None = None,
             one_gpu_batch: int | None = None, nics: int = DEFAULT_NICS,
             nic_bits_per_s: float = DEFAULT_NIC_BITS_PER_S,
             **options: Any) -> ParallelAnalysis:
    """Cost one rank's parallel step on ``device``: compute and communication streams.

    Parameters
    ----------
    trace : a trace from ``roofline.trace(..., parallel=..., gpus=N)`` (or any trace with
        collectives, e.g. of a model you wrapped, traced in its process group).
    device : registry name or DeviceSpec of every GPU.
    nodes : nodes the GPUs are spread over (the network between them:
        ``nics`` x ``nic_bits_per_s`` per node, a DGX H100's by default).
    gpus : re-cost a DDP trace for another world size (its buckets do not depend on it;
        each rank keeps the traced per-rank batch). Other parallelisms must be traced at
        the size they are costed at.
    one_gpu : the single-GPU step to compare with (a Trace, its Analysis, or seconds), and
        ``one_gpu_batch`` its batch: a trace's own batch where it says one (a different
        ``one_gpu_batch`` is refused), else the parallel trace's per-rank batch.
    options : :class:`~roofline.analysis.options.Options` for the compute ops.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> opt = torch.optim.AdamW(model.parameters())
    >>> step = dict(train=True, optimizer=opt, loss_fn=lambda y: y.sum())
    >>> t = roofline.trace(model, torch.randn(64, 1024), parallel="ddp", gpus=8, **step)
    >>> one = roofline.trace(model, torch.randn(8, 1024), fake=True, **step)
    >>> p = roofline.parallel(t, "h100", one_gpu=one)
    >>> p.gpus, p.speedup_vs_one_gpu < 8
    (8, True)
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"parallel() takes a Trace, got {type(trace).__name__}")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise ValueError(f"gpus={gpus!r}: expected a whole number >= 1")
    spec = get_device(device)
    trace, world, notes = _world(trace, gpus)
    top = topology(spec, max(world, 1), nodes, nics=nics, nic_bits_per_s=nic_bits_per_s)
    notes += top.assumptions
    a = analyze_step(trace, spec, Options(**options), collectives_costed=True)
    compute, comm, costs = _streams(trace, a, top)
    start, end = _schedule(trace, compute, comm)
    device_seconds = float(end.max()) if len(trace.ops) else 0.0
    busy = float(compute.sum())
    strategy = STRATEGIES.get(trace.info.parallel or "")
    if strategy is not None and strategy.schedule_note:
        notes.append(strategy.schedule_note)
    one_seconds, one_batch = _baseline(one_gpu, one_gpu_batch, trace.info.rank_batch, spec,
                                       options)
    return ParallelAnalysis(
        trace=trace, device=spec, topology=top, analysis=a,
        parallel=trace.info.parallel or "traced", gpus=max(world, 1),
        batch=_global_batch(trace, strategy, world), costs=costs, compute_seconds=compute,
        comm_seconds=comm, start=start, end=end, seconds=device_seconds + a.host_seconds,
        compute_total_seconds=busy, communication_seconds=float(comm.sum()),
        exposed_communication_seconds=max(device_seconds - busy, 0.0),
        one_gpu_seconds=one_seconds, one_gpu_batch=one_batch,
        assumptions=list(dict.fromkeys(notes + a.assumptions)),
        settings={"nics": nics, "nic_bits_per_s": nic_bits_per_s, **options})


def step_cost(trace: Trace, spec: DeviceSpec, **options: Any) -> tuple[Analysis, float]:
    """A step's analysis and the seconds its collectives add to it: those
    :func:`parallel` schedules outside compute (0 for a trace with none). The analysis's
    assumptions then name the interconnect they were costed on."""
    if not any(op.collective is not None for op in trace.ops):
        return analyze(trace, spec, **options), 0.0
    p = parallel(trace, spec, **options)
    p.analysis.assumptions[:] = p.assumptions
    return p.analysis, p.exposed_communication_seconds


def _world(trace: Trace, gpus: int | None) -> tuple[Trace, int, list[str]]:
    """The trace to cost (re-sized for ``gpus`` where its strategy allows), its world size
    and what was assumed about it."""
    world = trace.info.world_size or _world_of(trace)
    notes: list[str] = []
    if world <= 1 and not any(op.collective is not None for op in trace.ops):
        notes.append("the trace has no collectives (a single-GPU trace): the step is its "
                     "compute alone; trace with parallel= and gpus= for a parallel step")
    if gpus is None or gpus == world:
        return trace, world, notes
    strategy = STRATEGIES.get(trace.info.parallel or "")
    if strategy is None or not strategy.recostable:
        kind = trace.info.parallel or "traced"
        raise ValueError(f"gpus={gpus}: this {kind} trace holds the collectives of "
                         f"{world} ranks, whose sizes depend on the world size; trace "
                         f"it again with gpus={gpus}")
    notes.append(f"{strategy.name.upper()} trace of {world} ranks re-costed for {gpus}: the "
                 "same buckets, the same per-rank batch")
    return _resized(trace, world, gpus), gpus, notes


def _streams(trace: Trace, a: Analysis, top: Topology,
             ) -> tuple[np.ndarray, np.ndarray, list[CollectiveCost | None]]:
    """Each op's seconds on the compute stream and on the communication stream."""
    compute = a.op_seconds.copy()
    comm = np.zeros(len(trace.ops))
    costs: list[CollectiveCost | None] = [None] * len(trace.ops)
    for i, op in enumerate(trace.ops):
        if op.collective is not None:
            cost = collective_cost(op.collective, top)
            compute[i], comm[i], costs[i] = 0.0, cost.seconds, cost
    return compute, comm, costs


def _global_batch(trace: Trace, strategy: Strategy | None, world: int) -> int | None:
    """Samples per step over all ranks: the per-rank batch times the world for data
    parallelism (a re-costed trace keeps its per-rank batch), else the traced batch."""
    batch, rank_batch = trace.info.batch, trace.info.rank_batch
    if batch is not None and world and strategy is not None and strategy.splits_batch \
            and rank_batch:
        batch = rank_batch * world
    return int(batch) if batch else None


def _world_of(trace: Trace) -> int:
    sizes = [op.collective.group_size for op in trace.ops if op.collective is not None]
    return max(sizes, default=1)


def _resized(trace: Trace, old: int, new: int) -> Trace:
    ops = [replace(op, collective=replace(op.collective, group_size=new))
           if op.collective is not None and op.collective.group_size == old else op
           for op in trace.ops]
    return Trace(ops, dict(trace.meta), trace.storages,
                 replace(trace.info, world_size=new, buckets=list(trace.info.buckets)))


def _schedule(trace: Trace, compute: np.ndarray, comm: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every op on its stream (see the module docstring)."""
    n = len(trace.ops)
    start, end = np.zeros(n), np.zeros(n)
    compute_free = comm_free = 0.0
    ready: dict[int, float] = {}  # storage id -> when the collective writing it ends
    for i, op in enumerate(trace.ops):
        c = op.collective
        if c is not None and c.kind != "wait":
            start[i] = max(comm_free, compute_free)
            end[i] = comm_free = start[i] + comm[i]
            for sid in op.output_ids:
                ready[sid] = end[i]
            continue
        waits = [ready[s] for s in op.input_ids if s in ready]
        start[i] = max([compute_free, *waits])
        end[i] = compute_free = start[i] + compute[i]
    return start, end


@dataclass
class Scaling:
    """Predicted steps for several GPU counts: ``points`` is one ParallelAnalysis per
    count (the 1-GPU entry is the plain single-GPU step)."""

    device: str
    parallel: str
    one_gpu_seconds: float
    one_gpu_batch: int
    points: dict[int, ParallelAnalysis]

    def speedups(self) -> dict[int, float]:
        out = {1: 1.0}
        for n, p in self.points.items():
            if (s := p.speedup_vs_one_gpu) is not None:
                out[n] = s
        return dict(sorted(out.items()))

    def __repr__(self) -> str:
        rows = ", ".join(f"{n}: {s:.2f}x" for n, s in self.speedups().items())
        return f"Scaling({self.device}, {self.parallel}: {rows})"


def scaling(model: Any, inputs: Sequence[Any], device: str | DeviceSpec, *,
            gpus: Sequence[int] = (1, 2, 4, 8), parallel_kind: str = "ddp",
            gpus_per_node: int = 8, optimizer: Any = None, loss_fn: Any = None,
            **options: Any) -> Scaling:
    """Predicted samples/s of ``model`` on 1..N GPUs with the per-GPU batch of ``inputs``
    (weak scaling, as data-parallel training is run): one single-GPU trace and one
    parallel trace (DDP: one trace, re-costed per count; FSDP/TP: one per count).

    ``inputs`` are one GPU's inputs; ``gpus_per_node`` sets how counts beyond one node
    spread over nodes.

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    >>> s = roofline.scaling(model, (torch.randn(64, 1024),), device="h100", gpus=(1, 2, 4),
    ...                      loss_fn=lambda y: y.sum())
    >>> sorted(s.points)
    [2, 4]
    """
    spec = get_device(device)
    strategy = as_parallel(parallel_kind).strategy
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"scaling(model, inputs, device): model must be an nn.Module, got "
                        f"{type(model).__name__}")
    if not isinstance(inputs, (tuple, list)) or not inputs:
        raise TypeError("scaling(model, inputs, device): inputs must be a non-empty tuple of "
                        f"the model's arguments (one GPU's batch), got {type(inputs).__name__}"
                        + (" (wrap a single tensor: (x,))" if isinstance(inputs, torch.Tensor)
                           else ""))
    if isinstance(gpus, (int, str)) or not gpus:
        raise ValueError(f"scaling(gpus=...): gpus must be a sequence of GPU counts, e.g. "
                         f"(1, 2, 4, 8), got {gpus!r}")
    whole("gpus_per_node", gpus_per_node)
    for n in gpus:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"scaling(gpus={tuple(gpus)!r}): GPU counts are whole numbers "
                             f">= 1, got {n!r}")
    if set(gpus) == {1}:
        warn("scaling(gpus=(1,)): one GPU only, nothing to scale; pass more counts, "
                      "e.g. gpus=(1, 2, 4, 8)", RooflineWarning)
    one = trace_step(model, *inputs, train=True, fake=True, optimizer=optimizer,
                     loss_fn=loss_fn)
    t1 = analyze(one, spec, **options).seconds
    batch = _batch_of(inputs)
    points: dict[int, ParallelAnalysis] = {}
    traced: dict[int, Trace] = {}  # a re-costable strategy's one trace serves every count
    for n in sorted(set(gpus) - {1}):
        at = 2 if strategy.recostable else n
        if at not in traced:
            traced[at] = parallel_step(model, tuple(inputs), {}, parallel=strategy.name,
                                       gpus=at, train=True, loss_fn=loss_fn,
                                       optimizer=optimizer, rank_inputs=True)
        points[n] = parallel(traced[at], spec, nodes=-(-n // gpus_per_node), gpus=n,
                             one_gpu=t1, one_gpu_batch=batch, **options)
    return Scaling(spec.name, strategy.name, t1, batch, points)


def _batch_of(inputs: Sequence[Any]) -> int:
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            return int(x.shape[0])
    raise ValueError("scaling() needs a tensor input with a batch dimension")
