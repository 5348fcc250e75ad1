"""The optimizer steps of NVIDIA's BERT SQuAD fine-tuning, as PyTorch ops a fake trace records.

NVIDIA's DeepLearningExamples ``PyTorch/LanguageModeling/BERT/run_squad.py`` and
``optimization.py`` (unchanged in what they run here from NVIDIA/DeepLearningExamples
@f8b3a63f8100, 2020-07, to @128ecbe4f8ee, 2022-08, which Lambda's benchmark branch,
LambdaLabsML/DeepLearningExamples@c1781a370c8f ``lambda/benchmark``, runs with one GELU
line changed) train SQuAD so:

* fp16 (``--fp16``): apex ``amp.initialize(model, FusedAdam(...), opt_level="O2",
  keep_batchnorm_fp32=False)``: every parameter of the model is fp16 (layer norms too), so
  no op casts; the optimizer keeps fp32 master weights, into which apex unscales the fp16
  gradients, and copies them back after its step (:class:`ApexO2FusedAdam`);
* fp32: ``BertAdam``, a Python loop over the parameters that clips each gradient on its own
  and updates it with a dozen elementwise kernels (:class:`BertAdam`);
* both, before the step: ``GradientClipper``, one ``multi_tensor_l2norm`` over every
  gradient, then a rescale when the norm exceeds 1.0, which depends on values a fake trace
  does not have and is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.nn.utils import clip_grad_norm_


def _global_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """``GradientClipper``'s ``multi_tensor_l2norm``: every gradient read once."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))


class ApexO2FusedAdam(torch.optim.Optimizer):
    """apex amp O2 with ``FusedAdam(bias_correction=False)`` (AdamW), on fp16 parameters.

    The state holds each parameter's fp32 master copy, its fp32 gradient and moments. A
    step: the fp16 gradients unscaled into the fp32 ones (apex's ``multi_tensor_scale``:
    2 bytes read, 4 written per parameter), their global norm, one fused AdamW kernel per
    group over the masters, and the masters copied back into the fp16 parameters.
    """

    def __init__(self, params: Iterable[Any], lr: float = 5e-5, weight_decay: float = 0.01,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "betas": betas,
                                  "eps": eps})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> None:  # type: ignore[override]
        groups = [[p for p in g["params"] if p.grad is not None] for g in self.param_groups]
        every = [p for ps in groups for p in ps]
        grads = [self._state(p)["grad"] for p in every]
        torch._foreach_copy_(grads, [p.grad for p in every])  # type: ignore[misc]
        _global_norm(grads)
        for group, ps in zip(self.param_groups, groups, strict=True):
            if not ps:
                continue
            state = [self.state[p] for p in ps]
            beta1, beta2 = group["betas"]
            torch._fused_adamw_(
                [s["master"] for s in state], [s["grad"] for s in state],
                [s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state], [],
                [s["step"] for s in state], lr=group["lr"], beta1=beta1, beta2=beta2,
                weight_decay=group["weight_decay"], eps=group["eps"], amsgrad=False,
                maximize=False)
        torch._foreach_copy_(every, [self.state[p]["master"] for p in every])  # type: ignore[misc]

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """``p``'s state, made on the first step: its fp32 master copy, gradient and moments."""
        if not self.state[p]:
            master = p.detach().float()
            self.state[p] = {"master": master, "grad": torch.zeros_like(master),
                             "exp_avg": torch.zeros_like(master),
                             "exp_avg_sq": torch.zeros_like(master), "step": torch.tensor(0.0)}
        return self.state[p]


class BertAdam(torch.optim.Optimizer):
    """``optimization.BertAdam`` as the source's step runs it, parameter by parameter:
    ``clip_grad_norm_(p, max_grad_norm)``, the two moment updates, ``update = m / (sqrt(v)
    + e)``, the weight decay, the learning rate and the in-place update."""

    def __init__(self, params: Iterable[Any], lr: float = 5e-5, weight_decay: float = 0.01,
                 b1: float = 0.9, b2: float = 0.999, e: float = 1e-6,
                 max_grad_norm: float = 1.0) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "b1": b1, "b2": b2,
                                  "e": e, "max_grad_norm": max_grad_norm})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> None:  # type: ignore[override]
        _global_norm([p.grad for g in self.param_groups for p in g["params"]
                      if p.grad is not None])
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["next_m"] = torch.zeros_like(p)
                    state["next_v"] = torch.zeros_like(p)
                if group["max_grad_norm"] > 0:
                    clip_grad_norm_(p, group["max_grad_norm"], error_if_nonfinite=False)
                grad, m, v = p.grad, state["next_m"], state["next_v"]
                m.mul_(group["b1"]).add_(grad, alpha=1 - group["b1"])
                v.mul_(group["b2"]).addcmul_(grad, grad, value=1 - group["b2"])
                update = m / (v.sqrt() + group["e"])
                if group["weight_decay"] > 0.0:
                    update += group["weight_decay"] * p
                p.add_(-(group["lr"] * update))


def squad_groups(model: torch.nn.Module) -> list[dict[str, Any]]:
    """run_squad.py's two groups: weight decay 0.01, none on biases and layer norms."""
    norms = {id(p) for m in model.modules() if isinstance(m, torch.nn.LayerNorm)
             for p in m.parameters()}
    plain = [p for n, p in model.named_parameters() if n.endswith("bias") or id(p) in norms]
    decay = [p for p in model.parameters() if all(p is not q for q in plain)]
    return [{"params": decay, "weight_decay": 0.01}, {"params": plain, "weight_decay": 0.0}]
