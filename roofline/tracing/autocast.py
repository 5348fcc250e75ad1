"""CUDA autocast's cast policy, in a fake trace run under CPU autocast.

Mixed precision is traced with ``torch.autocast("cpu", ...)`` around the step: the fake
tensors are CPU tensors, so the CPU's autocast policy applies. CUDA's differs. It runs in
fp32 many ops the CPU leaves in the input's dtype: ``pow``, ``exp``, ``log``, ``rsqrt``,
``layer_norm``, ``group_norm``, softmax, sums... (``aten/src/ATen/autocast_mode.h``,
``AT_FORALL_FP32`` and ``AT_FORALL_FP32_SET_OPT_DTYPE``, pytorch/pytorch@d70fe7f33910).
A bf16 ``torch.pow(x, 3.0)`` (Hugging Face's GPT-2 GELU) is one cast to fp32 and an fp32
``pow`` on CUDA, and every op after it that mixes its fp32 result with bf16 promotes to
fp32 as well; on the CPU all of it stays in bf16, with half the bytes.

A fake trace stands for the step on the device being predicted, so while one runs
(:class:`~roofline.tracing.attention.AttentionAs` with ``fake=True``), CUDA's policy is
registered at the ``AutocastCPU`` dispatch key for each op that torch itself registers for
``AutocastCUDA`` but not for ``AutocastCPU``, and removed when the trace ends:

* ``fp32``: every floating-point tensor argument but fp64 cast to fp32 first;
* ``fp32_set_opt_dtype``: when the first argument is such a tensor, the op's own ``dtype``
  set to fp32 if the caller gave none (softmax and log-softmax then read an fp16 input in
  one kernel on CUDA, and cast a bf16 one first);
* ``promote``: every such argument cast to the widest among them.

Only in forward, in checkpoint's recomputation of it and in the optimizer step: training
loops call backward after the autocast block (PyTorch's AMP recipe: "backward passes under
autocast are not recommended"), while ``roofline.trace`` runs the whole step inside the
user's; the policy passes backward's own calls through as they are.

Three ops CPU autocast casts and CUDA's does not are run as on CUDA (:func:`cpu_only`):
``cross_entropy_loss``, which the CPU runs in fp32 (a cast of the logits, then an fp32
``log_softmax``) and CUDA as its composite (``log_softmax`` in the logits' dtype, then the
fp32 ``nll_loss`` both policies cast for), and ``cat`` and ``stack``, which the CPU promotes
with casts and CUDA reads in mixed dtypes. The registration is process-wide while the trace
runs (another thread's CPU autocast sees it too). Left as the CPU runs them: its other
CPU-only entries (linear algebra, FFTs, padding and 3-D pooling in fp32, convolutions with
string padding, whose composites reach CUDA's low-precision ``convolution``); CUDA's
low-precision ops the CPU does not list (``mv``, ``addmv``, ``addr``: composites such as
``einsum`` reach ``bmm``, which both cast); and ``norm``'s ``fp32_append_dtype`` overloads.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from roofline.tracing.softmax import half_to_float

#: AT_FORALL_FP32 and AT_FORALL_FP32_SET_OPT_DTYPE (autocast_mode.h @d70fe7f33910), plus
#: ``rms_norm``, which torch 2.13 registers for AutocastCUDA too and a later header lists
#: beside ``layer_norm`` in AT_FORALL_FP32 (the header read predates the op).
FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
    "pow.Scalar", "softplus", "layer_norm", "native_layer_norm", "rms_norm", "group_norm",
    "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist",
    "pdist", "cdist", "renorm", "logsumexp", "upsample_nearest1d", "_upsample_nearest_exact1d",
    "upsample_nearest2d", "_upsample_nearest_exact2d", "upsample_nearest3d",
    "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d",
    "_upsample_bicubic2d_aa")
FP32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
    "sum.dim_IntList")
#: AT_FORALL_PROMOTE
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
           "index_put", "tensordot", "scatter_add")

_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_STATE = threading.local()
_LOCK = threading.Lock()
_ACTIVE: list[Any] = []  # the registering library while a trace holds the policy


def _eligible(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def low_precision(t: Any) -> bool:
    """A tensor CUDA autocast's fp32 policy casts (floating point, not fp32 or fp64)."""
    return _eligible(t) and t.dtype != torch.float32


def _float_dtypes(args: Any) -> set[torch.dtype]:
    return {t.dtype for t in tree_leaves(args) if _eligible(t)}


def _to_fp32(args: Any) -> Any:
    return tree_map(lambda t: t.float() if _eligible(t) else t, args)


def _op(name: str) -> Any:
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    return getattr(packet, overload or "default", None) if packet is not None else None


def _registered(op: Any, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)


def record_call() -> None:
    """Count one call CUDA's policy ran otherwise than the CPU's would have (also by
    reroutes that cast themselves)."""
    _STATE.calls = getattr(_STATE, "calls", 0) + 1


def _below_autocast(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                    changed: bool) -> Any:
    if changed:
        record_call()
    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST):
        return op(*args, **kwargs)


