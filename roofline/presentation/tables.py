"""Plain-text tables and JSON-ready dicts for analyses and comparisons."""

from __future__ import annotations

import math
from typing import Any

from roofline._si import si
from roofline.analysis import Analysis, Comparison
from roofline.presentation.explain import explain
from roofline.tracing.records import OpRecord


def intensity(op: OpRecord) -> str:
    """FLOP/B of an op; ``-`` for one that moves no bytes (its intensity is undefined)."""
    return f"{op.intensity:.3g}" if op.bytes else "-"


def seconds(x: float) -> str:
    """A time with its SI prefix, four significant digits (``45.3 ms``)."""
    return si(x, "s", digits=4)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(lines)


def analysis_table(a: Analysis, top: int = 15) -> str:
    """Top ops by predicted time, then the totals by bound and category."""
    rows = []
    total = a.seconds or 1.0
    for op, s, bound in a.top(top):
        module = op.module if len(op.module) <= 40 else "..." + op.module[-37:]
        rows.append([op.name.removeprefix("aten."), module or "-", op.phase, op.dtype, bound,
                     si(op.flops), si(op.bytes, "B"), intensity(op), seconds(s),
                     f"{s / total:.1%}"])
    out = [f"{a.device.name}: predicted step {seconds(a.seconds)} "
           f"({len(a.trace.ops)} ops, {si(a.trace.total_flops, 'FLOP')}, "
           f"{si(a.trace.total_bytes, 'B')}), achieved {si(a.achieved_flops_per_s, 'FLOP/s')}"
           f" = {a.mfu:.1%} of peak",
           "",
           _table(["op", "module", "phase", "dtype", "bound", "FLOPs", "bytes", "FLOP/B",
                   "time", "share"], rows),
           "",
           "by bound:    " + ", ".join(f"{k} {v['fraction']:.1%}"
                                       for k, v in a.by_bound().items() if v["seconds"]),
           "by category: " + ", ".join(f"{k} {v['fraction']:.1%}"
                                       for k, v in list(a.by_category().items())[:8]),
           "by phase:    " + ", ".join(f"{k} {v['fraction']:.1%}"
                                       for k, v in a.by_phase().items())]
    if a.assumptions:
        out += ["", "assumptions:"] + [f"  - {x}" for x in a.assumptions]
    return "\n".join(out)


def comparison_table(c: Comparison) -> str:
    """Per-category times on both devices and the explanation."""
    rows = [[k, "", seconds(v["src_seconds"]), seconds(v["dst_seconds"]),
             f"{v['speedup']:.2f}x"] for k, v in c.by_category().items() if v["src_seconds"]]
    return "\n".join([
        f"{c.src.device.name} -> {c.dst.device.name}: predicted speedup {c.speedup:.2f}x "
        f"({seconds(c.src.seconds)} -> {seconds(c.dst.seconds)})", "",
        _table(["category", "", c.src.device.name, c.dst.device.name, "speedup"], rows), "",
        explain(c)])


def finite(x: Any) -> Any:
    """Replace inf/nan (not valid JSON) by None, recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def analysis_dict(a: Analysis, top: int = 15) -> dict[str, Any]:
    return {
        "device": a.device.name, "seconds": a.seconds, "device_seconds": a.device_seconds,
        "host_seconds": a.host_seconds, "total_flops": a.trace.total_flops,
        "total_bytes": a.trace.total_bytes, "achieved_flops_per_s": a.achieved_flops_per_s,
        "mfu": a.mfu, "by_bound": a.by_bound(), "by_category": a.by_category(),
        "by_phase": a.by_phase(), "assumptions": a.assumptions,
        "uncounted": {k: v.count for k, v in a.trace.uncounted.items()},
        "top_ops": [{"name": op.name, "module": op.module, "phase": op.phase,
                     "dtype": op.dtype, "bound": b, "flops": op.flops, "bytes": op.bytes,
                     "seconds": s} for op, s, b in a.top(top)],
    }


def comparison_dict(c: Comparison) -> dict[str, Any]:
    return {"src": analysis_dict(c.src), "dst": analysis_dict(c.dst), "speedup": c.speedup,
            "by_category": c.by_category(), "by_bound": c.by_bound(),
            "limits": c.speedup_limits(), "explanation": explain(c)}
