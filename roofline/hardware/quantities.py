"""Field types of device files: quantities in base units, parsed from datasheet strings.

Each type (:data:`FlopsPerS`, :data:`BytesPerS`, :data:`Bytes`, ...) is a float that
pydantic fills from a number or a string such as ``"989.4 TFLOPS"``
(:func:`roofline.hardware.units.parse_quantity`), then checks: positive, and inside the
unit-prefix range of :data:`roofline.hardware.units.PLAUSIBLE` unless the validation
context says ``{NO_PLAUSIBILITY: False}`` (what-if devices, whose scaled peaks may leave
it). :func:`peak_table` normalises the dtype keys of a table of peaks.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, WithJsonSchema

from roofline.hardware.units import canonical_dtype, check_plausible, parse_quantity

__all__ = [
    "NO_PLAUSIBILITY",
    "Bytes",
    "BytesPerS",
    "CacheBytes",
    "FlopsPerS",
    "Hertz",
    "MeasuredFlopsPerS",
    "MemoryBytesPerS",
    "Seconds",
    "Watts",
    "peak_table",
    "plausibility_checked",
    "quantity_schema",
]

#: Pass ``context={NO_PLAUSIBILITY: False}`` to ``model_validate`` to skip the unit-prefix
#: range checks (used for what-if devices, whose scaled peaks may leave the range).
NO_PLAUSIBILITY = "plausibility"


def plausibility_checked(info: ValidationInfo) -> bool:
    """Whether this validation applies the unit-prefix range checks (:data:`NO_PLAUSIBILITY`)."""
    return bool((info.context or {}).get(NO_PLAUSIBILITY, True))


def _parser(kind: str) -> BeforeValidator:
    return BeforeValidator(lambda value: parse_quantity(value, kind))


def _checker(kind: str, allow_zero: bool = False) -> AfterValidator:
    def check(value: float, info: ValidationInfo) -> float:
        if value < 0 or (value == 0 and not allow_zero):
            raise ValueError(f"must be {'>= 0' if allow_zero else '> 0'}, got {value:g}")
        if plausibility_checked(info):
            check_plausible(value, kind)
        return value

    return AfterValidator(check)


def quantity_schema(doc: str) -> WithJsonSchema:
    """JSON schema of a quantity field: a number or a string with a unit, described."""
    return WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}], "description": doc})


FlopsPerS = Annotated[
    float,
    _parser("flops"),
    _checker("flops"),
    quantity_schema("FLOP/s (OP/s for int): number or e.g. '989.4 TFLOPS'"),
]
# Measured rates (a kernel far below any roof, e.g. a CPU depthwise convolution) are
# not datasheet peaks: positive, with no unit-prefix range check.
MeasuredFlopsPerS = Annotated[
    float,
    _parser("flops"),
    Field(gt=0),
    quantity_schema("measured FLOP/s: number or e.g. '1.7 GFLOPS'"),
]
BytesPerS = Annotated[
    float,
    _parser("bandwidth"),
    _checker("bandwidth"),
    quantity_schema("bytes/s: number or e.g. '3.35 TB/s', '4800 Gbps'"),
]
# Main-memory bandwidth: bytes only. Datasheets quote it in GB/s or TB/s; a bit rate there
# is a slip (or a per-pin "19 Gbps" copied into the bandwidth), an 8x error no range catches.
MemoryBytesPerS = Annotated[
    float,
    BeforeValidator(lambda value: parse_quantity(value, "bandwidth", bits=False)),
    _checker("bandwidth"),
    quantity_schema("bytes/s: number or e.g. '3.35 TB/s' (bytes; bit rates are for links)"),
]
Bytes = Annotated[
    float, _parser("bytes"), _checker("bytes"),
    quantity_schema("bytes: number or e.g. '80 GB', '141 GiB'"),
]
CacheBytes = Annotated[
    float, _parser("cache"), _checker("cache"), quantity_schema("bytes: number or e.g. '50 MB'")
]
Hertz = Annotated[
    float, _parser("hz"), _checker("hz"), quantity_schema("Hz: number or e.g. '1980 MHz'")
]
Watts = Annotated[
    float, _parser("watts"), _checker("watts"), quantity_schema("W: number or e.g. '700 W'")
]
Seconds = Annotated[
    float,
    _parser("seconds"),
    _checker("seconds", allow_zero=True),
    quantity_schema("seconds: number or e.g. '5 us'"),
]


def peak_table(allowed: tuple[str, ...]) -> Any:
    """Before-validator normalising dtype keys of a peak table.

    Two keys naming one dtype (``bf16`` and ``bfloat16``) are an error, not "the last one
    wins": they are distinct keys to YAML and JSON, so only here can the clash be seen.
    """

    def normalise(table: Any) -> Any:
        if table is None:
            return {}
        if not isinstance(table, dict):
            return table  # let pydantic report the type error
        out: dict[str, Any] = {}
        given: dict[str, Any] = {}  # canonical dtype -> the key it was written as
        for key, value in table.items():
            try:
                dtype = canonical_dtype(key)
            except ValueError:
                dtype = ""
            if dtype not in allowed:
                raise ValueError(f"unknown dtype key {key!r}; expected one of {', '.join(allowed)}")
            if dtype in given:
                raise ValueError(
                    f"two entries for {dtype}: {given[dtype]!r} = {table[given[dtype]]!r} and "
                    f"{key!r} = {value!r} both name {dtype}; keep one")
            given[dtype] = key
            out[dtype] = value
        return out

    return normalise
