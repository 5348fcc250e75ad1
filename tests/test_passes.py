"""The passes PyTorch's GPU softmax and norm kernels make (analysis/passes.py, issue 23
item 3): which rows are read more than once, by the rules of SoftMax.cu and
layer_norm_kernel.cu, and what that adds to an analysis on a GPU (nothing on a CPU)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import roofline
from roofline.analysis.passes import extra, pattern


def _ops(fn, *inputs: torch.Tensor, train: bool = False) -> dict[str, object]:  # type: ignore[no-untyped-def]
    t = roofline.trace(fn, *inputs, train=train, fake=True)
    return {op.name: op for op in t.ops}


@pytest.mark.parametrize(("n", "dtype", "reads"), [
    (1024, torch.float32, 1),  # persistent: <= 1024 elements and <= 4096 B
    (2048, torch.float16, 1),  # 4 KiB: still persistent
    (4096, torch.float32, 1),  # 16 KiB: cached in shared memory (48 KiB a block)
    (12000, torch.float32, 1),  # 48,000 B < 48 KiB - 32 warps x 4 B, a multiple of 16 B
    (13000, torch.float32, 3),  # 52,000 B: too long for shared memory
    (50257, torch.float32, 3),  # GPT-2's vocabulary: 50257 x 4 B, not a multiple of 16 B
    (12001, torch.float32, 3),  # fits, but 48,004 B is no whole number of 16-byte vectors
])
def test_softmax_forward_reads_long_rows_three_times(n: int, dtype: torch.dtype,
                                                     reads: int) -> None:
    x = torch.empty(64, n, dtype=dtype)
    op = _ops(lambda x: torch.softmax(x, -1), x)["aten._softmax.default"]
    size = x.element_size()
    assert extra(op) == ((reads - 1) * 64 * n * size, 0)  # type: ignore[arg-type]


def test_softmax_backward_multiplies_first_and_log_softmax_reads_twice() -> None:
    """softmax: tmp = grad * output (2 reads, 1 write: 3 x 4 B x 64 x 2048) in its own
    kernel, then tmp read twice on 2,048-element rows (not persistent: 8 KiB). log-softmax:
    the gradient read twice, no extra kernel."""
    x = torch.randn(64, 2048, requires_grad=True)
    g = torch.randn(64, 2048)
    ops = _ops(lambda x: (torch.softmax(x, -1) * g).sum() + (x.log_softmax(-1) * g).sum(),
               x, train=True)
    elements = 64 * 2048
    assert extra(ops["aten._softmax_backward_data.default"]) == (  # type: ignore[arg-type]
        3 * elements * 4 + elements * 4, 1)
    assert extra(ops["aten._log_softmax_backward_data.default"]) == (  # type: ignore[arg-type]
        elements * 4, 0)
    small = _ops(lambda x: (torch.softmax(x, -1) * g[:, :256]).sum(),
                 torch.randn(64, 256, requires_grad=True), train=True)
    assert extra(small["aten._softmax_backward_data.default"]) == (  # type: ignore[arg-type]
        3 * 64 * 256 * 4, 1)  # persistent: tmp read once


def test_layer_norm_weight_gradients_reread_the_input_and_gradient() -> None:
    x = torch.randn(32, 768, requires_grad=True)
    g = torch.randn(32, 768)
    with_weight = _ops(lambda x: (nn.LayerNorm(768)(x) * g).sum(), x, train=True)
    without = _ops(lambda x: (nn.LayerNorm(768, elementwise_affine=False)(x) * g).sum(), x,
                   train=True)
    name = "aten.native_layer_norm_backward.default"
    assert extra(with_weight[name]) == (2 * 32 * 768 * 4, 1)  # type: ignore[arg-type]
    assert extra(without[name]) == (0, 0)  # type: ignore[arg-type]
    assert extra(with_weight["aten.native_layer_norm.default"]) == (0, 0)  # type: ignore[arg-type]
    # an input that needs no gradient: only the weight and bias gradients' kernel runs, and
    # the op's own bytes are its reads
    leaf = _ops(lambda x: (nn.LayerNorm(768)(x) * g).sum(), torch.randn(32, 768), train=True)
    assert leaf[name].output_shapes == ((768,), (768,))  # type: ignore[attr-defined]
    assert extra(leaf[name]) == (0, 0)  # type: ignore[arg-type]



def test_rms_norm_runs_layer_norms_kernels() -> None:
    """``_fused_rms_norm`` is layer norm's forward kernel (rms_norm=true), so it streams at
    the layer_norm figure; its backward's weight gradient is layer norm's column
    reduction: grad_out and input read again (2 x 32 x 768 x 4 B), one more kernel."""
    x = torch.randn(32, 768, requires_grad=True)
    g = torch.randn(32, 768)
    with_weight = _ops(lambda x: (nn.RMSNorm(768)(x) * g).sum(), x, train=True)
    without = _ops(lambda x: (nn.RMSNorm(768, elementwise_affine=False)(x) * g).sum(), x,
                   train=True)
    forward, backward = "aten._fused_rms_norm.default", "aten._fused_rms_norm_backward.default"
    assert extra(with_weight[backward]) == (2 * 32 * 768 * 4, 1)  # type: ignore[arg-type]
    assert extra(without[backward]) == (0, 0)  # type: ignore[arg-type]
    assert extra(with_weight[forward]) == (0, 0)  # type: ignore[arg-type]
    assert pattern(with_weight[forward]) == "layer_norm"  # type: ignore[arg-type]
    assert pattern(with_weight[backward]) is None  # type: ignore[arg-type]

def test_a_gpu_analysis_adds_the_passes_and_a_cpu_one_does_not() -> None:
    """One 8192 x 50257 fp32 log-softmax: 2 x 8192 x 50257 x 4 B more on the A100 (its
    stream bandwidth), none on a CPU."""
    x = torch.empty(8192, 50257)
    t = roofline.trace(lambda x: x.log_softmax(-1), x, fake=True)
    on, off = (roofline.analyze(t, "a100", kernel_passes=k).op_seconds[0] for k in (True, False))
    more = 2 * 8192 * 50257 * 4
    bandwidth = roofline.analyze(t, "a100").bytes_per_s[0]
    assert on - off == pytest.approx(more / bandwidth)
    cpu = [roofline.analyze(t, "EPYC 7763", kernel_passes=k).op_seconds[0] for k in (True, False)]
    assert cpu[0] == cpu[1]
    assert any("passes" in n for n in roofline.analyze(t, "a100").assumptions)


def test_layer_norm_forward_streams_at_its_measured_bandwidth() -> None:
    """A 4096 x 2560 fp16 layer norm on the A100 SXM 80GB: its compulsory bytes (the rows
    read and written, 2 B each; the weight and bias; mean and rstd, here in fp16 as the
    fake CPU kernel returns them) at vidur's measured 964.2 GB/s, not at the 1,732 GB/s of
    the copy stream; with ``kernel_passes=False``, or on a CPU, at the copy pattern. Its
    backward is not measured and keeps the pattern of its bytes."""
    x = torch.empty(4096, 2560, dtype=torch.float16)
    norm = nn.LayerNorm(2560, dtype=torch.float16)
    t = roofline.trace(norm, x, fake=True)
    (op,) = t.ops
    assert op.bytes == 2 * 4096 * 2560 * 2 + 2 * 2560 * 2 + 2 * 4096 * 2
    on, off = (roofline.analyze(t, "A100 SXM 80GB", overhead=False, kernel_passes=k)
               for k in (True, False))
    assert on.device_seconds == pytest.approx(op.bytes / 964.2e9)
    assert off.device_seconds == pytest.approx(op.bytes / 1732e9)
    assert any("layer_norm bandwidth 964 GB/s" in n for n in on.assumptions)
    cpu = [roofline.analyze(t, "EPYC 7763", kernel_passes=k).op_seconds[0] for k in (True, False)]
    assert cpu[0] == cpu[1]
    train = roofline.trace(lambda x: norm(x).sum(), x.requires_grad_(), train=True, fake=True)
    a = roofline.analyze(train, "A100 SXM 80GB")
    backward = [i for i, o in enumerate(train.ops)
                if o.name == "aten.native_layer_norm_backward.default"]
    assert backward and all(a.bytes_per_s[i] != 964.2e9 for i in backward)
