"""Measured rate curves: what a device achieves as a function of an op's size and shape.

A datasheet peak is a plateau; real kernels reach it only when they are large enough.
``roofline.calibrate`` measures two curves that a measured :class:`DeviceSpec` carries:

* ``matmul_curve[dtype]``: FLOP/s of ``torch.mm`` on a grid of (m, n, k) shapes. A skinny
  or small GEMM fills fewer cores (or SMs), reuses each loaded byte less and pays its
  launch; all three show up in the measured rate, so no tile or split-K model is needed.
* ``memory_curve``: bytes/s of an elementwise add by bytes moved. Small ones run from
  cache, below ATen's parallel grain size on one thread, or at launch latency; large ones
  at DRAM/HBM bandwidth.

Both are interpolated in log space (rates change by factors, sizes by powers of two) and
clamped at the grid's edges: beyond the largest point the plateau holds, below the
smallest the smallest's rate (the memory roof and the launch overhead bound those ops).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MatmulPoint",
    "MemoryPoint",
    "check_grid",
    "interpolate_matmul",
    "interpolate_memory",
    "sorted_memory_curve",
]


class MatmulPoint(BaseModel):
    """One measured GEMM: ``(m x k) @ (k x n)`` ran at ``flops_per_s`` (2 m n k FLOPs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    flops_per_s: float = Field(gt=0)


class MemoryPoint(BaseModel):
    """One measured elementwise kernel that moved ``bytes`` (read + written) at ``bytes_per_s``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bytes: int = Field(gt=0)
    bytes_per_s: float = Field(gt=0)


def check_grid(points: Sequence[MatmulPoint]) -> None:
    """Raise ValueError unless ``points`` cover every (m, n, k) of their axes exactly once."""
    if not points:
        raise ValueError("matmul curve is empty: give its points or leave the dtype out")
    axes = [sorted({getattr(p, a) for p in points}) for a in "mnk"]
    seen = {(p.m, p.n, p.k) for p in points}
    if len(seen) != len(points):
        raise ValueError("matmul curve has duplicate (m, n, k) points")
    need = len(axes[0]) * len(axes[1]) * len(axes[2])
    if len(points) != need:
        raise ValueError(f"matmul curve must be a full grid over its m, n, k values: "
                         f"{len(points)} points, {need} needed")


def sorted_memory_curve(points: Sequence[MemoryPoint]) -> list[MemoryPoint]:
    """``points`` by bytes moved; ValueError if two measure the same size."""
    if len({p.bytes for p in points}) != len(points):
        raise ValueError("memory curve has duplicate byte sizes")
    return sorted(points, key=lambda p: p.bytes)


def interpolate_matmul(points: Sequence[MatmulPoint], m: np.ndarray, n: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
    """FLOP/s of (m, n, k) GEMMs (arrays), trilinear in log2 of each size and of the rate."""
    axes = [np.log2(sorted({getattr(p, a) for p in points})) for a in "mnk"]
    grid = np.empty([len(a) for a in axes])
    for p in points:
        at = tuple(int(np.searchsorted(a, np.log2(v))) for a, v in zip(axes, (p.m, p.n, p.k),
                                                                       strict=True))
        grid[at] = np.log2(p.flops_per_s)
    bounds = []  # per axis: lower index, upper index, weight of the upper
    for axis, value in zip(axes, (m, n, k), strict=True):
        x = np.clip(np.log2(np.maximum(np.asarray(value, dtype=float), 1.0)), axis[0], axis[-1])
        hi = np.clip(np.searchsorted(axis, x), 0, len(axis) - 1)
        lo = np.maximum(hi - 1, 0)
        span = axis[hi] - axis[lo]
        w = np.divide(x - axis[lo], span, out=np.zeros_like(x), where=span > 0)
        bounds.append((lo, hi, w))
    (i0, i1, wi), (j0, j1, wj), (q0, q1, wq) = bounds
    log_rate = np.zeros(np.broadcast(wi, wj, wq).shape)
    for i, a in ((i0, 1 - wi), (i1, wi)):
        for j, b in ((j0, 1 - wj), (j1, wj)):
            for q, c in ((q0, 1 - wq), (q1, wq)):
                log_rate = log_rate + a * b * c * grid[i, j, q]
    return np.asarray(2.0 ** log_rate)


def interpolate_memory(points: Sequence[MemoryPoint], nbytes: np.ndarray) -> np.ndarray:
    """Bytes/s of ops moving ``nbytes`` each, linear in log2 of size and of rate."""
    pts = sorted(points, key=lambda p: p.bytes)
    xs = np.log2([p.bytes for p in pts])
    ys = np.log2([p.bytes_per_s for p in pts])
    return np.asarray(2.0 ** np.interp(np.log2(np.maximum(nbytes, 1.0)), xs, ys))
