"""``roofline.measure`` (tracing/measure.py): real step and per-op times on the CPU,
joined to the trace's op records.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import timed_mlp

from roofline.tracing.measure import measure


def test_measure_times_every_op_of_the_step() -> None:
    model, x = timed_mlp()
    m = measure(model, x, train=True, loss_fn=lambda o: o.sum(), repeat=3)
    assert m.coverage == 1.0
    assert m.step_seconds > 0 and len(m.step_samples) == 3
    launched = np.array([op.kernels > 0 for op in m.trace.ops])
    assert np.all(m.op_seconds[launched] > 0)
    assert "matmul" in m.by_category()
    assert all(p.grad is None for p in model.parameters())


def test_min_seconds_takes_more_samples_of_short_steps() -> None:
    model, x = timed_mlp()
    m = measure(model, x, repeat=2, min_seconds=0.05)
    assert len(m.step_samples) >= 2 and sum(m.step_samples) >= 0.05
    with pytest.raises(ValueError, match="min_seconds"):
        measure(model, x, min_seconds=-1)
