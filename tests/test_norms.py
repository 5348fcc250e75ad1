"""RMS norm as CUDA runs it (tracing/norms.py): a fake trace records ``F.rms_norm`` as
``_fused_rms_norm`` and ``_fused_rms_norm_backward``, not the CPU's composite.

Expected bytes are each tensor's elements times its element size: the input, the weight
and the output in the input's dtype, one fp32 ``rstd`` per row (CUDA's accumulate type).
FLOPs are the formula registry's per-element counts: 4 forward with a weight, 7 for the
input gradient and 2 for the weight gradient.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import no_global_state
from torch import nn
from torch.utils.checkpoint import checkpoint

import roofline

ROWS, D = 24, 64
FUSED, BACKWARD = "aten._fused_rms_norm.default", "aten._fused_rms_norm_backward.default"


class _Block(nn.Module):
    """An RMS norm between two linear layers: its input needs a gradient, and the gradient
    of its output is a whole tensor (that of a sum is one expanded scalar)."""

    def __init__(self, norm: nn.Module, checkpointed: bool = False) -> None:
        super().__init__()
        self.proj, self.norm, self.checkpointed = nn.Linear(D, D), norm, checkpointed
        self.out = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        return self.out(checkpoint(self.norm, h, use_reentrant=False) if self.checkpointed
                        else self.norm(h))


class _Functional(nn.Module):
    def __init__(self, call: str) -> None:
        super().__init__()
        self.proj, self.weight, self.call = nn.Linear(D, D), nn.Parameter(torch.ones(D)), call
        self.out = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if self.call == "torch":
            return self.out(torch.rms_norm(h, [D], self.weight, 1e-6))
        return self.out(F.rms_norm(h, (D,), weight=self.weight, eps=1e-6))


def _norm_ops(t: roofline.Trace) -> list[roofline.OpRecord]:
    return [op for op in t.ops if op.module.endswith("norm") or
            (op.module == "_Functional" and op.category == "normalization")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("model", ["module", "F.rms_norm", "torch.rms_norm"])
def test_rms_norm_is_traced_as_cudas_two_fused_kernels(model: str,
                                                       dtype: torch.dtype) -> None:
    net = (_Block(nn.RMSNorm(D)) if model == "module"
           else _Functional("torch" if model == "torch.rms_norm" else "F")).to(dtype)
    x = torch.randn(ROWS, D, dtype=dtype)
    t = roofline.trace(net, x, train=True, loss_fn=lambda o: o.float().sum(), fake=True)
    ops = [op for op in t.ops if op.name in (FUSED, BACKWARD)]
    assert [op.name for op in ops] == [FUSED, BACKWARD]
    assert not [op for op in t.ops if op.name in ("aten.rsqrt.default", "aten.pow.Tensor_Scalar")]
    size, n = dtype.itemsize, ROWS * D
    forward, backward = ops
    assert forward.flops == 4 * n and backward.flops == (7 + 2) * n
    # reads the input and the weight; writes the output and one fp32 rstd per row
    assert forward.bytes_read == (n + D) * size
    assert forward.bytes_written == n * size + ROWS * 4
    # reads the output gradient, the input, rstd and the weight; writes both gradients
    assert backward.bytes_read == (2 * n + D) * size + ROWS * 4
    assert backward.bytes_written == (n + D) * size
    assert forward.phase == "forward" and backward.phase == "backward"
    assert t.info.fused_rms_norm_calls == 1
    assert no_global_state()


def test_the_analysis_says_so_and_an_inference_trace_has_the_forward_only() -> None:
    net, x = _Block(nn.RMSNorm(D)), torch.randn(ROWS, D)
    t = roofline.trace(net, x, fake=True)
    assert [op.name for op in t.ops if "rms" in op.name] == [FUSED]
    notes = roofline.analyze(t, "A100 SXM 80GB").assumptions
    assert any(n.startswith("RMS norm calls (1) were traced as CUDA runs them") for n in notes)


def test_real_and_as_run_traces_keep_the_cpus_composite() -> None:
    """The fused backward has no CPU kernel, and ``attention='as-run'`` is a CPU trace."""
    net, x = _Block(nn.RMSNorm(D)), torch.randn(ROWS, D)
    for t in (roofline.trace(net, x, train=True, loss_fn=lambda o: o.sum()),
              roofline.trace(net, x, train=True, loss_fn=lambda o: o.sum(), fake=True,
                             attention="as-run")):
        names = [op.name for op in _norm_ops(t)]
        assert FUSED not in names and BACKWARD not in names
        assert "aten.rsqrt.default" in names
        assert t.info.fused_rms_norm_calls == 0
        assert not any("RMS norm" in n for n in roofline.analyze(t, "a100").assumptions)
    assert no_global_state()


def test_a_weight_of_another_dtype_keeps_pytorchs_composite() -> None:
    """rms_norm_symint takes its composite (and warns) when the weight's dtype differs."""
    net = _Block(nn.RMSNorm(D).to(torch.bfloat16))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Mismatch dtype")
        t = roofline.trace(net, torch.randn(ROWS, D), train=True, loss_fn=lambda o: o.sum(),
                           fake=True)
    assert not [op for op in t.ops if op.name in (FUSED, BACKWARD)]
    assert t.info.fused_rms_norm_calls == 0


