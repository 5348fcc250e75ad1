"""Fake-tensor execution: analyse a step without allocating its memory.

Parameters, buffers, optimizer state and inputs are swapped for fake tensors for
the duration of the step and put back afterwards, so the user's model is never
changed. ``meta`` tensors become fake CPU tensors (autocast then applies as on
the CPU).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.utils._pytree import tree_map

# Raised by fake tensors when an op needs real values.
DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException)


class _Faker:
    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self.memo: dict[int, torch.Tensor] = {}

    def __call__(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) in self.memo:
            return self.memo[id(t)]
        if t.device.type == "meta":
            with self.mode:
                f = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
        else:
            f = self.mode.from_tensor(t.detach())
            if t.numel() <= 1:  # scalars such as optimizer steps keep their value for .item()
                f.constant = t.detach().clone()  # type: ignore[attr-defined]
        if isinstance(t, torch.nn.Parameter):
            f = torch.nn.Parameter(f, requires_grad=t.requires_grad)
        elif t.requires_grad:
            f.requires_grad_(True)
        self.memo[id(t)] = f
        return f


@contextlib.contextmanager
def fake_step(model: Any, optimizer: torch.optim.Optimizer | None,
              args: tuple[Any, ...], kwargs: dict[str, Any],
              ) -> Iterator[tuple[FakeTensorMode, tuple[Any, ...], dict[str, Any]]]:
    """Swap ``model``/``optimizer`` tensors for fakes; yield the mode and fake inputs."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake = _Faker(mode)
    restore: list[tuple[dict[str, Any], str, Any]] = []
    saved_groups: list[Any] | None = None
    saved_state: Any = None
    try:
        modules = model.modules() if isinstance(model, torch.nn.Module) else ()
        for m in modules:
            for table in (m._parameters, m._buffers):
                for name, t in table.items():
                    if t is not None:
                        restore.append((table, name, t))
                        table[name] = fake(t)
        if optimizer is not None:
            saved_groups = [g["params"] for g in optimizer.param_groups]
            saved_state = optimizer.state
            new_state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
            for p, s in saved_state.items():
                new_state[fake(p)] = {k: fake(v) for k, v in s.items()}
            for g in optimizer.param_groups:
                g["params"] = [fake(p) for p in g["params"]]
            optimizer.state = new_state
            if not saved_state:
                _warm_up(optimizer, mode)
        fargs, fkwargs = tree_map(fake, (args, kwargs))
        yield mode, fargs, fkwargs
    finally:
        for table, name, t in reversed(restore):
            table[name] = t
        if optimizer is not None and saved_groups is not None:
            for g, params in zip(optimizer.param_groups, saved_groups, strict=True):
                g["params"] = params
            optimizer.state = saved_state


def _warm_up(optimizer: torch.optim.Optimizer, mode: FakeTensorMode) -> None:
    """Take one unrecorded fake step so the traced step is a steady-state one."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    with mode:
        for p in params:
            p.grad = torch.zeros_like(p)
        optimizer.step()
    for p in params:
        p.grad = None
