"""The shipped GEMM time models (``data/gemm.yaml``), fitted by ``benchmarks/fit_gemm.py`` to
measured per-shape tables, checked and attached to their devices' achievable figures.

A row with an implausible number (an efficiency above :data:`~.measured.CLOCK_MARGIN` of
the peak, a bandwidth share above 1, a floor outside its band), no source, an unknown
device, a dtype the device has no datasheet peak for (the fit derates that peak), or a
device and dtype listed twice is refused when the registry loads, naming the file and the
row.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from roofline._errors import DeviceSpecError
from roofline.hardware.measured import GemmFit, gemm_engine
from roofline.hardware.spec import DeviceSpec, validate_device
from roofline.hardware.units import canonical_dtype

GEMM_FILE = Path(__file__).parent / "data" / "gemm.yaml"


def read_gemm_fits(path: Path = GEMM_FILE) -> dict[str, dict[str, GemmFit]]:
    """Device name -> dtype -> :class:`GemmFit`, from a gemm.yaml file."""
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    rows = data.get("gemm") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise DeviceSpecError(f"{path}: expected a mapping with a 'gemm' list of rows")
    out: dict[str, dict[str, GemmFit]] = {}
    for i, row in enumerate(rows, 1):
        where = f"{path}, row {i}"
        if not isinstance(row, dict) or not isinstance(row.get("device"), str):
            raise DeviceSpecError(f"{where}: expected a mapping with a 'device' name")
        fields: dict[str, Any] = dict(row)
        device = fields.pop("device")
        try:
            dtype = canonical_dtype(str(fields.pop("dtype", "")))
            fit = GemmFit.model_validate(fields)
        except (ValidationError, ValueError) as exc:
            raise DeviceSpecError(f"{where} ({device}): {exc}") from None
        if dtype in out.setdefault(device, {}):
            raise DeviceSpecError(f"{where}: {device} {dtype} is listed twice")
        out[device][dtype] = fit
    return out


def with_gemm_fits(specs: Iterable[DeviceSpec], path: Path = GEMM_FILE) -> list[DeviceSpec]:
    """``specs`` with the fits of ``path`` added to their achievable figures."""
    specs = list(specs)
    fits = read_gemm_fits(path)
    names = {s.name for s in specs}
    unknown = sorted(set(fits) - names)
    if unknown:
        raise DeviceSpecError(f"{path}: no device named {', '.join(map(repr, unknown))} in "
                              "the shipped registry")
    out = []
    for spec in specs:
        if spec.name not in fits:
            out.append(spec)
            continue
        for dtype in fits[spec.name]:
            engine = gemm_engine(dtype)
            if spec.peak_flops_per_s(dtype, engine) is None:
                raise DeviceSpecError(f"{path}: the {spec.name} {dtype} row fits a share of a "
                                      f"{engine} {dtype} peak that the device does not list")
        data = spec.model_dump()
        achievable = data.get("achievable") or {}
        measured_on = {"compute_units": spec.compute_units}  # what the fit's chip had
        achievable["gemm"] = {**achievable.get("gemm", {}),
                              **{d: {**f.model_dump(), **measured_on}
                                 for d, f in fits[spec.name].items()}}
        data["achievable"] = achievable
        out.append(validate_device(data, origin=str(path)))
    return out
