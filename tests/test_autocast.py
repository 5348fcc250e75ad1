"""CUDA autocast's cast policy in fake traces (tracing/autocast.py).

Expected dtypes and bytes follow autocast_mode.h's lists (pytorch@d70fe7f33910): ``pow`` is
in ``AT_FORALL_FP32`` (its bf16 input cast to fp32 first), ``softmax`` in
``AT_FORALL_FP32_SET_OPT_DTYPE``, ``addcmul`` in ``AT_FORALL_PROMOTE``; matmuls are in the
low-precision list on both devices. Bytes are elements times element size.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import no_global_state
from torch import nn
from torch.utils.checkpoint import checkpoint

import roofline
from roofline.tracing import autocast

ROWS, D = 16, 32
AMP = {"device_type": "cpu", "dtype": torch.bfloat16}


class _TanhGelu(nn.Module):
    """Hugging Face's GPT-2 GELU (``NewGELUActivation``) after a linear layer."""

    def __init__(self, checkpointed: bool = False) -> None:
        super().__init__()
        self.fc, self.checkpointed = nn.Linear(D, D), checkpointed

    def gelu(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return checkpoint(self.gelu, h, use_reentrant=False) if self.checkpointed \
            else self.gelu(h)


def _trace(model: nn.Module, **kw: object) -> roofline.Trace:
    with torch.autocast(**AMP):  # type: ignore[arg-type]
        return roofline.trace(model, torch.randn(ROWS, D), train=True,
                              loss_fn=lambda o: o.float().sum(), **kw)  # type: ignore[arg-type]


def test_pow_runs_in_fp32_and_what_follows_it_is_promoted() -> None:
    t = _trace(_TanhGelu(), fake=True)
    forward = [op for op in t.ops if op.phase == "forward"]
    pow_ = next(op for op in forward if op.name == "aten.pow.Tensor_Scalar")
    n = ROWS * D
    assert pow_.dtype == "float32" and pow_.bytes == 2 * 4 * n  # fp32 in, fp32 out
    # the linear layer's bf16 output is cast once, for pow
    casts = [op for op in forward if op.name == "aten._to_copy.default"
             and op.dtype == "float32" and op.bytes == (2 + 4) * n]
    assert len(casts) == 1
    assert next(op for op in forward if op.name == "aten.tanh.default").dtype == "float32"
    assert t.info.cuda_autocast_calls == 1
    assert any(a.startswith("1 op calls under autocast were traced with CUDA autocast's")
               for a in roofline.analyze(t, "a100").assumptions)
    assert no_global_state()


def test_backward_and_cpu_traces_keep_the_cpus_dtypes() -> None:
    """Backward runs outside autocast in a training loop; a real or ``as-run`` trace
    records what the CPU ran (pow in bf16)."""
    t = _trace(_TanhGelu(), fake=True)
    backward = [op for op in t.ops if op.phase == "backward" and op.name.startswith(
        "aten.sum.dim_IntList")]
    assert backward and all(op.dtype == "bfloat16" for op in backward)  # the bias gradient
    for cpu in (_trace(_TanhGelu()), _trace(_TanhGelu(), fake=True, attention="as-run")):
        assert next(op for op in cpu.ops if op.name == "aten.pow.Tensor_Scalar").dtype \
            == "bfloat16"
        assert cpu.info.cuda_autocast_calls == 0


def test_checkpoint_recomputes_the_forward_under_the_same_policy() -> None:
    t = _trace(_TanhGelu(checkpointed=True), fake=True)
    # the forward's pow and checkpoint's recomputation of it (backward's own pow, in
    # pow_backward, reads the saved fp32 input and is not a forward op)
    pows = [(op.phase, op.recompute, op.dtype) for op in t.ops
            if op.name == "aten.pow.Tensor_Scalar" and (op.phase == "forward" or op.recompute)]
    assert pows == [("forward", False, "float32"), ("backward", True, "float32")]
    assert t.info.cuda_autocast_calls == 2  # the forward and its recomputation


class _Ops(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.norm = nn.Linear(D, D), nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)  # bf16
        return torch.addcmul(F.softmax(h, dim=-1), self.norm(h), h)


def test_softmax_layer_norm_and_promote() -> None:
    t = _trace(_Ops(), fake=True)
    forward = {op.name: op for op in t.ops if op.phase == "forward"}
    n = ROWS * D
    assert forward["aten._softmax.default"].dtype == "float32"
    assert forward["aten._softmax.default"].bytes == 2 * 4 * n
    assert forward["aten.native_layer_norm.default"].dtype == "float32"
    # addcmul of two fp32 tensors and the bf16 h: promote casts h to fp32 first, so the
    # op reads three fp32 tensors
    assert forward["aten.addcmul.default"].dtype == "float32"
    assert forward["aten.addcmul.default"].bytes == 4 * 4 * n
    assert t.info.cuda_autocast_calls == 3  # softmax's dtype, layer_norm's input, addcmul


def test_the_policy_is_gone_after_the_trace_even_when_it_fails() -> None:
    class Broken(_TanhGelu):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            super().forward(x)
            raise RuntimeError("the model's own error")

    with pytest.raises(RuntimeError, match="the model's own error"):
        _trace(Broken(), fake=True)
    assert not autocast.active()
    for name in autocast.policies():
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}",
                                                                  "AutocastCPU")
    with torch.autocast(**AMP):  # type: ignore[arg-type]
        assert torch.pow(torch.ones(2, dtype=torch.bfloat16), 3.0).dtype == torch.bfloat16
    assert no_global_state()


