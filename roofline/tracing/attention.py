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
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

AttentionMode = Literal["fused", "eager", "as-run"]
MODES: tuple[str, ...] = get_args(AttentionMode)
_FUSED = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


class AttentionAs(TorchFunctionMode):
    """Record ``F.scaled_dot_product_attention`` as ``mode``.

    ``calls`` counts the rerouted calls; ``unfused`` the calls with dropout left on the
    CPU's unfused fp32 path (real tensors, or a call the fused op cannot take).
    """

    def __init__(self, mode: AttentionMode, fake: bool = True) -> None:
        if mode not in MODES:
            raise ValueError(f"attention={mode!r}: expected one of {', '.join(MODES)}")
        super().__init__()
        self.mode, self.fake = mode, fake
        self.calls = self.unfused = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and self.mode != "as-run":
            out = (_fused(*args, **kwargs) if self.mode == "fused" and self.fake
                   else _eager(*args, **kwargs) if self.mode == "eager" else None)
            if out is not None:
                self.calls += 1
                return out
            if _on_cpu_math_path(*args, **kwargs):
                self.unfused += 1
        return func(*args, **kwargs)


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
           enable_gqa: bool = False) -> torch.Tensor:
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
    amp = torch.is_autocast_enabled(query.device.type)
    probs = F.softmax(scores, dim=-1, dtype=torch.float32 if amp else None)
    if dropout_p > 0.0:
        probs = F.dropout(probs, dropout_p)
    return torch.matmul(probs, value)
