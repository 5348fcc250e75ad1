"""Checks of user-given numbers, shared by every layer: one wording for one mistake.

It sits below the layers and imports nothing of roofline. A bool is not a number here
(``True`` is an ``int`` to Python, never a batch size or a factor to a user), and NaN and
infinity are refused unless a caller says they mean something.
"""

from __future__ import annotations

import math
from typing import Any


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number(name: str, value: Any, *, above: float | None = None,
           at_least: float | None = None, at_most: float | None = None,
           finite: bool = True) -> float:
    """``value`` as a float, or ValueError naming ``name`` and the rule it breaks."""
    bounds = [f"> {above:g}" if above is not None else "",
              f">= {at_least:g}" if at_least is not None else "",
              f"<= {at_most:g}" if at_most is not None else ""]
    rule = " and ".join(b for b in bounds if b)
    wanted = f"{'a finite' if finite else 'a'} number{' ' + rule if rule else ''}"
    if not is_number(value) or (finite and not math.isfinite(value)) or math.isnan(value) \
            or (above is not None and not value > above) \
            or (at_least is not None and not value >= at_least) \
            or (at_most is not None and not value <= at_most):
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    return float(value)


def whole(name: str, value: Any, *, at_least: int = 1) -> int:
    """``value`` as an int (a whole number, not a bool), at least ``at_least``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise ValueError(f"{name} must be a whole number >= {at_least}, got {value!r}")
    return value
