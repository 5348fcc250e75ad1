"""``trace(..., compile=True)``: the step as ``torch.compile`` (inductor) runs it on a GPU.

The step runs once on fake tensors under the usual capture, with dynamo left on and the
model compiled by :func:`roofline.tracing.inductor.backend`. Each call of a compiled
graph adds its fused kernels (one record each, the eager ops it fuses listed in
``OpRecord.fused``); code outside the compiled graphs (a graph break, a loss computed
after the model, the optimizer, which torchtitan does not compile either) is recorded op
by op as in an eager trace.

The GPU scheduler is used, not inductor's CPU backend that this machine could run: the C++
scheduler fuses differently (GELU's gradient and a bias gradient are two kernels there and
one on a GPU; a foreach AdamW twelve kernels there, two combo kernels on a GPU).

What it cannot know without a GPU, and says: ``max-autotune`` (triton GEMM templates are
chosen by timing them), ``pad_mm`` (decided by a GPU benchmark), a looped reduction's
second read of its input (decided at codegen). Memory is not modelled (inductor reuses
buffers): :func:`roofline.memory` of a compiled trace is refused.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from roofline._errors import CompileError, FakeModeError, RooflineWarning, warn
from roofline.tracing.autocast import cuda_autocast
from roofline.tracing.capture import Capture
from roofline.tracing.distributed import check_fake_wrapped
from roofline.tracing.fake import DATA_DEPENDENT, fake_step, modules_of, unwatched
from roofline.tracing.gpu_target import H100_PROPERTIES, patterns_on_cpu
from roofline.tracing.inductor import Graph, backend, kernels_sink
from roofline.tracing.records import Trace
from roofline.tracing.run import (
    captured_info,
    check_closure,
    check_grad_mode,
    leading_dim,
    model_name,
    run_step,
)

#: ``torch.compile`` modes a compiled trace takes: the fusion is the same; reduce-overhead
#: adds CUDA graphs (the analysis then uses the graph-launch overhead).
MODES = ("default", "reduce-overhead")


def compiled_step(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, train: bool,
                  loss_fn: Callable[[Any], torch.Tensor] | None,
                  optimizer: torch.optim.Optimizer | None, mode: str,
                  fullgraph: bool, regional: bool = False) -> Trace:
    """Trace one step of ``torch.compile(fn)`` as inductor would run it on a GPU; with
    ``regional``, of each repeated block compiled on its own (:func:`blocks`)."""
    _check_mode(mode)
    name = model_name(fn)
    check_grad_mode(train)
    check_closure(optimizer)
    check_fake_wrapped(fn)
    cap = Capture(warn=True, compiled=True)
    cap.modules = modules_of(fn, deep=False)
    graphs: list[Graph] = []
    regions = _Regions(name, blocks(fn) if regional else [])
    if regional and not regions.blocks:
        raise ValueError(f"compile={{'regional': True}} compiles each repeated block, and "
                         f"{name} has none (no nn.ModuleList of two or more modules of one "
                         "class): compile the whole model")

    @contextlib.contextmanager
    def receive(graph: Graph) -> Iterator[None]:
        graphs.append(graph)
        cap.recorder.kernels(graph.kernels, graph.backward, regions.module(graph.backward))
        cap.recorder.quiet += 1
        try:
            yield
        finally:
            cap.recorder.quiet -= 1

    compiler = backend(H100_PROPERTIES)
    compiled = fn if regional else torch.compile(fn, backend=compiler, fullgraph=fullgraph,
                                                 dynamic=False)
    torch._dynamo.reset()  # no graph of an earlier trace (or another backend) is reused
    breaks_before = Counter(torch._dynamo.utils.counters["graph_break"])
    try:
        with contextlib.ExitStack() as stack:
            faked = stack.enter_context(fake_step(fn, optimizer, args, kwargs))
            stack.enter_context(patterns_on_cpu())
            stack.enter_context(cuda_autocast())  # dynamo's graphs take CUDA's dtypes too
            stack.enter_context(kernels_sink(receive))
            if regional:
                stack.enter_context(regions.compiled(compiler, fullgraph))
            with cap:
                loss = _run(compiled, fn, faked.args, faked.kwargs, train=train,
                            loss_fn=loss_fn, optimizer=optimizer, name=name,
                            hooks=not regional)
            faked.check_survivors()
        breaks = _breaks(breaks_before)
    except DATA_DEPENDENT as e:
        raise FakeModeError(
            f"{name} ran an op whose result depends on tensor values ({e}); fake tensors "
            "have no values, and compile=True traces on fake tensors.") from e
    finally:
        torch._dynamo.reset()  # the guards hold the step's fake tensors
    if not any(not g.backward for g in graphs):
        raise CompileError(
            f"torch.compile compiled no graph of {name}: dynamo ran it eagerly"
            + (f" ({'; '.join(breaks[:3])})" if breaks else "")
            + ". Trace it without compile=True.")
    if breaks:
        warn(f"torch.compile broke {name} into {len({id(g) for g in graphs if not g.backward})}"
             f" graphs at {len(breaks)} graph break(s): {'; '.join(breaks[:3])}"
             f"{' and more' if len(breaks) > 3 else ''}. The code between graphs is "
             "recorded as eager ops; trace.info.graph_breaks lists them all.",
             RooflineWarning)
    forward = {id(g): g for g in graphs if not g.backward}
    cap.trace.info = captured_info(
        name, train=train, fake=True, attend=None, batch=leading_dim(args, kwargs) or None,
        loss=loss, optimizer_foreach=faked.foreach, compiled=mode,
        compiled_graphs=len(forward), graph_breaks=breaks,
        recompute_flops=sum(g.recompute_flops for g in graphs))
    return cap.trace


def _check_mode(mode: str) -> None:
    """A mode inductor's fusion can be predicted for, with dynamo on to compile it."""
    if torch._dynamo.config.disable:
        raise CompileError(
            "compile=True needs dynamo, which is disabled here (inside roofline.capture(), "
            "which runs torch.compile'd code eagerly, or with TORCHDYNAMO_DISABLE=1): "
            "trace the compiled step outside it")
    if mode in MODES:
        return
    if isinstance(mode, str) and mode.startswith("max-autotune"):
        raise ValueError(
            f"mode={mode!r} cannot be predicted: inductor picks its triton GEMM templates "
            "(and their fused epilogues) by timing them on the GPU. Trace with "
            "mode='default' (GEMMs as cuBLAS), which max-autotune can only improve on.")
    raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")


