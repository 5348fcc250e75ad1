"""Plain-text tables (presentation/tables.py, presentation/devices.py): one renderer
aligns every table; the device table and JSON show the registry's datasheet figures.
"""

from __future__ import annotations

import json

import pytest

from roofline.hardware import DeviceSpec, get_device
from roofline.hardware import registry as registry_module
from roofline.presentation.devices import devices_to_json, format_devices_table

SHIPPED = [spec for spec, _ in registry_module._builtin()]  # shipped devices only
IDS = [spec.name for spec in SHIPPED]


def test_one_table_renderer_aligns_every_table() -> None:
    """The analysis, device, memory and collective tables share tables._table: names
    left-aligned, numbers right-aligned, a rule under the header only when asked for, and
    a given width kept as a format spec keeps it."""
    from roofline.presentation.tables import _table

    assert _table(["op", "time"], [["mm", "1 ms"], ["add", "12 us"]], left=1) == (
        "op    time\n---  -----\nmm    1 ms\nadd  12 us")
    assert _table(["kind", "bytes"], [["input", "8 B"]], left=1, sep=" ", indent="  ",
                  rule=False, widths=(6, 6)) == ("  kind    bytes\n  input     8 B")
    assert _table(None, [["tensors", "1 GB"]], left=1, widths=(3, 5)) == "tensors   1 GB"


# --- devices (presentation/devices.py) ----------------------------------------------------

@pytest.mark.usefixtures("isolated_registry")
def test_format_devices_table() -> None:
    """Narrow (issue 24, item 8): the rates an analysis runs at, in under 100 columns; the
    H100's from nvidia.yaml: bf16 794.5 TFLOP/s measured (MAMF), 2693 GB/s (FluidX3D),
    fp32 52.0 TFLOP/s (SGEMM, zzc-db: 51.88 and 52.11), ridge 794.5 / 2.693 = 295 FLOP/B."""
    text = format_devices_table([get_device("H100 SXM"), get_device("T4")])
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["Name", "16-bit", "matrix", "TFLOPS"]
    h100_row = next(line for line in lines if line.startswith("H100 SXM"))
    assert h100_row.split()[2:] == ["794.5", "52.0", "2.69", "80", "295"]
    t4_row = next(line for line in lines if line.startswith("T4"))
    assert t4_row.split()[2] == "fp16"  # no bf16 on Turing: its fp16 figure, named
    shipped = format_devices_table(SHIPPED).splitlines()
    assert len(shipped) == len(SHIPPED) + 3  # header, rule, the note under the table
    assert max(map(len, shipped)) < 100


def test_format_devices_table_wide_has_datasheet_and_achievable() -> None:
    lines = format_devices_table([get_device("H100 SXM"), get_device("T4")],
                                 wide=True).splitlines()
    assert "datasheet | achievable" in lines[0]
    h100_row = next(line for line in lines if line.startswith("H100 SXM"))
    assert "989.4 | 794.5 (80%, measured)" in h100_row  # 794.5 / 989.4 = 80.3%
    assert "3.350 | 2.693 (80%, measured)" in h100_row  # 2.693 / 3.35 = 80.4%
    assert "66.9 | 52.0 (78%, measured)" in h100_row  # SGEMM (zzc-db): 51.995 / 66.9 = 77.7%


@pytest.mark.usefixtures("isolated_registry")
def test_devices_to_json() -> None:
    data = json.loads(devices_to_json(SHIPPED[:3]))
    assert [item["name"] for item in data] == IDS[:3]
    assert DeviceSpec.model_validate(data[0]) == SHIPPED[0]
