"""Registry of known devices: shipped data files, the user's folder, runtime registrations.

Shipped specs live in ``roofline/hardware/data/<vendor>.yaml``; users add their own in
``platformdirs.user_config_dir("roofline")/devices/*.yaml`` (or the folder named by the
``ROOFLINE_DEVICES_DIR`` environment variable) or call :func:`register_device`. Files are
read with a ``yaml.SafeLoader`` that rejects duplicate keys and validated on first lookup;
a user file that fails is skipped with a :class:`DeviceFileWarning`.

Name lookup (:func:`get_device`) resolves a name only when it names one device: exactly (case,
spaces and punctuation aside), or token by token (every word of a registered name or alias
present, the other words of the query only "filler" that agrees with the device: vendor
words, its memory size or type, its form factor). A near miss ("rtx 2080" for the RTX 2080
Ti, "NVIDIA H20" for the H200) is never substituted: the error suggests similar names, found
from a word boundary on ("Apple M3" suggests the M3 Max, not "H100 80GB HBM3"); only a name
that leaves out nothing but memory or form factor ("A100 PCIe") is called ambiguous.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from roofline._errors import (
    AmbiguousDeviceError,
    DeviceFileWarning,
    DeviceSpecError,
    UnknownDeviceError,
    warn,
)
from roofline.hardware.gemm_fits import with_gemm_fits
from roofline.hardware.spec import DeviceSpec, validate_device

__all__ = [
    "DATA_DIR",
    "AmbiguousDeviceError",
    "DeviceFileWarning",
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

# Leading words that torch.cuda.get_device_name() and people add to product names; only
# used to find suggestions for a name that resolves to nothing.
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
# Filler words by vendor (lower case): brand words that name no product of their own.
# "Quadro" is not filler: "Quadro RTX 6000" (Turing) and "RTX 6000 Ada" are two products.
_VENDOR_WORDS: dict[str, frozenset[str]] = {
    "nvidia": frozenset({"nvidia", "geforce", "tesla"}),
    "amd": frozenset({"amd", "instinct", "radeon"}),
    "intel": frozenset({"intel", "habana"}),
    "google": frozenset({"google", "cloud"}),
    "apple": frozenset({"apple"}),
}
_TRADEMARKS = frozenset({"r", "tm"})  # "Intel(R) Xeon(R)"
_FORM_FACTOR_WORD = re.compile(r"sxm\d?|pcie|oam")
_MEMORY_SIZE_WORD = re.compile(r"(\d+(?:\.\d+)?)(gb|gib)")
_MEMORY_TYPE_WORD = re.compile(r"(hbm|gddr|lpddr|ddr)\d*[a-z]?")
_CLOCK_WORD = re.compile(r"\d+(?:\.\d+)?[mg]hz")
_CORES_WORD = re.compile(r"(\d+)core")
# A memory-size word agrees with the device within 10%: "32GB" for a 32 GiB TPU v4.
_MEMORY_SIZE_TOLERANCE = 0.10


class _DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(f"line {line}: duplicate key {key!r} (first at line {first_line})")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises on a key repeated in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKeyError(key, line, seen[key])
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _unique_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def normalise(name: str) -> str:
    """Lookup key: lower case without spaces and punctuation ("H100-SXM" -> "h100sxm")."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _tokens(name: str) -> frozenset[str]:
    """Words of a name: "NVIDIA A100-SXM4-80GB" -> {nvidia, a100, sxm4, 80gb}."""
    text = re.sub(r"(\d+)[\s-]+core", r"\1core", name.lower())  # "96-Core" is one word
    return frozenset(re.findall(r"[0-9a-z]+(?:\.[0-9]+[a-z]*)?\+?", text))


