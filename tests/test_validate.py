"""Predicted against measured (analysis/validate.py): per-op errors, their statistics,
and a measurement of another step refused.

A device with half of every rate predicts twice the time, so its error follows by hand:
(1 + e_half) = 2 (1 + e).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import timed_mlp

import roofline
from roofline.analysis.validate import MismatchError
from roofline.tracing.measure import measure


def test_validation_against_a_cpu_spec() -> None:
    model, x = timed_mlp()
    m = measure(model, x, repeat=3)
    spec = roofline.get_device("h100").with_overrides(name="test cpu")
    v = roofline.validate(roofline.analyze(m.trace, spec), m)
    stats = v.op_error_stats(min_seconds=0)
    assert stats["ops"] == sum(op.kernels > 0 for op in m.trace.ops)  # views are not scored
    assert np.isfinite(stats["median"])
    # a device with half of every rate predicts twice the time without overhead (and without
    # the DRAM latency of achievable rates): the error follows as (1 + e_half) = 2 (1 + e)
    slow = spec.scaled(flops_factor=0.5, bandwidth_factor=0.5)
    pure = roofline.validate(roofline.analyze(m.trace, spec, overhead=False,
                                              peaks="datasheet"), m)
    half = roofline.validate(roofline.analyze(m.trace, slow, overhead=False,
                                              peaks="datasheet"), m)
    assert 1 + half.error == pytest.approx(2 * (1 + pure.error))
    assert v.measured_seconds == m.step_seconds
    ax = roofline.plot.validation_scatter(v)  # measured on x, predicted on y, per op
    pred, meas = v.per_op()
    x, y = ax.lines[0].get_data()
    assert np.array_equal(x, meas) and np.array_equal(y, pred)


def test_mismatched_measurement_is_refused() -> None:
    model, x = timed_mlp()
    m = measure(model, x, repeat=1)
    other = roofline.trace(model, torch.randn(32, 256))
    with pytest.raises(MismatchError, match="shapes"):
        roofline.validate(roofline.analyze(other, "h100"), m)
    with pytest.raises(ValueError, match="real tensors"):
        measure(model, torch.randn(4, 256, device="meta"))
