"""Every error and warning roofline raises, under two bases (as httpx's ``_exceptions``).

``except roofline.RooflineError`` catches every error the library raises on purpose, and
``warnings.filterwarnings("ignore", category=roofline.RooflineWarning)`` silences every
warning it gives, whichever layer gives it. Each class also derives from the built-in
exception that describes it (``ValueError`` for bad input, ``LookupError`` for a name that
resolves to nothing...), so code that catches those keeps working.

It sits below the layers and imports nothing of roofline: the capture and the hardware
registry, which may not import each other, both raise from here.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

__all__ = [
    "AmbiguousDeviceError",
    "CalibrationError",
    "CompileError",
    "ContextLengthError",
    "DeviceFileWarning",
    "DeviceSpecError",
    "FakeModeError",
    "MismatchError",
    "NeedsValues",
    "NoKVCacheError",
    "RooflineError",
    "RooflineWarning",
    "UnknownDeviceError",
    "UnknownModelError",
]


class RooflineError(Exception):
    """Base of every error roofline raises on purpose."""


class RooflineWarning(UserWarning):
    """A capture or analysis gap the user should know about (base of roofline's warnings)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning] = RooflineWarning) -> None:
    """Warn at the user's line: the caller of the outermost roofline frame on the stack.

    A fixed ``stacklevel`` points into the library whenever the call path changes (and inside
    a traced model the user's own forward sits between two roofline frames); Python 3.12's
    ``skip_file_prefixes`` does this, but 3.10 lacks it.
    """
    frame: FrameType | None = sys._getframe(1)  # the caller, level 1 (stacklevel 2)
    level, outermost = 1, 0  # 0: no roofline frame, the caller is the user's
    while frame is not None:
        if frame.f_code.co_filename.startswith(_PACKAGE):
            outermost = level
        frame, level = frame.f_back, level + 1
    # level L is stacklevel L + 1; the user's line is the frame out of the outermost one
    warnings.warn(message, category, stacklevel=outermost + 2)


# --- capture -----------------------------------------------------------------------------

class FakeModeError(RooflineError, RuntimeError):
    """The model cannot run on fake tensors (it depends on tensor values)."""


class CompileError(RooflineError, RuntimeError):
    """``compile=True`` could not compile the step: the message names the graph break or
    the failure, and says what to do."""


class NeedsValues(RooflineError, RuntimeError):
    """A Python-level call (``.numpy()``) that needs a fake tensor's values."""


class NoKVCacheError(RooflineError, TypeError):
    """A model whose forward takes no KV cache, so a decode step cannot be traced; the
    message says how to pass one."""


class ContextLengthError(RooflineError, ValueError):
    """Prompt plus new tokens exceed the longest context the model takes."""


# --- hardware ----------------------------------------------------------------------------

class DeviceSpecError(RooflineError, ValueError):
    """A device description failed validation; the message names file, device and field."""


class UnknownDeviceError(RooflineError, LookupError):
    """No device matches the name; the message lists the closest names."""


class AmbiguousDeviceError(RooflineError, LookupError):
    """Several devices match the name; the message lists the candidates."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


class DeviceFileWarning(RooflineWarning):
    """A user device file was skipped; the message names the file and the reason."""


class CalibrationError(RooflineError, ValueError, RuntimeError):
    """The device or dtype cannot be calibrated here; the message says what is missing."""


# --- analysis ----------------------------------------------------------------------------

class MismatchError(RooflineError, ValueError):
    """The measurement's ops are not the analysed trace's ops."""


# --- zoo ---------------------------------------------------------------------------------

class UnknownModelError(RooflineError, KeyError):
    """A name that is not in the model zoo; the message lists the closest names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