def _strip_prefixes(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                key, changed = key[len(prefix) :], True
    return key


def _is_filler(word: str, spec: DeviceSpec) -> bool:
    """Whether ``word`` in a query may go beyond ``spec``'s name: it adds nothing or agrees."""
    if word in _TRADEMARKS or word in _VENDOR_WORDS.get(spec.vendor.lower(), ()):
        return True
    if _FORM_FACTOR_WORD.fullmatch(word):
        words = _tokens(spec.form_factor or "")
        return word in words or (word == "sxm" and any(t.startswith("sxm") for t in words))
    if size := _MEMORY_SIZE_WORD.fullmatch(word):
        return _agrees_memory_size(float(size.group(1)), spec.memory_bytes)
    if kind := _MEMORY_TYPE_WORD.fullmatch(word):
        memory = normalise(spec.memory_type or "")
        return bool(memory) and word in (memory, kind.group(1)) and memory.startswith(kind.group(1))
    if spec.kind == "cpu":
        return _is_cpu_filler(word, spec.compute_units)
    return word == "gpu" and spec.kind == "gpu"


def _agrees_memory_size(number: float, memory_bytes: float | None) -> bool:
    """Whether ``number`` GB (or GiB) is ``memory_bytes``, within the tolerance."""
    if not memory_bytes:
        return False
    return any(abs(number * unit - memory_bytes) <= _MEMORY_SIZE_TOLERANCE * memory_bytes
               for unit in (1e9, 2.0**30))


def _is_cpu_filler(word: str, compute_units: int | None) -> bool:
    """"CPU", "processor", a clock, or the core count of a CPU with ``compute_units`` cores."""
    cores = _CORES_WORD.fullmatch(word)
    if cores:
        return compute_units in (None, int(cores.group(1)))
    return word in ("cpu", "processor") or bool(_CLOCK_WORD.fullmatch(word))


@dataclass
class _Registry:
    specs: dict[str, DeviceSpec] = field(default_factory=dict)  # name -> spec
    origins: dict[str, str] = field(default_factory=dict)  # name -> file (or "register_device()")
    keys: dict[str, str] = field(default_factory=dict)  # normalised name/alias -> name
    user_files: set[str] = field(default_factory=set)  # the user files added

    def check(self, specs: Sequence[DeviceSpec], origin: str, replace: bool = False) -> None:
        """Raise DeviceSpecError if adding ``specs`` would clash; changes nothing.

        With ``replace``, the keys of a registered device of the same name are free.
        """
        taken: dict[str, tuple[str, str]] = {}  # key -> (device, its origin)
        for spec in specs:
            if spec.name in self.specs and not replace:
                raise DeviceSpecError(
                    f"{origin}: device '{spec.name}': field 'name': {spec.name!r} is already "
                    f"used by device '{spec.name}' from {self.origins[spec.name]}"
                )
            for label in (spec.name, *spec.aliases):
                key = normalise(label)
                other = self.keys.get(key)
                other_origin = self.origins.get(other or "", "")
                if other is not None and replace and other == spec.name:
                    other = None
                if other is None and key in taken and taken[key][0] != spec.name:
                    other, other_origin = taken[key]
                if other is not None:
                    field_name = "name" if label == spec.name else "aliases"
                    raise DeviceSpecError(
                        f"{origin}: device '{spec.name}': field '{field_name}': {label!r} is "
                        f"already used by device '{other}' from {other_origin}"
                    )
                taken[key] = (spec.name, origin)

    def add(self, specs: Sequence[DeviceSpec], origin: str, replace: bool = False) -> None:
        """Add ``specs`` all or none (a clash raises before anything changes)."""
        self.check(specs, origin, replace)
        for spec in specs:
            if spec.name in self.specs:
                self.remove(spec.name)
            self.specs[spec.name] = spec
            self.origins[spec.name] = origin
            for label in (spec.name, *spec.aliases):
                self.keys[normalise(label)] = spec.name

    def remove(self, name: str) -> None:
        del self.specs[name], self.origins[name]
        self.keys = {k: v for k, v in self.keys.items() if v != name}

    def clashing_files(self, spec: DeviceSpec) -> list[str]:
        """The user files holding another device that a label of ``spec`` names (a device
        of ``spec``'s own name it would replace, not clash with)."""
        owners = {self.keys.get(normalise(label)) for label in (spec.name, *spec.aliases)}
        return sorted({self.origins[name] for name in owners
                       if name is not None and name != spec.name} & self.user_files)

    def remove_file(self, origin: str) -> list[DeviceSpec]:
        """Take out the devices added from ``origin``, and return them."""
        specs = [spec for name, spec in self.specs.items() if self.origins[name] == origin]
        for spec in specs:
            self.remove(spec.name)
        self.user_files.discard(origin)
        return specs


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
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeviceSpecError(f"{path}: cannot read: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text, object_pairs_hook=_unique_json_keys)
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except (ValueError, yaml.YAMLError) as exc:  # JSONDecodeError is a ValueError
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
    loaded = [(spec, str(path)) for path in _data_files() for spec in _load_file(path)[0]]
    fitted = with_gemm_fits(spec for spec, _ in loaded)
    return tuple((spec, origin) for spec, (_, origin) in zip(fitted, loaded, strict=True))


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
            cached.add([spec], origin)
        if folder.is_dir():
            for path in sorted(
                [*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.json")]
            ):
                _add_user_file(cached, path)
        _cache.clear()
        _cache[str(folder)] = cached
    for name, spec in _registered.items():
        if cached.specs.get(name) is not spec:
            _add_registered(cached, spec)
    return cached


def _add_user_file(registry: _Registry, path: Path) -> None:
    """Add the devices of one user file, or skip the whole file with a warning."""
    try:
        specs = _load_file(path)[0]
    except DeviceSpecError as exc:  # one broken file must not break every lookup
        warn(f"skipped device file {path}: {exc}", DeviceFileWarning)
    else:
        _add_user_specs(registry, str(path), specs)


def _add_user_specs(registry: _Registry, path: str, specs: Sequence[DeviceSpec]) -> None:
    """Add the devices of user file ``path``, or skip them all with a warning naming it."""
    try:
        registry.add(specs, path)
    except DeviceSpecError as exc:  # a clash must not break every lookup either
        warn(f"skipped device file {path}: {exc}", DeviceFileWarning)
    else:
        registry.user_files.add(path)


def _add_registered(registry: _Registry, spec: DeviceSpec) -> None:
    """Apply a :func:`register_device` call again, to the registry of a new user folder.

    A registration comes before the user files: a file that clashes with it (a label of
    the registered device names one of the file's devices) is skipped whole, with the
    warning naming that file, as a clash between files is. A device of the registered
    device's own name is replaced, as :func:`register_device` replaces it.
    """
    skipped = [(path, registry.remove_file(path)) for path in registry.clashing_files(spec)]
    registry.add([spec], "register_device()", replace=True)
    for path, specs in skipped:
        _add_user_specs(registry, path, specs)  # clashes now: warns against the file


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
        Naming the file, the device and the field that failed (for a key given twice in one
        mapping: the line and the key).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "mine.yaml"
    >>> _ = path.write_text('''
    ... name: My Accelerator X1
    ... vendor: Example Corp
    ... kind: accelerator
    ... matrix_flops_per_s: {bf16: 400 TFLOPS}
    ... vector_flops_per_s: {fp32: 25 TFLOPS}
    ... bandwidth_bytes_per_s: 2.4 TB/s
    ... sources: {compute: https://example.com/x1-datasheet.pdf}
    ... ''')
    >>> x1 = roofline.load_device(path)
    >>> x1.bandwidth_bytes_per_s, x1.ridge_point("bf16")
    (2400000000000.0, 166.66666666666666)
    """
    specs, single = _load_file(Path(path))
    return specs[0] if single else specs


def register_device(spec: DeviceSpec | Mapping[str, Any], overwrite: bool = False,
                    aliases: Sequence[str] | None = None) -> DeviceSpec:
    """Make ``spec`` available to :func:`get_device` and :func:`list_devices` for this process.

    Registration is atomic: a spec that fails validation, or whose name or an alias is taken
    by another device, raises and leaves the registry as it was.

    Parameters
    ----------
    spec : DeviceSpec or mapping
        The device; a mapping is validated first.
    overwrite : bool
        Replace a device of the same name instead of raising. The new entry keeps the
        replaced device's aliases, plus any new ones of ``spec``, so that e.g. ``"h100"``
        still names the corrected H100 SXM; pass ``aliases`` to choose them instead.
    aliases : sequence of str, optional
        The registered device's aliases exactly (``[]`` for none), replacing both those of
        ``spec`` and those of a replaced device.

    Returns
    -------
    DeviceSpec
        The registered spec (``spec`` itself unless its aliases changed).

    Raises
    ------
    DeviceSpecError
        If the spec does not validate, the name or an alias is taken by another device, or
        the name is taken and ``overwrite`` is false.

    Examples
    --------
    >>> mine = roofline.get_device("h100").with_overrides(name="H100 at 600 W")
    >>> _ = roofline.register_device(mine)
    >>> roofline.get_device("H100 at 600 W").name
    'H100 at 600 W'
    """
    if not isinstance(spec, DeviceSpec):
        spec = validate_device(dict(spec), origin="register_device()")
    registry = _registry()
    old = registry.specs.get(spec.name)
    if old is not None and not overwrite:
        raise DeviceSpecError(
            f"register_device(): device '{spec.name}': field 'name': already defined in "
            f"{registry.origins[spec.name]}; pass overwrite=True to replace it"
        )
    if aliases is not None:
        if isinstance(aliases, str) or not all(isinstance(a, str) for a in aliases):
            raise DeviceSpecError(f"register_device(): device '{spec.name}': field 'aliases': "
                                  f"expected a list of strings, got {aliases!r}")
        merged = list(dict.fromkeys(aliases))
    else:
        merged = _unique([*(old.aliases if old else []), *spec.aliases])
    if merged != spec.aliases:
        spec = spec.model_copy(update={"aliases": merged})
    registry.add([spec], "register_device()", replace=True)  # raises before any change
    _registered[spec.name] = spec
    return spec


def list_devices(vendor: str | None = None, kind: str | None = None) -> list[DeviceSpec]:
    """All known devices, optionally filtered by vendor and kind (case-insensitive).

    Examples
    --------
    >>> amd = roofline.list_devices(vendor="amd")
    >>> "MI300X" in [d.name for d in amd]
    True
    """
    return [
        spec
        for spec in _registry().specs.values()
        if (vendor is None or spec.vendor.lower() == vendor.lower())
        and (kind is None or spec.kind == kind.lower())
    ]


def get_device(name: str | DeviceSpec) -> DeviceSpec:
    """Look a device up by name, alias or ``torch.cuda.get_device_name()`` string.

    A name resolves when it names exactly one device:

    1. its name or an alias, ignoring case, spaces and punctuation (``"h100-sxm"``);
    2. or every word of one of those, plus words that only agree with the device: vendor
       words ("NVIDIA", "GeForce", "Tesla", "AMD Instinct"), its memory size ("141GB") or
       type ("HBM3"), its form factor ("SXM", "PCIe"), and for CPUs "CPU", clock and core
       count. ``"NVIDIA H200 SXM 141GB"`` is the H200 SXM; ``"rtx 2080"`` is not the RTX
       2080 Ti (a missing "Ti" is another product), it raises and suggests it.

    Parameters
    ----------
    name : str or DeviceSpec
        E.g. ``"h100"``, ``"NVIDIA H100 80GB HBM3"``, ``"A100-SXM4-40GB"``, ``"tpu-v5e"``;
        a DeviceSpec is returned unchanged.

    Raises
    ------
    TypeError
        If ``name`` is neither a string nor a DeviceSpec.
    AmbiguousDeviceError
        If several devices match, or the name is part of several names; lists them.
    UnknownDeviceError
        Listing the closest names.

    Examples
    --------
    >>> spec = roofline.get_device("h100")
    >>> spec.name, spec.bandwidth_bytes_per_s
    ('H100 SXM', 3350000000000.0)
    >>> roofline.get_device("NVIDIA A100-SXM4-80GB").name  # torch.cuda.get_device_name()
    'A100 SXM 80GB'
    """
    if isinstance(name, DeviceSpec):
        return name
    if not isinstance(name, str):
        raise TypeError(f"get_device() takes a device name (str) or a DeviceSpec, got "
                        f"{type(name).__name__} {name!r}; see list_devices() for the names")
    registry = _registry()
    key = normalise(name)
    if key in registry.keys:
        return registry.specs[registry.keys[key]]
    matches = _token_matches(registry, name)
    if len(matches) == 1:
        return registry.specs[matches[0]]
    if matches:
        raise AmbiguousDeviceError(
            f"{name!r} matches several devices: {', '.join(matches)}; use one of these names",
            matches,
        )
    raise _near_miss(registry, name, key)


def _token_matches(registry: _Registry, name: str) -> list[str]:
    """Devices one of whose labels has all its words in ``name`` and the rest filler.

    Among several, those whose label covers the most words of ``name`` (the most specific).
    """
    query = _tokens(name)
    best: dict[str, int] = {}
    for device, spec in registry.specs.items():
        for label in (spec.name, *spec.aliases):
            words = _tokens(label)
            if words and words <= query and all(_is_filler(w, spec) for w in query - words):
                best[device] = max(best.get(device, 0), len(words))
    top = max(best.values(), default=0)
    return [device for device, score in best.items() if score == top]


def _near_miss(registry: _Registry, name: str, key: str) -> LookupError:
    """The error for a name that resolves to nothing.

    Candidates are the labels in which the query (vendor words stripped) starts at a word
    boundary, so "Apple M3" finds "Apple M3 Max" and not "H100 80GB HBM3". Where it also
    ends at one and the label's other words only say memory, form factor or vendor ("A100
    PCIe" in "A100 PCIe 40GB"), the query names a product but not which variant: with two
    or more such devices the name is ambiguous. Otherwise ("NVIDIA H20" in "H200 SXM",
    "MI250" in "MI250X") the label is another product, only similar; with no candidate,
    difflib's close matches are.
    """
    stripped = _strip_prefixes(key)
    variants: list[str] = []
    similar: list[str] = []
    for device, spec in registry.specs.items():
        for label in (spec.name, *spec.aliases):
            kind = _anchored_match(stripped, label, spec)
            if kind == "variant":
                variants.append(device)
            elif kind == "similar":
                similar.append(device)
    variants = _unique(variants)
    if len(variants) > 1:
        return AmbiguousDeviceError(
            f"{name!r} names several devices that differ only in memory or form factor: "
            f"{', '.join(variants)}; use one of these names", variants)
    close = _unique([*variants, *similar]) or _unique(
        registry.keys[k]
        for k in difflib.get_close_matches(key, list(registry.keys), n=10, cutoff=0.5)
    )[:5]  # spelling neighbours: the closest few
    shown = ", ".join(close[:_MAX_SUGGESTIONS]) + (
        f" and {len(close) - _MAX_SUGGESTIONS} more" if len(close) > _MAX_SUGGESTIONS else "")
    hint = (f"; similar names: {shown} (not substituted: a name that differs in a model word "
            "is another product)") if close else ""
    return UnknownDeviceError(
        f"unknown device {name!r}: not in the registry{hint}. See list_devices(), or add it "
        f"with register_device() or a YAML file in {user_devices_dir()}."
    )


_MAX_SUGGESTIONS = 8


def _anchored_match(query: str, label: str, spec: DeviceSpec) -> str:
    """How normalised ``query`` occurs in ``label``: "variant", "similar" or "" (not at all).

    It must start at a word of the label; it is a "variant" match when it also ends at one
    and every word of the label it leaves out is a variant word (:func:`_is_variant_word`).
    """
    words = re.findall(r"[0-9a-z]+", label.lower())  # "".join(words) == normalise(label)
    starts = [sum(len(w) for w in words[:i]) for i in range(len(words) + 1)]
    joined = "".join(words)
    found = ""
    for i, start in enumerate(starts[:-1]):
        if not query or not joined.startswith(query, start):
            continue
        end = start + len(query)
        if end in starts:
            j = starts.index(end)
            rest = [*words[:i], *words[j:]]
            if all(_is_variant_word(w, spec) for w in rest):
                return "variant"
        found = "similar"
    return found


def _is_variant_word(word: str, spec: DeviceSpec) -> bool:
    """Whether a word names a variant of a product, not another product: vendor words,
    memory size or type, form factor (whether or not they agree with ``spec``)."""
    return (word in _TRADEMARKS or word in _VENDOR_WORDS.get(spec.vendor.lower(), ())
            or any(p.fullmatch(word) for p in (_FORM_FACTOR_WORD, _MEMORY_SIZE_WORD,
                                                _MEMORY_TYPE_WORD)))


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))
