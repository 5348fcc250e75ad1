"""Shared fixtures and helpers of the test suite.

Fixtures: ``isolated_registry`` (the shipped devices alone) and ``quiet`` (warnings off, for
tests whose steps warn on purpose and check what they need themselves).

Helpers, imported by name (``from conftest import no_global_state``: pytest puts this folder
on ``sys.path``):

* ``no_global_state``: what every trace must leave as it found it (issue 13, item 4);
* ``callable_forms``: one step in the four forms users pass to ``roofline.trace``;
* ``captured`` and ``op_of``: a capture with its uncounted-op warnings silenced, and the
  one op of a name in it (the formula tests assert warnings explicitly);
* ``small_mlp``, ``sum_loss`` and ``optimizer_flops``: the five-layer MLP of the parallel and
  sharded-memory tests, its loss, and the FLOPs of a trace's optimizer phase;
  ``adamw_trace``/``adamw_report`` (its AdamW step), ``mlp_build`` and ``small_device``
  (a ``max_batch`` build and a device it fills quickly);
* ``timed_mlp``: the model and batch the measurement tests time;
* ``assert_refused_by_name``: a bad argument is refused naming it (issue 22, item 10).
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

import roofline
from roofline.hardware import registry as registry_module
from roofline.tracing import OpRecord, Trace


@pytest.fixture
def isolated_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The shipped registry alone: no user device folder, and a fresh registry after."""
    monkeypatch.setenv("ROOFLINE_DEVICES_DIR", str(tmp_path / "no-user-devices"))
    registry_module._reset()
    yield
    registry_module._reset()


@pytest.fixture
def quiet() -> Iterator[None]:
    """Every warning ignored while the test runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- global state ------------------------------------------------------------------------

_MODULE_SETATTR, _MODULE_DELATTR = nn.Module.__setattr__, nn.Module.__delattr__


def no_global_state() -> bool:
    """No dispatch mode, global hook, patched ``nn.Module`` method, autocast, torch-function
    mode or disabled dynamo is left behind."""
    import torch._dynamo
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o

    return (_get_current_dispatch_mode() is None and not m._global_forward_hooks
            and not m._global_forward_pre_hooks and not o._global_optimizer_pre_hooks
            and nn.Module.__setattr__ is _MODULE_SETATTR
            and nn.Module.__delattr__ is _MODULE_DELATTR
            and not m._global_buffer_registration_hooks
            and not m._global_parameter_registration_hooks
            and not m._global_module_registration_hooks
            and not o._global_optimizer_post_hooks and not torch.is_autocast_enabled("cpu")
            and torch._C._len_torch_function_stack() == 0
            and not torch._dynamo.config.disable)


def callable_forms(model: nn.Module) -> dict[str, Callable[..., Any]]:
    """The same step as the four callables users pass."""
    return {"module": model, "forward": model.forward,
            "lambda": lambda *a: model(*a), "partial": functools.partial(model)}


# --- captures and their ops --------------------------------------------------------------

def captured(fn: Callable[..., Any], *args: Any) -> Trace:
    """``fn(*args)`` captured, its uncounted-op warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uncounted-op warnings are asserted explicitly
        with roofline.capture() as t:
            fn(*args)
    return t


def op_of(t: Trace, prefix: str) -> OpRecord:
    """The one op of ``t`` whose name starts with ``prefix``."""
    ops = [op for op in t.ops if op.name.startswith(prefix)]
    assert len(ops) == 1, [op.name for op in t.ops]
    return ops[0]


# --- hand-built ops for the timing tests ----------------------------------------------------

#: The classic roofline on datasheet peaks: the time of an op is the max of its roofs.
CLASSIC = {"peaks": "datasheet", "overhead_model": "max"}
DATASHEET = {"peaks": "datasheet"}
H100_BF16, H100_BANDWIDTH = 989.4e12, 3.35e12  # H100 SXM datasheet (registry sources)


def make_op(category: str, flops: int, nbytes: int, kernels: int = 1,
            shapes: tuple[tuple[int, ...], ...] = ((1024, 1024),)) -> OpRecord:
    """A bf16 forward op of ``category`` reading ``nbytes``, output ``shapes``."""
    return OpRecord(f"aten.{category}.default", category, "forward", "", "bfloat16", flops,
                    nbytes, 0, kernels=kernels, output_shapes=shapes)


def make_op_4096(category: str, flops: int, nbytes: int, dtype: str = "bfloat16",
                 out: tuple[int, ...] = (4096, 4096)) -> OpRecord:
    """A forward op reading ``nbytes`` with one output of shape ``out``."""
    return OpRecord(name=f"aten.{category}.default", category=category, phase="forward",
                    module="", dtype=dtype, flops=flops, bytes_read=nbytes, bytes_written=0,
                    output_shapes=(out,))


