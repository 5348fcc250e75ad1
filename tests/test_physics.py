"""Kernel physics of the time model (issue 15): additive overhead, Little's law, the layout
transposes cuDNN adds, clock and core what-ifs. Expected values are derived by hand from
the datasheet figures and the formulas in each docstring."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import roofline
from roofline.tracing import OpRecord, Trace

H100_BF16, H100_BANDWIDTH = 989.4e12, 3.35e12  # H100 SXM datasheet (registry sources)


def _op(category: str, flops: int, nbytes: int, dtype: str = "bfloat16",
        kernels: int = 1) -> OpRecord:
    return OpRecord(name=f"aten.{category}.default", category=category, phase="forward",
                    module="", dtype=dtype, flops=flops, bytes_read=nbytes // 2,
                    bytes_written=nbytes - nbytes // 2, kernels=kernels,
                    output_shapes=((8192, 8192),))


DATASHEET = {"peaks": "datasheet"}


def test_overhead_adds_to_the_slower_of_compute_and_memory() -> None:
    """T = a + max(flops / P, bytes / B): a 10 MB copy on an H100 takes its transfer
    (10e6 / 3.35e12 = 3.0 us) plus the launch constant, not the max of the two."""
    h100 = roofline.get_device("h100")
    a_s = h100.launch_overhead_seconds
    copy = _op("pointwise", 0, 10_000_000)
    big = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    add = roofline.analyze(Trace([copy, big]), h100, **DATASHEET)
    classic = roofline.analyze(Trace([copy, big]), h100, **DATASHEET, overhead_model="max")
    transfer = 10_000_000 / H100_BANDWIDTH
    assert add.op_seconds[0] == pytest.approx(a_s + transfer)
    assert classic.op_seconds[0] == pytest.approx(max(a_s, transfer))
    assert add.op_seconds[1] == pytest.approx(a_s + big.flops / H100_BF16)
    # a kernel whose transfer is comparable to its launch: additive is up to 2x slower
    assert 1 < add.op_seconds[0] / classic.op_seconds[0] <= 2
    # what-ifs scale the roofs and keep the form: infinite bandwidth leaves the launch
    assert add.seconds_with(memory=float("inf")) == pytest.approx(
        2 * a_s + big.flops / H100_BF16)


def test_overhead_bound_op_is_the_one_whose_overhead_exceeds_both_roofs() -> None:
    tiny = _op("pointwise", 10, 30)
    a = roofline.analyze(Trace([tiny]), "h100", **DATASHEET)
    assert a.bound == ["overhead"]
    assert a.by_bound()["overhead"]["fraction"] == pytest.approx(1.0)


def test_options_name_their_choices() -> None:
    with pytest.raises(ValueError, match="peaks='measured'"):
        roofline.analyze(Trace([]), "h100", peaks="measured")
    with pytest.raises(ValueError, match="overhead_model"):
        roofline.analyze(Trace([]), "h100", overhead_model="sum")
    with pytest.raises(ValueError, match="layout_transposes"):
        roofline.analyze(Trace([]), "h100", layout_transposes="yes")


# --- cuDNN's layout transposes ----------------------------------------------------------

N, C, K, HW = 8, 16, 32, 14  # batch, in and out channels, height = width


class _Conv(nn.Module):
    def __init__(self, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(C, K, 3, padding=1, bias=False, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def _trace(model: nn.Module, x: torch.Tensor, dtype: torch.dtype | None,
           train: bool = False) -> Trace:
    amp = torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None)
    loss = {"loss_fn": lambda o: o.float().sum()} if train else {}
    with amp:
        return roofline.trace(model, x, train=train, fake=True, **loss)


def test_channels_first_16bit_convolution_records_its_transposes() -> None:
    """Forward: cuDNN transposes the input (N C H W), the weight (K C 3 3) and the output
    (N K H W), each read and written once: 2 bytes per element x 2 (read + write)."""
    x = torch.randn(N, C, HW, HW)
    t = _trace(_Conv(), x, torch.float16)
    layout = [op for op in t.ops if op.category == "layout"]
    assert len(layout) == 1 and layout[0].kernels == 3 and layout[0].flops == 0
    elements = N * C * HW * HW + K * C * 9 + N * K * HW * HW
    assert layout[0].bytes_read == layout[0].bytes_written == 2 * elements
    # its time is the bytes at the bandwidth on an NVIDIA GPU, nothing elsewhere
    i = t.ops.index(layout[0])
    a = roofline.analyze(t, "h100", **DATASHEET)
    assert a.memory_seconds[i] == pytest.approx(4 * elements / H100_BANDWIDTH)
    assert any("NCHW <-> NHWC" in n for n in a.assumptions)
    assert roofline.analyze(t, "h100", **DATASHEET, layout_transposes=False).op_seconds[i] == 0
    assert roofline.analyze(t, "mi300x", **DATASHEET).op_seconds[i] == 0


def test_backward_transposes_every_tensor_the_gradient_kernel_touches() -> None:
    """convolution_backward reads grad_output, input and weight and writes grad_input and
    grad_weight: five transposes (the input, a leaf here, still gets its gradient)."""
    x = torch.randn(N, C, HW, HW, requires_grad=True)
    t = _trace(_Conv(), x, torch.bfloat16, train=True)
    back = [op for op in t.ops if op.category == "layout" and op.phase == "backward"]
    assert len(back) == 1 and back[0].kernels == 5
    act_in, act_out, w = N * C * HW * HW, N * K * HW * HW, K * C * 9
    assert back[0].bytes_read == 2 * (act_out + act_in + w + act_in + w)


@pytest.mark.parametrize("case", ["channels_last", "fp32", "depthwise"])
def test_no_transposes_where_cudnn_runs_the_layout_natively(case: str) -> None:
    x = torch.randn(N, C, HW, HW)
    model: nn.Module = _Conv(groups=C if case == "depthwise" else 1)
    dtype: torch.dtype | None = None if case == "fp32" else torch.float16
    if case == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    t = _trace(model, x, dtype)
    assert not [op for op in t.ops if op.category == "layout"]


# --- clock and cores ---------------------------------------------------------------------
def test_clock_what_if_speeds_compute_not_bandwidth() -> None:
    """Peak = units x FLOP/clock/unit x clock: 1.5x the clock gives a compute-bound GEMM
    1.5x on its compute time and a streaming copy nothing (DRAM has its own clock)."""
    big = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    copy = _op("pointwise", 0, 10**9)
    for op in (big, copy):
        c = roofline.what_if(Trace([op]), "h100", clock=1.5, overhead=False)
        expected = 1.5 if op is big else 1.0
        assert c.speedup == pytest.approx(expected), op.category
    h100 = roofline.get_device("h100")
    faster = h100.scaled(clock_factor=1.5)
    assert faster.peak_flops_per_s("bf16") == pytest.approx(1.5 * H100_BF16)
    assert faster.bandwidth_bytes_per_s == H100_BANDWIDTH
    assert faster.boost_clock_hz == pytest.approx(1.5 * 1980e6)  # H100 SXM max boost


def test_cores_what_if_helps_only_ops_that_fill_the_chip() -> None:
    """A 128 x 128 output with K = 512 is one 128x128 tile: one of the H100's 132 SMs
    works, so 264 SMs leave it as slow; a square 8192 GEMM (4096 tiles) gains 2x."""
    tiny = OpRecord(name="aten.mm.default", category="matmul", phase="forward", module="",
                    dtype="bfloat16", flops=2 * 128 * 128 * 512, bytes_read=10,
                    bytes_written=0, input_shapes=((128, 512), (512, 128)),
                    output_shapes=((128, 128),))
    big = _op("matmul", 2 * 8192**3, 3 * 8192**2 * 2)
    small = roofline.what_if(Trace([tiny]), "h100", cores=2, overhead=False)
    assert small.speedup == pytest.approx(1.0)
    large = roofline.what_if(Trace([big]), "h100", cores=2, overhead=False)
    assert large.speedup == pytest.approx(2.0, rel=0.02)  # 4096 tiles over 264 SMs: 16 waves
    assert roofline.get_device("h100").scaled(cores_factor=2).compute_units == 264


def test_what_if_clock_and_cores_refuse_bad_factors() -> None:
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="clock"):
            roofline.what_if(Trace([]), "h100", clock=bad)
        with pytest.raises(ValueError, match="cores"):
            roofline.what_if(Trace([]), "h100", cores=bad)
