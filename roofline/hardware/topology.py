"""How GPUs talk: the links of a node, the network between nodes, and NCCL's constants.

A :class:`Topology` is ``nodes`` x ``gpus_per_node`` GPUs of one device. Within a node the
GPUs use the device's interconnect (``DeviceSpec.interconnect``: NVLink through NVSwitch,
or a bridge joining 2 or 4 GPUs), else its PCIe host link (``DeviceSpec.host_link``);
between nodes, the node's network adapters (InfiniBand or Ethernet). Each link is given as
a *bus bandwidth* in nccl-tests' sense: the per-GPU rate a collective's bus traffic moves
at, whatever the number of ranks (NVIDIA/nccl-tests@a0b82b2260cf5152b9f8c061bbf7eaf0ba096432
doc/PERFORMANCE.md, "Bus bandwidth").

Sources of the constants (each read at the commit named):

* NCCL's own topology model, NVIDIA/nccl@5067397c2676d5aed50042fc39e5c8ee96eb0027
  src/graph/topo.h: the bandwidth NCCL assumes per NVLink link (``SM70_NVLINK_BW 20.0``,
  ``SM80_NVLINK_BW 20.0``, ``SM90_NVLINK_BW 20.6``, ``SM100_NVLINK_BW 40.1`` GB/s),
  per PCIe Gen3 x16 link (``PCI_BW 12.0``) and per 100 Gbit NIC (``NET_BW 12.0``). Over
  the datasheet's per-direction rate of the same link (NVLink 2-4: 25 GB/s a link, NVLink
  5: 50 GB/s; PCIe Gen3 x16: 15.75 GB/s; 100 Gbit: 12.5 GB/s) they give the share of a
  link a collective reaches, :data:`LINK_EFFICIENCY`.
* NCCL's latency model, same commit, src/graph/tuning.cc (``ncclTunerConstantsDefaults``):
  a base latency per algorithm and protocol plus a latency per hop by link type, in
  microseconds (:data:`BASE_LATENCY_S`, :data:`HOP_LATENCY_S`).
* The network of a node: NVIDIA DGX BasePOD reference architecture, "Core Components"
  (https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html):
  a DGX H100 serves its compute fabric with "eight single-port NVIDIA ConnectX-7 VPI, up
  to 400 Gb/s InfiniBand/Ethernet" (:data:`DEFAULT_NICS`, :data:`DEFAULT_NIC_BITS_PER_S`).
  The registry has no network field; this default stands in until it does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from roofline._checks import number, whole
from roofline.hardware.links import HostLink, Interconnect
from roofline.hardware.spec import DeviceSpec

#: Share of a link's per-direction datasheet rate NCCL's model assumes a collective gets
#: (nccl@5067397 src/graph/topo.h over the datasheet rate, see the module docstring).
LINK_EFFICIENCY: dict[str, float] = {
    "NVLink 1": 18.0 / 20.0,  # SM60_NVLINK_BW over NVLink 1's 20 GB/s a link and direction
    "NVLink 2": 20.0 / 25.0,  # SM70_NVLINK_BW
    "NVLink 3": 20.0 / 25.0,  # SM80_NVLINK_BW
    "NVLink 4": 20.6 / 25.0,  # SM90_NVLINK_BW
    "NVLink 5": 40.1 / 50.0,  # SM100_NVLINK_BW
    "PCIe": 12.0 / 15.75,  # PCI_BW over Gen3 x16 (8 GT/s x 128/130 / 8 x 16 lanes)
    "network": 12.0 / 12.5,  # NET_BW over 100 Gbit/s
}

#: NCCL base latency (seconds) by (algorithm, protocol): tuning.cc ``baseLatencies``.
BASE_LATENCY_S: dict[tuple[str, str], float] = {
    ("tree", "LL"): 6.8e-6, ("tree", "Simple"): 8.4e-6,
    ("ring", "LL"): 6.6e-6, ("ring", "Simple"): 8.4e-6,
}
#: NCCL latency per step (seconds) by (link, algorithm, protocol): tuning.cc
#: ``hwLatencies`` (NVLINK, PCI, NET rows).
HOP_LATENCY_S: dict[tuple[str, str, str], float] = {
    ("nvlink", "tree", "LL"): 0.6e-6, ("nvlink", "tree", "Simple"): 4.0e-6,
    ("nvlink", "ring", "LL"): 0.6e-6, ("nvlink", "ring", "Simple"): 3.4e-6,
    ("pcie", "tree", "LL"): 1.0e-6, ("pcie", "tree", "Simple"): 4.0e-6,
    ("pcie", "ring", "LL"): 1.0e-6, ("pcie", "ring", "Simple"): 5.7e-6,
    ("network", "tree", "LL"): 5.0e-6, ("network", "tree", "Simple"): 14.0e-6,
    ("network", "ring", "LL"): 2.7e-6, ("network", "ring", "Simple"): 14.0e-6,
}
#: The LL protocol's bus bandwidth relative to Simple: tuning.cc, ``busBw * .5`` for
#: ring/LL (and at most ``llMaxBw``, not modelled).
LL_BANDWIDTH_SHARE = 0.5

#: Network adapters per node and their line rate (DGX H100, see the module docstring).
DEFAULT_NICS = 8
#: GPUs an NVSwitch node joins (DGX H100: eight, the same reference architecture).
DGX_GPUS_PER_NODE = 8
DEFAULT_NIC_BITS_PER_S = 400e9


@dataclass(frozen=True)
class Link:
    """One level of the topology: its kind, bus bandwidth and NCCL latency class."""

    kind: str  # e.g. "NVLink 4", "PCIe Gen5 x16", "InfiniBand 8 x 400 Gb/s"
    bus_bytes_per_s: float  # per GPU, what a collective's bus traffic reaches
    latency_class: str  # "nvlink" | "pcie" | "network"
    assumption: str = ""  # how the figure was obtained, in words


@dataclass(frozen=True)
class Topology:
    """``nodes`` x ``gpus_per_node`` GPUs: the link within a node and the one between.

    Attributes
    ----------
    device : the GPU's name.
    nodes, gpus_per_node : the shape.
    intra : the link between GPUs of a node.
    inter : the network between nodes (None for one node).
    assumptions : how the links were chosen and rated, in words.
    """

    device: str
    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link | None
    assumptions: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def link_for(self, group_size: int) -> tuple[Link, int]:
        """The bottleneck link of a collective over ``group_size`` ranks, and the nodes it
        spans (a group is laid out on as few nodes as hold it: data parallelism over all
        GPUs spans every node; tensor parallelism inside a node spans one)."""
        nodes = max(1, -(-group_size // self.gpus_per_node))
        if nodes == 1 or self.inter is None:
            return self.intra, 1
        # NCCL's rings cross each node boundary once per channel, one channel per NIC:
        # busBw = nChannels x min(bwIntra, bwInter) (tuning.cc): the slower of the two
        if self.inter.bus_bytes_per_s < self.intra.bus_bytes_per_s:
            return self.inter, nodes
        return Link(self.intra.kind, self.intra.bus_bytes_per_s, "network",
                    self.intra.assumption), nodes


def _generation(kind: str) -> str | None:
    m = re.match(r"\s*NVLink\s+(\d)", kind)
    return f"NVLink {m.group(1)}" if m else None


def _bridge_gpus(kind: str) -> int | None:
    """GPUs a bridge joins ("NVLink 3 (bridge)": 2; "(2- or 4-way bridge)": 4)."""
    if "bridge" not in kind.lower():
        return None
    m = re.search(r"(\d)-way", kind)
    return int(m.group(1)) if m else 2


def _pcie_link(name: str, link: HostLink | None, why: str) -> Link:
    """The PCIe host link of device ``name`` as the link between its GPUs."""
    if link is None:
        raise ValueError(
            f"{name} has neither interconnect figures nor a PCIe host link in the "
            "registry: nothing to cost its collectives with. Add interconnect: {kind, "
            "bandwidth_bytes_per_s, direction} or host_link: {pcie_gen, lanes} to its entry "
            "(roofline.register_device)")
    rate = link.bandwidth_bytes_per_s * LINK_EFFICIENCY["PCIe"]
    return Link(f"PCIe Gen{link.pcie_gen} x{link.lanes}", rate, "pcie",
                f"{why}: GPUs talk over PCIe Gen{link.pcie_gen} x{link.lanes} "
                f"({link.bandwidth_bytes_per_s / 1e9:.1f} GB/s a direction) at NCCL's "
                f"{LINK_EFFICIENCY['PCIe']:.0%} of it, through the host (no peer-to-peer "
                "switch modelled)")


def intra_node_link(spec: DeviceSpec, gpus_per_node: int) -> Link:
    """The link between ``gpus_per_node`` GPUs of ``spec`` in one node.

    The interconnect when it joins them all (NVLink/NVSwitch, or a bridge of at least that
    many GPUs), else the PCIe host link; ValueError when the device has neither.
    """
    ic: Interconnect | None = spec.interconnect
    if ic is None:
        return _pcie_link(spec.name, spec.host_link, f"{spec.name} lists no interconnect")
    bridge = _bridge_gpus(ic.kind)
    if bridge is not None and gpus_per_node > bridge:
        return _pcie_link(spec.name, spec.host_link,
                          f"{spec.name}'s {ic.kind} joins {bridge} GPUs, not {gpus_per_node}")
    per_direction = (ic.bandwidth_bytes_per_s / 2 if ic.direction == "bidirectional"
                     else ic.bandwidth_bytes_per_s)
    gen = _generation(ic.kind)
    if gen in LINK_EFFICIENCY:
        share = LINK_EFFICIENCY[gen]
        note = (f"{ic.kind}: {per_direction / 1e9:.0f} GB/s a direction at NCCL's "
                f"{share:.0%} of it (its per-link model), all GPUs of a node joined "
                "(NVSwitch or a bridge)")
    else:
        share = 1.0
        note = (f"{ic.kind}: {per_direction / 1e9:.0f} GB/s a direction, used whole (NCCL "
                "gives no efficiency for this link: an upper bound)")
    return Link(ic.kind, per_direction * share, "nvlink", note)


def network_link(nics: int = DEFAULT_NICS,
                 nic_bits_per_s: float = DEFAULT_NIC_BITS_PER_S) -> Link:
    """A node's network: ``nics`` adapters of ``nic_bits_per_s`` each, at NCCL's share."""
    if nics < 1 or not nic_bits_per_s > 0:
        raise ValueError(f"a network needs nics >= 1 and nic_bits_per_s > 0, got {nics}, "
                         f"{nic_bits_per_s}")
    total = nics * nic_bits_per_s / 8
    rate = total * LINK_EFFICIENCY["network"]
    return Link(f"network {nics} x {nic_bits_per_s / 1e9:.0f} Gb/s", rate, "network",
                f"between nodes: {nics} x {nic_bits_per_s / 1e9:.0f} Gb/s adapters "
                f"({total / 1e9:.0f} GB/s a node) at NCCL's "
                f"{LINK_EFFICIENCY['network']:.0%}; one NIC per ring channel")


def topology(spec: DeviceSpec, gpus: int, nodes: int = 1, *, nics: int = DEFAULT_NICS,
             nic_bits_per_s: float = DEFAULT_NIC_BITS_PER_S) -> Topology:
    """``gpus`` GPUs of ``spec`` spread evenly over ``nodes`` nodes."""
    for name, value in (("gpus", gpus), ("nodes", nodes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if gpus % nodes:
        raise ValueError(f"{gpus} GPUs do not spread evenly over {nodes} nodes")
    whole("nics", nics)
    number("nic_bits_per_s", nic_bits_per_s, above=0)
    per_node = gpus // nodes
    intra = intra_node_link(spec, max(per_node, 2))
    inter = network_link(nics, nic_bits_per_s) if nodes > 1 else None
    shape = (f"{gpus} GPUs: {nodes} nodes of {per_node}" if nodes > 1
             else f"{gpus} GPUs in one node")
    if per_node > DGX_GPUS_PER_NODE:
        shape += (f" (NVSwitch nodes such as the DGX hold {DGX_GPUS_PER_NODE}; nodes= "
                  "spreads them)")
    notes = [shape, intra.assumption] + ([inter.assumption] if inter else [])
    return Topology(spec.name, nodes, per_node, intra, inter, notes)
