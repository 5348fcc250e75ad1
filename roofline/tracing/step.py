"""``roofline.trace``: capture one inference or training step of a model."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from roofline.tracing.attention import AttentionAs, AttentionMode
from roofline.tracing.distributed import Parallel, check_fake_wrapped, parallel_step
from roofline.tracing.fake import DATA_DEPENDENT, fake_step, modules_of
from roofline.tracing.records import Trace
from roofline.tracing.tracer import Capture, FakeModeError, RooflineWarning


def _unwrap_compiled(fn: Any) -> Any:
    """A ``torch.compile``d module or function runs its original eager code."""
    orig = getattr(fn, "_orig_mod", None) or getattr(fn, "_torchdynamo_orig_callable", None)
    if orig is None:
        return fn
    warnings.warn(
        "roofline traces torch.compile'd code eagerly: the counts are those of the eager "
        "ATen ops (fusion by the compiler changes bytes, not FLOPs).",
        RooflineWarning, stacklevel=3)
    return orig


def _loss(out: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    loss = loss_fn(out) if loss_fn is not None else out
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        what = (f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
                else type(loss).__name__)
        where = "loss_fn returned" if loss_fn is not None else "the model returned"
        raise ValueError(
            f"train=True needs a scalar loss, but {where} {what}; pass "
            "loss_fn=lambda out: ... that reduces the output to a scalar.")
    return loss


def _check_grad_mode(train: bool) -> None:
    if not train or torch.is_grad_enabled():
        return
    where = ("torch.inference_mode()" if torch.is_inference_mode_enabled()
             else "torch.no_grad() (or set_grad_enabled(False))")
    # not switched back on here: under inference_mode the inputs are inference tensors,
    # which backward cannot save, and a silent switch would hide the user's own setting
    raise RuntimeError(
        f"train=True needs autograd, but gradients are disabled: the trace runs inside "
        f"{where}. Call roofline.trace outside it, or wrap the call in torch.enable_grad().")


@contextlib.contextmanager
def _training_mode(fn: Any, train: bool) -> Iterator[None]:
    """``train()``/``eval()`` the module behind ``fn`` for one step; restore every flag.

    Only the module itself, a bound method's module and a partial of either: modules
    that a function merely closes over (a frozen teacher) keep the mode the user set.
    """
    roots = modules_of(fn, deep=False)
    flags = [(m, m.training) for root in roots for m in root.modules()]
    try:
        for root in roots:
            root.train(train)
        yield
    finally:
        for m, flag in flags:
            m.training = flag


def run_step(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], *,
             train: bool, loss_fn: Callable[[Any], torch.Tensor] | None,
             optimizer: torch.optim.Optimizer | None) -> None:
    """One step: forward and, with ``train``, loss, backward and ``optimizer.step()``.

    The module behind ``fn`` runs in ``train()`` mode with ``train``, else in ``eval()``.
    """
    _check_grad_mode(train)
    with _training_mode(fn, train):
        out = fn(*args, **kwargs)
        if train:
            _loss(out, loss_fn).backward()
            if optimizer is not None:
                optimizer.step()


def trace(model_or_fn: Any, *args: Any, train: bool = False,
          loss_fn: Callable[[Any], torch.Tensor] | None = None,
          optimizer: torch.optim.Optimizer | None = None, fake: bool | None = None,
          attention: AttentionMode = "fused", parallel: str | Parallel | None = None,
          gpus: int | None = None, **kwargs: Any) -> Trace:
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
        ``optimizer`` is rebuilt (its class and defaults) on the wrapped parameters. Every
        collective is an op of the trace (category ``collective``); cost it with
        :func:`roofline.parallel`. A model you wrapped yourself is traced without
        ``parallel=``, inside its initialised process group, with ``fake=False``.
    gpus : the world size for ``parallel=``; None inside an initialised process group (its
        world size is used, and the group is left as it was).

    Returns
    -------
    Trace
        One record per ATen op, with FLOPs, bytes, phase and module.

    Notes
    -----
    Inside an outer :func:`capture`, the outer trace records the step's ops once, the
    same ops with the same phases as the returned trace, and none of roofline's own
    work around the step (making fakes, the optimizer's fake warm-up step).
    """
    if parallel is not None:
        if fake is False:
            raise ValueError(
                "parallel= traces on fake tensors in a fake process group (fake=True): one "
                "process plays rank 0; a model you wrapped yourself is traced without "
                "parallel=, inside its own process group")
        return parallel_step(_unwrap_compiled(model_or_fn), args, kwargs, parallel=parallel,
                             gpus=gpus, train=train, loss_fn=loss_fn, optimizer=optimizer,
                             attention=attention)
    if gpus is not None:
        raise ValueError("gpus= is the world size of a parallel trace: pass parallel='ddp', "
                         "'fsdp' or 'tp' with it")
    return traced_step(model_or_fn, args, kwargs, train=train, loss_fn=loss_fn,
                       optimizer=optimizer, fake=bool(fake), attention=attention)


def traced_step(model_or_fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                train: bool, loss_fn: Callable[[Any], torch.Tensor] | None,
                optimizer: torch.optim.Optimizer | None, fake: bool,
                attention: AttentionMode = "as-run", annotate: bool = False) -> Trace:
    """:func:`trace`, optionally naming a profiler range after each op (for measure)."""
    fn = _unwrap_compiled(model_or_fn)
    if optimizer is not None and not train:
        raise ValueError("optimizer= is only used with train=True")
    if loss_fn is not None and not train:
        raise ValueError("loss_fn= is only used with train=True")
    name = type(fn).__name__ if isinstance(fn, torch.nn.Module) else getattr(
        fn, "__name__", type(fn).__name__)
    meta = {"model": name, "train": train, "fake": fake}

    _check_grad_mode(train)  # before anything is changed (run_step checks for measure too)
    if fake:
        check_fake_wrapped(fn)
    if train and not fake:
        for root in modules_of(fn, deep=False):
            for p in root.parameters():
                p.grad = None
    if optimizer is not None and not fake and not optimizer.state:
        warnings.warn(
            "the optimizer has no state yet: this first step also initialises it (zeros_like "
            "per parameter), which later steps do not; trace a later step, or use fake=True "
            "(it traces a steady-state step)", RooflineWarning, stacklevel=3)

    cap = Capture(meta, warn=True, annotate=annotate)
    cap.modules = modules_of(fn, deep=False)  # their unused parameters take memory too
    attend = AttentionAs(attention, fake=fake)
    with contextlib.ExitStack() as stack:
        if fake:
            args, kwargs = stack.enter_context(fake_step(fn, optimizer, args, kwargs))
        if attention != "as-run":
            stack.enter_context(attend)
        try:
            with cap:
                run_step(fn, args, kwargs, train=train, loss_fn=loss_fn, optimizer=optimizer)
        except DATA_DEPENDENT as e:
            raise FakeModeError(
                f"{name} ran an op whose result depends on tensor values ({e}); fake "
                "tensors have no values. Trace it with real tensors (fake=False).") from e
    if attend.calls or attend.unfused:
        cap.trace.meta.update(attention=attention, attention_calls=attend.calls,
                              attention_unfused=attend.unfused)
    if attend.dropouts:
        cap.trace.meta["fused_dropout_calls"] = attend.dropouts
    return cap.trace
