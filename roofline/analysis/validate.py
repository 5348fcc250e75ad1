"""Predicted against measured: per op, per category and in total, with error statistics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline._errors import MismatchError
from roofline.analysis.timing import Analysis
from roofline.tracing.measure import Measurement


def check_same_ops(analysis: Analysis, measurement: Measurement) -> None:
    """Raise :class:`MismatchError` unless both ran the same ops with the same shapes."""
    a, m = analysis.trace.ops, measurement.trace.ops
    if len(a) != len(m):
        raise MismatchError(f"the measurement ran {len(m)} ops, the analysed trace has {len(a)}: "
                            "measure the same model, inputs and mode (train/inference)")
    for i, (x, y) in enumerate(zip(a, m, strict=True)):
        if x.name != y.name or x.input_shapes != y.input_shapes:
            raise MismatchError(
                f"op {i} differs: analysed {x.name} {x.input_shapes}, measured {y.name} "
                f"{y.input_shapes}; measure with the same shapes as the trace")


def validate(analysis: Analysis, measurement: Measurement) -> Validation:
    """Set a prediction against a measurement of the same step.

    Raises
    ------
    MismatchError
        If the measurement did not run the analysed trace's ops.

    Examples
    --------
    >>> model = nn.Linear(256, 256)
    >>> m = roofline.measure(model, torch.randn(64, 256), repeat=3)
    >>> v = roofline.validate(roofline.analyze(m.trace, "EPYC 7763"), m)
    >>> type(v).__name__
    'Validation'
    """
    check_same_ops(analysis, measurement)
    return Validation(analysis, measurement)


@dataclass
class Validation:
    """An analysis set against a measurement of the same step (see :func:`validate`)."""

    analysis: Analysis
    measurement: Measurement

    @property
    def predicted_seconds(self) -> float:
        return self.analysis.seconds

    @property
    def measured_seconds(self) -> float:
        return self.measurement.step_seconds

    @property
    def error(self) -> float:
        """Relative error of the predicted step time: predicted / measured - 1."""
        return self.predicted_seconds / self.measured_seconds - 1

    def per_op(self) -> tuple[np.ndarray, np.ndarray]:
        """(predicted, measured) seconds of the kernel-launching ops that got a measured time.

        Views and allocations launch no kernel and are predicted to take no device time;
        their host time shows in ``by_category()`` instead of in the per-op statistics.
        """
        mask = np.isfinite(self.measurement.op_seconds) & self.measurement.launched
        return self.analysis.op_seconds[mask], self.measurement.op_seconds[mask]

    def op_error_stats(self, min_seconds: float = 1e-5) -> dict[str, float]:
        """Median and 90th-percentile |relative error| over ops of at least ``min_seconds``."""
        pred, meas = self.per_op()
        keep = meas >= min_seconds
        if not keep.any():
            return {"ops": 0, "median": float("nan"), "p90": float("nan")}
        err = np.abs(pred[keep] / meas[keep] - 1)
        return {"ops": int(keep.sum()), "median": float(np.median(err)),
                "p90": float(np.percentile(err, 90))}

    def by_category(self) -> dict[str, dict[str, float]]:
        measured = self.measurement.by_category()
        predicted = {k: v["seconds"] for k, v in self.analysis.by_category().items()}
        return {k: {"predicted": predicted.get(k, 0.0), "measured": m,
                    "error": predicted.get(k, 0.0) / m - 1 if m else float("nan")}
                for k, m in measured.items()}

    def __repr__(self) -> str:
        s = self.op_error_stats()
        return (f"Validation({self.analysis.device.name}: predicted "
                f"{self.predicted_seconds * 1e3:.3f} ms, measured "
                f"{self.measured_seconds * 1e3:.3f} ms, error {self.error:+.1%}; per-op median "
                f"|error| {s['median']:.0%} over {s['ops']} ops)")
