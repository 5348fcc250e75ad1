"""roofline: will twice the FLOP/s train your model twice as fast?

Capture the operators of a real PyTorch step (:func:`trace`, :func:`capture`),
look devices up in a cited registry (:func:`get_device`), place every op on the
roofline (:func:`analyze`) and predict the speedup of a device swap or a what-if
device (:func:`compare`, :func:`what_if`, :func:`sweep`); the memory of a step, whether it
fits and the largest batch that does (:func:`memory`, :func:`fits`, :func:`max_batch`,
:func:`compare_at_max_batch`); a step on N GPUs, its communication and speedup
(``trace(..., parallel=, gpus=)``, :func:`parallel`, :func:`scaling`); serving an LLM:
time to first token, time per output token, tokens/s and how many sequences fit
(:func:`trace_serving`, :func:`serve`; :func:`compare` and :func:`what_if` of a serving
trace give prefill and decode speedups apart).

The layers only import downwards: capture (``tracing``) and ``hardware`` (siblings, neither
imports the other) -> ``analysis`` -> ``presentation``.
"""

from roofline._errors import (
    CompileError,
    ContextLengthError,
    NoKVCacheError,
    RooflineError,
    RooflineWarning,
)
from roofline.analysis import (
    Analysis,
    BatchComparison,
    Capacity,
    Comparison,
    Fit,
    MaxBatch,
    MemoryReport,
    Options,
    ParallelAnalysis,
    Reasons,
    Scaling,
    Serving,
    ServingComparison,
    Validation,
    analyze,
    compare,
    compare_at_max_batch,
    fits,
    max_batch,
    memory,
    parallel,
    scaling,
    serve,
    sweep,
    validate,
    what_if,
)
from roofline.hardware import (
    DeviceSpec,
    calibrate,
    get_device,
    list_devices,
    load_device,
    register_device,
)
from roofline.presentation import plots as plot
from roofline.presentation.explain import explain
from roofline.tracing import (
    Capture,
    FakeModeError,
    OpRecord,
    ServingTrace,
    Trace,
    capture,
    register_formula,
    trace,
    trace_serving,
)
from roofline.tracing.measure import Measurement, measure
from roofline.tracing.strategies import Parallel

__version__ = "0.1.0"

__all__ = [
    "Analysis",
    "BatchComparison",
    "Capacity",
    "Capture",
    "Comparison",
    "CompileError",
    "ContextLengthError",
    "DeviceSpec",
    "FakeModeError",
    "Fit",
    "MaxBatch",
    "Measurement",
    "MemoryReport",
    "NoKVCacheError",
    "OpRecord",
    "Options",
    "Parallel",
    "ParallelAnalysis",
    "Reasons",
    "RooflineError",
    "RooflineWarning",
    "Scaling",
    "Serving",
    "ServingComparison",
    "ServingTrace",
    "Trace",
    "Validation",
    "analyze",
    "calibrate",
    "capture",
    "compare",
    "compare_at_max_batch",
    "explain",
    "fits",
    "get_device",
    "list_devices",
    "load_device",
    "max_batch",
    "measure",
    "memory",
    "parallel",
    "plot",
    "register_device",
    "register_formula",
    "scaling",
    "serve",
    "sweep",
    "trace",
    "trace_serving",
    "validate",
    "what_if",
]
