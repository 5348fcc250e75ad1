"""Op records and the :class:`Trace` that holds them.

A record is one ATen operator call, as the kernel ran it: its FLOPs, the bytes
it had to move (see :mod:`roofline.tracing.ops` for the byte model), where it ran
(phase, module) and the tensors it touched (shapes, dtype, storage ids), so later
analyses (memory lifetimes, communication) can build on the same records.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

from roofline._si import si
from roofline.tracing.info import CaptureInfo

PHASES = ("forward", "backward", "optimizer")

Shape = tuple[int, ...]


class Category(str, Enum):
    """The op family of a record.

    A ``str``, so ``op.category == "matmul"``, dictionary keys and JSON keep working. Each
    member states whether it runs on the matrix units (tensor cores, MMA engines) or on the
    vector units; the two-field definition makes that a required choice for a new member,
    and :data:`MATRIX_CATEGORIES` is derived from it.
    """

    matrix: bool

    def __new__(cls, value: str, matrix: bool) -> Category:
        member = str.__new__(cls, value)
        member._value_ = value
        member.matrix = matrix
        return member

    MATMUL = "matmul", True
    CONV = "conv", True
    ATTENTION = "attention", True
    POINTWISE = "pointwise", False
    REDUCTION = "reduction", False
    SOFTMAX = "softmax", False
    NORMALIZATION = "normalization", False
    EMBEDDING = "embedding", False
    LOSS = "loss", False
    POOLING = "pooling", False
    UPSAMPLE = "upsample", False
    DROPOUT = "dropout", False
    OPTIMIZER = "optimizer", False
    COPY = "copy", False  # copies, gathers, scatters, sorts (data movement: "memory" is a bound)
    VIEW = "view", False  # metadata only
    ALLOCATION = "allocation", False  # uninitialised memory
    LAYOUT = "layout", False  # transposes a library runs that are not PyTorch ops (cuDNN)
    UNCOUNTED = "uncounted", False  # ops the registry does not know
    # torch.distributed collectives: no device FLOPs or HBM bytes of their own; the payload
    # is in ``OpRecord.collective`` and the link, not the chip, sets their time
    COLLECTIVE = "collective", False

    # "matmul", not "Category.MATMUL", in f-strings and tables
    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(str.__str__(self), format_spec)

    @classmethod
    def of(cls, value: str) -> Category:
        """The member whose value is ``value``; ValueError naming the known ones if none."""
        member = cls._value2member_map_.get(value) if isinstance(value, str) else None
        if member is None:
            known = ", ".join(c.value for c in cls)
            renamed = (" ('memory', the category of copies, is now 'copy': memory is a bound)"
                       if value == LEGACY_COPY else "")
            raise ValueError(f"unknown op category {value!r}{renamed} (known: {known}; a new "
                             "category is added to roofline.tracing.Category, saying whether "
                             "it runs on the matrix units)")
        return member  # type: ignore[return-value]


#: What version-1 trace files called :attr:`Category.COPY`.
LEGACY_COPY = "memory"

#: The categories whose FLOPs run on the matrix units.
MATRIX_CATEGORIES: frozenset[Category] = frozenset(c for c in Category if c.matrix)


def is_backward_kernel(op_name: str) -> bool:
    """Whether an ATen op name (``aten.convolution_backward.default``) is a gradient kernel.

    ATen names its gradient kernels ``*_backward*`` (``convolution_backward``,
    ``_softmax_backward_data``, the SDPA ``*_backward`` kernels); the registry uses this
    rule unless an op is registered with ``backward=`` explicitly.
    """
    return "backward" in op_name


#: The kinds of :class:`Collective` (``wait``: where a functional collective's result is
#: waited for; it moves nothing).
COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                    "all_to_all", "gather", "scatter", "send", "recv", "barrier", "wait")


@dataclass(frozen=True, slots=True)
class Collective:
    """The payload of one torch.distributed collective, as nccl-tests sizes it.

    Attributes
    ----------
    kind : one of :data:`COLLECTIVE_KINDS`.
    bytes : the operation's size ``S`` in nccl-tests' sense (doc/PERFORMANCE.md): the
        tensor of an all-reduce, broadcast or reduce; the whole gathered output of an
        all-gather (``n`` x the per-rank input); the whole input of a reduce-scatter; a
        rank's send buffer of an all-to-all.
    group_size : ranks in the process group it ran on.
    dtype : dtype of the payload, e.g. ``"float32"``.
    group : the process group's name (several groups: the data- and tensor-parallel
        groups of a mesh).
    """

    kind: str
    bytes: int
    group_size: int
    dtype: str = ""
    group: str = ""


@dataclass(slots=True)
class OpRecord:
    """One operator call.

    Attributes
    ----------
    name : ATen overload, e.g. ``"aten.mm.default"``.
    category : op family, a :class:`Category` (a ``str``: ``"matmul"``, ``"pointwise"``...).
    phase : ``forward``, ``backward`` or ``optimizer``.
    module : innermost module running the op (ModuleTracker name), ``""`` outside modules.
    dtype : dtype the op computed in (after autocast), e.g. ``"bfloat16"``.
    flops : floating-point operations (a multiply-add is 2).
    bytes_read, bytes_written : compulsory memory traffic of one eager kernel.
    counted : False when no FLOP formula exists for the op, or for the dtype it ran in (a
        complex call of an op without a complex rule): its ``flops`` is 0, unknown.
    kernels : device kernels the op launches (0 for metadata-only ops).
    input_shapes, output_shapes : shapes of tensor inputs and outputs.
    input_ids, output_ids : storage ids (stable within one trace) for lifetime analyses.
    backward_kernel : True for kernels that compute gradients (``convolution_backward``,
        ``*_backward`` ops, SDPA backward), whatever phase they ran in.
    recompute : True for forward ops that activation checkpointing
        (``torch.utils.checkpoint``, ``use_reentrant=False``) reruns in backward to remake
        the activations it did not keep; their phase is ``backward``, where they run.
    fused : for a kernel of a compiled step (``trace(..., compile=True)``), the eager ATen
        ops fused into it, in order (empty for an op that ran as itself).
    collective : for a torch.distributed collective (category ``collective``), its
        :class:`Collective` payload; such a record has 0 FLOPs, 0 bytes and 0 kernels, so
        the single-device analysis gives it no time (``roofline.parallel`` costs it on the
        communication stream). None for every other op.
    channels_last : an input is a 4-D or 5-D tensor in the channels-last memory format
        (and not also contiguous): PyTorch's GPU kernels of some ops (batch norm) pick
        another grid for it.
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
    backward_kernel: bool = False
    recompute: bool = False
    collective: Collective | None = None
    fused: tuple[str, ...] = ()
    channels_last: bool = False

    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOPs per byte (``inf`` when no bytes move)."""
        return self.flops / self.bytes if self.bytes else float("inf")


#: What a storage holds, as :class:`Storage` ``kind`` names it. The first five existed
#: (or, for gradients and optimizer state, are kept) beyond the ops that use them; the
#: last two are made by the step and die at their last use.
STORAGE_KINDS = ("parameter", "buffer", "gradient", "optimizer_state", "input",
                 "activation", "temporary")


@dataclass(slots=True)
class Storage:
    """One storage (the memory behind a tensor and all its views) that the step touched.

    Attributes
    ----------
    bytes : size of the storage (``untyped_storage().nbytes()``, views included once).
    dtype : dtype of the first tensor seen on it, e.g. ``"float32"``.
    first, last : indices (in ``Trace.ops``) of the first and last op that read or wrote
        it; -1 for both when no op did (a parameter the step never used).
    created : True when the step made it (its first op wrote it, reading nothing from it);
        False when it existed before the step.
    kind : one of :data:`STORAGE_KINDS`: a module's parameter or buffer, a parameter's
        ``.grad``, a tensor in an optimizer's ``state``, an ``input`` (anything else that
        existed before the step), an ``activation`` (made in forward, last used in
        backward: saved for backward) or a ``temporary``.
    held_to : index of the last op during which something outside the step's ops still
        held it, past ``last``: autocast's cast cache keeps the low-precision copy of a
        parameter until the autocast region exits (a ``held_to`` of the trace's last op:
        it outlived the capture), and an autograd node keeps a tensor it saved until the
        node has run. Watched only for autocast-style casts of parameters (see
        ``_Recorder._note_casts``); -1 when it was freed after its last use.
    """

    bytes: int
    dtype: str
    first: int
    last: int
    created: bool
    kind: str = "temporary"
    held_to: int = -1


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
            f"Totals(count={self.count}, flops={si(self.flops, 'FLOP')}, "
            f"bytes={si(self.bytes, 'B')})"
        )


def _ops(count: int) -> str:
    return "op " if count == 1 else "ops"


class Breakdown(dict[str, Totals]):
    """Totals per group (module, category or phase), largest FLOPs first."""

    def __repr__(self) -> str:
        if not self:
            return "Breakdown({})"
        width = max(len(k) for k in self)
        rows = [f"  {k:<{width}}  {v.count:>6} {_ops(v.count)}  {si(v.flops, 'FLOP'):>10}  "
                f"{si(v.bytes, 'B'):>8}" for k, v in self.items()]
        return "Breakdown(\n" + "\n".join(rows) + "\n)"

    def _repr_html_(self) -> str:  # Jupyter: the repr's rows as a table
        from roofline._table import html_table

        return html_table(["group", "ops", "FLOPs", "bytes"], [
            [k, v.count, si(v.flops, "FLOP"), si(v.bytes, "B")] for k, v in self.items()])


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
    meta : the user's own tags (``roofline.capture(meta=...)``), free-form.
    storages : storage id (as in ``OpRecord.input_ids`` and ``output_ids``) -> :class:`Storage`,
        for memory analyses; empty for traces saved before it existed, and for
        traces made by :meth:`filter` (their op indices no longer match).
    info : what the capture knows about itself (model, train, fake, torch version, how
        attention and dropout were recorded, the parallel strategy and world), a
        :class:`~roofline.tracing.info.CaptureInfo`.
    """

    ops: list[OpRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    storages: dict[int, Storage] = field(default_factory=dict)
    info: CaptureInfo = field(default_factory=CaptureInfo)

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
        return Trace([op for op in self.ops if predicate(op)], dict(self.meta),
                     info=replace(self.info, buckets=list(self.info.buckets),
                                  graph_breaks=list(self.info.graph_breaks)))

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
        if not any(op.collective is not None for op in self.ops):
            names.remove("collective")  # absent, so older readers see the document they knew
        if not any(op.fused for op in self.ops):
            names.remove("fused")
        if not any(op.channels_last for op in self.ops):
            names.remove("channels_last")
        rows = [[_plain(getattr(op, n)) for n in names] for op in self.ops]
        doc: dict[str, Any] = {"version": 2, "info": self.info.to_dict(), "meta": self.meta,
                               "fields": names, "ops": rows}
        if self.storages:  # absent, not empty, so older readers see the document they knew
            doc["storage_fields"] = ["id", *_STORAGE_FIELDS]
            doc["storages"] = [[sid, *(getattr(s, n) for n in _STORAGE_FIELDS)]
                               for sid, s in self.storages.items()]
        return json.dumps(doc, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        """Read a trace written by :meth:`to_json`, checking every op row.

        Raises
        ------
        ValueError
            When the document or a row is malformed; the message names the row index and
            the field (a negative or NaN count, a wrong type, a missing value).
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"trace JSON must be an object, got {type(data).__name__}")
        version = data.get("version")
        if version not in (1, 2) or isinstance(version, bool):
            raise ValueError(f"unsupported trace JSON version {version!r}")
        names, rows = data.get("fields"), data.get("ops")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("trace JSON: 'fields' must be a list of field names")
        if not isinstance(rows, list):
            raise ValueError("trace JSON: 'ops' must be a list of op rows")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise ValueError("trace JSON: 'meta' must be an object")
        _check_field_names(names)
        if version == 1:
            _rename_legacy_copy(names, rows)
        ops = [_op_from_row(i, names, row) for i, row in enumerate(rows)]
        if version == 1:  # the capture's facts were free-form meta keys then
            info, meta = CaptureInfo.from_meta(meta)
        else:
            info = CaptureInfo.from_dict(data.get("info", {}))
        return cls(ops, meta, _storages_from(data, len(ops)), info)

    def __repr__(self) -> str:
        phases = Counter(op.phase for op in self.ops)
        parts = ", ".join(f"{p}={phases[p]}" for p in PHASES if phases[p])
        missing = sum(t.count for t in self.uncounted.values())
        gap = f", uncounted={missing}" if missing else ""
        return (f"Trace({len(self.ops)} ops [{parts}], flops={si(self.total_flops, 'FLOP')}, "
                f"bytes={si(self.total_bytes, 'B')}{gap})")

    def _repr_html_(self) -> str:  # Jupyter: the repr's fields as a table
        from roofline._table import html_table

        phases = Counter(op.phase for op in self.ops)
        rows: list[list[Any]] = [["ops", len(self.ops)],
                                 *([p, phases[p]] for p in PHASES if phases[p]),
                ["FLOPs", si(self.total_flops, "FLOP")], ["bytes", si(self.total_bytes, "B")]]
        if missing := sum(t.count for t in self.uncounted.values()):
            rows.append(["uncounted", missing])
        return html_table(["Trace", ""], rows)


def _plain(value: Any) -> Any:
    """A field's JSON value: a :class:`Collective` as an object, the rest as it is."""
    return asdict(value) if isinstance(value, Collective) else value


# --- checked loading ---------------------------------------------------------------

def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _count(value: Any) -> int:
    """A non-negative integer; an integral float (``1e12``, as other writers emit) is one."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"expected a non-negative integer, got {value!r}")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _category(value: Any) -> Category:
    try:
        return Category.of(_text(value))
    except ValueError as e:
        raise TypeError(str(e)) from None


def _phase(value: Any) -> str:
    if value not in PHASES:
        raise TypeError(f"expected one of {', '.join(PHASES)}, got {value!r}")
    return str(value)


def _collective(value: Any) -> Collective | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"expected an object or null, got {value!r}")
    known = {f.name for f in fields(Collective)}
    if unknown := sorted(set(value) - known):
        raise TypeError(f"unknown collective field(s) {unknown} (known: {', '.join(known)})")
    kind = value.get("kind")
    if kind not in COLLECTIVE_KINDS:
        raise TypeError(f"collective kind must be one of {', '.join(COLLECTIVE_KINDS)}, "
                        f"got {kind!r}")
    size = _count(value.get("group_size"))
    if size < 1:
        raise TypeError(f"collective group_size must be >= 1, got {size}")
    return Collective(kind, _count(value.get("bytes")), size, _text(value.get("dtype", "")),
                      _text(value.get("group", "")))


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of op names, got {value!r}")
    return tuple(_text(v) for v in value)


def _ids(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of integers, got {value!r}")
    return tuple(_count(v) for v in value)


def _shapes(value: Any) -> tuple[Shape, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of shapes, got {value!r}")
    return tuple(_ids(shape) for shape in value)


# How each OpRecord field is checked (and converted) when a trace is loaded; the capture
# builds records unchecked, to stay fast.
_FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": _text, "category": _category, "phase": _phase, "module": _text, "dtype": _text,
    "flops": _count, "bytes_read": _count, "bytes_written": _count, "counted": _flag,
    "kernels": _count, "input_shapes": _shapes, "output_shapes": _shapes,
    "input_ids": _ids, "output_ids": _ids, "backward_kernel": _flag, "recompute": _flag,
    "collective": _collective, "fused": _names, "channels_last": _flag,
}
_REQUIRED = [f.name for f in fields(OpRecord)
             if f.default is MISSING and f.default_factory is MISSING]


def _check_field_names(names: list[str]) -> None:
    unknown = [n for n in names if n not in _FIELD_CHECKS]
    if unknown:
        raise ValueError(f"trace JSON: unknown op field(s) {unknown} "
                         f"(known: {', '.join(_FIELD_CHECKS)})")
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        raise ValueError(f"trace JSON: op fields {missing} are missing from 'fields'")
    if len(set(names)) != len(names):
        raise ValueError(f"trace JSON: repeated names in 'fields': {names}")


_STORAGE_FIELDS = [f.name for f in fields(Storage)]


def _rename_legacy_copy(names: list[str], rows: list[Any]) -> None:
    """A version-1 document's ``"memory"`` category (copies) is today's ``"copy"``."""
    at = names.index("category")
    for row in rows:
        if isinstance(row, list) and len(row) == len(names) and row[at] == LEGACY_COPY:
            row[at] = Category.COPY.value


def _storages_from(data: dict[str, Any], n_ops: int) -> dict[int, Storage]:
    """The storage table of a trace document; empty when it has none (older traces)."""
    if "storages" not in data:
        return {}
    names = data.get("storage_fields")
    # a trace written before ``held_to`` existed has one field less: freed at last use
    if names not in (["id", *_STORAGE_FIELDS], ["id", *_STORAGE_FIELDS[:-1]]):
        raise ValueError(f"trace JSON: 'storage_fields' must be {['id', *_STORAGE_FIELDS]}, "
                         f"got {names!r}")
    rows = data["storages"]
    if not isinstance(rows, list):
        raise ValueError("trace JSON: 'storages' must be a list of storage rows")
    table: dict[int, Storage] = {}
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, list) or len(row) != len(names):
                raise TypeError(f"expected a list of {len(names)} values")
            sid, size, dtype, first, last, created, kind, *held = row
            first, last = _index(first, n_ops), _index(last, n_ops)
            held_to = _index(held[0], n_ops) if held else -1
            if held_to != -1 and held_to < last:
                raise TypeError(f"held_to {held_to} is before its last use {last}")
            if kind not in STORAGE_KINDS:
                raise TypeError(f"kind must be one of {', '.join(STORAGE_KINDS)}, got {kind!r}")
            if (first == -1) != (last == -1) or last < first:
                raise TypeError(f"first {first} and last {last} are not an op range")
            table[_count(sid)] = Storage(_count(size), _text(dtype), first, last,
                                         _flag(created), kind, held_to)
        except (TypeError, ValueError) as e:
            raise ValueError(f"trace JSON: storage row {i}: {e}") from None
    return table


def _index(value: Any, n_ops: int) -> int:
    """An op index of the trace, or -1 (no op)."""
    if value == -1 and not isinstance(value, bool):
        return -1
    index = _count(value)
    if index >= n_ops:
        raise TypeError(f"op index {index} is past the trace's {n_ops} ops")
    return index


def _op_from_row(i: int, names: list[str], row: Any) -> OpRecord:
    if not isinstance(row, list) or len(row) != len(names):
        got = f"{len(row)} values" if isinstance(row, list) else repr(row)
        raise ValueError(f"trace JSON op row {i}: expected a list of {len(names)} values "
                         f"(one per field), got {got}")
    kw: dict[str, Any] = {}
    for name, value in zip(names, row, strict=True):
        try:
            kw[name] = _FIELD_CHECKS[name](value)
        except TypeError as e:
            raise ValueError(f"trace JSON op row {i}, field {name!r}: {e}") from None
    if "backward_kernel" not in kw:  # a trace written before the field existed
        kw["backward_kernel"] = is_backward_kernel(kw["name"])
    return OpRecord(**kw)
