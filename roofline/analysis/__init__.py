"""Analysis: op records x device -> times, bounds, predictions.

``options`` (what PyTorch would choose) -> ``rates`` (engine and FLOP/s per op) and
``gemm`` (GEMM shapes, fill) -> ``timing`` (roofs per op, :class:`Analysis`) ->
``compare`` (speedups) and ``reasons`` (why, as data) -> ``validate`` (against a measurement).
"""

from roofline.analysis.compare import Comparison, compare, sweep, what_if
from roofline.analysis.memory import (
    BatchComparison,
    Fit,
    MaxBatch,
    MemoryReport,
    compare_at_max_batch,
    fits,
    max_batch,
    memory,
)
from roofline.analysis.options import Options
from roofline.analysis.parallel import ParallelAnalysis, Scaling, parallel, scaling
from roofline.analysis.reasons import Reasons
from roofline.analysis.timing import BOUNDS, ROOFS, Analysis, analyze
from roofline.analysis.validate import MismatchError, Validation, validate

__all__ = ["BOUNDS", "ROOFS", "Analysis", "BatchComparison", "Comparison", "Fit", "MaxBatch",
           "MemoryReport", "MismatchError", "Options", "ParallelAnalysis", "Reasons",
           "Scaling", "Validation", "analyze",
           "compare", "compare_at_max_batch", "fits", "max_batch", "memory", "parallel",
           "scaling", "sweep", "validate", "what_if"]
