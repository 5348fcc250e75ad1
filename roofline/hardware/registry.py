"""Registry of known devices: shipped data files, the user's folder, runtime registrations.

Shipped specs live in ``roofline/hardware/data/<vendor>.yaml``; users add their own in
``platformdirs.user_config_dir("roofline")/devices/*.yaml`` (or the folder named by the
``ROOFLINE_DEVICES_DIR`` environment variable) or call :func:`register_device`. Files are
read with ``yaml.safe_load`` and validated on first lookup.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from roofline.hardware.spec import DeviceSpec, DeviceSpecError, validate_device

__all__ = [
    "DATA_DIR",
    "AmbiguousDeviceError",
    "UnknownDeviceError",
    "get_device",
    "list_devices",
    "load_device",
    "register_device",
    "user_devices_dir",
]

DATA_DIR = Path(__file__).parent / "data"
#: Shipped data files, in listing order.
VENDOR_FILES = ("nvidia", "amd", "intel", "google", "apple", "cpu")
ENV_VAR = "ROOFLINE_DEVICES_DIR"

# Leading words that torch.cuda.get_device_name() and people add to product names.
_PREFIXES = (
    "nvidia",
    "geforce",
    "tesla",
    "quadro",
    "amd",
    "instinct",
    "radeon",
    "intel",
    "google",
    "apple",
)


class UnknownDeviceError(LookupError):
    """No device matches the name; the message lists the closest names."""


class AmbiguousDeviceError(LookupError):
    """Several devices match the name; the message lists the candidates."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


def normalise(name: str) -> str:
    """Lookup key: lower case without spaces and punctuation ("H100-SXM" -> "h100sxm")."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _strip_prefixes(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                key, changed = key[len(prefix) :], True
    return key


@dataclass
class _Registry:
    specs: dict[str, DeviceSpec] = field(default_factory=dict)  # name -> spec
    origins: dict[str, str] = field(default_factory=dict)  # name -> file (or "register_device()")
    keys: dict[str, str] = field(default_factory=dict)  # normalised name/alias -> name

    def add(self, spec: DeviceSpec, origin: str, overwrite: bool = False) -> None:
        if overwrite and spec.name in self.specs:
            self.remove(spec.name)
        for label in (spec.name, *spec.aliases):
            other = self.keys.get(normalise(label))
            if other is not None:
                field_name = "name" if label == spec.name else "aliases"
                raise DeviceSpecError(
                    f"{origin}: device '{spec.name}': field '{field_name}': {label!r} is already "
                    f"used by device '{other}' from {self.origins[other]}"
                )
        self.specs[spec.name] = spec
        self.origins[spec.name] = origin
        for label in (spec.name, *spec.aliases):
            self.keys[normalise(label)] = spec.name

    def remove(self, name: str) -> None:
        del self.specs[name], self.origins[name]
        self.keys = {k: v for k, v in self.keys.items() if v != name}


_registered: dict[str, DeviceSpec] = {}  # register_device() calls, in order
_cache: dict[str, _Registry] = {}  # user folder -> merged registry


def _reset() -> None:
    """Forget runtime registrations and cached user files (for tests)."""
    _registered.clear()
    _cache.clear()


def user_devices_dir() -> Path:
    """Folder of the user's device files: ``$ROOFLINE_DEVICES_DIR`` or the platform config dir."""
    override = os.environ.get(ENV_VAR)
    return (
        Path(override) if override else Path(platformdirs.user_config_dir("roofline")) / "devices"
    )


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise DeviceSpecError(f"{path}: cannot parse: {exc}") from exc


def _load_file(path: Path) -> tuple[list[DeviceSpec], bool]:
    """Specs in ``path`` and whether the file holds a single device mapping."""
    data = _read(path)
    single = isinstance(data, Mapping) and "devices" not in data
    if isinstance(data, Mapping) and "devices" in data:
        data = data["devices"]
    entries = [data] if single else data
    if (
        not isinstance(entries, list)
        or not entries
        or not all(isinstance(e, Mapping) for e in entries)
    ):
        raise DeviceSpecError(f"{path}: expected a device mapping or a list of device mappings")
    return [validate_device(dict(entry), origin=str(path)) for entry in entries], single


@functools.cache
def _builtin() -> tuple[tuple[DeviceSpec, str], ...]:
    return tuple((spec, str(path)) for path in _data_files() for spec in _load_file(path)[0])


def _data_files() -> list[Path]:
    return [
        DATA_DIR / f"{vendor}.yaml"
        for vendor in VENDOR_FILES
        if (DATA_DIR / f"{vendor}.yaml").exists()
    ]