def _run(compiled: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
         train: bool, loss_fn: Callable[[Any], torch.Tensor] | None,
         optimizer: torch.optim.Optimizer | None, name: str, hooks: bool = True) -> str:
    """One step of the compiled callable: forward, loss, backward, optimizer step (eager).

    A regional step runs the model eagerly (its module hooks on): only its blocks' calls are
    compiled, each with the hooks off (:class:`_Regions`)."""
    from torch._inductor.exc import InductorError

    def forward(*a: Any, **k: Any) -> Any:
        with _module_hooks_off() if hooks else contextlib.nullcontext():
            return compiled(*a, **k)

    try:
        return run_step(fn, args, kwargs, train=train, loss_fn=loss_fn, optimizer=optimizer,
                        forward=forward)
    except torch._dynamo.exc.Unsupported as e:
        raise CompileError(
            f"torch.compile(fullgraph=True) found a graph break in {name}: "
            f"{_first_line(e)}. Trace with fullgraph=False (the code between graphs is "
            "recorded eagerly), or remove the break.") from e
    except (torch._dynamo.exc.BackendCompilerFailed, InductorError) as e:
        # a forward graph fails inside dynamo, a backward graph when backward runs
        inner = getattr(e, "inner_exception", None) or e
        raise CompileError(
            f"inductor failed to compile {name} for a GPU on this machine: "
            f"{_first_line(inner)}. Trace it without compile=True.") from e


_GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks",
                 "_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs",
                 "_global_backward_pre_hooks", "_global_backward_hooks",
                 "_global_buffer_registration_hooks", "_global_module_registration_hooks",
                 "_global_parameter_registration_hooks")


@contextlib.contextmanager
def _module_hooks_off() -> Iterator[None]:
    """No global module hook (the capture's module tracker, the fake step's swap) and no
    wrapped ``nn.Module.__setattr__`` (the fake step's write watch) while dynamo traces: it
    would trace them into the graph, or break it at them. The kernels name their modules
    from dynamo's own ``nn_module_stack``."""
    from torch.nn.modules import module

    saved = {n: dict(getattr(module, n)) for n in _GLOBAL_HOOKS}
    for n in _GLOBAL_HOOKS:
        getattr(module, n).clear()
    try:
        with unwatched(writes=True):
            yield
    finally:
        for n in _GLOBAL_HOOKS:
            getattr(module, n).update(saved[n])


def blocks(fn: Any) -> list[tuple[str, nn.Module]]:
    """The repeated blocks of the module behind ``fn``: the items of every ``nn.ModuleList``
    of two or more modules of one class (transformer layers), outermost lists only, each
    with its path. Regional compilation compiles each on its own, as torchtitan and
    torchtune do, and dynamo compiles their shared code once."""
    found: list[tuple[str, nn.Module]] = []
    for root in modules_of(fn, deep=False):
        for path, m in root.named_modules():
            inside = any(path.startswith(f"{p}.") for p, _ in found)
            if inside or not isinstance(m, nn.ModuleList) or len(m) < 2 \
                    or len({type(c) for c in m}) != 1:
                continue
            found += [(f"{path}.{i}" if path else str(i), c) for i, c in enumerate(m)]
    return found


class _Regions:
    """The compiled blocks of a regional step, and which block a graph's kernels are of:
    a forward graph is the block being called; a backward graph the last block whose
    forward has not had its backward yet (autograd runs the blocks in reverse)."""

    def __init__(self, name: str, found: list[tuple[str, nn.Module]]) -> None:
        self.name, self.blocks = name, found
        self.calling: str = ""
        self.pending: list[str] = []

    def module(self, backward: bool) -> str:
        if not self.blocks:
            return self.name
        path = (self.pending.pop() if self.pending else "") if backward else self.calling
        if not backward:
            self.pending.append(path)
        return f"{self.name}.{path}" if path else self.name

    @contextlib.contextmanager
    def compiled(self, compiler: Any, fullgraph: bool) -> Iterator[None]:
        """Each block's calls through ``torch.compile`` (as ``Module.compile()`` does)."""
        saved = [(b, b._compiled_call_impl) for _, b in self.blocks]
        try:
            for path, block in self.blocks:
                block._compiled_call_impl = self._call(
                    path, torch.compile(block._call_impl, backend=compiler,
                                        fullgraph=fullgraph, dynamic=False))
            yield
        finally:
            for block, impl in saved:
                block._compiled_call_impl = impl

    def _call(self, path: str, compiled: Any) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calling = path
            with _module_hooks_off():
                return compiled(*args, **kwargs)

        return call


def _breaks(before: Counter[str]) -> list[str]:
    """Each new graph break's reason: dynamo's first line, and the call it broke at."""
    now = Counter(torch._dynamo.utils.counters["graph_break"])
    return [_reason(reason) for reason, n in (now - before).items() for _ in range(n)]


def _reason(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    where = next((line.removeprefix("Developer debug context:").strip() for line in lines
                  if line.startswith("Developer debug context:")), "")
    head = lines[0] if lines else str(text)
    return f"{head} ({where[:160]})" if where else head


def _first_line(e: BaseException | None) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
