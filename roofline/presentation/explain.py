"""The reasons of a speedup in words (``roofline.explain(comparison)``), and what a step
is, in a few words (:func:`describe`)."""

from __future__ import annotations

import math
from collections import Counter

from roofline._si import si
from roofline.analysis import Analysis, Comparison, ParallelAnalysis, Reasons
from roofline.analysis.rates import dtype_key
from roofline.tracing.records import Category

#: A bound with a smaller share of the step than this is not worth a clause.
MIN_SHARE = 0.01
#: The achievable FLOP/s ratio is named next to the datasheet's when they differ by more
#: than this (a share measured on one device and not the other, a dual-datapath SGEMM).
ACHIEVABLE_DIFFERS = 0.05

#: How each op category is named in a sentence.
CATEGORY_WORDS: dict[str, str] = {  # keyed by Category (a str)
    Category.NORMALIZATION: "norms", Category.SOFTMAX: "softmax",
    Category.OPTIMIZER: "optimizer", Category.POINTWISE: "elementwise",
    Category.COPY: "copies", Category.REDUCTION: "reductions",
    Category.EMBEDDING: "embeddings", Category.LOSS: "loss", Category.POOLING: "pooling",
    Category.DROPOUT: "dropout", Category.MATMUL: "matmuls", Category.CONV: "convolutions",
    Category.ATTENTION: "attention", Category.UPSAMPLE: "upsampling",
    Category.UNCOUNTED: "uncounted ops", Category.VIEW: "views",
    Category.ALLOCATION: "allocations", Category.LAYOUT: "layout transposes",
    Category.COLLECTIVE: "communication",
}


def explain(c: Comparison | Reasons | ParallelAnalysis, assumptions: bool = True) -> str:
    """A short paragraph: the speedup and why it is not the FLOP/s ratio (or, for a
    :class:`~roofline.analysis.parallel.ParallelAnalysis`, not the GPU count).

    ``assumptions=False`` leaves out the sentence listing the analyses' assumptions.

    Raises
    ------
    TypeError
        For anything but a Comparison (``compare``, ``what_if``) or its ``reasons()``.

    Examples
    --------
    >>> t = roofline.trace(nn.Linear(4096, 4096), torch.randn(8192, 4096), fake=True)
    >>> print(roofline.explain(roofline.compare(t, "a100", "h100"), assumptions=False))
    H100 SXM vs A100 SXM 80GB: 3.4x the FLOP/s (2.7x at the rates each reaches) and 1.6x
    the bandwidth give 2.71x: 100% of the step is compute-bound. On A100 SXM 80GB, infinite
    FLOP/s would give at most 74.12x, infinite bandwidth 1.00x. Published pairs of this kind
    (measured, compute-bound) put the measured speedup at ...x (80% of ... pairs).
    """
    if isinstance(c, ParallelAnalysis):
        return _parallel(c, assumptions)
    if isinstance(c, Comparison):
        r = c.reasons()
    elif isinstance(c, Reasons):
        r = c
    else:
        raise TypeError(f"explain() takes a Comparison or its Reasons, got {type(c).__name__}; "
                        "explain a prediction: roofline.explain(roofline.what_if(t, device)) "
                        "or roofline.explain(roofline.compare(t, src, dst))")
    tail = _assumptions(r) if assumptions else ""
    if r.fusion is not None and not r.empty:
        return _compiled(r) + tail
    if r.empty:
        return (f"{r.dst} vs {r.src}: the trace predicts no device time (no ops, or views "
                "only), so there is nothing to speed up." + tail)
    if math.isfinite(r.flops_ratio):
        at = reached(r.flops_ratio, r.achievable_flops_ratio,
                     " ({:.2g}x at the rates each reaches)")
        head = (f"{r.dst} vs {r.src}: {r.flops_ratio:.2g}x the FLOP/s{at} and "
                f"{r.bandwidth_ratio:.2g}x the bandwidth give {r.speedup:.2f}x")
    elif not r.flops:
        head = (f"{r.dst} vs {r.src}: the step has no FLOPs, and {r.bandwidth_ratio:.2g}x the "
                f"bandwidth gives {r.speedup:.2f}x")
    else:  # FLOPs, but no engine of the source device has a rate for them
        head = (f"{r.dst} vs {r.src}: {r.src} lists no compute rate for the step's FLOPs (see "
                f"the assumptions), and {r.bandwidth_ratio:.2g}x the bandwidth gives "
                f"{r.speedup:.2f}x")
    parts = [_clause(r, bound, share) for bound, share in r.shares.items()
             if bound != "compute" and share >= MIN_SHARE]
    if parts:
        text = f"{head}, because " + ", ".join(parts[:-1]) + (
            " and " if len(parts) > 1 else "") + parts[-1] + "."
    else:
        text = f"{head}: {r.shares.get('compute', 0.0):.0%} of the step is compute-bound."
    limits = ", ".join(f"{_LIMIT_WORDS.get(name, name.replace('_', ' '))} "
                       f"{'would give at most ' if i == 0 else ''}{value:.2f}x"
                       for i, (name, value) in enumerate(r.limits.items()))
    band = r.band
    sure = (f" Published pairs of this kind ({band.kind}) put the measured speedup at "
            f"{band.low:.2f}-{band.high:.2f}x (80% of {band.pairs} pairs)."
            if band is not None else "")
    return text + f" On {r.src}, {limits}." + _misaligned(r) + sure + tail


