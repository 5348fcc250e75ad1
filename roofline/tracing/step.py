"""``roofline.trace``: capture one inference or training step of a model."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from roofline._errors import FakeModeError, RooflineWarning, warn
from roofline.tracing.attention import AttentionAs, AttentionMode
from roofline.tracing.capture import Capture
from roofline.tracing.compiled import compiled_step
from roofline.tracing.distributed import check_fake_wrapped, parallel_step
from roofline.tracing.fake import DATA_DEPENDENT, fake_step, modules_of
from roofline.tracing.records import Trace
from roofline.tracing.run import (
    captured_info,
    check_autocast,
    check_closure,
    check_grad_mode,
    leading_dim,
    model_name,
    run_step,
    unwrap_compiled,
)
from roofline.tracing.strategies import Parallel


def trace(model_or_fn: Any, *args: Any, train: bool = False,
          loss_fn: Callable[[Any], torch.Tensor] | None = None,
          optimizer: torch.optim.Optimizer | None = None, fake: bool | None = None,
          attention: AttentionMode = "fused", parallel: str | Parallel | None = None,
          gpus: int | None = None, per_gpu_inputs: bool = False,
          compile: bool | dict[str, Any] = False, **kwargs: Any) -> Trace:
    """Capture the ops of one step of ``model_or_fn(*args, **kwargs)``.

    Parameters
    ----------
    model_or_fn : an ``nn.Module`` or any callable.
    train : run forward, loss, backward and (with ``optimizer``) ``optimizer.step()``.
        The loss is the output when it is a scalar, else ``loss_fn(output)``.
        Existing gradients are set to ``None`` first, as ``zero_grad()`` would.
        The module behind ``model_or_fn`` (the module, a bound method's module, a
        ``functools.partial`` of either) runs the step in ``train()`` mode, and in
        ``eval()`` mode without ``train`` (no dropout, batch norm on its running
        statistics); every submodule's ``training`` flag is restored afterwards.
        Modules a function only closes over keep the mode they are in. Needs grad
        mode: inside ``torch.no_grad()``/``torch.inference_mode()`` it is an error.
    loss_fn : maps the output to a scalar loss (``train=True`` only).
    optimizer : stepped after backward when ``train=True``.
    fake : run on fake tensors (``FakeTensorMode``; default False, and always with
        ``parallel=``, where ``fake=False`` is refused): nothing is allocated and the
        model, its gradients, buffers, attributes (tensors, and the contents of lists,
        dicts and sets) and the optimizer are left as they were, as are the plain
        objects the callable holds, whatever the callable (see
        :mod:`roofline.tracing.fake`). A write into a real tensor the trace cannot
        swap for a fake (a global) is refused with :class:`FakeModeError`. Models on
        the ``meta`` device need it. Inside the user's own ``FakeTensorMode`` that mode
        is used. Code that needs values (``.item()``, ``.numpy()``, data-dependent
        shapes) raises :class:`FakeModeError`: trace it with ``fake=False``.
    attention : how ``F.scaled_dot_product_attention`` is recorded. CPU PyTorch runs
        calls with dropout unfused in fp32; CUDA runs them as one fused kernel.
        ``"fused"``: calls with dropout as CUDA's fused kernel, in the input dtype (fake
        traces; a real trace records what ran and the analysis says so). ``"eager"``:
        every call as explicit matmul, softmax and dropout, as models that write
        attention out run it under CUDA AMP. ``"as-run"``: as the CPU runs it (for a CPU
        prediction).
    parallel : ``"ddp"``, ``"fsdp"``, ``"tp"`` or a :class:`~roofline.tracing.distributed.
        Parallel`: trace rank 0 of the model wrapped by torch (DistributedDataParallel,
        FSDP2's ``fully_shard``, ``parallelize_module``) in a world of ``gpus`` ranks, on a
        fake process group and fake tensors (see :mod:`roofline.tracing.distributed`).
        The inputs are the global batch: data parallelism gives each rank ``batch / gpus``
        (an error when it does not divide); tensor parallelism gives each the whole batch.
        ``optimizer`` is rebuilt (its class, defaults and param groups, each group's
        parameters found by name) on the wrapped parameters. Every
        collective is an op of the trace (category ``collective``); cost it with
        :func:`roofline.parallel`. A model you wrapped yourself is traced without
        ``parallel=``, inside its initialised process group, with ``fake=False``.
    gpus : the world size for ``parallel=``; None inside an initialised process group (its
        world size is used, and the group is left as it was).
    per_gpu_inputs : with ``parallel=``, the inputs are one GPU's share (its per-GPU batch)
        rather than the global batch: data parallelism's global batch is then ``gpus``
        times theirs, and nothing is split.
    compile : record the step as ``torch.compile`` (inductor) runs it on a GPU: one record
        per fused kernel, whose bytes are what leaves the kernel and whose ``fused`` lists
        the eager ops inside; GEMMs and attention stay cuBLAS and SDPA kernels (see
        :mod:`roofline.tracing.compiled`). ``True``, or a dict of ``torch.compile``'s own
        ``mode`` (``"default"``, ``"reduce-overhead"``) and ``fullgraph``, and
        ``regional``: compile each repeated block (the items of an ``nn.ModuleList`` of
        one class) on its own, as torchtitan and torchtune do, rather than the whole
        model (no fusion across blocks; a fraction of the tracing time). Runs on fake
        tensors (``fake=False`` is refused) and needs no GPU; the optimizer runs eagerly.

    Returns
    -------
    Trace
        One record per ATen op, with FLOPs, bytes, phase and module.

    Notes
    -----
    Inside an outer :func:`capture`, the outer trace records the step's ops once, the
    same ops with the same phases as the returned trace, and none of roofline's own
    work around the step (making fakes, the optimizer's fake warm-up step).

    Examples
    --------
    >>> model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    >>> t = roofline.trace(model, torch.randn(32, 64))
    >>> t.total_flops  # 2 x 32 x (64 x 256 + 256 x 10) in the GEMMs, 32 x 256 in relu
    1220608
    >>> opt = torch.optim.AdamW(model.parameters())
    >>> t = roofline.trace(model, torch.randn(32, 64), train=True, optimizer=opt,
    ...                    loss_fn=lambda y: y.sum(), fake=True)
    >>> sorted({op.phase for op in t.ops})
    ['backward', 'forward', 'optimizer']
    """
    check_autocast(model_or_fn, args, kwargs)
    check_closure(optimizer)
    if compile is not False:
        return _compiled(model_or_fn, args, kwargs, compile, train=train, loss_fn=loss_fn,
                         optimizer=optimizer, fake=fake, attention=attention,
                         parallel=parallel or gpus or per_gpu_inputs)
    if parallel is not None:
        if fake is False:
            raise ValueError(
                "parallel= traces on fake tensors in a fake process group (fake=True): one "
                "process plays rank 0; a model you wrapped yourself is traced without "
                "parallel=, inside its own process group")
        return parallel_step(unwrap_compiled(model_or_fn), args, kwargs, parallel=parallel,
                             gpus=gpus, train=train, loss_fn=loss_fn, optimizer=optimizer,
                             attention=attention, rank_inputs=per_gpu_inputs)
    if gpus is not None or per_gpu_inputs:
        what = "gpus= is the world size" if gpus is not None else "per_gpu_inputs= describes"
        raise ValueError(f"{what} of a parallel trace: pass parallel='ddp', 'fsdp' or 'tp' "
                         "with it")
    return traced_step(model_or_fn, args, kwargs, train=train, loss_fn=loss_fn,
                       optimizer=optimizer, fake=bool(fake), attention=attention)


def traced_step(model_or_fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                train: bool, loss_fn: Callable[[Any], torch.Tensor] | None,
                optimizer: torch.optim.Optimizer | None, fake: bool,
                attention: AttentionMode = "as-run", annotate: bool = False) -> Trace:
    """:func:`trace`, optionally naming a profiler range after each op (for measure)."""
    fn = unwrap_compiled(model_or_fn)
    if optimizer is not None and not train:
        raise ValueError("optimizer= is only used with train=True")
    if loss_fn is not None and not train:
        raise ValueError("loss_fn= is only used with train=True")
    name = model_name(fn)
    check_grad_mode(train)  # before anything is changed (run_step checks for measure too)
    _prepare(fn, train=train, fake=fake, optimizer=optimizer)
    cap = Capture(warn=True, annotate=annotate)
    cap.modules = modules_of(fn, deep=False)  # their unused parameters take memory too
    attend = AttentionAs(attention, fake=fake)
    faked = None
    with contextlib.ExitStack() as stack:
        if fake:
            faked = stack.enter_context(fake_step(fn, optimizer, args, kwargs))
        if attention != "as-run":
            stack.enter_context(attend)
        try:
            with cap:
                loss = run_step(fn, *((faked.args, faked.kwargs) if faked else (args, kwargs)),
                                train=train, loss_fn=loss_fn, optimizer=optimizer)
        except DATA_DEPENDENT as e:
            raise FakeModeError(
                f"{name} ran an op whose result depends on tensor values ({e}); fake "
                "tensors have no values. Trace it with real tensors (fake=False).") from e
    if faked is not None:
        faked.check_survivors()
    cap.trace.info = captured_info(name, train=train, fake=fake, attend=attend,
                                   batch=leading_dim(args, kwargs) or None, loss=loss,
                                   optimizer_foreach=faked is not None and faked.foreach)
    return cap.trace


def _compiled(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              compile: bool | dict[str, Any], *, train: bool,
              loss_fn: Callable[[Any], torch.Tensor] | None,
              optimizer: torch.optim.Optimizer | None, fake: bool | None,
              attention: AttentionMode, parallel: Any) -> Trace:
    """:func:`trace` with ``compile=``: its options checked, then the compiled step."""
    options = {} if compile is True else compile
    if not isinstance(options, dict) or set(options) - {"mode", "fullgraph", "regional"}:
        raise ValueError("compile= takes True, or a dict of torch.compile's 'mode' and "
                         f"'fullgraph' and roofline's 'regional', got {compile!r}")
    if fake is False:
        raise ValueError("compile=True traces on fake tensors (inductor is run for a GPU "
                         "this machine need not have): leave fake unset")
    if parallel:
        raise ValueError("compile=True traces one GPU's step: a compiled parallel step "
                         "(DDP, FSDP, TP) is not modelled; trace it eagerly")
    if attention != "fused":
        raise ValueError("compile=True puts the GPU's own attention kernel in the compiled "
                         "graph (flash or memory-efficient SDPA): attention= is for eager "
                         "traces")
    if optimizer is not None and not train:
        raise ValueError("optimizer= is only used with train=True")
    if loss_fn is not None and not train:
        raise ValueError("loss_fn= is only used with train=True")
    fn = getattr(fn, "_orig_mod", None) or fn  # already compiled: its eager module
    return compiled_step(fn, args, kwargs, train=train, loss_fn=loss_fn,
                         optimizer=optimizer, mode=options.get("mode", "default"),
                         fullgraph=bool(options.get("fullgraph", False)),
                         regional=bool(options.get("regional", False)))


def _prepare(fn: Any, *, train: bool, fake: bool,
             optimizer: torch.optim.Optimizer | None) -> None:
    """Before a step is traced: refuse what cannot be faked, start real training from no
    gradient (as ``zero_grad()`` would), and say when a real optimizer has no state yet."""
    if fake:
        check_fake_wrapped(fn)
        return
    if train:
        for root in modules_of(fn, deep=False):
            for p in root.parameters():
                p.grad = None
    if optimizer is not None and not optimizer.state and _keeps_state(optimizer):
        warn(
            "the optimizer has no state yet: this first step also initialises it (zeros_like "
            "per parameter), which later steps do not; trace a later step, or use fake=True "
            "(it traces a steady-state step)", RooflineWarning)


def _keeps_state(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the optimizer's step makes state: SGD keeps a momentum buffer only when a
    group has momentum (``torch/optim/sgd.py``: ``if group["momentum"] != 0``)."""
    if isinstance(optimizer, torch.optim.SGD):
        return any(g.get("momentum", 0) != 0 for g in optimizer.param_groups)
    return True
