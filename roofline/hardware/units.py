"""Datasheet units and dtype names.

Data files and users write quantities the way datasheets print them
(``"989.4 TFLOPS"``, ``"3.35 TB/s"``, ``"80 GB"``, ``"1980 MHz"``); this module turns
them into base units (FLOP/s, bytes/s, bytes, Hz, W, s) and checks that the result is
plausible, which catches unit-prefix slips such as ``989 FLOPS`` or ``989e15``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from roofline._si import si

__all__ = [
    "DTYPES",
    "PLAUSIBLE",
    "VECTOR_DTYPES",
    "canonical_dtype",
    "check_plausible",
    "format_quantity",
    "parse_quantity",
]

#: Canonical dtype keys of the peak tables (int8/int4 peaks are OP/s).
DTYPES: tuple[str, ...] = (
    "fp64",
    "fp32",
    "tf32",
    "fp16",
    "bf16",
    "fp8",
    "fp6",
    "fp4",
    "int8",
    "int4",
)
#: Dtypes the non-matrix (vector / SIMD) units are rated for.
VECTOR_DTYPES: tuple[str, ...] = ("fp64", "fp32", "fp16", "bf16")

_DTYPE_ALIASES: dict[str, str] = {
    **{name: name for name in DTYPES},
    "float64": "fp64",
    "double": "fp64",
    "f64": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "single": "fp32",
    "f32": "fp32",
    "tensorfloat32": "tf32",
    "xf32": "tf32",
    "float16": "fp16",
    "half": "fp16",
    "f16": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "mxfp8": "fp8",
    "float6": "fp6",
    "mxfp6": "fp6",
    "float4": "fp4",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "uint8": "int8",
    "qint8": "int8",
    "quint8": "int8",
    "i8": "int8",
    "uint4": "int4",
    "quint4x2": "int4",
    "i4": "int4",
}
# Prefix rules for the torch float8/6/4 families (float8_e4m3fn, float4_e2m1fn_x2, ...).
_DTYPE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("float8_", "fp8"),
    ("float6_", "fp6"),
    ("float4_", "fp4"),
)


def canonical_dtype(dtype: Any) -> str:
    """Map a torch dtype or a dtype name to a canonical key of :data:`DTYPES`.

    Parameters
    ----------
    dtype : torch.dtype or str
        ``torch.bfloat16``, ``"bfloat16"``, ``"torch.bfloat16"``, ``"bf16"``, ``"half"``,
        ``"float8_e4m3fn"``, ``"tf32"``, ``"int8"``, ...

    Returns
    -------
    str
        One of ``fp64, fp32, tf32, fp16, bf16, fp8, fp6, fp4, int8, int4``.

    Raises
    ------
    ValueError
        For names that are not a known dtype.
    """
    name = str(dtype).strip().lower().removeprefix("torch.")
    if name in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[name]
    for prefix, key in _DTYPE_PREFIXES:
        if name.startswith(prefix):
            return key
    raise ValueError(
        f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)} or a torch dtype"
    )


_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_SUBSECOND = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_PREFIX = r"(?P<prefix>Ki|Mi|Gi|Ti|[kKMGTPE]?)"

# kind -> (regex for the unit after the prefix, base-unit label)
_UNITS: dict[str, tuple[str, str]] = {
    "flops": (r"(?:FLOPS|FLOP/s|FLOPs|OPS|OP/s|OPs|IOPS)", "FLOP/s"),
    "bandwidth": (r"(?P<byte>B|b)(?:/s|ps)", "B/s"),
    "bytes": (r"B", "B"),
    "hz": (r"Hz", "Hz"),
    "watts": (r"W", "W"),
    "seconds": (r"s", "s"),
}

#: Plausible ranges per kind, in base units; values outside are unit-prefix slips.
PLAUSIBLE: dict[str, tuple[float, float]] = {
    "flops": (1e9, 1e17),
    "bandwidth": (1e9, 1e14),
    "bytes": (1e8, 1e13),
    "cache": (1e5, 1e10),
    "hz": (1e7, 1e11),
    "watts": (1.0, 1e5),
    "seconds": (0.0, 1.0),
}


def _scaled(number: str, scale: float) -> float:
    """``number * scale`` in decimal arithmetic, so "261.1" x 1e12 is exactly 2.611e14."""
    return float(Decimal(number.replace(",", "").replace("_", "")) * Decimal(repr(scale)))


def parse_quantity(value: Any, kind: str, *, bits: bool = True) -> float:
    """Convert ``value`` to base units.

    Parameters
    ----------
    value : float, int or str
        A bare number (already in base units) or a datasheet string such as
        ``"1979 TOPS"``, ``"900 GB/s"``, ``"141 GiB"``, ``"1980 MHz"``, ``"700 W"``, ``"5 us"``.
        Lower-case ``b`` in a rate means bits (``"4800 Gbps"`` = 600 GB/s).
    kind : str
        ``flops``, ``bandwidth``, ``bytes`` (or ``cache``), ``hz``, ``watts`` or ``seconds``.
    bits : bool
        Whether a ``bandwidth`` may be written in bits per second. Link rates are quoted in
        bits (``"4800 Gbps"``), memory bandwidths in bytes: ``bits=False`` rejects a bit rate,
        so that ``"3.35 Tb/s"`` for an HBM part is not read as 419 GB/s.

    Returns
    -------
    float
        The value in FLOP/s (OP/s), bytes/s, bytes, Hz, W or s.

    Raises
    ------
    ValueError
        If the string cannot be parsed or the unit does not fit ``kind``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number or a string with a unit, got {value!r}")
    if isinstance(value, str):
        value = _parse_string(value, "bytes" if kind == "cache" else kind, bits)
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    return value


