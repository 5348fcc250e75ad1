"""What one collective costs on a link: nccl-tests' bus bandwidth and NCCL's latency model.

A collective of size ``S`` takes ``latency + S x factor / bus_bandwidth``. The factor is
nccl-tests' (NVIDIA/nccl-tests@a0b82b2260cf5152b9f8c061bbf7eaf0ba096432
doc/PERFORMANCE.md): all-reduce ``2(n-1)/n``, all-gather, reduce-scatter and all-to-all
``(n-1)/n``, broadcast and reduce ``1``. ``bus_bytes_per_s`` is the link's bus bandwidth
(:mod:`roofline.hardware.topology`); ``algorithm_bytes_per_s = bus / factor`` is the rate
``S`` itself moves at. The latency and the algorithm (ring, or tree for all-reduce) and
protocol (LL or Simple) are NCCL's model (nccl@5067397 src/graph/tuning.cc): the fastest
of them is taken, as NCCL's tuner does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofline.hardware.topology import (
    BASE_LATENCY_S,
    HOP_LATENCY_S,
    LL_BANDWIDTH_SHARE,
    Topology,
)
from roofline.tracing.records import Collective

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
