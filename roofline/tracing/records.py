"""Op records and the :class:`Trace` that holds them.

A record is one ATen operator call, as the kernel ran it: its FLOPs, the bytes
it had to move (see :mod:`roofline.tracing.ops` for the byte model), where it ran
(phase, module) and the tensors it touched (shapes, dtype, storage ids), so later
analyses (memory lifetimes, communication) can build on the same records.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

PHASES = ("forward", "backward", "optimizer")

Shape = tuple[int, ...]


@dataclass(slots=True)
class OpRecord:
    """One operator call.

    Attributes
    ----------
    name : ATen overload, e.g. ``"aten.mm.default"``.
    category : op family (``matmul``, ``pointwise``, ``normalization``, ``view``...).
    phase : ``forward``, ``backward`` or ``optimizer``.
    module : innermost module running the op (ModuleTracker name), ``""`` outside modules.
    dtype : dtype the op computed in (after autocast), e.g. ``"bfloat16"``.
    flops : floating-point operations (a multiply-add is 2).
    bytes_read, bytes_written : compulsory memory traffic of one eager kernel.
    counted : False when no FLOP formula exists for the op (its ``flops`` is 0, unknown).
    kernels : device kernels the op launches (0 for metadata-only ops).
    input_shapes, output_shapes : shapes of tensor inputs and outputs.
    input_ids, output_ids : storage ids (stable within one trace) for lifetime analyses.
    """

    name: str
    category: str
    phase: str
    module: str
    dtype: str
    flops: int
    bytes_read: int
    bytes_written: int
    counted: bool = True
    kernels: int = 1
    input_shapes: tuple[Shape, ...] = ()
    output_shapes: tuple[Shape, ...] = ()
    input_ids: tuple[int, ...] = ()
    output_ids: tuple[int, ...] = ()

    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOPs per byte (``inf`` when no bytes move)."""
        return self.flops / self.bytes if self.bytes else float("inf")


@dataclass(slots=True)
class Totals:
    """Summed FLOPs and bytes of a group of ops."""

    count: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def add(self, op: OpRecord) -> None:
        self.count += 1
        self.flops += op.flops
        self.bytes_read += op.bytes_read
        self.bytes_written += op.bytes_written

    def __repr__(self) -> str:
        return (
            f"Totals(count={self.count}, flops={_si(self.flops)}, "
            f"bytes={_si(self.bytes)}B)"
        )


class Breakdown(dict[str, Totals]):
    """Totals per group (module, category or phase), largest FLOPs first."""

    def __repr__(self) -> str:
        if not self:
            return "Breakdown({})"
        width = max(len(k) for k in self)
        rows = [f"  {k:<{width}}  {v.count:>6} ops  {_si(v.flops):>9}FLOP  {_si(v.bytes):>9}B"
                for k, v in self.items()]
        return "Breakdown(\n" + "\n".join(rows) + "\n)"


def _group(ops: Sequence[OpRecord], key: Callable[[OpRecord], str]) -> Breakdown:
    groups: dict[str, Totals] = {}
    for op in ops:
        groups.setdefault(key(op), Totals()).add(op)
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1].flops, -kv[1].bytes, kv[0]))
    return Breakdown(ordered)


@dataclass
class Trace:
    """The operators of one captured step.

    Attributes
    ----------
    ops : the op records, in execution order.
    meta : free-form facts about the capture (model, train, fake, torch version...).
    """

    ops: list[OpRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[OpRecord]:
        return iter(self.ops)

    @property
    def total_flops(self) -> int:
        """FLOPs of every op."""
        return sum(op.flops for op in self.ops)

    @property
    def total_bytes(self) -> int:
        """Bytes read plus written by every op."""
        return sum(op.bytes for op in self.ops)

    def totals(self) -> Totals:
        """One :class:`Totals` over all ops."""
        t = Totals()
        for op in self.ops:
            t.add(op)
        return t

    def by_phase(self) -> Breakdown:
        return _group(self.ops, lambda op: op.phase)

    def by_category(self) -> Breakdown:
        return _group(self.ops, lambda op: op.category)

    def by_op(self) -> Breakdown:
        """Totals per ATen overload."""
        return _group(self.ops, lambda op: op.name)

    def by_module(self, depth: int | None = 2) -> Breakdown:
        """Totals per module, the module path cut to its first ``depth`` components.

        ``depth=None`` keeps full paths; ops outside any module are under ``""``.
        """
        def key(op: OpRecord) -> str:
            return op.module if depth is None else ".".join(op.module.split(".")[:depth])

        return _group(self.ops, key)

    @property
    def uncounted(self) -> dict[str, Totals]:
        """Ops that ran without a FLOP formula: name -> count and bytes."""
        return dict(_group([op for op in self.ops if not op.counted], lambda op: op.name))

    def filter(self, predicate: Callable[[OpRecord], bool]) -> Trace:
        """A new trace with the ops for which ``predicate`` is true."""
        return Trace([op for op in self.ops if predicate(op)], dict(self.meta))

    def to_dataframe(self) -> Any:
        """The ops as a pandas DataFrame, one row per op (needs ``pandas``)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - exercised only without pandas
            raise ImportError("Trace.to_dataframe needs pandas: pip install pandas") from e
        rows = [asdict(op) | {"bytes": op.bytes} for op in self.ops]
        columns = [f.name for f in fields(OpRecord)] + ["bytes"]
        return pd.DataFrame(rows, columns=columns)

    def to_json(self, indent: int | None = None) -> str:
        """Serialise to JSON; :meth:`from_json` reads it back."""
        names = [f.name for f in fields(OpRecord)]
        rows = [[getattr(op, n) for n in names] for op in self.ops]
        return json.dumps({"version": 1, "meta": self.meta, "fields": names, "ops": rows},
                          indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        data = json.loads(text)
        if data.get("version") != 1:
            raise ValueError(f"unsupported trace JSON version {data.get('version')!r}")
        names = data["fields"]
        tuple_fields = {"input_shapes", "output_shapes"}
        ops = []
        for row in data["ops"]:
            kw = dict(zip(names, row, strict=True))
            for k in tuple_fields & kw.keys():
                kw[k] = tuple(tuple(s) for s in kw[k])
            for k in {"input_ids", "output_ids"} & kw.keys():
                kw[k] = tuple(kw[k])
            ops.append(OpRecord(**kw))
        return cls(ops, data.get("meta", {}))

    def __repr__(self) -> str:
        phases = Counter(op.phase for op in self.ops)
        parts = ", ".join(f"{p}={phases[p]}" for p in PHASES if phases[p])
        missing = sum(t.count for t in self.uncounted.values())
        gap = f", uncounted={missing}" if missing else ""
        return (f"Trace({len(self.ops)} ops [{parts}], flops={_si(self.total_flops)}, "
                f"bytes={_si(self.total_bytes)}B{gap})")


def _si(x: float) -> str:
    """Format with an SI prefix: 1.23G, 45.6M."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}"
