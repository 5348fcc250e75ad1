"""Analysis: op records x device -> times, bounds, predictions.

``options`` (what PyTorch would choose) -> ``rates`` (engine and FLOP/s per op) and
``gemm`` (GEMM shapes, fill) -> ``timing`` (roofs per op, :class:`Analysis`) ->
``reasons`` (why, as data) and ``validate`` (against a measurement) -> ``compare``
(speedups, what-ifs). Memory: ``memory`` (what is live when) -> ``fit`` (against a
device, with the allocator's overheads) -> ``batch`` (the largest batch that fits).
Serving an LLM: ``serving`` (a serving trace on one device: TTFT, TPOT, tokens/s,
capacity) -> ``serving_compare`` (prefill and decode speedups, their reasons).
Several GPUs: ``collectives`` (one collective's cost on a link) -> ``parallel`` (two
streams, their critical path; scaling over GPU counts).
"""

from roofline.analysis.batch import BatchComparison, MaxBatch, compare_at_max_batch, max_batch
from roofline.analysis.compare import Comparison, compare, sweep, what_if
from roofline.analysis.fit import Fit, fits
from roofline.analysis.memory import MemoryReport, memory
from roofline.analysis.options import Options
from roofline.analysis.parallel import ParallelAnalysis, Scaling, parallel, scaling
from roofline.analysis.reasons import Reasons
from roofline.analysis.serving import Capacity, Serving, serve
from roofline.analysis.serving_compare import PhaseReason, ServingComparison
from roofline.analysis.timing import ALWAYS_SHOWN, BOUNDS, ROOFS, Analysis, analyze
from roofline.analysis.validate import MismatchError, Validation, validate

__all__ = ["ALWAYS_SHOWN", "BOUNDS", "ROOFS", "Analysis", "BatchComparison", "Capacity",
           "Comparison", "Fit",
           "MaxBatch", "MemoryReport", "MismatchError", "Options", "ParallelAnalysis",
           "PhaseReason", "Reasons", "Scaling", "Serving", "ServingComparison",
           "Validation", "analyze",
           "compare", "compare_at_max_batch", "fits", "max_batch", "memory", "parallel",
           "scaling", "serve", "sweep", "validate", "what_if"]
