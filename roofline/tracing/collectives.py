"""Recognise torch.distributed collectives among the ops a capture sees.

Every collective of torch.distributed reaches the dispatcher as an op of its own: the
process-group API (``dist.all_reduce``, FSDP's ``all_gather_into_tensor`` and
``reduce_scatter_tensor``, DDP's C++ reducer, which calls ``ProcessGroup::allreduce``)
as ``c10d.*`` ops, and the functional collectives of DTensor and tensor parallelism as
``_c10d_functional.*`` ops (with ``wait_tensor`` where the result is waited for). The
capture's dispatch mode sees them like any ATen op; :func:`describe` turns one into a
:class:`~roofline.tracing.records.Collective`: kind, size, group size, dtype, group.

The size follows nccl-tests (NVIDIA/nccl-tests@a0b82b2260cf5152b9f8c061bbf7eaf0ba096432
doc/PERFORMANCE.md): ``S`` is the all-reduced tensor, the whole gathered output of an
all-gather, the whole input of a reduce-scatter. Read generically: the larger of the
bytes the op only reads and the bytes it writes (an in-place all-reduce writes ``S``; an
all-gather reads ``S/n`` and writes ``S``; a reduce-scatter reads ``S`` and writes
``S/n``).
"""

from __future__ import annotations

from typing import Any

import torch

from roofline.tracing.ops import nbytes
from roofline.tracing.records import Collective

#: Op namespaces that hold collectives.
NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional",
                        "_c10d_functional_autograd", "_dtensor"})

# (substring of the op's name, kind), first match wins: "reduce_scatter" before "reduce"
_KINDS: tuple[tuple[str, str], ...] = (
    ("wait_tensor", "wait"), ("barrier", "barrier"), ("reduce_scatter", "reduce_scatter"),
    ("allreduce", "all_reduce"), ("all_reduce", "all_reduce"),
    ("allgather", "all_gather"), ("all_gather", "all_gather"),
    ("alltoall", "all_to_all"), ("all_to_all", "all_to_all"),
    ("broadcast", "broadcast"), ("reduce", "reduce"), ("gather", "gather"),
    ("scatter", "scatter"), ("send", "send"), ("recv", "recv"), ("p2p", "send"),
)


def kind_of(func: Any) -> str | None:
    """The collective kind of an op in :data:`NAMESPACES` (None: not a collective)."""
    name = func._schema.name.split("::")[-1]
    return next((kind for key, kind in _KINDS if key in name), None)


def _group(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The ProcessGroup an op runs on: a boxed ProcessGroup argument, or a group name."""
    from torch.distributed import ProcessGroup
    from torch.distributed.distributed_c10d import _resolve_process_group

    values = list(args) + list(kwargs.values())
    for v in values:
        if isinstance(v, torch.ScriptObject):
            try:
                return ProcessGroup.unbox(v)
            except (RuntimeError, TypeError):
                continue
    for v in values:
        if isinstance(v, str):
            try:
                return _resolve_process_group(v)  # type: ignore[arg-type]
            except (RuntimeError, ValueError, KeyError):
                continue
    return None


def describe(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             reads: list[torch.Tensor], writes: list[torch.Tensor]) -> Collective | None:
    """The :class:`Collective` of one op, or None when the op is no collective.

    ``reads`` and ``writes`` are the op's unique tensor arguments and the tensors it writes
    (in place or as outputs), as the recorder finds them.
    """
    kind = kind_of(func)
    if kind is None:
        return None
    written = {id(t) for t in writes}
    read_bytes = sum(nbytes(t) for t in reads if id(t) not in written)
    write_bytes = sum(nbytes(t) for t in writes)
    payload = next((t for t in (*writes, *reads) if t.is_floating_point()),
                   writes[0] if writes else (reads[0] if reads else None))
    group = _group(args, kwargs) if kind != "wait" else None
    size = int(group.size()) if group is not None else 1
    name = str(getattr(group, "group_name", "")) if group is not None else ""
    moved = 0 if kind in ("wait", "barrier") else max(read_bytes, write_bytes)
    dtype = str(payload.dtype).removeprefix("torch.") if payload is not None else ""
    return Collective(kind, int(moved), size, dtype, name)
