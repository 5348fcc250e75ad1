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
    Category.ALLOCATION: "allocations",
}


def explain(c: Comparison | Reasons, assumptions: bool = True) -> str:
    """A short paragraph: the speedup and why it is not the FLOP/s ratio.

    ``assumptions=False`` leaves out the sentence listing the analyses' assumptions.
    """
    r = c.reasons() if isinstance(c, Comparison) else c
    if math.isfinite(r.flops_ratio):
        head = (f"{r.dst} vs {r.src}: {r.flops_ratio:.2g}x the FLOP/s and "
                f"{r.bandwidth_ratio:.2g}x the bandwidth give {r.speedup:.2f}x")
    else:  # no op with FLOPs on an engine: there is no FLOP/s ratio to speak of
        head = (f"{r.dst} vs {r.src}: the step has no FLOPs on any engine, and "
                f"{r.bandwidth_ratio:.2g}x the bandwidth gives {r.speedup:.2f}x")
    if r.empty:
        text = (f"{r.dst} vs {r.src}: the trace predicts no device time (no ops, or views "
                "only), so there is nothing to speed up.")
        return text + (_assumptions(r) if assumptions else "")
    parts = []
    if r.shares.get("memory", 0.0) >= MIN_SHARE:
        words = ", ".join(CATEGORY_WORDS.get(k, k) for k in r.categories.get("memory", []))
        parts.append(f"{r.shares['memory']:.0%} of the {r.src} step is memory-bound ({words})")
    if r.shares.get("overhead", 0.0) >= MIN_SHARE:
        parts.append(f"{r.shares['overhead']:.0%} is launch overhead")
    if r.shares.get("host", 0.0) >= MIN_SHARE:
        parts.append(f"{r.shares['host']:.0%} is spent off the device")
    if parts:
        text = f"{head}, because " + ", ".join(parts[:-1]) + (
            " and " if len(parts) > 1 else "") + parts[-1] + "."
    else:
        text = f"{head}: {r.shares.get('compute', 0.0):.0%} of the step is compute-bound."
    text += (f" On {r.src}, infinite FLOP/s would give at most "
             f"{r.limits['infinite_flops']:.2f}x, infinite bandwidth "
             f"{r.limits['infinite_bandwidth']:.2f}x.")
    return text + (_assumptions(r) if assumptions else "")


def _assumptions(r: Reasons) -> str:
    return " Assumptions: " + "; ".join(r.assumptions) + "." if r.assumptions else ""
