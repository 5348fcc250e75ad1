"""Attention as the predicted device runs it, traced on CPU tensors.

``F.scaled_dot_product_attention`` with dropout has no fused CPU kernel: CPU PyTorch
takes its math path, which upcasts bf16/fp16 to fp32 and materialises the T x T scores.
CUDA runs the same call as one fused kernel in the input dtype (flash or
memory-efficient attention, dropout drawn in-kernel). A fake trace stands for the step
on the device being predicted, so there the call is recorded as one of:

* ``"fused"``: calls with dropout as the fused kernel (calls without dropout already
  take the CPU's own fused kernel);
* ``"eager"``: every call as explicit ``matmul``, softmax, dropout, ``matmul``, as models
  that write attention out (Hugging Face's eager attention, NVIDIA's BERT) run it under
  CUDA AMP: matmuls in the autocast dtype, softmax and dropout in fp32 (CUDA autocast's
  softmax policy; CPU autocast would keep it in low precision);
* ``"as-run"``: whatever the CPU dispatches.

In a fake trace (except ``"as-run"``), ``F.dropout`` is recorded as CUDA runs it too:
CUDA's ``dropout`` is one ``native_dropout`` kernel that keeps a 1-byte boolean mask for
backward, while the CPU's is ``input * empty_like(input).bernoulli_().div_(1 - p)``,
which keeps the mask in the input's dtype (4 bytes per element in fp32). In-place
dropout takes the second form on CUDA as well and is left as it runs. ``F.rms_norm`` is
recorded as CUDA's fused kernels likewise (:mod:`roofline.tracing.norms`), an fp32
softmax of an fp16 tensor as CUDA's one kernel (:mod:`roofline.tracing.softmax`), and under
autocast every op follows CUDA autocast's cast policy (:mod:`roofline.tracing.autocast`).

Backward runs with the mode still active, so that ``torch.utils.checkpoint``'s
recomputation reroutes the same calls as the forward did (otherwise the recomputed
attention saves other tensors and checkpoint raises ``CheckpointError``).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Literal, get_args

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from roofline.tracing import autocast as _autocast
from roofline.tracing.norms import RMS_NORMS, fused_rms_norm
from roofline.tracing.softmax import SOFTMAXES, fp32_softmax

AttentionMode = Literal["fused", "eager", "as-run"]
MODES: tuple[str, ...] = get_args(AttentionMode)
_FUSED = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


class AttentionAs(TorchFunctionMode):
    """Record ``F.scaled_dot_product_attention`` as ``mode``.

    ``calls`` counts the rerouted calls; ``unfused`` the calls with dropout left on the
    CPU's unfused fp32 path (real tensors, or a call the fused op cannot take);
    ``dropouts``, ``rms_norms`` and ``softmaxes`` the calls recorded as CUDA's kernels;
    ``autocast_calls`` the op calls CUDA autocast's policy ran otherwise than the CPU's.
    """

    def __init__(self, mode: AttentionMode, fake: bool = True) -> None:
        if mode not in MODES:
            raise ValueError(f"attention={mode!r}: expected one of {', '.join(MODES)}")
        super().__init__()
        self.mode, self.fake = mode, fake
        self.calls = self.unfused = self.dropouts = self.rms_norms = self.softmaxes = 0
        self.autocast_calls = 0
        self._policies: list[tuple[contextlib.ExitStack, int]] = []

    def __enter__(self) -> AttentionAs:
        if self.fake:  # entered again by _backward: the policy is held once
            stack = contextlib.ExitStack()
            stack.enter_context(_autocast.cuda_autocast())
            self._policies.append((stack, _autocast.calls()))
        try:
            super().__enter__()
        except BaseException:
            if self.fake:
                self._policies.pop()[0].close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            if self.fake:
                stack, before = self._policies.pop()
                if not self._policies:
                    self.autocast_calls += _autocast.calls() - before
                stack.close()

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.backward and self.mode != "as-run" and _ENGINE is not None:
            return self._backward(*args, **kwargs)
        if self.fake and self.mode != "as-run" and (
                out := self._as_cuda(func, args, kwargs)) is not None:
            return out
        if func is F.scaled_dot_product_attention and self.mode != "as-run":
            out = (_fused(*args, **kwargs) if self.mode == "fused" and self.fake
                   else _eager(*args, **kwargs, fused_dropout=self.fake)
                   if self.mode == "eager" else None)
            if out is not None:
                self.calls += 1
                return out
            if _on_cpu_math_path(*args, **kwargs):
                self.unfused += 1
        return func(*args, **kwargs)


    def _as_cuda(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Dropout, RMS norm and an fp32 softmax of fp16 as CUDA's kernels, counted; None
        for any other call, or one CUDA runs as the CPU does."""
        for funcs, reroute, counter in _AS_CUDA:
            if func in funcs and (out := reroute(func, *args, **kwargs)) is not None:
                setattr(self, counter, getattr(self, counter) + 1)
                return out
        return None

    def _backward(self, tensor: torch.Tensor, gradient: torch.Tensor | None = None,
                  retain_graph: bool | None = None, create_graph: bool = False,
                  inputs: Any = None) -> None:
        # A mode is popped while its handler runs, and the autograd engine captures the
        # mode stack when backward starts: calling func here would run backward (and
        # checkpoint's recomputation) without this mode. Every public backward entry point
        # dispatches to the handler again, so the engine is entered directly, as
        # torch.autograd.backward does after its own checks.
        assert _ENGINE is not None and _MAKE_GRADS is not None
        if inputs is not None:
            inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(
                inputs.values() if isinstance(inputs, dict) else inputs)
        with self:
            grads = _MAKE_GRADS((tensor,), (gradient,), is_grads_batched=False)
            _ENGINE((tensor,), grads, create_graph if retain_graph is None else retain_graph,
                    create_graph, inputs or (), allow_unreachable=True, accumulate_grad=True)