def test_every_op_cuda_autocast_lists_is_covered_or_named() -> None:
    """The running torch's own AutocastCUDA registrations: each one the CPU lacks has a
    policy here, or is one of the low-precision ops and norm overloads the module says it
    leaves as the CPU runs them."""
    ops = [n.removeprefix("aten::") for n in torch._C._dispatch_get_all_op_names()
           if n.startswith("aten::")]
    cuda_only = {n for n in ops
                 if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{n}", "AutocastCUDA")
                 and not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{n}",
                                                                        "AutocastCPU")}
    # AT_FORALL_LOWER_PRECISION_FP and the cudnn convolutions, and fp32_append_dtype's norm
    left = {"_convolution", "convolution", "cudnn_convolution", "cudnn_convolution_transpose",
            "addmv", "addr", "mv", "einsum", "chain_matmul", "linalg_multi_dot", "lstm_cell",
            "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "_thnn_fused_lstm_cell",
            "_thnn_fused_gru_cell", "_scaled_dot_product_flash_attention", "norm.Scalar",
            "norm.ScalarOpt_dim"}
    assert cuda_only - set(autocast.policies()) <= left
    assert set(autocast.policies()) <= cuda_only


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_an_fp16_softmax_reads_its_input_in_one_kernel_a_bf16_one_is_cast(
        dtype: torch.dtype) -> None:
    """CUDA's softmax with an fp32 dtype takes half_to_float for fp16 only (SoftMax.cpp)."""
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(D, D)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.softmax(self.fc(x), dim=-1)

    with torch.autocast("cpu", dtype=dtype):
        t = roofline.trace(Net(), torch.randn(ROWS, D), fake=True)
    n = ROWS * D
    softmax = next(op for op in t.ops if op.name == "aten._softmax.default")
    casts = [op for op in t.ops if op.name == "aten._to_copy.default" and op.module == "Net"]
    if dtype == torch.float16:
        assert softmax.bytes_read == 2 * n and softmax.bytes_written == 4 * n and not casts
    else:
        assert softmax.bytes == 8 * n and len(casts) == 1
    assert t.info.cuda_autocast_calls == 1



class _Classifier(nn.Module):
    """Logits from a linear layer into ``F.cross_entropy``, the class count V."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(D, classes)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.fc(x), target)


def test_cross_entropy_takes_its_log_softmax_in_the_logits_dtype() -> None:
    """CUDA runs cross_entropy_loss as its composite: log_softmax(logits, dtype=their own)
    keeps fp16 (set_opt_dtype leaves a given dtype), and nll_loss, fp32 on both devices,
    casts the log-probabilities. CPU autocast casts the logits to fp32 first."""
    classes = 100
    model, x, target = _Classifier(classes), torch.randn(ROWS, D), torch.zeros(ROWS).long()
    with torch.autocast("cpu", dtype=torch.float16):
        cuda = roofline.trace(model, x, target, train=True, fake=True)
        cpu = roofline.trace(model, x, target, train=True, fake=True, attention="as-run")
    n = ROWS * classes
    lsm = next(op for op in cuda.ops if op.name == "aten._log_softmax.default")
    assert lsm.dtype == "float16" and (lsm.bytes_read, lsm.bytes_written) == (2 * n, 2 * n)
    back = next(op for op in cuda.ops if op.name == "aten._log_softmax_backward_data.default")
    assert back.dtype == "float16" and back.bytes == 3 * 2 * n  # gradient, output; gradient
    # nll_loss's cast of the log-probabilities, and its gradient's way back
    cast = [op.phase for op in cuda.ops if op.name == "aten._to_copy.default"
            and op.bytes == (2 + 4) * n]
    assert cast == ["forward", "backward"]
    assert cuda.info.cuda_autocast_calls == 1
    cpu_lsm = next(op for op in cpu.ops if op.name == "aten._log_softmax.default")
    assert cpu_lsm.dtype == "float32" and cpu_lsm.bytes == 2 * 4 * n
    assert cpu.total_bytes > cuda.total_bytes
    assert no_global_state()


def test_cat_reads_mixed_dtypes_as_they_are() -> None:
    class Cat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(D, D)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.fc(x), x], dim=-1)  # bf16 and fp32

    with torch.autocast(**AMP):  # type: ignore[arg-type]
        cuda = roofline.trace(Cat(), torch.randn(ROWS, D), fake=True)
        cpu = roofline.trace(Cat(), torch.randn(ROWS, D), fake=True, attention="as-run")
    n = ROWS * D
    cat = next(op for op in cuda.ops if op.name == "aten.cat.default")
    assert (cat.bytes_read, cat.bytes_written) == ((2 + 4) * n, 4 * 2 * n)
    def casts(t: roofline.Trace) -> list[roofline.OpRecord]:
        return [op for op in t.ops if op.module == "Cat" and op.name == "aten._to_copy.default"]

    assert not casts(cuda) and casts(cpu)
    assert cuda.info.cuda_autocast_calls == 1
