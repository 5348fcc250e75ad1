"""Are N GPUs N times as fast? A parallel trace costed on two streams.

``roofline.parallel(trace, device)`` takes a trace of one rank of a parallel step
(``roofline.trace(..., parallel="ddp", gpus=8)``) and predicts its step time:

* every compute op takes the time :func:`roofline.analyze` gives it, on the compute stream,
  in trace order;
* every collective takes ``latency + S x factor / bus_bandwidth`` on a second stream, the
  communication stream (one collective at a time, in trace order); the factor is
  nccl-tests' (NVIDIA/nccl-tests@a0b82b2260cf5152b9f8c061bbf7eaf0ba096432
  doc/PERFORMANCE.md): all-reduce ``2(n-1)/n``, all-gather, reduce-scatter and all-to-all
  ``(n-1)/n``, broadcast and reduce ``1``. ``bus_bytes_per_s`` is the link's bus bandwidth
  (:mod:`roofline.hardware.topology`); ``algorithm_bytes_per_s = bus / factor`` is the rate
  ``S`` itself moves at. The latency and the algorithm (ring, or tree for all-reduce) and
  protocol (LL or Simple) are NCCL's model (nccl@5067397 src/graph/tuning.cc): the fastest
  of them is taken, as NCCL's tuner does;
* a collective starts when the communication stream is free and the compute op before it
  in the trace has finished (its inputs are ready then); a compute op that reads a
  collective's output (by storage) waits for it to finish.

The step is the critical path of the two streams; the *exposed* communication is the time
the compute stream waits, the part of the communication no compute hides.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from roofline._si import si
from roofline.analysis.timing import COLLECTIVES_NOTE, Analysis, analyze
from roofline.hardware import DeviceSpec, get_device
from roofline.hardware.topology import (
    BASE_LATENCY_S,
    DEFAULT_NIC_BITS_PER_S,
    DEFAULT_NICS,
    HOP_LATENCY_S,
    LL_BANDWIDTH_SHARE,
    Topology,
    topology,
)
from roofline.tracing.records import Collective, Trace

#: nccl-tests' bus-bandwidth factor of each kind, as a function of the group size n.
_RING_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n, "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
}


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' factor: bus bytes = ``S x factor`` (0 for a barrier or a wait)."""
    rule = _RING_FACTOR.get(kind)
    return float(rule(n)) if rule is not None and n > 1 else 0.0


def _ring_steps(kind: str, n: int) -> int:
    """Latency steps of a ring (tuning.cc ``nsteps``)."""
    if kind == "all_reduce":
        return 2 * (n - 1)
    if kind in ("all_gather", "reduce_scatter"):
        return n - 1
    return n


@dataclass(frozen=True)
class CollectiveCost:
    """The time of one collective on a link, and how NCCL would run it."""

    seconds: float
    algorithm: str  # "ring" | "tree" | "none"
    protocol: str  # "LL" | "Simple" | "none"
    bus_bytes_per_s: float  # the link's bus bandwidth under that protocol
    algorithm_bytes_per_s: float  # S / (seconds - latency): the rate S itself moves at
    latency_seconds: float
    link: str


def collective_cost(c: Collective, top: Topology) -> CollectiveCost:
    """Seconds of collective ``c`` on ``top``: the fastest of NCCL's ring and tree (tree:
    all-reduce only) under the LL and Simple protocols."""
    n = c.group_size
    factor = bus_factor(c.kind, n)
    if n <= 1 or factor == 0 or c.bytes == 0:
        return CollectiveCost(0.0, "none", "none", 0.0, 0.0, 0.0, "")
    link, nodes = top.link_for(n)
    per_node = -(-n // nodes)
    intra_class = top.intra.latency_class
    best: CollectiveCost | None = None
    for protocol in ("LL", "Simple"):
        bus = link.bus_bytes_per_s * (LL_BANDWIDTH_SHARE if protocol == "LL" else 1.0)
        options = [("ring", factor, _ring_latency(c.kind, n, nodes, intra_class, protocol))]
        if c.kind == "all_reduce":  # tree: reduce up, broadcast down: 2 S over each link
            options.append(("tree", 2.0, _tree_latency(per_node, nodes, intra_class,
                                                       protocol)))
        for algorithm, move, latency in options:
            seconds = latency + c.bytes * move / bus
            if best is None or seconds < best.seconds:
                best = CollectiveCost(seconds, algorithm, protocol, bus, bus / move,
                                      latency, link.kind)
    assert best is not None
    return best


def _ring_latency(kind: str, n: int, nodes: int, intra: str, protocol: str) -> float:
    steps = _ring_steps(kind, n)
    inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if kind == "all_reduce" else nodes - 1)
    return (BASE_LATENCY_S[("ring", protocol)]
            + (steps - inter_steps) * HOP_LATENCY_S[(intra, "ring", protocol)]
            + inter_steps * HOP_LATENCY_S[("network", "ring", protocol)])


def _tree_latency(per_node: int, nodes: int, intra: str, protocol: str) -> float:
    return BASE_LATENCY_S[("tree", protocol)] + 2 * (
        (per_node - 1) * HOP_LATENCY_S[(intra, "tree", protocol)]
        + math.log2(nodes) * HOP_LATENCY_S[("network", "tree", protocol)])


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


