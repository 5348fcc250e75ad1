"""Softmax over an fp16 input with an fp32 result, as CUDA runs it, traced on CPU tensors.

``softmax`` and ``log_softmax`` given ``dtype=torch.float32`` run, for an fp16 CUDA tensor,
one kernel that reads fp16 and writes fp32 (``_softmax(input, dim, half_to_float=True)``);
any other input, and every CPU tensor, is first cast to fp32 by a kernel of its own
(``softmax`` and ``log_softmax`` in ``aten/src/ATen/native/SoftMax.cpp``,
pytorch/pytorch@52644650f0a9). Attention written out under AMP and losses call it so. A
fake trace stands for the step on the device being predicted, so there such a call is
recorded as the one kernel; bf16 inputs are left as they run, cast first, as on CUDA.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

_aten = torch.ops.aten
#: the calls rerouted, and whether each is the log form
SOFTMAXES = {F.softmax: False, torch.softmax: False, torch.Tensor.softmax: False,
             F.log_softmax: True, torch.log_softmax: True, torch.Tensor.log_softmax: True}


def half_to_float(input: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    """CUDA's one-kernel fp32 softmax (or log-softmax) of an fp16 tensor."""
    op = _aten._log_softmax.default if log else _aten._softmax.default
    out: torch.Tensor = op(input, dim, True)
    return out


def fp32_softmax(func: Any, *args: Any, **kwargs: Any) -> torch.Tensor | None:
    """The call as CUDA runs it when it is an fp32 softmax of an fp16 tensor over one
    dimension, else None (then it runs as it is)."""
    input = args[0] if args else kwargs.get("input")
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    if (kwargs.get("dtype") is not torch.float32 or not isinstance(input, torch.Tensor)
            or input.dtype != torch.float16 or not isinstance(dim, int)):
        return None
    return half_to_float(input, dim, SOFTMAXES[func])
