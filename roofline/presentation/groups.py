"""Ops in groups: by ATen op and shapes, by module (repeated blocks folded), by category.

The roofline chart draws one point per group, the CLI lists one row per group (with a
count), and ``roofline_data`` returns them as a DataFrame: all three group here.

Folding modules: the layers of a transformer (``GPT.h.0`` ... ``GPT.h.11``) run the same
ops on the same shapes, and are one group, ``GPT.h.*``; the stages of a CNN's
``nn.Sequential`` (``features.0`` ... ``features.7``) are different layers, and stay
apart. Each indexed block is compared with its siblings by its signature, the ops it ran
(name, shapes, dtype, phase and the path below the block, in order): identical siblings
fold, all of them into ``*`` and some of them into a list of their indices
(``layer1.[1-2]``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from roofline.analysis import Analysis
from roofline.analysis.rates import dtype_key
from roofline.analysis.timing import ROOFS
from roofline.tracing.records import OpRecord, Trace

GROUPS = ("op", "module", "category")
_INDEX = re.compile(r"\d+")


@dataclass
class Group:
    """The ops of one group and what they add up to on one analysis."""

    label: str
    count: int = 0
    flops: int = 0
    bytes: int = 0
    seconds: float = 0.0
    bounds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROOFS, 0.0))
    engines: dict[str, int] = field(default_factory=dict)
    rated: bool = True
    ops: list[int] = field(default_factory=list)

    @property
    def bound(self) -> str:
        """The bound holding most of the group's time (``none`` when it takes none)."""
        return max(ROOFS, key=lambda b: self.bounds[b]) if self.seconds > 0 else "none"

    @property
    def engine(self) -> str:
        """The engine that ran most of the group's FLOPs (``""``: none)."""
        return max(self.engines, key=self.engines.__getitem__) if self.engines else ""


def op_label(op: OpRecord) -> str:
    """``mm 8192x768 768x3072``: the op and its input shapes (a count for many)."""
    name = op.name.removeprefix("aten.").removesuffix(".default")
    tensors = [s for s in op.input_shapes if s]
    shapes = (" ".join("x".join(map(str, s)) for s in tensors) if len(tensors) <= 3
              else f"({len(tensors)} tensors)")  # a _foreach_ op over every parameter
    return f"{name} {shapes}".strip()


def keys(trace: Trace, group_by: str) -> list[tuple[str, str]]:
    """(group key, display label) of every op."""
    if group_by not in GROUPS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPS)}, got {group_by!r}")
    if group_by == "category":
        return [(str(op.category), str(op.category)) for op in trace.ops]
    if group_by == "module":
        folded = _folded_modules(trace)
        return [(m, m) for m in folded]
    pairs = [(f"{op.name}|{op.input_shapes}|{op.dtype}", op_label(op)) for op in trace.ops]
    groups: dict[str, set[str]] = defaultdict(set)
    for key, label in pairs:
        groups[label].add(key)
    # one label for two groups (a cast to bf16 and one back, of the same shape): the dtype
    return [(key, label if len(groups[label]) == 1 else
             f"{label} ({dtype_key(op.dtype) or op.dtype})")
            for (key, label), op in zip(pairs, trace.ops, strict=True)]


def grouped(a: Analysis, group_by: str = "op") -> dict[str, Group]:
    """The groups of an analysis, in order of their first op."""
    out: dict[str, Group] = {}
    for i, ((key, label), op, s, b, e) in enumerate(zip(
            keys(a.trace, group_by), a.trace.ops, a.op_seconds, a.bound, a.engine,
            strict=True)):
        g = out.setdefault(key, Group(label))
        g.count += 1
        g.flops += op.flops
        g.bytes += op.bytes
        g.seconds += float(s)
        g.ops.append(i)
        if b in g.bounds:  # an op that takes no time has no roof ("none")
            g.bounds[b] += float(s)
        if e is not None:
            g.engines[str(e)] = g.engines.get(str(e), 0) + op.flops
        elif op.flops > 0:  # FLOPs on no engine: costed by bytes and overhead only
            g.rated = False
    return out


# --- folding repeated blocks ------------------------------------------------------------

def _folded_modules(trace: Trace) -> list[str]:
    """Every op's module path with identical sibling blocks folded (see the module doc)."""
    signatures: dict[tuple[str, str], list[tuple[object, ...]]] = defaultdict(list)
    split = [op.module.split(".") if op.module else [] for op in trace.ops]
    for op, parts in zip(trace.ops, split, strict=True):
        for i, part in enumerate(parts):
            if _INDEX.fullmatch(part) and i:
                block = (".".join(parts[:i]), part)
                signatures[block].append((op.name, op.input_shapes, op.dtype, op.phase,
                                          ".".join(parts[i + 1:])))
    labels = _index_labels(signatures)
    out = []
    for parts in split:
        folded = [labels.get((".".join(parts[:i]), p), p) if _INDEX.fullmatch(p) and i else p
                  for i, p in enumerate(parts)]
        out.append(".".join(folded) or "(outside modules)")
    return out


def _index_labels(signatures: dict[tuple[str, str], list[tuple[object, ...]]],
                  ) -> dict[tuple[str, str], str]:
    """(container, index) -> the index's label: ``*`` when every sibling block is alike,
    ``[1-2]`` for a class of alike siblings, the index itself when it is alone."""
    by_container: dict[str, dict[tuple[object, ...], list[int]]] = defaultdict(
        lambda: defaultdict(list))
    for (container, index), sig in signatures.items():
        by_container[container][tuple(sig)].append(int(index))
    labels: dict[tuple[str, str], str] = {}
    for container, classes in by_container.items():
        for members in classes.values():
            if len(classes) == 1 and len(members) > 1:
                label = "*"
            elif len(members) > 1:
                label = f"[{_ranges(sorted(members))}]"
            else:
                label = str(members[0])
            for member in members:
                labels[(container, str(member))] = label
    return labels


def _ranges(indices: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``1-3,5``."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and i == spans[-1][-1] + 1:
            spans[-1].append(i)
        else:
            spans.append([i])
    return ",".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0]) for s in spans)
