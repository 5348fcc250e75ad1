"""The one SI formatter, shared by every layer (reprs, tables, device messages).

It sits below the layers (it imports nothing of roofline), so capture and hardware, which
may not import each other, both use it.
"""

from __future__ import annotations

_LARGE = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
_SMALL = (("m", 1e-3), ("us", 1e-6), ("ns", 1e-9))  # seconds only: "us" for micro, ASCII


def si(value: float, unit: str = "", digits: int = 3, sep: str = " ") -> str:
    """``value`` with an SI prefix and ``digits`` significant digits.

    Examples
    --------
    >>> si(9.894e14, "FLOP/s", digits=4)
    '989.4 TFLOP/s'
    >>> si(4.53e-2, "s")
    '45.3 ms'
    >>> si(1.23e9, sep="")
    '1.23G'
    """
    magnitude = abs(value)
    for prefix, scale in _LARGE:
        if magnitude >= scale:
            return f"{value / scale:.{digits}g}{sep}{prefix}{unit}"
    if unit == "s" and 0 < magnitude < 1:
        for prefix, scale in _SMALL:
            if magnitude >= scale:
                label = prefix if prefix != "m" else "ms"
                return f"{value / scale:.{digits}g}{sep}{label}"
        return f"{value / 1e-9:.{digits}g}{sep}ns"
    return f"{value:.{digits}g}{sep}{unit}".rstrip()