# Commas are thousands separators only: "1,979" is 1979, but "1,5" (a decimal comma) would
# silently read as 15.
_THOUSANDS = re.compile(r"[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")


def _parse_string(text: str, kind: str, bits: bool = True) -> float:
    match = re.fullmatch(r"\s*([-+]?[0-9][0-9,_]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?)\s*(\S*)\s*", text)
    if match is None:
        raise ValueError(f"cannot parse {text!r} as a {kind} quantity")
    number, unit = match.group(1), match.group(2)
    if "," in number and not _THOUSANDS.fullmatch(number):
        raise ValueError(
            f"{text!r}: a comma is read only as a thousands separator (groups of 3 digits, "
            f"'1,979'); write the decimal point as '.', e.g. {number.replace(',', '.')!r}"
        )
    if not unit:
        return _scaled(number, 1.0)
    if kind == "seconds":
        if unit not in _SUBSECOND:
            raise ValueError(f"unknown time unit {unit!r} in {text!r}; use s, ms, us or ns")
        return _scaled(number, _SUBSECOND[unit])
    pattern, label = _UNITS[kind]
    if kind == "hz":
        unit = unit[:-2].upper() + "Hz" if unit.lower().endswith("hz") else unit
    unit_match = re.fullmatch(_PREFIX + pattern, unit)
    if unit_match is None:
        raise ValueError(
            f"unit {unit!r} in {text!r} is not a {kind} unit (expected e.g. 'T{label}')"
        )
    prefix = unit_match.group("prefix")
    scale = _BINARY[prefix] if prefix in _BINARY else _SI[prefix]
    if kind == "bandwidth" and unit_match.group("byte") == "b":
        if not bits:
            raise ValueError(
                f"{text!r} is a bit rate (lower-case b); memory bandwidth is quoted in bytes "
                f"per second: write {number} {prefix}B/s if the datasheet says bytes, or "
                f"{format_quantity(_scaled(number, scale / 8.0), 'bandwidth')} for {text!r}")
        scale /= 8.0  # bits per second
    return _scaled(number, scale)


def check_plausible(value: float, kind: str) -> float:
    """Return ``value`` unless it is outside :data:`PLAUSIBLE` for ``kind``.

    Raises
    ------
    ValueError
        With a message saying the value "looks off by a unit prefix".
    """
    low, high = PLAUSIBLE[kind]
    if not low <= value <= high:
        raise ValueError(
            f"{format_quantity(value, kind)} looks off by a unit prefix "
            f"(plausible range {low:g} to {high:g} {_label(kind)}); "
            f"write it with its datasheet unit, e.g. '989.4 TFLOPS', '3.35 TB/s', '80 GB'"
        )
    return value


def _label(kind: str) -> str:
    return {"cache": "B", "seconds": "s"}.get(kind, _UNITS.get(kind, ("", kind))[1])


def format_quantity(value: float, kind: str) -> str:
    """Format a base-unit value with an SI prefix, e.g. ``9.894e14`` -> ``"989.4 TFLOP/s"``."""
    return si(value, _label(kind), digits=4)
