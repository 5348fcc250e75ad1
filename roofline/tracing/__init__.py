"""Tracing (the capture layer): model -> op records (FLOPs, bytes, phase, module, dtype, shapes)."""

from roofline._errors import FakeModeError, RooflineWarning
from roofline.tracing.attention import AttentionMode
from roofline.tracing.capture import Capture, capture
from roofline.tracing.info import CaptureInfo
from roofline.tracing.ops import register_formula, register_no_flops
from roofline.tracing.records import MATRIX_CATEGORIES, Breakdown, Category, OpRecord, Totals, Trace
from roofline.tracing.serving import ServingTrace, trace_serving
from roofline.tracing.step import trace

__all__ = [
    "MATRIX_CATEGORIES",
    "AttentionMode",
    "Breakdown",
    "Capture",
    "CaptureInfo",
    "Category",
    "FakeModeError",
    "OpRecord",
    "RooflineWarning",
    "ServingTrace",
    "Totals",
    "Trace",
    "capture",
    "register_formula",
    "register_no_flops",
    "trace",
    "trace_serving",
]
