"""Analysis: op records x device -> times, bounds, predictions."""

from roofline.analysis.compare import Comparison, compare, sweep, what_if
from roofline.analysis.roofline import Analysis, Options, analyze

__all__ = ["Analysis", "Comparison", "Options", "analyze", "compare", "sweep", "what_if"]
