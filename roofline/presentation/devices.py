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
    "FP32 vector TFLOPS",
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
        _fmt(None if fp32 is None else fp32 / 1e12),
        side_by_side(spec.bandwidth_bytes_per_s, achievable.bandwidth("copy"), 1e12, 3),
        _fmt(None if memory is None else memory / 1e9, 0),
        _fmt(ridge, 0),
    )


def format_devices_table(specs: Iterable[DeviceSpec]) -> str:
    """Plain-text table of devices for the CLI, one row per device.

    Parameters
    ----------
    specs : iterable of DeviceSpec
        E.g. ``roofline.hardware.list_devices()``.

    Returns
    -------
    str
        Left-aligned text columns, numbers right-aligned, no trailing newline.
    """
    return _table(HEADERS, [device_row(spec) for spec in specs])


def devices_to_json(specs: Iterable[DeviceSpec]) -> str:
    """JSON list of the full specs in base units (FLOP/s, bytes/s, bytes, Hz, W, s)."""
    return json.dumps([spec.model_dump(mode="json") for spec in specs], indent=2)
