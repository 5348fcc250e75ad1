"""roofline: will twice the FLOP/s train your model twice as fast?

Capture the operators of a real PyTorch step (:func:`trace`, :func:`capture`),
look devices up in a cited registry (:func:`get_device`), place every op on the
roofline (:func:`analyze`) and predict the speedup of a device swap or a what-if
device (:func:`compare`, :func:`what_if`, :func:`sweep`); the memory of a step, whether it
fits and the largest batch that does (:func:`memory`, :func:`fits`, :func:`max_batch`,
:func:`compare_at_max_batch`); a step on N GPUs, its communication and speedup
(``trace(..., parallel=, gpus=)``, :func:`parallel`, :func:`scaling`).

The layers only import downwards: capture (``tracing``) and ``hardware`` (siblings, neither
imports the other) -> ``analysis`` -> ``presentation``.
"""

from roofline._errors import RooflineError, RooflineWarning
from roofline.analysis import (
    Analysis,
    BatchComparison,
    Comparison,
    Fit,
    MaxBatch,
    MemoryReport,
    Options,
    ParallelAnalysis,
    Reasons,
    Scaling,
    Validation,
    analyze,
    compare,
    compare_at_max_batch,
    fits,
    max_batch,
    memory,
    parallel,
    scaling,
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
    Trace,
    capture,
    register_formula,
    trace,
)
from roofline.tracing.measure import Measurement, measure
from roofline.tracing.strategies import Parallel

__version__ = "0.1.0"

__all__ = [
    "Analysis",
    "BatchComparison",
    "Capture",
    "Comparison",
    "DeviceSpec",
    "FakeModeError",
    "Fit",
    "MaxBatch",
    "Measurement",
    "MemoryReport",
    "OpRecord",
    "Options",
    "Parallel",
    "ParallelAnalysis",
    "Reasons",
    "RooflineError",
    "RooflineWarning",
    "Scaling",
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
    "sweep",
    "trace",
    "validate",
    "what_if",
]
