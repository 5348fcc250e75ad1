"""Running one step: forward, loss, backward and the optimizer, as the trace records it.

Shared by the single-GPU trace (:mod:`roofline.tracing.step`), the parallel trace
(:mod:`roofline.tracing.distributed`) and the measurement (:mod:`roofline.tracing.measure`),
together with :func:`captured_info`, the one place a trace's :class:`CaptureInfo` is filled.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from roofline._errors import RooflineWarning, warn
from roofline.tracing.attention import AttentionAs
from roofline.tracing.fake import modules_of
from roofline.tracing.records import CaptureInfo


def unwrap_compiled(fn: Any) -> Any:
    """A ``torch.compile``d module or function runs its original eager code."""
    orig = getattr(fn, "_orig_mod", None) or getattr(fn, "_torchdynamo_orig_callable", None)
    if orig is None:
        return fn
    warn(
        "roofline traces torch.compile'd code eagerly: the counts are those of the eager "
        "ATen ops (fusion by the compiler changes bytes, not FLOPs).",
        RooflineWarning)
    return orig


def model_name(fn: Any) -> str:
    """What a trace calls the callable: its module's class, else its ``__name__``."""
    if isinstance(fn, torch.nn.Module):
        return type(fn).__name__
    return str(getattr(fn, "__name__", type(fn).__name__))


def leading_dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The first dimension of the first tensor input with one: the batch (0: none)."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
               and t.dim() > 0]
    return int(tensors[0].shape[0]) if tensors else 0


def loss_of(out: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    """The scalar a training step backpropagates: ``loss_fn(out)``, else ``out`` itself,
    else the ``loss`` the output carries (a Hugging Face ``ModelOutput`` given labels)."""
    loss = loss_fn(out) if loss_fn is not None else out
    if loss_fn is None and not isinstance(loss, torch.Tensor):
        carried = _carried_loss(out)
        if carried is not None:
            return carried
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        what = (f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
                else type(loss).__name__)
        where = "loss_fn returned" if loss_fn is not None else "the model returned"
        raise ValueError(
            f"train=True needs a scalar loss, but {where} {what}; pass "
            "loss_fn=lambda out: ... that reduces the output to a scalar.")
    return loss


def _carried_loss(out: Any) -> torch.Tensor | None:
    """``out.loss`` (an attribute, or a mapping's key as ``ModelOutput`` has both) when it
    is a scalar tensor, else None."""
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    return loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None


def uses_carried_loss(out: Any, loss_fn: Any) -> bool:
    """Whether :func:`loss_of` takes the output's own ``loss``."""
    return loss_fn is None and not isinstance(out, torch.Tensor) and \
        _carried_loss(out) is not None


_AUTOCAST_DEVICES = ("cuda", "cpu", "xpu", "mps")


def check_autocast(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Warn when autocast is on for a device the step's tensors are not on: it changes
    nothing, and the step is traced in full precision (``torch.autocast("cuda")`` around
    a CPU model, the usual mistake on a machine without a GPU)."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    tensors += [p for m in modules_of(fn, deep=False) for p in m.parameters()][:1]
    devices = {"cpu" if t.device.type == "meta" else t.device.type for t in tensors}
    if not devices:
        return
    on = [d for d in _AUTOCAST_DEVICES if _autocast_on(d)] or _disabled_autocast()
    if not on or any(d in devices for d in on):
        return
    where = ", ".join(sorted(devices))
    warn(
        f"torch.autocast({on[0]!r}) is on, but the step's tensors are on {where}: autocast "
        f"changes nothing there, and the step is traced in full precision. Trace mixed "
        f"precision with torch.autocast({sorted(devices)[0]!r}, dtype=torch.bfloat16) around "
        "roofline.trace (the analysis costs it on the device you name).",
        RooflineWarning)


def _disabled_autocast() -> list[str]:
    """Devices of autocast regions entered but switched off by torch itself:
    ``torch.autocast("cuda")`` on a machine without CUDA warns "Disabling autocast" and
    runs the region in full precision. Looked for only inside some autocast region (its
    nesting level is above 0) with no device's autocast on."""
    level = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    if level <= 0:
        return []
    import gc

    # type(o), not isinstance: isinstance reads __class__, which lazy module proxies answer
    return sorted({o.device for o in gc.get_objects() if torch.autocast in type(o).__mro__
                   and not getattr(o, "_enabled", True) and hasattr(o, "prev")
                   and getattr(o, "device", "") in _AUTOCAST_DEVICES})


def _autocast_on(device: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device))
    except (RuntimeError, TypeError):  # a device type this build does not know
        return False


def check_grad_mode(train: bool) -> None:
    """A training step needs autograd: refuse one inside ``no_grad``/``inference_mode``."""
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
def training_mode(fn: Any, train: bool) -> Iterator[None]:
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
             optimizer: torch.optim.Optimizer | None,
             forward: Callable[..., Any] | None = None) -> str:
    """One step: forward and, with ``train``, loss, backward and ``optimizer.step()``.

    The module behind ``fn`` runs in ``train()`` mode with ``train``, else in ``eval()``;
    ``forward`` (default ``fn``) is what the step calls (a compiled step calls
    ``torch.compile(fn)``). Returns where the loss came from: ``"output"``, ``"loss_fn"``,
    ``"output.loss"`` (the output's own, e.g. a Hugging Face ``ModelOutput``), or ``""``
    without ``train``.
    """
    check_grad_mode(train)
    check_closure(optimizer)
    with training_mode(fn, train):
        out = (forward or fn)(*args, **kwargs)
        if not train:
            return ""
        source = ("loss_fn" if loss_fn is not None else "output.loss"
                  if uses_carried_loss(out, loss_fn) else "output")
        loss_of(out, loss_fn).backward()
        if optimizer is not None:
            optimizer.step()
        return source


def check_closure(optimizer: torch.optim.Optimizer | None) -> None:
    """An optimizer whose ``step`` needs a closure (LBFGS) reruns the model inside the step:
    that is no step of one forward, backward and update."""
    if optimizer is None:
        return
    closure = inspect.signature(optimizer.step).parameters.get("closure")
    if closure is not None and closure.default is inspect.Parameter.empty:
        raise ValueError(
            f"{type(optimizer).__name__}.step(closure) reruns the model's forward and "
            "backward inside the step, as many times as it iterates: roofline.trace runs "
            "one forward, backward and optimizer.step(). Trace your own loop instead: "
            "with roofline.capture() as t: optimizer.step(closure)")


def captured_info(name: str, *, train: bool, fake: bool, attend: AttentionAs | None,
                  **parallel: Any) -> CaptureInfo:
    """What a step's trace says about its capture: the one place both trace paths fill it.

    ``parallel`` are the other facts of the trace (a parallel trace's ``parallel``,
    ``world_size``, ``rank_batch``, ``buckets``; a compiled trace's ``compiled``...).
    ``attend`` is None where attention was not rerouted (a compiled trace: the backend
    puts the GPU's attention kernel in the graph).
    """
    if attend is None:
        return CaptureInfo(model=name, train=train, fake=fake, torch=torch.__version__,
                           **parallel)
    rerouted = bool(attend.calls or attend.unfused)
    return CaptureInfo(
        model=name, train=train, fake=fake, torch=torch.__version__,
        attention=attend.mode if rerouted else None, attention_calls=attend.calls,
        attention_unfused=attend.unfused, fused_dropout_calls=attend.dropouts,
        fused_rms_norm_calls=attend.rms_norms, fused_softmax_calls=attend.softmaxes,
        cuda_autocast_calls=attend.autocast_calls, **parallel)
