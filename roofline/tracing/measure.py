"""``roofline.measure``: real step and per-op times, joined to the trace's op records.

Per-op times come from ``torch.profiler`` (CPU op time on the CPU, kernel time on a
GPU): the step is traced under the profiler with each op's execution wrapped in a
``record_function`` range named after its index in the trace, so every time lands
on exactly its op record (the capture's own bookkeeping falls outside the ranges).
The step time is measured separately, untraced.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from roofline.tracing.records import Trace
from roofline.tracing.run import run_step
from roofline.tracing.step import traced_step


@dataclass
class Measurement:
    """Measured times of one step, aligned with ``trace.ops``.

    Attributes
    ----------
    trace : the ops of the measured step (real tensors).
    op_seconds : measured time per op (NaN where no profiler event matched).
    step_seconds : median wall time of a whole step after warm-up.
    step_samples : every timed step.
    device : where it ran (``"cpu"``, ``"cuda:0"``...).
    threads : CPU threads torch used.
    profiler_inflation : how much the profiled ops summed to over the untraced step
        (their times are divided by it; 1.0 when they fit inside the step).
    """

    trace: Trace
    op_seconds: np.ndarray
    step_seconds: float
    step_samples: list[float]
    device: str
    threads: int
    profiler_inflation: float = 1.0

    @property
    def spread(self) -> float:
        """Interquartile range over median of the step samples (0.1 = 10% noisy)."""
        if len(self.step_samples) < 4:
            return (max(self.step_samples) - min(self.step_samples)) / self.step_seconds
        q = np.percentile(self.step_samples, [25, 75])
        return float((q[1] - q[0]) / self.step_seconds)

    @property
    def launched(self) -> np.ndarray:
        """Mask of the ops that launch a kernel (views and allocations do not)."""
        return np.array([op.kernels > 0 for op in self.trace.ops], dtype=bool).reshape(-1)

    @property
    def coverage(self) -> float:
        """Fraction of the trace's kernel-launching ops that got a measured time."""
        launched = self.launched
        if not launched.any():
            return 1.0
        return float(np.isfinite(self.op_seconds[launched]).mean())

    @property
    def op_seconds_total(self) -> float:
        """Sum of the measured op times."""
        return float(np.nansum(self.op_seconds))

    @property
    def host_seconds(self) -> float:
        """Step time not inside any op (Python, framework overhead): step minus ops."""
        return max(0.0, self.step_seconds - self.op_seconds_total)

    def by_category(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for op, s in zip(self.trace.ops, self.op_seconds, strict=True):
            if np.isfinite(s):
                out[op.category] = out.get(op.category, 0.0) + float(s)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def __repr__(self) -> str:
        return (f"Measurement({self.device}, {self.threads} threads: step "
                f"{self.step_seconds * 1e3:.3f} ms (spread {self.spread:.0%}), ops "
                f"{self.op_seconds_total * 1e3:.3f} ms, coverage {self.coverage:.0%}, "
                f"profiler inflation {self.profiler_inflation:.2f}x)")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _op_times(n: int, events: list[Any], use_device_time: bool) -> np.ndarray:
    """Seconds of each op from its ``roofline::<index>`` profiler range."""
    seconds = np.full(n, np.nan)
    for e in events:
        if e.name.startswith("roofline::"):
            us = e.device_time_total if use_device_time else e.cpu_time_total
            seconds[int(e.name[len("roofline::"):])] = us * 1e-6
    return seconds


def measure(model_or_fn: Callable[..., Any], *args: Any, train: bool = False,
            loss_fn: Callable[[Any], torch.Tensor] | None = None,
            optimizer: torch.optim.Optimizer | None = None, device: str | None = None,
            repeat: int = 5, warmup: int = 2, min_seconds: float = 0.0,
            **kwargs: Any) -> Measurement:
    """Time a real step (median of ``repeat`` after ``warmup``) and each of its ops.

    Takes the same arguments as :func:`roofline.trace` (real tensors only); the
    inputs must already live on ``device`` (default: the first tensor argument's).
    ``min_seconds`` keeps timing steps past ``repeat`` until that much time was spent
    (as ``Timer.blocked_autorange``'s ``min_run_time``): short steps get more samples.

    Examples
    --------
    >>> model = nn.Linear(256, 256)
    >>> m = roofline.measure(model, torch.randn(64, 256), repeat=3)
    >>> len(m.op_seconds) == len(m.trace.ops), m.device
    (True, 'cpu')
    """
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    if not 0 <= min_seconds < float("inf"):
        raise ValueError(f"min_seconds must be finite and >= 0, got {min_seconds}")
    dev = device or next((str(a.device) for a in args if isinstance(a, torch.Tensor)), "cpu")
    if any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args):
        raise ValueError("measure() needs real tensors, not meta tensors")

    def clear_grads() -> None:
        if isinstance(model_or_fn, torch.nn.Module):
            for p in model_or_fn.parameters():
                p.grad = None

    def step() -> None:
        run_step(model_or_fn, args, kwargs, train=train, loss_fn=loss_fn, optimizer=optimizer)
        if train:
            clear_grads()

    for _ in range(warmup):
        step()
    _sync(dev)
    samples: list[float] = []
    while len(samples) < repeat or sum(samples) < min_seconds:
        start = time.perf_counter()
        step()
        _sync(dev)
        samples.append(time.perf_counter() - start)

    activities = [torch.profiler.ProfilerActivity.CPU]
    cuda = dev.startswith("cuda")
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    # an untraced step first, under the same profiler: its start-up cost lands there, not
    # on the traced step's first ops (only the traced step's ranges are read)
    with torch.profiler.profile(activities=activities) as prof:
        step()
        _sync(dev)
        with torch.profiler.record_function("roofline-warmup"):  # first range pays set-up
            pass
        t = traced_step(model_or_fn, args, kwargs, train=train, loss_fn=loss_fn,
                        optimizer=optimizer, fake=False, annotate=True)
        _sync(dev)
    clear_grads()
    seconds = _op_times(len(t.ops), list(prof.events()), use_device_time=cuda)
    step_seconds = statistics.median(samples)
    # per-op profiling costs time of its own: where the ops add up to more than the
    # untraced step, scale them down to it and report the factor
    inflation = max(1.0, float(np.nansum(seconds)) / step_seconds)
    return Measurement(t, seconds / inflation, step_seconds, samples, dev,
                       torch.get_num_threads(), inflation)
