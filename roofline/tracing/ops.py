"""The operator registry: FLOP formula, category and byte rule per ATen op family.

FLOP formulas follow :mod:`torch.utils.flop_counter`: one small, shape-only
function per op family, registered by decorator; torch's own registered formulas
(mm, addmm, bmm, baddbmm, convolution and its backward, the SDPA kernels) are
used as they are, and :mod:`roofline.tracing.formulas` fills the gaps.

The byte model
--------------
Bytes are the compulsory traffic of one eager kernel:

* each distinct tensor input is read once and each output written once, at
  ``unique elements x itemsize`` of the view involved (a stride-0, expanded
  dimension is read once, not once per broadcast copy);
* an in-place op reads and writes the tensor it mutates; an ``out=`` argument is
  only written;
* views, reshapes, expands, ``detach`` and other metadata-only ops move 0 bytes,
  as do ``empty``-style allocations (category ``view`` / ``allocation``);
* gathers (``embedding``, ``index_select``, ``gather``, ``index``) read the index
  and the gathered rows, not the whole table; fills write without reading;
  ``copy_`` reads its source only; fused optimizers do not write the gradients.

Caches are ignored: a tensor read by two kernels is counted twice, which is what
an eager (unfused) execution pays on a device whose cache cannot hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any

import torch
from torch.utils import flop_counter
from torch.utils._pytree import tree_map

aten = torch.ops.aten

Formula = Callable[..., int]
BytesRule = Callable[[Any, tuple[Any, ...], dict[str, Any], list[torch.Tensor],
                      list[torch.Tensor]], tuple[int, int]]


@dataclass(frozen=True)
class OpInfo:
    """What the registry knows about one op family."""

    category: str
    flops: Formula | None  # None: the op does no floating-point work by definition
    bytes_rule: BytesRule | None = None  # None: the default rule (read inputs, write outputs)
    kernels: int = 1


_REGISTRY: dict[Any, OpInfo] = {}

# Categories of the ops torch.utils.flop_counter already has formulas for.
_TORCH_CATEGORIES = {
    "mm": "matmul", "addmm": "matmul", "bmm": "matmul", "baddbmm": "matmul",
    "_scaled_mm": "matmul",
}


def nbytes(t: torch.Tensor) -> int:
    """Unique bytes of a view: broadcast (stride-0) dimensions count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size() if t.numel() else 0


def _shape_only(f: Formula) -> Formula:
    """Call ``f`` with tensors replaced by their shapes, as torch's formulas are."""

    @wraps(f)
    def wrapped(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        args, kwargs, out_shape = tree_map(
            lambda x: x.shape if isinstance(x, torch.Tensor) else x, (args, kwargs, out_val))
        return int(f(*args, out_shape=out_shape, **kwargs))

    return wrapped


def _packets(ops: Sequence[Any]) -> list[Any]:
    """Op packets to register, with the in-place twin (``relu`` -> ``relu_``) of each."""
    out = []
    for op in ops:
        packet = getattr(op, "overloadpacket", op)
        if packet in _REGISTRY:
            raise RuntimeError(f"duplicate registration for {packet}")
        out.append(packet)
        twin = getattr(aten, packet.__name__ + "_", None) if packet.__name__[-1] != "_" else None
        if twin is not None and twin not in _REGISTRY and twin not in ops:
            out.append(twin)
    return out


def register_formula(*ops: Any, category: str, bytes_rule: BytesRule | None = None,
                     ) -> Callable[[Formula], Formula]:
    """Register a shape-only FLOP formula for one or more ops (packets or overloads)."""

    def deco(f: Formula) -> Formula:
        wrapped = _shape_only(f)
        for packet in _packets(ops):
            _REGISTRY[packet] = OpInfo(category, wrapped, bytes_rule)
        return f

    return deco


def register_no_flops(category: str, *ops: Any, bytes_rule: BytesRule | None = None,
                      kernels: int = 1) -> None:
    """Register ops that do no floating-point work (data movement, views, allocation)."""
    for packet in _packets(ops):
        _REGISTRY[packet] = OpInfo(category, None, bytes_rule, kernels)


def lookup(func: Any) -> OpInfo | None:
    """The registry entry for an op overload, ours first, then torch's formulas."""
    packet = func.overloadpacket
    info = _REGISTRY.get(packet)
    if info is not None:
        return info
    formula = flop_counter.flop_registry.get(packet)
    if formula is None:
        return None
    name = packet.__name__
    category = _TORCH_CATEGORIES.get(name, "attention" if "attention" in name else "conv")
    info = OpInfo(category, formula)
    _REGISTRY[packet] = info
    return info


# --- byte rules -------------------------------------------------------------------

def no_bytes(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             reads: list[torch.Tensor], writes: list[torch.Tensor]) -> tuple[int, int]:
    """Metadata-only ops and uninitialised allocations."""
    return 0, 0


def write_only(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               reads: list[torch.Tensor], writes: list[torch.Tensor]) -> tuple[int, int]:
    """Fills and factories: the output is written, nothing is read."""
    return 0, sum(nbytes(t) for t in writes)


def gather(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
           reads: list[torch.Tensor], writes: list[torch.Tensor]) -> tuple[int, int]:
    """Gathers read the indices and the gathered values (one output's worth)."""
    written = sum(nbytes(t) for t in writes)
    index = sum(nbytes(t) for t in reads if not t.is_floating_point())
    return index + written, written


def copy_from_src(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  reads: list[torch.Tensor], writes: list[torch.Tensor]) -> tuple[int, int]:
    """``copy_(dst, src)`` reads ``src`` and writes ``dst``."""
    src = args[1]
    read = nbytes(src) if isinstance(src, torch.Tensor) else 0
    return read, sum(nbytes(t) for t in writes)


def fused_optimizer(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                    reads: list[torch.Tensor], writes: list[torch.Tensor]) -> tuple[int, int]:
    """Fused Adam/AdamW/SGD: gradients are read, not written (schema marks them mutable)."""
    grads = {id(t) for t in args[1]} if len(args) > 1 else set()
    return (sum(nbytes(t) for t in reads),
            sum(nbytes(t) for t in writes if id(t) not in grads))