def _registry() -> _Registry:
    folder = user_devices_dir()
    cached = _cache.get(str(folder))
    if cached is None:
        cached = _Registry()
        for spec, origin in _builtin():
            cached.add(spec, origin)
        if folder.is_dir():
            for path in sorted(
                [*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.json")]
            ):
                for spec in _load_file(path)[0]:
                    cached.add(spec, str(path))
        _cache.clear()
        _cache[str(folder)] = cached
    for name, spec in _registered.items():
        if cached.specs.get(name) is not spec:
            cached.add(spec, "register_device()", overwrite=True)
    return cached


def load_device(path: str | os.PathLike[str]) -> DeviceSpec | list[DeviceSpec]:
    """Read and validate a YAML or JSON device file (same schema as the shipped data).

    Parameters
    ----------
    path : str or PathLike
        File with one device mapping, a list of them, or ``{"devices": [...]}``.

    Returns
    -------
    DeviceSpec or list of DeviceSpec
        One spec for a single mapping, a list otherwise. Not registered; see
        :func:`register_device`.

    Raises
    ------
    DeviceSpecError
        Naming the file, the device and the field that failed.
    """
    specs, single = _load_file(Path(path))
    return specs[0] if single else specs


def register_device(spec: DeviceSpec | Mapping[str, Any], overwrite: bool = False) -> DeviceSpec:
    """Make ``spec`` available to :func:`get_device` and :func:`list_devices` for this process.

    Parameters
    ----------
    spec : DeviceSpec or mapping
        The device; a mapping is validated first.
    overwrite : bool
        Replace a device of the same name instead of raising.

    Returns
    -------
    DeviceSpec
        The registered spec.

    Raises
    ------
    DeviceSpecError
        If the name or an alias is taken by another device (or by the same name and
        ``overwrite`` is false).
    """
    if not isinstance(spec, DeviceSpec):
        spec = validate_device(dict(spec), origin="register_device()")
    registry = _registry()
    if spec.name in registry.specs and not overwrite:
        raise DeviceSpecError(
            f"register_device(): device '{spec.name}': field 'name': already defined in "
            f"{registry.origins[spec.name]}; pass overwrite=True to replace it"
        )
    registry.add(spec, "register_device()", overwrite=True)
    _registered[spec.name] = spec
    return spec


def list_devices(vendor: str | None = None, kind: str | None = None) -> list[DeviceSpec]:
    """All known devices, optionally filtered by vendor and kind (case-insensitive)."""
    return [
        spec
        for spec in _registry().specs.values()
        if (vendor is None or spec.vendor.lower() == vendor.lower())
        and (kind is None or spec.kind == kind.lower())
    ]


def get_device(name: str | DeviceSpec) -> DeviceSpec:
    """Look a device up by name, alias or ``torch.cuda.get_device_name()`` string.

    Matching ignores case, spaces and punctuation; vendor words such as "NVIDIA",
    "GeForce", "Tesla" or "AMD Instinct" are optional. A name that is part of several
    device names (and no exact alias) is ambiguous.

    Parameters
    ----------
    name : str or DeviceSpec
        E.g. ``"h100"``, ``"NVIDIA H100 80GB HBM3"``, ``"A100-SXM4-40GB"``, ``"tpu-v5e"``;
        a DeviceSpec is returned unchanged.

    Raises
    ------
    AmbiguousDeviceError
        Listing the candidate devices.
    UnknownDeviceError
        Listing the closest names.
    """
    if isinstance(name, DeviceSpec):
        return name
    registry = _registry()
    key = normalise(name)
    for candidate in (key, _strip_prefixes(key)):
        if candidate in registry.keys:
            return registry.specs[registry.keys[candidate]]
    stripped = _strip_prefixes(key)
    if stripped:
        matches = _unique(registry.keys[k] for k in registry.keys if stripped in k)
        if len(matches) == 1:
            return registry.specs[matches[0]]
        if matches:
            raise AmbiguousDeviceError(
                f"{name!r} matches several devices: {', '.join(matches)}; use one of these names",
                matches,
            )
    close = _unique(
        registry.keys[k]
        for k in difflib.get_close_matches(key, list(registry.keys), n=10, cutoff=0.5)
    )
    hint = f" Did you mean: {', '.join(close[:5])}?" if close else ""
    raise UnknownDeviceError(
        f"unknown device {name!r}.{hint} See list_devices(), or add your own with "
        f"register_device() or a YAML file in {user_devices_dir()}."
    )


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))
