"""Memory of a step: what is live when, the peak, and whether it fits a device.

Built on the storage table of the capture (:attr:`Trace.storages`): every storage the
step touched, with its bytes, the ops that first and last used it, and what it holds.
Liveness is by use, as an eager step with a caching allocator frees a tensor when its
last reference goes:

* parameters, buffers, optimizer state and inputs are live for the whole step (they
  existed before it; optimizer state a first step creates, from its creation on);
* a gradient from the op that makes it to the end of the step (the optimizer reads it,
  and nothing frees it within the step);
* activations (made in forward, last used in backward: saved for backward) and
  temporaries from their first write to their last use, or to ``Storage.held_to``
  when something outside the ops held them longer: autocast's cast cache keeps the
  low-precision copy of each parameter until the autocast region exits. A
  ``with torch.autocast(...)`` around :func:`roofline.trace` exits after the optimizer
  step, so the copies are live to the end of the step; one inside the model's forward
  exits before backward, and they die there (the capture sees when, see
  ``_Recorder._note_casts``).

Activation checkpointing (``torch.utils.checkpoint``) is seen as it runs: forward keeps
no activations of the checkpointed function (its outputs die at their last forward use),
and backward reruns it, ops flagged ``OpRecord.recompute``, whose outputs are then
backward's temporaries; :attr:`MemoryReport.recompute_flops` sums the rerun.

A storage is live during its first and last op, so an op's inputs and outputs coexist,
as they do when the kernel runs. What the model misses: Python references that outlive
the last use (an output the caller holds), kernels' internal workspaces, and allocator
overheads; :func:`roofline.analysis.fit.fits` adds the allocator's, as separate, cited
assumptions, and :func:`roofline.analysis.batch.max_batch` finds the largest batch that
fits.

Why roofline tracks storages itself rather than using
``torch.distributed._tools.mem_tracker.MemTracker``: see ``tests/test_memory.py``
(``test_memtracker_*``) for what it does on the same fake step; it needs the model and
optimizer up front (a plain :func:`roofline.capture` block has neither), counts a
storage by its owner at registration rather than by its lifetime in the op stream, and
does not give the op, module and phase of the peak, which the capture has per op anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofline._checks import whole
from roofline._si import si
from roofline.tracing.records import STORAGE_KINDS, Storage, Trace

# Kinds live from the start (or their creation) to the end of the step.
_KEPT = frozenset({"parameter", "buffer", "optimizer_state", "input", "gradient"})


def _interval(s: Storage, n_ops: int) -> tuple[int, int]:
    """The op range ``[start, end]`` in which ``s`` is live."""
    # from the start when it existed before the step (or no op used it)
    start = 0 if s.first < 0 or not s.created else s.first
    end = n_ops - 1 if s.kind in _KEPT or s.first < 0 else max(s.last, s.held_to)
    return start, end


def _timeline(storages: dict[int, Storage], n: int, size: Any = None) -> list[int]:
    """Live bytes during each of ``n`` ops (``size(storage)`` instead of its bytes if given)."""
    delta = [0] * (n + 1)
    for s in storages.values():
        start, end = _interval(s, n)
        b = s.bytes if size is None else size(s)
        delta[start] += b
        delta[end + 1] -= b
    live, total = [], 0
    for d in delta[:n]:
        total += d
        live.append(total)
    return live


@dataclass
class MemoryReport:
    """Bytes a step holds, by kind, and live bytes over the step.

    Attributes
    ----------
    bytes_by_kind : bytes of all storages of each kind (:data:`STORAGE_KINDS`), whether
        or not they are live at the same time.
    peak_bytes : the most bytes live during one op.
    peak_op : index (in ``trace.ops``) of the first op at the peak; ``peak_name``,
        ``peak_module``, ``peak_phase`` say which op that is.
    peak_by_kind : the live bytes at the peak, by kind.
    timeline : live bytes during each op, in op order.
    by_module : module (cut to ``depth`` components) -> kind -> bytes of the storages
        first used by that module's ops (parameters where first read, activations where
        made).
    held_bytes : bytes of the storages held past their last use (``Storage.held_to``:
        autocast's cached parameter copies, or a saved copy until its autograd node has
        run); ``peak_held_bytes`` those live at the peak.
    recompute_flops : FLOPs of the ops activation checkpointing reran in backward
        (``OpRecord.recompute``), included in the trace's backward FLOPs.
    """

    bytes_by_kind: dict[str, int]
    peak_bytes: int
    peak_op: int
    peak_name: str
    peak_module: str
    peak_phase: str
    peak_by_kind: dict[str, int]
    timeline: list[int] = field(repr=False)
    by_module: dict[str, dict[str, int]] = field(repr=False)
    storages: dict[int, Storage] = field(repr=False, default_factory=dict)
    held_bytes: int = 0
    peak_held_bytes: int = 0
    recompute_flops: int = 0

    @property
    def parameters_bytes(self) -> int:
        return self.bytes_by_kind["parameter"]

    @property
    def gradients_bytes(self) -> int:
        return self.bytes_by_kind["gradient"]

    @property
    def optimizer_state_bytes(self) -> int:
        return self.bytes_by_kind["optimizer_state"]

    @property
    def buffers_bytes(self) -> int:
        return self.bytes_by_kind["buffer"]

    @property
    def inputs_bytes(self) -> int:
        return self.bytes_by_kind["input"]

    @property
    def activations_bytes(self) -> int:
        """Bytes made in forward and used in backward: saved for backward."""
        return self.bytes_by_kind["activation"]

    @property
    def temporaries_bytes(self) -> int:
        return self.bytes_by_kind["temporary"]

    @property
    def where(self) -> str:
        """Where the peak is, in words: ``"aten.mm.default (op 41, backward, GPT.h.0)"``."""
        module = f", {self.peak_module}" if self.peak_module else ""
        return f"{self.peak_name} (op {self.peak_op}, {self.peak_phase}{module})"

    def __repr__(self) -> str:
        kinds = "\n".join(f"  {k:<16} {si(self.bytes_by_kind[k], 'B'):>9}   at peak "
                          f"{si(self.peak_by_kind[k], 'B'):>9}" for k in STORAGE_KINDS)
        return f"MemoryReport(peak {si(self.peak_bytes, 'B')} at {self.where}\n{kinds}\n)"


def memory(trace: Trace, depth: int | None = 2) -> MemoryReport:
    """The memory of a captured step: bytes by kind, the peak and where it is, a timeline.

    Parameters
    ----------
    trace : a trace from :func:`roofline.trace` or :func:`roofline.capture` (fake or real).
    depth : module paths in ``by_module`` are cut to this many components (None: full).

    Raises
    ------
    ValueError
        When the trace has no storage table (saved by an older roofline, or made by
        :meth:`Trace.filter`): capture the step again. For a compiled trace.

    Examples
    --------
    >>> model = nn.Linear(1024, 1024)
    >>> opt = torch.optim.AdamW(model.parameters())
    >>> t = roofline.trace(model, torch.randn(8, 1024), train=True, optimizer=opt,
    ...                    loss_fn=lambda y: y.sum(), fake=True)
    >>> r = roofline.memory(t)
    >>> r.parameters_bytes  # fp32: 4 x (1024 x 1024 + 1024)
    4198400
    >>> r.optimizer_state_bytes  # AdamW's two moments, and a 4-byte step per tensor
    8396808
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"roofline.memory takes a Trace (from roofline.trace or "
                        f"roofline.capture), got {type(trace).__name__}")
    if depth is not None:
        depth = whole("depth", depth, at_least=0)
    if trace.info.compiled:
        raise ValueError(
            "roofline.memory of a compiled trace (compile=True) is not modelled: its fused "
            "kernels keep no tensor lifetimes, and inductor reuses buffers. Ask the eager "
            "trace of the same step (compile=False): it gives the activations eager PyTorch "
            "saves, which a compiled step's min-cut partitioner can only reduce.")
    if not trace.ops or not trace.storages:
        what = "no ops" if not trace.ops else "no storage table (an older trace file, or a " \
            "Trace.filter result, whose op indices no longer match)"
        raise ValueError(f"roofline.memory needs a captured step, but the trace has {what}; "
                         "capture the step again with roofline.trace or roofline.capture.")
    by_kind = dict.fromkeys(STORAGE_KINDS, 0)
    by_module: dict[str, dict[str, int]] = {}
    for s in trace.storages.values():
        by_kind[s.kind] += s.bytes
        module = trace.ops[s.first].module if s.first >= 0 else ""
        if depth is not None:
            module = ".".join(module.split(".")[:depth])
        row = by_module.setdefault(module, dict.fromkeys(STORAGE_KINDS, 0))
        row[s.kind] += s.bytes
    live = _timeline(trace.storages, len(trace.ops))
    peak = max(range(len(live)), key=live.__getitem__)
    at_peak = dict.fromkeys(STORAGE_KINDS, 0)
    held = held_at_peak = 0
    for s in trace.storages.values():
        start, end = _interval(s, len(trace.ops))
        if start <= peak <= end:
            at_peak[s.kind] += s.bytes
        if s.held_to > s.last:
            held += s.bytes
            held_at_peak += s.bytes if start <= peak <= end else 0
    op = trace.ops[peak]
    recompute = sum(o.flops for o in trace.ops if o.recompute)
    return MemoryReport(by_kind, live[peak], peak, op.name, op.module, op.phase, at_peak,
                        live, by_module, dict(trace.storages), held, held_at_peak, recompute)
