"""How GPUs talk (hardware/topology.py, hardware/links.py): the link a topology picks
and the host link's bandwidth.

Expected figures: PCI-SIG's headline rates (Gen1 250 MB/s a lane, Gen3 x16 ~15.75 GB/s, Gen5
x16 ~63 GB/s, 128b/130b coding) and NCCL's PCIe model (``PCI_BW`` 12 GB/s of a Gen3 x16
link's 15.75, nccl@5067397 src/graph/topo.h), by hand.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from roofline.hardware import get_device
from roofline.hardware.spec import HostLink
from roofline.hardware.topology import topology


@pytest.mark.usefixtures("quiet")
def test_no_interconnect_falls_back_to_pcie() -> None:
    spec = get_device("h100").model_copy(update={"interconnect": None})
    top = topology(spec, 8)
    assert top.intra.kind == "PCIe Gen5 x16"
    assert top.intra.bus_bytes_per_s == pytest.approx(32e9 * 128 / 130 / 8 * 16 * 12 / 15.75)
    assert any("PCIe" in a and "no interconnect" in a for a in top.assumptions)


@pytest.mark.usefixtures("quiet")
def test_a_bridge_joins_two_gpus_only() -> None:
    spec = get_device("A100 PCIe 80GB")
    assert topology(spec, 2).intra.latency_class == "nvlink"
    assert topology(spec, 8).intra.kind.startswith("PCIe")


@pytest.mark.usefixtures("quiet")
def test_no_link_at_all_is_an_error() -> None:
    spec = get_device("h100").model_copy(update={"interconnect": None, "host_link": None})
    with pytest.raises(ValueError, match="neither interconnect figures nor a PCIe host link"):
        topology(spec, 8)


@pytest.mark.usefixtures("isolated_registry")
def test_host_link_bandwidth() -> None:
    # PCI-SIG's headline figures: Gen1 250 MB/s per lane, Gen3 x16 ~15.75 GB/s, Gen5 x16 ~63 GB/s
    assert HostLink(pcie_gen=1, lanes=1).bandwidth_bytes_per_s == pytest.approx(250e6)
    assert HostLink(pcie_gen=3, lanes=16).bandwidth_bytes_per_s == pytest.approx(15.75e9, rel=0.01)
    assert HostLink(pcie_gen=5, lanes=16).bandwidth_bytes_per_s == pytest.approx(63.0e9, rel=0.01)
    # Gen6 x16: above the TLP-only ~118 GB/s, below the raw 64 GT/s x 16 / 8 = 128 GB/s
    assert 118e9 < HostLink(pcie_gen=6, lanes=16).bandwidth_bytes_per_s < 128e9
    with pytest.raises(ValidationError):
        HostLink(pcie_gen=7, lanes=16)  # type: ignore[arg-type]
