"""Datasheet units and dtype names (hardware/units.py): quantities parsed from datasheet
strings, commas read as thousands separators only (issue 13, item 10), dtype keys.

Expected values are the strings' own numbers in base units, converted by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from roofline.hardware.units import canonical_dtype, parse_quantity

pytestmark = pytest.mark.usefixtures("isolated_registry")


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("989.4 TFLOPS", "flops", 989.4e12), ("1979 TOPS", "flops", 1979e12),
        ("1,979 TFLOPS", "flops", 1979e12), ("2.25 PFLOPS", "flops", 2.25e15),
        ("197 TFLOPs", "flops", 197e12), ("3.35 TB/s", "bandwidth", 3.35e12),
        ("900 GB/s", "bandwidth", 900e9), ("2765 GBps", "bandwidth", 2765e9),
        ("4800 Gbps", "bandwidth", 600e9), ("80 GB", "bytes", 80e9),
        ("141 GiB", "bytes", 141 * 2**30), ("50 MB", "cache", 50e6), ("1980 MHz", "hz", 1.98e9),
        ("3.8 GHz", "hz", 3.8e9), ("700 W", "watts", 700.0), ("1.4 kW", "watts", 1400.0),
        ("5 us", "seconds", 5e-6), ("5 µs", "seconds", 5e-6), ("2 ms", "seconds", 2e-3),
        (3e12, "flops", 3e12), ("7e12", "flops", 7e12),
    ],
)  # fmt: skip
def test_parse_quantity(text: Any, kind: str, value: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "kind"),
    [("5 GB", "flops"), ("3 TFLOPS", "bandwidth"), ("fast", "flops"), ("5 min", "seconds")],
)
def test_parse_quantity_rejects_wrong_units(text: str, kind: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text, kind)


@given(st.floats(min_value=1e9, max_value=1e17))
def test_parse_quantity_tflops_round_trip(flops_per_s: float) -> None:
    assert parse_quantity(f"{flops_per_s / 1e12!r} TFLOPS", "flops") == pytest.approx(flops_per_s)


# issue 13, item 10
@pytest.mark.parametrize("text", ["1,5 TB/s", "3,35 TB/s", "1,50 TB/s", "1,2345 TB/s",
                                  "1,979,5 GB/s"])
def test_decimal_comma_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="thousands separator"):
        parse_quantity(text, "bandwidth")


@pytest.mark.parametrize(("text", "value"), [("1,979 TFLOPS", 1979e12),
                                             ("1,000,000 GFLOPS", 1e15),
                                             ("2,039.5 GB/s", 2039.5e9)])
def test_thousands_separators_still_parse(text: str, value: float) -> None:
    kind = "bandwidth" if text.endswith("B/s") else "flops"
    assert parse_quantity(text, kind) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    ("dtype", "key"),
    [
        (torch.bfloat16, "bf16"), ("bfloat16", "bf16"), ("torch.bfloat16", "bf16"),
        ("BF16", "bf16"), (torch.float32, "fp32"), ("float", "fp32"), ("tf32", "tf32"),
        (torch.float16, "fp16"), ("half", "fp16"), (torch.float64, "fp64"), ("double", "fp64"),
        (torch.float8_e4m3fn, "fp8"), (torch.float8_e5m2, "fp8"), ("float8_e4m3fnuz", "fp8"),
        ("nvfp4", "fp4"), (torch.int8, "int8"), (torch.uint8, "int8"), ("int4", "int4"),
    ],
)  # fmt: skip
def test_canonical_dtype(dtype: Any, key: str) -> None:
    assert canonical_dtype(dtype) == key