def _baseline(one_gpu: Trace | Analysis | float | None, device: DeviceSpec,
              options: dict[str, Any]) -> float | None:
    if one_gpu is None:
        return None
    if isinstance(one_gpu, Trace):
        return analyze(one_gpu, device, **options).seconds
    if isinstance(one_gpu, Analysis):
        return one_gpu.seconds
    if isinstance(one_gpu, (int, float)) and not isinstance(one_gpu, bool) and one_gpu > 0:
        return float(one_gpu)
    raise TypeError(f"one_gpu= takes a Trace, an Analysis or seconds > 0, got {one_gpu!r}")


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
        ``one_gpu_batch`` its batch (default: the trace's per-rank batch).
    options : :class:`~roofline.analysis.options.Options` for the compute ops.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"parallel() takes a Trace, got {type(trace).__name__}")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise ValueError(f"gpus={gpus!r}: expected a whole number >= 1")
    spec = get_device(device)
    world = int(trace.meta.get("world_size", 0)) or _world_of(trace)
    kind = str(trace.meta.get("parallel", "traced"))
    notes: list[str] = []
    if world <= 1 and not any(op.collective is not None for op in trace.ops):
        notes.append("the trace has no collectives (a single-GPU trace): the step is its "
                     "compute alone; trace with parallel= and gpus= for a parallel step")
    if gpus is not None and gpus != world:
        if kind != "ddp":
            raise ValueError(f"gpus={gpus}: this {kind} trace holds the collectives of "
                             f"{world} ranks, whose sizes depend on the world size; trace "
                             f"it again with gpus={gpus}")
        trace = _resized(trace, world, gpus)
        notes.append(f"DDP trace of {world} ranks re-costed for {gpus}: the same buckets, "
                     "the same per-rank batch")
        world = gpus
    top = topology(spec, max(world, 1), nodes, nics=nics, nic_bits_per_s=nic_bits_per_s)
    notes += top.assumptions
    with warnings.catch_warnings():  # its collectives are costed here, not there
        warnings.filterwarnings("ignore", message=COLLECTIVES_NOTE)
        a = analyze(trace, spec, **options)
    compute = a.op_seconds.copy()
    n = len(trace.ops)
    comm = np.zeros(n)
    costs: list[CollectiveCost | None] = [None] * n
    for i, op in enumerate(trace.ops):
        if op.collective is not None:
            compute[i] = 0.0
            costs[i] = collective_cost(op.collective, top)
            comm[i] = costs[i].seconds  # type: ignore[union-attr]
    start, end = _schedule(trace, compute, comm)
    device_seconds = float(end.max()) if n else 0.0
    busy = float(compute.sum())
    host = a.host_seconds
    rank_batch = trace.meta.get("rank_batch")
    batch = trace.meta.get("batch")
    if batch is not None and world and kind in ("ddp", "fsdp") and rank_batch:
        batch = int(rank_batch) * world
    if kind == "fsdp":
        notes.append("FSDP all-gathers start after the compute op before them in the trace "
                     "(no CPU run-ahead): forward all-gathers not prefetched are exposed")
    return ParallelAnalysis(
        trace=trace, device=spec, topology=top, analysis=a, parallel=kind, gpus=max(world, 1),
        batch=int(batch) if batch else None, costs=costs, compute_seconds=compute,
        comm_seconds=comm, start=start, end=end, seconds=device_seconds + host,
        compute_total_seconds=busy, communication_seconds=float(comm.sum()),
        exposed_communication_seconds=max(device_seconds - busy, 0.0),
        one_gpu_seconds=_baseline(one_gpu, spec, options),
        one_gpu_batch=one_gpu_batch if one_gpu_batch is not None else (
            int(rank_batch) if rank_batch else None),
        assumptions=list(dict.fromkeys(notes + [n for n in a.assumptions
                                                if not n.startswith(COLLECTIVES_NOTE)])),
        settings={"nics": nics, "nic_bits_per_s": nic_bits_per_s, **options})


def _world_of(trace: Trace) -> int:
    sizes = [op.collective.group_size for op in trace.ops if op.collective is not None]
    return max(sizes, default=1)


def _resized(trace: Trace, old: int, new: int) -> Trace:
    ops = [replace(op, collective=replace(op.collective, group_size=new))
           if op.collective is not None and op.collective.group_size == old else op
           for op in trace.ops]
    return Trace(ops, {**trace.meta, "world_size": new}, trace.storages)


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
    """
    from roofline.tracing import trace as trace_step
    from roofline.tracing.distributed import parallel_step

    spec = get_device(device)
    one = trace_step(model, *inputs, train=True, fake=True, optimizer=optimizer,
                     loss_fn=loss_fn)
    t1 = analyze(one, spec, **options).seconds
    batch = _batch_of(inputs)
    points: dict[int, ParallelAnalysis] = {}
    ddp_trace: Trace | None = None
    for n in gpus:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"scaling(gpus={tuple(gpus)!r}): GPU counts are whole numbers "
                             f">= 1, got {n!r}")
    for n in sorted(set(gpus)):
        if n == 1:
            continue
        nodes = -(-n // gpus_per_node)
        if parallel_kind == "ddp":
            if ddp_trace is None:
                ddp_trace = parallel_step(model, tuple(inputs), {}, parallel="ddp", gpus=2,
                                          train=True, loss_fn=loss_fn, optimizer=optimizer,
                                          rank_inputs=True)
            t = ddp_trace
        else:
            t = parallel_step(model, tuple(inputs), {}, parallel=parallel_kind, gpus=n,
                              train=True, loss_fn=loss_fn, optimizer=optimizer,
                              rank_inputs=True)
        points[n] = parallel(t, spec, nodes=nodes, gpus=n, one_gpu=t1, one_gpu_batch=batch,
                             **options)
    return Scaling(spec.name, parallel_kind, t1, batch, points)


def _batch_of(inputs: Sequence[Any]) -> int:
    import torch

    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            return int(x.shape[0])
    raise ValueError("scaling() needs a tensor input with a batch dimension")
