"""Analysis options (analysis/options.py): values of the wrong type or out of range are
refused naming the option (issue 13, item 5), and the choices are named.
"""

from __future__ import annotations

import math

import pytest
from conftest import make_op

import roofline
from roofline.tracing import Trace


# issue 13, item 5
@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "1"])
def test_host_seconds_must_be_finite(bad: object) -> None:
    t = Trace([make_op("pointwise", 10, 10)])
    with pytest.raises(ValueError, match="host_seconds"):
        roofline.analyze(t, "a100", host_seconds=bad)


@pytest.mark.parametrize("bad", [math.nan, 1.0, -0.1])
def test_host_fraction_must_be_in_range(bad: float) -> None:
    with pytest.raises(ValueError, match="host_fraction"):
        roofline.analyze(Trace([make_op("pointwise", 10, 10)]), "a100", host_fraction=bad)


def test_efficiency_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="efficiency"):
        roofline.analyze(Trace([make_op("pointwise", 10, 10)]), "a100", efficiency=math.nan)


@pytest.mark.parametrize(("name", "bad"), [("tf32_matmul", "no"), ("tf32_conv", 0),
                                           ("fp16_accumulate", None), ("overhead", "off"),
                                           ("efficiency", True)])
def test_option_values_of_the_wrong_type_are_refused(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=name):
        roofline.analyze(Trace([make_op("matmul", 10**12, 10**6)]), "a100", **{name: bad})


# issue 15
def test_options_name_their_choices() -> None:
    with pytest.raises(ValueError, match="peaks='measured'"):
        roofline.analyze(Trace([]), "h100", peaks="measured")
    with pytest.raises(ValueError, match="overhead_model"):
        roofline.analyze(Trace([]), "h100", overhead_model="sum")
    with pytest.raises(ValueError, match="layout_transposes"):
        roofline.analyze(Trace([]), "h100", layout_transposes="yes")