def _misaligned(r: Reasons) -> str:
    return "".join(f" On {name}, GEMMs with rows off a multiple of 16 bytes take {share:.0%} of "
                   "the step, at a fifth to a third of the aligned rate."
                   for name, share in r.misaligned.items() if share >= MIN_SHARE)


def reached(flops_ratio: float, achievable_ratio: float, form: str) -> str:
    """The FLOP/s ratio at the rates the devices reach, in ``form`` (``"{:.2g}"`` is the
    ratio), where it differs from the datasheets' by more than
    :data:`ACHIEVABLE_DIFFERS`; else ``""``."""
    if not (math.isfinite(achievable_ratio) and math.isfinite(flops_ratio) and flops_ratio
            and abs(achievable_ratio / flops_ratio - 1) > ACHIEVABLE_DIFFERS):
        return ""
    return form.format(achievable_ratio)


def _compiled(r: Reasons) -> str:
    """"torch.compile on H100 SXM: 1.50x over eager: fusion removes 20 GB of 59 GB ..."."""
    fusion = r.fusion or {}
    before = sum(b for b, _ in fusion.values())
    after = sum(a for _, a in fusion.values())
    saved = [(k, b - a) for k, (b, a) in fusion.items() if b > a]
    families = ", ".join(f"{CATEGORY_WORDS.get(k, k)} {si(d, 'B')}" for k, d in saved[:3])
    moved = (f"fusion removes {si(before - after, 'B')} of the {si(before, 'B')} the eager "
             f"step moves ({(before - after) / before:.0%}; {families})" if before > after
             and before else "fusion removes no bytes")
    memory = r.shares.get("memory", 0.0)
    return (f"torch.compile on {r.dst}: {r.speedup:.2f}x over eager: {moved}. Eager, "
            f"{memory:.0%} of the step is memory-bound, the part fusion shrinks; GEMMs and "
            "attention stay the same cuBLAS and SDPA kernels.")


#: How each speedup limit is named.
_LIMIT_WORDS = {"infinite_flops": "infinite FLOP/s", "infinite_bandwidth": "infinite bandwidth"}


def _clause(r: Reasons, bound: str, share: float) -> str:
    """Why ``share`` of the source step does not follow the FLOP/s, for one bound."""
    if bound == "memory":
        words = ", ".join(CATEGORY_WORDS.get(k, k) for k in r.categories.get("memory", []))
        return f"{share:.0%} of the {r.src} step is memory-bound ({words})"
    if bound == "latency":
        words = ", ".join(CATEGORY_WORDS.get(k, k) for k in r.categories.get("latency", []))
        return (f"{share:.0%} waits on DRAM latency ({words}: too few thread blocks to "
                "keep the memory busy, or loads waited on one after another)")
    if bound == "overhead":
        return f"{share:.0%} is launch overhead"
    if bound == "host":
        return f"{share:.0%} is spent off the device"
    return f"{share:.0%} is {bound}-bound"  # a roof with no words of its own yet


