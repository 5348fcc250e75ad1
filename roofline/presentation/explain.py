"""The reasons of a speedup in words: ``roofline.explain(comparison)``."""

from __future__ import annotations

import math

from roofline.analysis import Comparison, Reasons
from roofline.tracing.records import Category

#: A bound with a smaller share of the step than this is not worth a clause.
MIN_SHARE = 0.01

#: How each op category is named in a sentence.
CATEGORY_WORDS: dict[str, str] = {  # keyed by Category (a str)
    Category.NORMALIZATION: "norms", Category.SOFTMAX: "softmax",
    Category.OPTIMIZER: "optimizer", Category.POINTWISE: "elementwise",
    Category.MEMORY: "copies", Category.REDUCTION: "reductions",
    Category.EMBEDDING: "embeddings", Category.LOSS: "loss", Category.POOLING: "pooling",
    Category.DROPOUT: "dropout", Category.MATMUL: "matmuls", Category.CONV: "convolutions",
    Category.ATTENTION: "attention", Category.UPSAMPLE: "upsampling",
    Category.UNCOUNTED: "uncounted ops", Category.VIEW: "views",
    Category.ALLOCATION: "allocations", Category.COLLECTIVE: "communication",
}


def explain(c: Comparison | Reasons, assumptions: bool = True) -> str:
    """A short paragraph: the speedup and why it is not the FLOP/s ratio.

    ``assumptions=False`` leaves out the sentence listing the analyses' assumptions.

    Raises
    ------
    TypeError
        For anything but a Comparison (``compare``, ``what_if``) or its ``reasons()``.
    """
    if isinstance(c, Comparison):
        r = c.reasons()
    elif isinstance(c, Reasons):
        r = c
    else:
        raise TypeError(f"explain() takes a Comparison or its Reasons, got {type(c).__name__}; "
                        "explain a prediction: roofline.explain(roofline.what_if(t, device)) "
                        "or roofline.explain(roofline.compare(t, src, dst))")
    tail = _assumptions(r) if assumptions else ""
    if r.empty:
        return (f"{r.dst} vs {r.src}: the trace predicts no device time (no ops, or views "
                "only), so there is nothing to speed up." + tail)
    if math.isfinite(r.flops_ratio):
        head = (f"{r.dst} vs {r.src}: {r.flops_ratio:.2g}x the FLOP/s and "
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
    return text + f" On {r.src}, {limits}." + tail


#: How each speedup limit is named.
_LIMIT_WORDS = {"infinite_flops": "infinite FLOP/s", "infinite_bandwidth": "infinite bandwidth"}


def _clause(r: Reasons, bound: str, share: float) -> str:
    """Why ``share`` of the source step does not follow the FLOP/s, for one bound."""
    if bound == "memory":
        words = ", ".join(CATEGORY_WORDS.get(k, k) for k in r.categories.get("memory", []))
        return f"{share:.0%} of the {r.src} step is memory-bound ({words})"
    if bound == "overhead":
        return f"{share:.0%} is launch overhead"
    if bound == "host":
        return f"{share:.0%} is spent off the device"
    return f"{share:.0%} is {bound}-bound"  # a roof with no words of its own yet


def _assumptions(r: Reasons) -> str:
    return " Assumptions: " + "; ".join(r.assumptions) + "." if r.assumptions else ""