def make_split_op(category: str, flops: int, nbytes: int, dtype: str = "bfloat16",
                  kernels: int = 1) -> OpRecord:
    """A forward op whose ``nbytes`` are half read, half written (output 8192 x 8192)."""
    return OpRecord(name=f"aten.{category}.default", category=category, phase="forward",
                    module="", dtype=dtype, flops=flops, bytes_read=nbytes // 2,
                    bytes_written=nbytes - nbytes // 2, kernels=kernels,
                    output_shapes=((8192, 8192),))


# --- small models --------------------------------------------------------------------------

def small_mlp() -> nn.Module:
    """Linear(64, 256), ReLU, Linear(256, 64), ReLU, Linear(64, 10): 33,738 fp32
    parameters in 6 tensors, seeded."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def sum_loss(out: torch.Tensor) -> torch.Tensor:
    return out.sum()


def storage_bytes(tensors: Iterable[Any]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a DTensor's local shard; None
    skipped)."""
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if t is None:
            continue
        storage = (t.to_local() if hasattr(t, "to_local") else t).untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


def profiled_peak_bytes(step: Callable[[], None], preexisting: Iterable[Any]) -> int:
    """The CPU allocator's peak over one ``step``: the storages of the ``preexisting``
    tensors (those alive before it that it uses), plus the most the allocator held above
    its level when the step began, from torch.profiler's allocation events.

    The events are read from the profiler's raw event tree, not from the memory timeline
    built on it (``prof._memory_profile()``), whose data-flow graph now and then rejects a
    step with an internal "version mismatch" (a storage address reused within the step):
    that failed a CI run. Both give the same peak on the steps the tests run.
    """
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    base = storage_bytes(preexisting)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events: list[tuple[int, int, int]] = []  # (time, allocator total after, bytes allocated)
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.typed[0] == _EventType.Allocation:
            fields = event.typed[1]
            events.append((event.start_time_ns, fields.total_allocated, fields.alloc_size))
        stack.extend(event.children)
    assert events, "the profiler recorded no allocation in the step"
    events.sort()
    start = events[0][1] - events[0][2]  # the allocator's total before the first event
    return base + max(total for _, total, _ in events) - start


def optimizer_flops(t: Trace) -> int:
    """FLOPs of the trace's optimizer phase."""
    return sum(op.flops for op in t.ops if op.phase == "optimizer")


@functools.cache
def adamw_trace() -> Trace:
    """``small_mlp``'s fake AdamW training step at batch 8 (traced once per session)."""
    model = small_mlp()
    return roofline.trace(model, torch.randn(8, 64), train=True, loss_fn=sum_loss, fake=True,
                          optimizer=torch.optim.AdamW(model.parameters()))


@functools.cache
def adamw_report() -> roofline.MemoryReport:
    return roofline.memory(adamw_trace())


@functools.cache
def _model_for_build() -> nn.Module:
    return small_mlp()


def mlp_build(batch: int) -> Trace:
    """``small_mlp``'s fake inference step at ``batch`` (a ``max_batch`` build)."""
    return roofline.trace(_model_for_build(), torch.randn(batch, 64), fake=True)


@functools.cache
def small_device() -> roofline.DeviceSpec:
    """A device holding ``mlp_build``'s parameters and some 120 samples: a short search."""
    need = roofline.memory(mlp_build(1)).peak_bytes
    return roofline.get_device("h100").model_copy(update={
        "memory_bytes": need * 3, "vendor": "Other", "name": "small test device"})


def timed_mlp() -> tuple[nn.Module, torch.Tensor]:
    """Linear(256, 512), GELU, Linear(512, 256) and a batch of 64, seeded."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)), torch.randn(
        64, 256)


# --- bad arguments (issue 22, item 10) ------------------------------------------------------

def assert_refused_by_name(call: Callable[[], Any], argument: str,
                           warning_will_do: bool) -> None:
    """``call()`` raises a ValueError or TypeError whose message names ``argument`` (or,
    where ``warning_will_do``, warns a RooflineWarning naming it)."""
    named = re.compile(rf"\b{re.escape(argument)}\b")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result = call()
        except (ValueError, TypeError) as e:
            assert named.search(str(e)), f"{type(e).__name__} does not name {argument}: {e}"
            return
    if warning_will_do and any(named.search(str(w.message)) for w in seen
                               if issubclass(w.category, roofline.RooflineWarning)):
        return
    pytest.fail(f"{argument}: accepted, returned {result!r:.200}")
