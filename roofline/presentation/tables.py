"""Plain-text tables and JSON-ready dicts: what the CLI prints.

Analyses and comparisons, a parallel step and its collectives, the memory of a step, its
fit and the largest batch, a calibrated device. Every text table is drawn by one renderer,
:func:`_table` (``presentation/devices.py``'s device table too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from roofline._si import si
from roofline.analysis import (
    Analysis,
    Comparison,
    Fit,
    MaxBatch,
    MemoryReport,
    ParallelAnalysis,
    fits,
    memory,
)
from roofline.analysis.timing import ratio
from roofline.hardware import DeviceSpec
from roofline.presentation.explain import describe, explain, reached
from roofline.presentation.groups import grouped
from roofline.tracing.records import STORAGE_KINDS, OpRecord, Trace


def intensity(op: OpRecord) -> str:
    """FLOP/B of an op; ``-`` for one that moves no bytes (its intensity is undefined)."""
    return f"{op.intensity:.3g}" if op.bytes else "-"


def seconds(x: float) -> str:
    """A time with its SI prefix, four significant digits (``45.3 ms``)."""
    return si(x, "s", digits=4)


def _table(header: Sequence[str] | None, rows: Sequence[Sequence[str]], *, left: int = 2,
           sep: str = "  ", indent: str = "", rule: bool = True,
           widths: Sequence[int] | None = None) -> str:
    """Text columns: the one renderer of every table the CLI prints.

    Parameters
    ----------
    header : the column names (None: no header line, and no rule).
    rows : the cells, as text.
    left : how many leading columns are left-aligned (they name the row); the rest,
        numbers, are right-aligned.
    sep, indent : between columns, and before each line.
    rule : a line of dashes under the header.
    widths : each column's width; by default its widest cell. A cell wider than a given
        width pushes the rest of its row right, as a format spec does.
    """
    if widths is None:
        cells = ([] if header is None else [header]) + list(rows)
        widths = [max(map(len, column)) for column in zip(*cells, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return indent + sep.join(c.ljust(w) if i < left else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    out = [] if header is None else [line(header)]
    if header is not None and rule:
        out.append(line(["-" * w for w in widths]))
    return "\n".join(out + [line(r) for r in rows])


def headline(a: Analysis) -> str:
    """``gpt2 (batch 8, bf16, training step) on A100 SXM 80GB: 52.5 ms per step (compute 45%,
    memory 51%, overhead 4%)``."""
    shares = ", ".join(f"{k} {v['fraction']:.0%}" for k, v in a.by_bound().items()
                       if v["seconds"])
    return f"{describe(a)} on {a.device.name}: {seconds(a.seconds)} per step ({shares})"


def answer(a: Analysis, *, compared: Comparison | None = None,
           asked: Comparison | None = None, note: str = "") -> str:
    """The answer, first, in at most six lines: what the step is and where its time goes,
    what 2x the FLOP/s and 2x the bandwidth give with the Amdahl ceilings, the what-if
    asked or the device swap; a note (e.g. the dtype the step was analysed in) comes first."""
    def gain(**factors: float) -> float:
        return ratio(a.seconds, a.seconds_with(**factors))

    lines = [note] if note else []
    lines.append(headline(a))
    if asked is not None:
        lines.append(f"what if {asked.dst.device.name}: {asked.speedup:.2f}x "
                     f"({seconds(asked.src.seconds)} -> {seconds(asked.dst.seconds)})")
    lines.append(f"2x FLOP/s: {gain(compute=2):.2f}x   2x bandwidth: {gain(memory=2):.2f}x"
                 f"   at most {gain(compute=math.inf):.2f}x with infinite FLOP/s, "
                 f"{gain(memory=math.inf):.2f}x with infinite bandwidth")
    if compared is not None:
        band = compared.band
        sure = f"; {band.low:.2f}-{band.high:.2f}x on {band.pairs} published pairs of " \
               "this kind" if band is not None else ""
        lines.append(f"{compared.src.device.name} -> {compared.dst.device.name}: "
                     f"{compared.speedup:.2f}x ({_ratio_words(compared)}{sure})")
    return "\n".join(lines)


def compile_lines(fusion: Comparison, eager_asked: Comparison | None = None) -> str:
    """What ``torch.compile`` buys (``compare(eager, compiled, device)``), and the what-if
    asked of the eager step, for the answer of a compiled trace."""
    before, after = fusion.src.trace.total_bytes, fusion.dst.trace.total_bytes
    line = (f"torch.compile: {fusion.speedup:.2f}x over eager on {fusion.dst.device.name} "
            f"({seconds(fusion.src.seconds)} -> {seconds(fusion.dst.seconds)}); fusion "
            f"removes {si(before - after, 'B')} of the {si(before, 'B')} moved")
    if eager_asked is None:
        return line
    return line + (f"\neager (no compile), the same what-if: {eager_asked.speedup:.2f}x "
                   f"({seconds(eager_asked.src.seconds)} -> {seconds(eager_asked.dst.seconds)})")


def _ratio_words(c: Comparison) -> str:
    at = reached(c.flops_ratio, c.achievable_flops_ratio, " or {:.2g}x as reached")
    flops = (f"{c.flops_ratio:.2g}x the FLOP/s{at}, " if math.isfinite(c.flops_ratio) else "")
    return f"{flops}{c.bandwidth_ratio:.2g}x the bandwidth"


def ops_table(a: Analysis, top: int = 15, group_by: str = "op") -> str:
    """The ``top`` groups of ops by predicted time: one row per ATen op and shapes (with a
    count of calls), per module (repeated blocks folded) or per category."""
    groups = sorted(grouped(a, group_by).values(), key=lambda g: -g.seconds)
    total = a.seconds or 1.0
    rows = []
    for g in groups[:top]:
        label = g.label if len(g.label) <= 48 else g.label[:45] + "..."
        rows.append([label, str(g.count), g.bound, si(g.flops), si(g.bytes, "B"),
                     f"{g.flops / g.bytes:.3g}" if g.bytes else "-", seconds(g.seconds),
                     f"{g.seconds / total:.1%}"])
    covered = sum(g.seconds for g in groups[:top]) / total
    name = {"op": "op and shapes", "module": "module", "category": "category"}[group_by]
    return "\n".join([
        _table([name, "calls", "bound", "FLOPs", "bytes", "FLOP/B", "time", "share"], rows,
               left=3),
        f"(top {len(rows)} of {len(groups)} groups: {covered:.0%} of the step; "
        f"--top N for more, --group-by op|module|category)"])


def analysis_table(a: Analysis, top: int = 15, group_by: str = "op") -> str:
    """The groups of ops that take the most time, then the totals by bound, category and
    phase."""
    return "\n".join([
        f"{a.device.name}: {len(a.trace.ops)} ops, {si(a.trace.total_flops, 'FLOP')}, "
        f"{si(a.trace.total_bytes, 'B')}; achieved {si(a.achieved_flops_per_s, 'FLOP/s')} = "
        f"{a.mfu:.1%} of peak", "",
        ops_table(a, top, group_by), "",
        "by bound:    " + ", ".join(f"{k} {v['fraction']:.1%}"
                                    for k, v in a.by_bound().items() if v["seconds"]),
        "by category: " + ", ".join(f"{k} {v['fraction']:.1%}"
                                    for k, v in list(a.by_category().items())[:8]),
        "by phase:    " + ", ".join(f"{k} {v['fraction']:.1%}"
                                    for k, v in a.by_phase().items())])


def assumptions_text(notes: Sequence[str], verbose: bool = False, shown: int = 3) -> str:
    """The assumptions, once: all with ``verbose``, else the first ``shown`` (they are in
    order of how much they shape the answer: the capture's choices, then the device's
    figures) and how many more there are."""
    notes = list(dict.fromkeys(notes))
    if not notes:
        return ""
    listed = notes if verbose else notes[:shown]
    more = len(notes) - len(listed)
    tail = [f"  ... and {more} more (-v lists them all; --json has them)"] if more else []
    return "\n".join(["assumptions:", *(f"  - {x}" for x in listed), *tail])


def comparison_table(c: Comparison) -> str:
    """Per-category times on both devices and the explanation (its assumptions apart)."""
    rows = [[k, "", seconds(v["src_seconds"]), seconds(v["dst_seconds"]),
             f"{v['speedup']:.2f}x"] for k, v in c.by_category().items() if v["src_seconds"]]
    return "\n".join([
        f"{c.src.device.name} -> {c.dst.device.name}: predicted speedup {c.speedup:.2f}x "
        f"({seconds(c.src.seconds)} -> {seconds(c.dst.seconds)})", "",
        _table(["category", "", c.src.device.name, c.dst.device.name, "speedup"], rows), "",
        explain(c, assumptions=False)])


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


# --- a parallel step ---------------------------------------------------------------------


def parallel_text(p: ParallelAnalysis, verbose: bool = False) -> str:
    """The step, its collectives by kind and the explanation (``analyze --gpus N``)."""
    rows = [[kind, str(int(v["count"])), si(v["bytes"], "B"), si(v["seconds"], "s")]
            for kind, v in p.by_kind().items()]
    table = _table(["collective", "calls", "bytes", "seconds"], rows, left=1, sep=" ",
                   indent="  ", rule=False, widths=(15, 5, 9, 9))
    return "\n\n".join([parallel_answer(p), table, explain(p, assumptions=False),
                        assumptions_text(p.assumptions, verbose)]).rstrip()


def parallel_answer(p: ParallelAnalysis) -> str:
    """The answer of a parallel step first: the step on N GPUs, its speedup over one, and
    how much communication the compute hides."""
    link = p.topology.intra.kind + (f", {p.nodes} nodes" if p.nodes > 1 else "")
    speed = p.speedup_vs_one_gpu
    vs_one = (f"{speed:.2f}x one GPU ({p.efficiency:.0%} efficiency)" if speed is not None
              else "no single-GPU step to compare with")
    rate = f", {p.samples_per_s:.4g} samples/s" if p.samples_per_s else ""
    return "\n".join([
        f"{describe(p.analysis)} on {p.gpus}x {p.device.name} ({p.parallel} over {link}): "
        f"{seconds(p.seconds)} per step{rate}",
        f"{vs_one}; communication {seconds(p.communication_seconds)}, of which "
        f"{seconds(p.exposed_communication_seconds)} exposed ({p.exposed_share:.0%} of the "
        "step)"])


def parallel_dict(p: ParallelAnalysis) -> dict[str, Any]:
    top = p.topology
    links = {"intra_node": {"kind": top.intra.kind,
                            "bus_bytes_per_s": top.intra.bus_bytes_per_s}}
    if top.inter is not None:
        links["inter_node"] = {"kind": top.inter.kind,
                               "bus_bytes_per_s": top.inter.bus_bytes_per_s}
    return {"device": p.device.name, "gpus": p.gpus, "nodes": p.nodes,
            "gpus_per_node": top.gpus_per_node, "links": links,
            "one_gpu_seconds": p.one_gpu_seconds, "one_gpu_batch": p.one_gpu_batch,
            "parallel": p.parallel, "seconds": p.seconds,
            "samples_per_s": p.samples_per_s, "compute_seconds": p.compute_total_seconds,
            "communication_seconds": p.communication_seconds,
            "exposed_communication_seconds": p.exposed_communication_seconds,
            "exposed_share": p.exposed_share, "speedup_vs_one_gpu": p.speedup_vs_one_gpu,
            "efficiency": p.efficiency, "collectives": p.collectives(),
            "assumptions": p.assumptions}


# --- memory ------------------------------------------------------------------------------


def memory_summary(t: Trace, device: DeviceSpec) -> dict[str, Any]:
    """Peak and fit of a trace, for ``analyze --json`` (no fit where the device has no size)."""
    r = memory(t)
    out: dict[str, Any] = {"peak_bytes": r.peak_bytes, "peak_op": r.peak_name,
                           "peak_phase": r.peak_phase, "peak_module": r.peak_module}
    if device.memory_bytes:
        f = fits(r, device)
        out.update(fits=f.fits, required_bytes=f.required_bytes,
                   capacity_bytes=f.capacity_bytes, margin_bytes=f.margin_bytes)
    return out


def memory_line(t: Trace, device: DeviceSpec) -> str:
    """One line for ``analyze``: the peak, and whether it fits the device."""
    m = memory_summary(t, device)
    line = f"memory: peak {si(m['peak_bytes'], 'B')} ({m['peak_phase']}, {m['peak_op']})"
    if "fits" not in m:
        return line + f"; {device.name} has no memory size in the registry: no fit checked"
    verdict = "fits" if m["fits"] else "does NOT fit"
    return (line + f"; with allocator overheads {si(m['required_bytes'], 'B')}: {verdict} "
            f"{device.name}'s {si(m['capacity_bytes'], 'B')} (margin "
            f"{si(m['margin_bytes'], 'B')}; roofline memory for the details)")


def fit_dict(f: Fit) -> dict[str, Any]:
    return {"fits": f.fits, "device": f.device, "capacity_bytes": f.capacity_bytes,
            "tensor_bytes": f.tensor_bytes, "overheads": f.overheads,
            "required_bytes": f.required_bytes, "margin_bytes": f.margin_bytes,
            "margin_fraction": f.margin_fraction, "assumptions": f.assumptions}


def memory_dict(r: MemoryReport, f: Fit) -> dict[str, Any]:
    return {"bytes_by_kind": r.bytes_by_kind, "peak_by_kind": r.peak_by_kind,
            "peak": {"bytes": r.peak_bytes, "op_index": r.peak_op, "op": r.peak_name,
                     "module": r.peak_module, "phase": r.peak_phase},
            "fit": fit_dict(f)}


def memory_table(r: MemoryReport, f: Fit) -> str:
    """The peak, bytes by kind (all step and at the peak), the fit and its overheads
    (``roofline memory``)."""
    kinds = _table(["kind", "all step", "at peak"],
                   [[k, si(r.bytes_by_kind[k], "B"), si(r.peak_by_kind[k], "B")]
                    for k in STORAGE_KINDS],
                   left=1, sep=" ", indent="  ", rule=False, widths=(16, 10, 10))
    needs = _table(None, [["tensors", si(f.tensor_bytes, "B")],
                          *([k, si(v, "B")] for k, v in f.overheads.items())],
                   left=1, sep=" ", indent="  ", widths=(16, 10))
    verdict = "fits" if f.fits else "does NOT fit"
    lines = [f"peak live tensors: {si(r.peak_bytes, 'B')} at {r.where}", "", kinds, "",
             f"{f.device}: {verdict}: needs {si(f.required_bytes, 'B')} of "
             f"{si(f.capacity_bytes, 'B')}, margin {si(f.margin_bytes, 'B')} "
             f"({f.margin_fraction:.1%})", needs, "assumptions:"]
    lines += [f"  - {a}" for a in f.assumptions]
    return "\n".join(lines)


def max_batch_dict(m: MaxBatch, search_seconds: float) -> dict[str, Any]:
    """The search's result for ``memory --max-batch --json`` (``search_seconds``: how long
    it took)."""
    return {"batch": m.batch, "samples_per_s": m.samples_per_s, "seconds": m.seconds,
            "bytes_per_sample": m.bytes_per_sample, "fixed_bytes": m.fixed_bytes,
            "predicted_batch": m.predicted_batch, "check_batch": m.check_batch,
            "fit_error": m.fit_error, "affine": m.affine,
            "pieces": [{"start": p.start, "bytes_per_sample": p.bytes_per_sample,
                        "fixed_bytes": p.fixed_bytes} for p in m.pieces],
            "traced": {b: {"required_bytes": r, "seconds": s}
                       for b, (r, s) in m.traced.items()},
            "search_seconds": search_seconds}


def fit_words(m: MaxBatch) -> str:
    """The fit as words: one line, or its pieces with the batch each starts at."""
    pieces = m.pieces or ()
    if len(pieces) <= 1:
        return f"{si(m.bytes_per_sample, 'B')} per sample + {si(m.fixed_bytes, 'B')}"
    words = [f"{si(p.bytes_per_sample, 'B')} per sample + {si(p.fixed_bytes, 'B')} from "
             f"batch {p.start}" for p in pieces]
    if len(words) > 2:  # the ends say how it starts and where it limits the batch
        words[1:-1] = [f"{len(words) - 2} more piece{'s' if len(words) > 3 else ''}"]
    return ", then ".join(words) + " (the op at the peak changes with the batch)"


def max_batch_text(m: MaxBatch, search_seconds: float) -> str:
    """The largest batch, the affine fit and the batches traced, then the memory table at
    that batch (``memory --max-batch``)."""
    affine = ("affine in the batch" if m.affine else
              f"NOT affine in the batch ({m.fit_error:.1%} off at batch {m.check_batch})")
    head = [f"largest batch on {m.device}: {m.batch} ({m.samples_per_s:.4g} samples/s, "
            f"step {si(m.seconds, 's')})",
            f"memory {affine}: {fit_words(m)}; traced batches "
            + ", ".join(f"{b} ({si(r, 'B')})" for b, (r, _) in m.traced.items())
            + f" in {search_seconds:.1f} s", "", f"at batch {m.batch}:"]
    return "\n".join(head) + "\n" + memory_table(m.memory, m.fit)


# --- a calibrated device -----------------------------------------------------------------


def calibration_text(spec: DeviceSpec) -> str:
    """The measured peaks, bandwidth and per-op overhead (``roofline calibrate``)."""
    lines = [f"{spec.name}"]
    for unit, peaks in (("matrix", spec.matrix_flops_per_s), ("vector", spec.vector_flops_per_s)):
        for dtype, rate in peaks.items():
            lines.append(f"  {unit} {dtype:<5} {rate / 1e9:10.1f} GFLOP/s")
    lines.append(f"  bandwidth    {spec.bandwidth_bytes_per_s / 1e9:10.1f} GB/s")
    lines.append(f"  per-op overhead {spec.launch_overhead_seconds * 1e6:7.2f} us")
    lines += [f"  - {n}" for n in spec.notes]
    return "\n".join(lines)
