"""The engine an op runs on: matrix (tensor core) or vector units, in one datatype.

An :class:`Engine` is the key of a device's compute roofs. Its dtype is a canonical key of
:data:`roofline.hardware.units.DTYPES` (``"bf16"``, ``"fp8"``, ``"tf32"``...), so one
vocabulary names a datatype from the trace to the registry; ``str(engine)`` is for display.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from roofline.hardware.units import canonical_dtype

__all__ = ["Engine", "EngineKind"]

EngineKind = Literal["matrix", "vector"]
_KINDS = ("matrix", "vector")
_ACCUMULATE = ("fp32", "fp16")


@dataclass(frozen=True, slots=True)
class Engine:
    """Matrix or vector units computing in ``dtype``.

    Attributes
    ----------
    kind : {"matrix", "vector"}
        Tensor/matrix cores, or the non-matrix (CUDA core / SIMD) units.
    dtype : str
        Canonical dtype key (``"bf16"``, ``"fp32"``, ``"tf32"``, ``"fp8"``...).
    accumulate : {"fp32", "fp16"}
        Accumulator of a matrix engine: fp16 accumulation has its own, faster peak on
        GeForce cards (``fp16_accumulate_flops_per_s``).
    """

    kind: EngineKind
    dtype: str
    accumulate: Literal["fp32", "fp16"] = "fp32"

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"engine kind must be 'matrix' or 'vector', got {self.kind!r}")
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.accumulate not in _ACCUMULATE:
            raise ValueError(f"accumulate must be 'fp32' or 'fp16', got {self.accumulate!r}")
        if self.accumulate == "fp16" and (self.kind, self.dtype) != ("matrix", "fp16"):
            raise ValueError("fp16 accumulation is a mode of the fp16 matrix engine only")

    @classmethod
    def of(cls, engine: Engine | str, dtype: Any = None) -> Engine:
        """``engine`` itself, or ``Engine(kind, dtype)`` from a kind name."""
        if isinstance(engine, Engine):
            return engine
        return cls(engine, dtype)  # type: ignore[arg-type]

    @property
    def matrix(self) -> bool:
        return self.kind == "matrix"

    def __str__(self) -> str:
        suffix = " (fp16 accumulate)" if self.accumulate == "fp16" else ""
        return f"{self.kind} {self.dtype}{suffix}"