def _private(module: str, name: str) -> Any:
    """A private torch function the backward reroute needs, or None (then backward runs
    without the mode, and checkpointed attention keeps the CPU's path in recomputation)."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


_ENGINE = _private("torch.autograd.graph", "_engine_run_backward")
_MAKE_GRADS = _private("torch.autograd", "_make_grads")


_DROPOUTS = (F.dropout, torch.dropout)


def _native_dropout(func: Any, input: torch.Tensor, p: float = 0.5, *args: Any,
                    **kwargs: Any) -> torch.Tensor | None:
    """CUDA's fused dropout for a call that CUDA would fuse (training, not in place, a
    floating-point tensor with elements), else None."""
    names = ("training", "inplace") if func is F.dropout else ("train",)
    flags = dict(zip(names, args, strict=False)) | kwargs
    train = flags.get("training", flags.get("train", True))
    if (not train or flags.get("inplace", False) or p == 0.0 or not input.is_floating_point()
            or input.numel() == 0):
        return None
    return torch.ops.aten.native_dropout(input, p, True)[0]


#: (the functions, their reroute, the counter it adds to); a reroute takes the function
#: and its arguments and returns CUDA's result, or None to leave the call as it is
_AS_CUDA: tuple[tuple[Any, Any, str], ...] = (
    (_DROPOUTS, _native_dropout, "dropouts"),
    (RMS_NORMS, lambda func, *a, **kw: fused_rms_norm(*a, **kw), "rms_norms"),
    (SOFTMAXES, fp32_softmax, "softmaxes"))


def _on_cpu_math_path(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                      *args: Any, **kwargs: Any) -> bool:
    return query.device.type == "cpu" and dropout_p > 0.0


def _fused(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
           is_causal: bool = False, scale: float | None = None,
           enable_gqa: bool = False) -> torch.Tensor | None:
    # only the CPU lacks a fused kernel for dropout (fake CUDA tensors dispatch as CUDA);
    # grouped-query calls and a mask together with is_causal are beyond the CPU op
    if (dropout_p == 0.0 or query.device.type != "cpu" or enable_gqa
            or (is_causal and attn_mask is not None)):
        return None
    q, k, v = query, key, value
    dtype = q.dtype
    if torch.is_autocast_enabled("cpu"):  # autocast's rule for this call: its low precision
        dtype = torch.get_autocast_dtype("cpu")
        q, k, v = (t.to(dtype) if t.dtype == torch.float32 else t for t in (q, k, v))
    if attn_mask is not None:  # as SDPA does: a boolean mask becomes 0 / -inf in q's dtype
        attn_mask = (torch.where(attn_mask, 0.0, float("-inf")).to(dtype)
                     if attn_mask.dtype == torch.bool else attn_mask.to(dtype))
    return _FUSED(q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]


def _eager(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
           is_causal: bool = False, scale: float | None = None,
           enable_gqa: bool = False, *, fused_dropout: bool = False) -> torch.Tensor:
    # numerically SDPA's result, except that a fully masked row gives NaN, not 0: this is
    # for counting, and the ops are those of attention written out
    if enable_gqa:
        groups = query.size(-3) // key.size(-3)
        key, value = key.repeat_interleave(groups, -3), value.repeat_interleave(groups, -3)
    scores = torch.matmul(query, key.transpose(-2, -1)) * (
        scale if scale is not None else 1 / math.sqrt(query.size(-1)))
    if is_causal:
        future = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool,
                            device=query.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    if attn_mask is not None:
        scores = (torch.where(attn_mask, scores, float("-inf")) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    dtype = torch.float32 if torch.is_autocast_enabled(query.device.type) else None
    # a fake trace: an fp16 one in one kernel, as on CUDA
    probs = fp32_softmax(F.softmax, scores, -1, dtype=dtype) if fused_dropout else None
    if probs is None:
        probs = F.softmax(scores, dim=-1, dtype=dtype)
    if dropout_p > 0.0:  # this runs inside the mode's handler, where the mode is off
        fused = _native_dropout(F.dropout, probs, dropout_p) if fused_dropout else None
        probs = F.dropout(probs, dropout_p) if fused is None else fused
    return torch.matmul(probs, value)