def test_no_weight_and_a_checkpointed_norm() -> None:
    net = _Block(nn.RMSNorm(D, elementwise_affine=False))
    t = roofline.trace(net, torch.randn(ROWS, D), train=True, loss_fn=lambda o: o.sum(),
                       fake=True)
    forward, backward = (op for op in t.ops if op.name in (FUSED, BACKWARD))
    n = ROWS * D
    assert forward.flops == 3 * n and backward.flops == 7 * n  # no weight, no weight gradient
    assert backward.bytes_written == n * 4
    # checkpoint recomputes the forward in backward: the fused op runs twice
    t = roofline.trace(_Block(nn.RMSNorm(D), checkpointed=True), torch.randn(ROWS, D),
                       train=True, loss_fn=lambda o: o.sum(), fake=True)
    assert [op.name for op in t.ops if op.name in (FUSED, BACKWARD)] == [FUSED, FUSED, BACKWARD]
    assert no_global_state()


def test_fewer_bytes_than_the_composite() -> None:
    """The composite's passes over the activation are gone: the two kernels move exactly
    the bytes counted above, the composite many times more."""
    net, x = _Block(nn.RMSNorm(D)), torch.randn(ROWS, D)
    fused = roofline.trace(net, x, train=True, loss_fn=lambda o: o.sum(), fake=True)
    composite = roofline.trace(net, x, train=True, loss_fn=lambda o: o.sum(), fake=True,
                               attention="as-run")
    n = ROWS * D
    assert sum(op.bytes for op in _norm_ops(fused)) == 4 * (
        (n + D) + n + ROWS + (2 * n + D) + ROWS + (n + D))
    assert sum(op.bytes for op in _norm_ops(composite)) > 2 * sum(
        op.bytes for op in _norm_ops(fused))


def test_a_bad_call_is_left_to_pytorchs_own_error() -> None:
    net = _Functional("F")
    net.weight = nn.Parameter(torch.ones(D + 1))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        roofline.trace(net, torch.randn(ROWS, D), fake=True)
    assert no_global_state()


def test_under_inference_mode_a_real_trace_records_what_the_cpu_ran() -> None:
    """There the composite reaches the capture whole; only the reroute's own call of the
    fused op is recorded as one op."""
    net, x = _Block(nn.RMSNorm(D)), torch.randn(ROWS, D)
    with torch.inference_mode():
        real = roofline.trace(net, x)
        fake = roofline.trace(net, x, fake=True)
    assert FUSED not in [op.name for op in real.ops]
    assert "aten.rsqrt.default" in [op.name for op in real.ops]
    assert [op.name for op in _norm_ops(fake)] == [FUSED]
    assert no_global_state()


def test_under_autocast_it_is_fused_in_fp32_as_cuda_autocast_runs_rms_norm() -> None:
    """The linear layer's output is bf16 and the weight fp32: CUDA autocast casts the input
    to fp32 (tracing/autocast.py), so the dtypes match and CUDA fuses; the CPU's autocast
    leaves the input in bf16, and PyTorch takes the composite."""
    net, x = _Block(nn.RMSNorm(D)), torch.randn(ROWS, D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(net, x, train=True, loss_fn=lambda o: o.float().sum(), fake=True)
    forward = next(op for op in t.ops if op.name == FUSED)
    n = ROWS * D
    assert forward.dtype == "float32" and forward.bytes_read == (n + D) * 4
    assert t.info.fused_rms_norm_calls == 1 and t.info.cuda_autocast_calls == 1
    assert no_global_state()
