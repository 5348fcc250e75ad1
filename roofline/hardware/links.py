"""Links of a device: to its peers (:class:`Interconnect`) and to the host (:class:`HostLink`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from roofline.hardware.quantities import BytesPerS

__all__ = ["PCIE_LANE_BYTES_PER_S", "HostLink", "Interconnect"]


class Interconnect(BaseModel):
    """Device-to-device link (NVLink, Infinity Fabric, ICI, RoCE ports, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(description="Link family and generation, e.g. 'NVLink 4'.")
    bandwidth_bytes_per_s: BytesPerS
    direction: Literal["bidirectional", "unidirectional"] = Field(
        description="Whether the bandwidth counts both directions or one."
    )


# Per-lane transfer rate (GT/s, one bit per transfer and lane) and the fraction of the bits
# left after line encoding, by PCIe generation. Gen1/2 use 8b/10b, Gen3-5 128b/130b (PCI-SIG,
# PCIe 3.0 FAQ, http://www.pcisig.com/news_room/faqs/pcie3.0_faq/). Gen6 runs 64 GT/s
# (PAM4) in 256-byte flits of 236 B TLP + 6 B data-link payload + 8 B CRC + 6 B FEC
# (https://glennklockwood.com/garden/PCIe-Gen6, after PCI-SIG and Synopsys): CRC and FEC
# are its coding overhead, 242/256. As for Gen1-5, link-layer traffic (what the 6 B DLP
# carries) is not subtracted; counting only TLP bytes would give 236/256, 2.5% less.
_PCIE_LINE_CODING: dict[int, tuple[float, float]] = {
    1: (2.5e9, 8 / 10), 2: (5e9, 8 / 10), 3: (8e9, 128 / 130), 4: (16e9, 128 / 130),
    5: (32e9, 128 / 130), 6: (64e9, 242 / 256),
}
#: Per-lane, per-direction payload rate of each PCIe generation in bytes/s: transfers/s x
#: line-coding efficiency / 8 bits.
PCIE_LANE_BYTES_PER_S: dict[int, float] = {
    gen: rate * efficiency / 8 for gen, (rate, efficiency) in _PCIE_LINE_CODING.items()}


class HostLink(BaseModel):
    """PCIe link to the host CPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pcie_gen: Literal[1, 2, 3, 4, 5, 6]
    lanes: Literal[1, 2, 4, 8, 16]

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Per-direction bandwidth in bytes/s (e.g. Gen5 x16: about 63 GB/s)."""
        return PCIE_LANE_BYTES_PER_S[self.pcie_gen] * self.lanes