def _level() -> int:
    """Autocast regions entered on this thread and not left."""
    level = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return int(level)


def _in_backward() -> bool:
    # in backward, outside the autocast regions checkpoint's recomputation enters to run
    # the forward again as it ran (more than were open when the trace began)
    return (torch._C._current_graph_task_id() != -1
            and _level() <= getattr(_STATE, "level", 0))


def _fp32(op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        low = not _in_backward() and any(map(low_precision, tree_leaves((args, kwargs))))
        if low:
            args, kwargs = _to_fp32((args, kwargs))
        return _below_autocast(op, args, kwargs, low)
    return kernel


def _fp32_set_opt_dtype(op: Any) -> Callable[..., Any]:
    index = next(i for i, a in enumerate(op._schema.arguments) if a.name == "dtype")
    keyword = op._schema.arguments[index].kwarg_only
    name = op._overloadpacket.__name__
    fused = name in ("softmax", "log_softmax")  # CUDA reads an fp16 input in one kernel

    def kernel(*args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("dtype") if keyword else (
            args[index] if len(args) > index else None)
        low = bool(args) and low_precision(args[0]) and not _in_backward()
        if fused and low and given is None and args[0].dtype == torch.float16:
            return _below_autocast(half_to_float, (args[0], args[1], name == "log_softmax"),
                                   {}, True)
        if low and given is None:
            if keyword:
                kwargs = {**kwargs, "dtype": torch.float32}
            else:
                args = (*args[:index], *(None,) * (index - len(args)), torch.float32)
        return _below_autocast(op, args, kwargs, low and given is None)
    return kernel


def _promote(op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        mixed = len(_float_dtypes((args, kwargs))) > 1 and not _in_backward()
        if mixed:  # fp32 wins over the low precision, as autocast's promote_type has it
            args, kwargs = _to_fp32((args, kwargs))
        return _below_autocast(op, args, kwargs, mixed)
    return kernel


def _composite(op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if args and low_precision(args[0]):
            record_call()
        # the op's own decomposition, each op of it under autocast, as CUDA's fallthrough
        # runs it (excluding autocast would take the inner ops' policies away too)
        return op.decompose(*args, **kwargs)
    return kernel


def _as_is(op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return _below_autocast(op, args, kwargs, len(_float_dtypes((args, kwargs))) > 1)
    return kernel


def policies() -> dict[str, Callable[[Any], Callable[..., Any]]]:
    """CUDA's policy of each op torch registers for AutocastCUDA and not AutocastCPU."""
    table = {**dict.fromkeys(FP32, _fp32), **dict.fromkeys(FP32_SET_OPT_DTYPE,
                                                            _fp32_set_opt_dtype),
             **dict.fromkeys(PROMOTE, _promote)}
    return {name: make for name, make in table.items()
            if (op := _op(name)) is not None and _registered(op, "AutocastCUDA")
            and not _registered(op, "AutocastCPU")}


def cpu_only() -> dict[str, Callable[[Any], Callable[..., Any]]]:
    """The ops CPU autocast casts and CUDA's does not, run as CUDA runs them:
    ``cross_entropy_loss`` (fp32 on the CPU) as its composite, whose ``log_softmax`` keeps
    the input's dtype and whose ``nll_loss`` both policies run in fp32; ``cat`` and
    ``stack`` (promote on the CPU) as they are, reading mixed dtypes without casts."""
    table = {"cross_entropy_loss": _composite, "cat": _as_is, "stack": _as_is}
    return {name: make for name, make in table.items()
            if (op := _op(name)) is not None and _registered(op, "AutocastCPU")
            and not _registered(op, "AutocastCUDA")}


@contextlib.contextmanager
def cuda_autocast() -> Iterator[None]:
    """CUDA autocast's policy at the AutocastCPU key while the block runs (nested blocks
    share the outermost's registration)."""
    _STATE.level = _level()
    with _LOCK:
        outer = not _ACTIVE
        if outer:
            lib = torch.library.Library("aten", "IMPL")
            for name, make in policies().items():
                lib.impl(name, make(_op(name)), "AutocastCPU")
            with warnings.catch_warnings():  # "Overriding a previously registered kernel":
                warnings.simplefilter("ignore")  # CPU's, restored when lib is destroyed
                for name, make in cpu_only().items():
                    lib.impl(name, make(_op(name)), "AutocastCPU")
            _ACTIVE.append(lib)
        else:
            _ACTIVE.append(None)
    try:
        yield
    finally:
        with _LOCK:
            lib = _ACTIVE.pop()
            if lib is not None:
                lib._destroy()


def active() -> bool:
    """Whether a fake trace holds CUDA's policy now."""
    return bool(_ACTIVE)


def calls() -> int:
    """Calls this thread has run under CUDA's policy so far that it ran otherwise than the
    CPU's would have (a cast, an fp32 ``dtype``, a composite or mixed dtypes kept)."""
    return int(getattr(_STATE, "calls", 0))
