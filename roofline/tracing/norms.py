"""RMS norm as CUDA runs it, traced on CPU tensors.

``F.rms_norm`` (and ``nn.RMSNorm``) calls ``aten::_fused_rms_norm`` on every device
(``rms_norm_symint``, ``aten/src/ATen/native/layer_norm.cpp``). CUDA has a kernel for it
(ATen's, in ``layer_norm_kernel.cu``; on Hopper and Blackwell with CuTe DSL installed,
quack's, which torch 2.13 registers in ``torch/_native/ops/norm/rmsnorm_impl.py``), and
autograd saves the input and the per-row fp32 ``rstd`` for one
``_fused_rms_norm_backward``. The CPU has neither: there the op is
CompositeImplicitAutograd and runs as its composite (``rms_norm_composite``): an fp32
upcast, ``pow``, ``mean``, ``add_``, ``rsqrt`` and two ``mul`` in forward, and autograd
through each of them in backward, several passes over the activation for one. A fake trace
stands for the step on the device being predicted, so there a call CUDA would fuse is
recorded as the two fused ops. PyTorch itself takes the composite for channels-last or
complex inputs and for a weight of another dtype than the input: those calls are left as
they run. The fused backward has no CPU kernel, so real-tensor traces keep the composite.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
import torch.nn.functional as F

from roofline.tracing import autocast as _autocast

_aten = torch.ops.aten
RMS_NORMS = (F.rms_norm, torch.rms_norm)
_ROUTING = threading.local()


def recorded_whole(func: Any) -> bool:
    """Whether ``func`` is the fused op :func:`fused_rms_norm` is calling now: the capture
    records it as one op, where it would otherwise record its CPU decomposition (as it
    does for the same op reaching it whole in a real trace under ``inference_mode``)."""
    return func is _aten._fused_rms_norm.default and getattr(_ROUTING, "on", False)


class _FusedRMSNorm(torch.autograd.Function):
    """``_fused_rms_norm`` with CUDA's autograd formula (derivatives.yaml: the input,
    ``rstd`` and the weight saved for ``_fused_rms_norm_backward``)."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, normalized_shape: list[int],
                weight: torch.Tensor | None, eps: float | None) -> torch.Tensor:
        # below autograd the op reaches the dispatch modes whole, instead of running as
        # its CPU composite at the autograd key
        _ROUTING.on = True
        try:
            with torch._C._AutoDispatchBelowAutograd():
                out, rstd = _aten._fused_rms_norm.default(input, normalized_shape, weight,
                                                          eps)
        finally:
            _ROUTING.on = False
        ctx.save_for_backward(input, rstd, weight)
        ctx.normalized_shape = normalized_shape
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        input, rstd, weight = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[2]]
        grad_input, grad_weight = _aten._fused_rms_norm_backward.default(
            grad, input, ctx.normalized_shape, rstd, weight, mask)
        return grad_input, None, grad_weight, None


def fused_rms_norm(input: torch.Tensor, normalized_shape: Any,
                   weight: torch.Tensor | None = None, eps: float | None = None
                   ) -> torch.Tensor | None:
    """CUDA's fused RMS norm for a call that CUDA would fuse, else None (then the call
    runs as it is, and PyTorch checks its arguments)."""
    if not isinstance(input, torch.Tensor) or not input.is_floating_point():
        return None
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if not _well_formed(input, shape, weight) or _channels_last(input):
        return None  # PyTorch's own checks raise; channels-last takes rms_norm_symint's composite
    if _autocast.active() and torch.is_autocast_enabled("cpu") and any(
            map(_autocast.low_precision, (input, weight))):
        # CUDA autocast runs rms_norm in fp32 (roofline.tracing.autocast); the call is
        # intercepted before it reaches the autocast key, so it is cast here
        _autocast.record_call()
        input, weight = input.float(), (weight.float() if weight is not None else None)
    if weight is not None and weight.dtype != input.dtype:
        return None  # rms_norm_symint's composite (with a warning) for a weight of another dtype
    out: torch.Tensor = _FusedRMSNorm.apply(input, shape, weight, eps)
    return out


def _well_formed(input: torch.Tensor, shape: list[int], weight: torch.Tensor | None) -> bool:
    size = torch.Size(shape)
    return (input.numel() > 0 and input.shape[input.dim() - len(shape):] == size
            and (weight is None or weight.shape == size))


def _channels_last(input: torch.Tensor) -> bool:
    formats = (torch.channels_last, torch.channels_last_3d)
    return input.dim() in (4, 5) and not input.is_contiguous() and any(
        input.is_contiguous(memory_format=f) for f in formats)