def _assumptions(r: Reasons) -> str:
    return " Assumptions: " + "; ".join(r.assumptions) + "." if r.assumptions else ""


#: How each collective is named in a sentence.
KIND_WORDS = {"all_reduce": "all-reduce", "all_gather": "all-gather",
              "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all",
              "broadcast": "broadcast", "reduce": "reduce", "gather": "gather",
              "scatter": "scatter", "send": "send", "recv": "receive", "barrier": "barrier"}


def _parallel(p: ParallelAnalysis, assumptions: bool) -> str:
    """"8 H100 SXMs over PCIe: 5.1x one GPU, because 31% of the step waits for ..."."""
    link = p.topology.intra.kind + (f", {p.nodes} nodes" if p.nodes > 1 else "")
    head = f"{p.gpus} {p.device.name}s ({p.parallel} over {link})"
    speed = p.speedup_vs_one_gpu
    result = (f"{speed:.2f}x one GPU ({p.efficiency:.0%} efficiency)" if speed is not None
              else f"a step of {si(p.seconds, 's')} (no single-GPU step given to compare)")
    kinds = sorted(p.by_kind().items(), key=lambda kv: -kv[1]["seconds"])
    if not kinds or not p.communication_seconds:
        why = "no communication: the step is its compute"
    else:
        name, top = kinds[0]
        words = KIND_WORDS.get(name, name)
        if p.strategy is not None and p.strategy.gradient_collective == name:
            words = f"gradient {words}"
        why = (f"{p.exposed_share:.0%} of the step waits for communication (the {words}: "
               f"{int(top['count'])} calls, {si(top['bytes'], 'B')}; "
               f"{si(p.hidden_communication_seconds, 's')} of "
               f"{si(p.communication_seconds, 's')} of communication hidden behind compute)")
    own = _wrapper_share(p)
    if own >= MIN_SHARE:
        why += (f", and {own:.0%} is work of the {p.parallel} wrapper on the compute stream "
                "that one GPU does not do (gradient bucket copies, shard packing)")
    tail = (" Assumptions: " + "; ".join(p.assumptions) + ".") if assumptions and \
        p.assumptions else ""
    return f"{head}: {result}, because {why}." + tail


def _wrapper_share(p: ParallelAnalysis) -> float:
    """Share of the step the compute stream spends beyond the one-GPU step of the same
    per-GPU batch (data parallelism only; 0 when not comparable)."""
    splits_batch = p.strategy is not None and p.strategy.splits_batch
    if (p.one_gpu_seconds is None or not splits_batch or not p.seconds
            or p.trace.info.rank_batch != p.one_gpu_batch):
        return 0.0
    return max(p.compute_total_seconds - p.one_gpu_seconds, 0.0) / p.seconds


#: How a trace's phase is named.
_PHASES = {True: "training step", False: "inference"}


def describe(a: Analysis) -> str:
    """What was traced, for titles and the first line: ``"gpt2 (batch 8, bf16, training
    step)"``. The batch is the first input's first dimension; the dtype is the one the
    engine carrying most FLOPs computes in (``tf32`` where fp32 matmuls run on TF32)."""
    info = a.trace.info
    parts = [f"batch {info.batch}" if info.batch else "", main_dtype(a),
             _PHASES.get(info.train, "") if info.train is not None else ""]
    words = ", ".join(p for p in parts if p)
    name = info.model or "step"
    return f"{name} ({words})" if words else name


def main_dtype(a: Analysis) -> str:
    """The dtype of the engine that carries most of the step's FLOPs (``"bf16"``), else the
    most frequent dtype of the ops (``""``: none)."""
    flops: Counter[str] = Counter()
    for op, engine in zip(a.trace.ops, a.engine, strict=True):
        if engine is not None:
            flops[engine.dtype] += op.flops
    if flops:
        return flops.most_common(1)[0][0]
    common = Counter(dtype_key(op.dtype) for op in a.trace.ops if op.dtype)
    common.pop("", None)
    return common.most_common(1)[0][0] if common else ""

