"""Plain-text and JSON views of device specs (``roofline devices``).

Peaks are shown as datasheet and achievable side by side, ``"3.350 | 2.693 (80%,
measured)"``: the achievable figure is measured, a class default or the datasheet itself
(``roofline.hardware.achievable``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from roofline.hardware import DeviceSpec
from roofline.hardware.achievable import Figure, figures
from roofline.presentation.tables import _table

__all__ = ["device_row", "devices_to_json", "format_devices_table", "side_by_side"]

HEADERS = (
    "Name",
    "Vendor",
    "BF16 matrix TFLOPS (datasheet | achievable)",
    "FP32 vector TFLOPS (datasheet | achievable)",
    "Bandwidth TB/s (datasheet | achievable, copy)",
    "Memory GB",
    "Ridge FLOP/B (BF16)",
)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def side_by_side(datasheet: float | None, achievable: Figure | None, scale: float,
                 digits: int = 1) -> str:
    """``"989.4 | 794.5 (80%, measured)"``: datasheet and achievable in one cell (``-`` if
    the datasheet has no figure)."""
    if datasheet is None:
        return "-"
    if achievable is None:
        return _fmt(datasheet / scale, digits)
    share = "" if achievable.share is None else f"{achievable.share:.0%}, "
    return (f"{_fmt(datasheet / scale, digits)} | {_fmt(achievable.value / scale, digits)} "
            f"({share}{achievable.origin})")


def device_row(spec: DeviceSpec) -> tuple[str, ...]:
    """The cells of one table row: name, vendor, peaks, bandwidth, memory, ridge point.

    Missing values (no BF16 matrix unit, no published figure) are shown as ``-``.
    """
    achievable = figures(spec)
    bf16 = spec.peak_flops_per_s("bf16", "matrix")
    fp32 = spec.peak_flops_per_s("fp32", "vector")
    memory = spec.memory_bytes
    ridge = spec.ridge_point("bf16", "matrix")
    return (
        spec.name,
        spec.vendor,
        side_by_side(bf16, achievable.matrix("bf16"), 1e12),
        side_by_side(fp32, achievable.vector("fp32"), 1e12),
        side_by_side(spec.bandwidth_bytes_per_s, achievable.bandwidth("copy"), 1e12, 3),
        _fmt(None if memory is None else memory / 1e9, 0),
        _fmt(ridge, 0),
    )


#: The narrow table's columns: the rates an analysis runs at (achievable figures).
NARROW_HEADERS = ("Name", "16-bit matrix TFLOPS", "FP32 TFLOPS", "Bandwidth TB/s",
                  "Memory GB", "Ridge FLOP/B")
#: Longest name shown in the narrow table.
NAME_WIDTH = 30


def narrow_row(spec: DeviceSpec) -> tuple[str, ...]:
    """One row of the narrow table: the achievable 16-bit matrix rate (bf16, else fp16,
    marked), fp32 vector rate and copy bandwidth, the memory, and their ridge point."""
    achievable = figures(spec)
    dtype = "bf16" if spec.peak_flops_per_s("bf16", "matrix") else "fp16"
    matrix = achievable.matrix(dtype)
    vector = achievable.vector("fp32")
    bandwidth = achievable.bandwidth("copy")
    name = spec.name if len(spec.name) <= NAME_WIDTH else spec.name[:NAME_WIDTH - 3] + "..."
    rate = "-" if matrix is None else _fmt(matrix.value / 1e12) + (
        "" if dtype == "bf16" else " fp16")
    ridge = matrix.value / bandwidth.value if matrix is not None and bandwidth.value else None
    return (name, rate, _fmt(None if vector is None else vector.value / 1e12),
            _fmt(bandwidth.value / 1e12, 2),
            _fmt(None if spec.memory_bytes is None else spec.memory_bytes / 1e9, 0),
            _fmt(ridge, 0))


def format_devices_table(specs: Iterable[DeviceSpec], wide: bool = False) -> str:
    """Plain-text table of devices for the CLI, one row per device.

    Parameters
    ----------
    specs : iterable of DeviceSpec
        E.g. ``roofline.hardware.list_devices()``.
    wide : datasheet and achievable figures side by side with their origin (about 200
        columns); by default the achievable figures alone, in under 100 columns.

    Returns
    -------
    str
        Left-aligned text columns, numbers right-aligned, no trailing newline.
    """
    specs = list(specs)
    if wide:
        return _table(HEADERS, [device_row(spec) for spec in specs])
    return (_table(NARROW_HEADERS, [narrow_row(spec) for spec in specs], left=1) + "\n"
            "(the rates an analysis runs at, measured or its class's default; --wide: "
            "the datasheet too)")


def devices_to_json(specs: Iterable[DeviceSpec]) -> str:
    """JSON list of the full specs in base units (FLOP/s, bytes/s, bytes, Hz, W, s)."""
    return json.dumps([spec.model_dump(mode="json") for spec in specs], indent=2)
