"""Measurement, validation and runtime-based prediction on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import roofline
from roofline.analysis.validate import MismatchError
from roofline.tracing.measure import measure


def _model() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)), torch.randn(
        64, 256)


def test_measure_times_every_op_of_the_step() -> None:
    model, x = _model()
    m = measure(model, x, train=True, loss_fn=lambda o: o.sum(), repeat=3)
    assert m.coverage == 1.0
    assert m.step_seconds > 0 and len(m.step_samples) == 3
    launched = np.array([op.kernels > 0 for op in m.trace.ops])
    assert np.all(m.op_seconds[launched] > 0)
    assert "matmul" in m.by_category()
    assert all(p.grad is None for p in model.parameters())


def test_min_seconds_takes_more_samples_of_short_steps() -> None:
    model, x = _model()
    m = measure(model, x, repeat=2, min_seconds=0.05)
    assert len(m.step_samples) >= 2 and sum(m.step_samples) >= 0.05
    with pytest.raises(ValueError, match="min_seconds"):
        measure(model, x, min_seconds=-1)


def test_validation_against_a_cpu_spec() -> None:
    model, x = _model()
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
    model, x = _model()
    m = measure(model, x, repeat=1)
    other = roofline.trace(model, torch.randn(32, 256))
    with pytest.raises(MismatchError, match="shapes"):
        roofline.validate(roofline.analyze(other, "h100"), m)
    with pytest.raises(ValueError, match="real tensors"):
        measure(model, torch.randn(4, 256, device="meta"))


def test_runtime_method_scales_measured_ops() -> None:
    model, x = _model()
    m = measure(model, x, repeat=3)
    src = roofline.get_device("a100")
    same = roofline.compare(m.trace, src, src, method="runtime", measurement=m)
    assert same.speedup == pytest.approx(1.0)
    assert same.src.seconds == pytest.approx(
        np.nansum(m.op_seconds) + m.host_seconds, rel=1e-6)
    faster = roofline.compare(m.trace, src, src.scaled(flops_factor=2, bandwidth_factor=2),
                              method="runtime", measurement=m)
    # every measured op halves except overhead-bound ones; host time stays
    assert 1.0 <= faster.speedup <= 2.0 + 1e-9
    with pytest.raises(ValueError, match="measurement"):
        roofline.compare(m.trace, src, src, method="runtime")
