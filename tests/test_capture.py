"""The capture (tracing/capture.py, higher_order.py): what the recorder sees and records.

Phases (the backward seed, gradient clipping, an optimizer in a custom loop), the module
each op ran in (backward ops in their own modules; a shared submodule under the path it was
called through), single-use captures and captures around a trace, torch.compile'd code,
uncounted ops, which ops are gradient kernels, cuDNN's layout transposes and an eager
``flex_attention``. Expected numbers are derived by hand from shapes (a (B, in) x (in, out)
matmul is 2 B in out FLOPs; attention 4 B H S_q S_k D forward and 2.5x that backward) and
from the H100 SXM datasheet (3.35 TB/s).
"""

from __future__ import annotations

import collections
import warnings
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from conftest import DATASHEET, H100_BANDWIDTH, captured, no_global_state, op_of
from torch import nn

import roofline
from roofline.tracing import RooflineWarning, Trace

# --- what the recorder sees ---------------------------------------------------------------

def test_inference_mode_counts_composite_copies() -> None:
    x = torch.randn(64, 32)
    with torch.inference_mode():
        t = roofline.trace(lambda x: x.t().reshape(-1), x)
    # reshape of a transposed tensor is a real copy, not a view
    assert t.total_bytes == 2 * 64 * 32 * 4


def test_uncounted_ops_are_reported_not_zeroed_silently() -> None:
    x = torch.randn(8, 8)
    with pytest.warns(RooflineWarning, match="without a FLOP formula"), roofline.capture() as t:
        torch.linalg.qr(x)
    gaps = t.uncounted
    assert gaps and all(v.count >= 1 and v.bytes > 0 for v in gaps.values())


def test_compiled_model_is_counted_once() -> None:
    model = nn.Linear(8, 8)
    x = torch.randn(2, 8)
    eager = roofline.trace(model, x)
    with pytest.warns(RooflineWarning, match="eagerly"):
        compiled = roofline.trace(torch.compile(model), x)
    assert compiled.total_flops == eager.total_flops
    assert len(compiled) == len(eager)


# --- phases -------------------------------------------------------------------------------

def test_capture_custom_loop_with_optimizer_phase() -> None:
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with roofline.capture() as t:
        for _ in range(2):
            opt.zero_grad()
            F.mse_loss(model(torch.randn(3, 4)), torch.zeros(3, 4)).backward()
            opt.step()
    phases = t.by_phase()
    assert phases["forward"].count and phases["backward"].count and phases["optimizer"].count


# issue 13, item 14: the backward seed is backward, gradient clipping optimizer
def test_backward_seed_is_backward_and_grad_clipping_is_optimizer() -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)
    with roofline.capture() as t:
        for _ in range(2):  # gradient accumulation: the second forward is still forward
            model(x).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model(x)
    forward = [op.name for op in t.ops if op.phase == "forward"]
    # linear = transpose + addmm, then the sum: twice, and the last forward without sum
    step = ["aten.t.default", "aten.addmm.default", "aten.sum.default"]
    assert forward == step + step + step[:2]
    seeds = [op for op in t.ops if op.name == "aten.ones_like.default"]
    assert len(seeds) == 2 and all(op.phase == "backward" for op in seeds)
    norms = [op for op in t.ops if "norm" in op.name]
    assert norms and all(op.phase == "optimizer" for op in norms)
    api = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum())
    assert next(op for op in api.ops if op.name == "aten.ones_like.default").phase == "backward"


# --- a Capture records one block (issue 13, item 4) ---------------------------------------

def test_capture_refuses_reentry_without_leaving_state_behind() -> None:
    x = torch.randn(4, 4)
    cap = roofline.capture()
    with cap as t:
        x + x
        with pytest.raises(RuntimeError, match="already recording"), cap:
            pass
        x * x
    assert no_global_state()
    assert [op.name for op in t.ops] == ["aten.add.Tensor", "aten.mul.Tensor"]
    with pytest.raises(RuntimeError, match="single-use"), cap:
        x - x
    assert no_global_state()
    assert len(t.ops) == 2 and cap.trace is t  # the first trace is not overwritten


# a capture around a trace sees the step, and none of roofline's bookkeeping
@pytest.mark.parametrize("fake", [True, False])
def test_a_capture_around_a_trace_sees_its_step_once_and_no_bookkeeping(fake: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), foreach=True)  # no state: a fake warm-up
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a real first step's "no state yet" note
        with roofline.capture() as outer:
            inner = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(),
                                   optimizer=opt, fake=fake)
    assert [(op.name, op.phase) for op in outer.ops] == [
        (op.name, op.phase) for op in inner.ops]
    assert inner.by_phase()["optimizer"].count and no_global_state()


# --- gradient kernels are recorded as such (issue 12) -------------------------------------

aten = torch.ops.aten


def test_backward_kernel_is_set_from_the_op_not_the_phase() -> None:
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    t = roofline.trace(lambda: F.conv2d(F.relu(x), w).sum().backward())
    conv_bwd = op_of(t, "aten.convolution_backward")
    assert conv_bwd.backward_kernel and conv_bwd.phase == "backward"
    assert op_of(t, "aten.threshold_backward").backward_kernel
    assert not op_of(t, "aten.convolution.").backward_kernel
    # a gradient kernel called outside autograd runs in the forward phase: still one
    direct = captured(lambda: aten.convolution_backward(
        torch.randn(2, 4, 6, 6), torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), [4],
        [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]))
    called = op_of(direct, "aten.convolution_backward")
    assert called.phase == "forward" and called.backward_kernel
    # a matmul run by autograd is a backward-phase op, not a gradient kernel by name
    wm = torch.randn(5, 3, requires_grad=True)
    m = roofline.trace(lambda: (torch.randn(4, 5) @ wm).sum().backward())
    assert any(op.category == "matmul" and op.phase == "backward" for op in m.ops)
    assert not any(op.backward_kernel for op in m.ops if op.category == "matmul")


# --- backward ops land in their own modules (issue 13) ------------------------------------

class _Block(torch.nn.Module):
    """q, k, v projections of one input (siblings sharing it), then a Dropout(p=0), which
    returns its input itself, as a transformer block with dropout off does."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.q = torch.nn.Linear(d, 2 * d, bias=False)
        self.k = torch.nn.Linear(d, 3 * d, bias=False)
        self.v = torch.nn.Linear(d, 5 * d, bias=False)
        self.drop = torch.nn.Dropout(0.0)
        self.out = torch.nn.Linear(10 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.out(torch.cat([self.q(x), self.k(x), self.v(x)], dim=-1)))


@pytest.mark.parametrize("fake", [False, True])
def test_backward_matmuls_are_attributed_to_their_own_modules(fake: bool) -> None:
    n, d = 16, 8
    model = torch.nn.Sequential(_Block(d), torch.nn.Linear(d, d, bias=False))
    t = roofline.trace(model, torch.randn(n, d), train=True, loss_fn=lambda o: o.sum(),
                       fake=fake)
    backward: dict[str, int] = {}
    for op in t.ops:
        if op.phase == "backward" and op.category == "matmul":
            backward[op.module] = backward.get(op.module, 0) + op.flops
    # a Linear (n x i) @ (i x o) costs 2 n i o FLOPs per gradient: of its weight, and of its
    # input unless the input is the model's own (which needs none)
    first = 2 * n * d
    assert backward == {
        "Sequential.0.q": first * 2 * d, "Sequential.0.k": first * 3 * d,
        "Sequential.0.v": first * 5 * d, "Sequential.0.out": 2 * 2 * n * 10 * d * d,
        "Sequential.1": 2 * 2 * n * d * d}


# --- a shared submodule (issue 22, item 14) -----------------------------------------------

class SharedInner(nn.Module):
    def __init__(self, submod: nn.Module) -> None:
        super().__init__()
        self.submod = submod

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.submod(x)


class SharedModuleNet(nn.Module):
    """fvcore's test model: one Linear under two parents, one under two names."""

    def __init__(self) -> None:
        super().__init__()
        inner = nn.Linear(10, 10)
        self.submod1 = SharedInner(inner)
        self.submod2 = SharedInner(inner)
        multiname = nn.Linear(10, 1)
        self.multiname1 = multiname
        self.multiname2 = multiname

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.submod1(x) + self.submod2(x)
        return self.multiname1(x) + self.multiname2(x)


@pytest.fixture
def shared_trace() -> Iterator[roofline.Trace]:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield roofline.trace(SharedModuleNet(), torch.randn(4, 10, requires_grad=True),
                             train=True, loss_fn=lambda o: o.sum())


def _matmul_flops(t: roofline.Trace, depth: int) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = collections.defaultdict(int)
    for op in t.ops:
        if op.category == "matmul":
            out[(".".join(op.module.split(".")[:depth]), op.phase)] += op.flops
    return dict(out)


def test_a_shared_linear_is_counted_under_each_parent_that_calls_it(shared_trace) -> None:  # type: ignore[no-untyped-def]
    # one call: forward 2 x 4 x 10 x 10 = 800; backward grad input and grad weight 1600
    per_parent = _matmul_flops(shared_trace, depth=2)
    for parent in ("SharedModuleNet.submod1", "SharedModuleNet.submod2"):
        assert per_parent[(parent, "forward")] == 800
        assert per_parent[(parent, "backward")] == 1600


def test_a_shared_linear_keeps_the_path_it_was_called_through(shared_trace) -> None:  # type: ignore[no-untyped-def]
    leaf = _matmul_flops(shared_trace, depth=3)
    assert leaf[("SharedModuleNet.submod1.submod", "forward")] == 800
    assert leaf[("SharedModuleNet.submod2.submod", "forward")] == 800


def test_one_module_under_two_names_of_one_parent_is_one_module(shared_trace) -> None:  # type: ignore[no-untyped-def]
    """``multiname1`` and ``multiname2`` are one object: its two calls (2 x 4 x 10 x 1
    FLOPs each) go to its first name, as fvcore's canonical name."""
    per = _matmul_flops(shared_trace, depth=2)
    assert per[("SharedModuleNet.multiname1", "forward")] == 2 * 80
    assert ("SharedModuleNet.multiname2", "forward") not in per


# --- cuDNN's layout transposes (issue 15) -------------------------------------------------

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


# --- flex_attention (issue 22, item 13) ---------------------------------------------------

B, HQ, HKV, S, D = 2, 4, 2, 256, 32


DENSE = 4 * B * HQ * S * S * D  # QK^T and PV over every query-key pair of every query head


@pytest.fixture
def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(B, HQ, S, D), torch.randn(B, HKV, S, D), torch.randn(B, HKV, S, D)


def _flex_ops(t: roofline.Trace) -> list[roofline.OpRecord]:
    return [op for op in t.ops if "flex_attention" in op.name]


def test_eager_flex_attention_with_gqa_is_one_dense_attention_op(qkv) -> None:  # type: ignore[no-untyped-def]
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v = qkv
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with roofline.capture() as t:
            out = flex_attention(q, k, v, enable_gqa=True)
    assert tuple(out.shape) == (B, HQ, S, D)
    (op,) = _flex_ops(t)
    assert op.category == "attention"
    assert op.flops == DENSE
    # the fused kernel reads q, k, v and writes the output (and its logsumexp)
    assert op.bytes_read >= 4 * (B * HQ * S * D + 2 * B * HKV * S * D)
    assert op.bytes_written >= 4 * B * HQ * S * D


def test_flex_attention_with_a_causal_block_mask_counts_its_density(qkv) -> None:  # type: ignore[no-untyped-def]
    """128 x 128 blocks of a 256 x 256 causal mask: 3 of the 4 block pairs are computed
    (one full, two partial), density 3/4 as BlockMask.sparsity() defines it."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = qkv
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, S, S, device="cpu")
    assert mask.sparsity() == pytest.approx(25.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = roofline.trace(lambda q, k, v: flex_attention(q, k, v, block_mask=mask,
                                                          enable_gqa=True), q, k, v)
    (op,) = _flex_ops(t)
    assert op.flops == DENSE * 3 // 4


def test_flex_attention_forward_and_backward_through_the_hop() -> None:
    """The public flex_attention refuses backward on CPU; the higher-order op itself runs
    both directions here: forward 4 B H S^2 D x 3/4, backward 2.5x that."""
    from torch._higher_order_ops.flex_attention import flex_attention as hop
    from torch.nn.attention.flex_attention import _apply_kernel_options, create_block_mask

    torch.manual_seed(0)
    q, k, v = (torch.randn(B, HQ, S, D, requires_grad=True) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, S, S, device="cpu")
    options = _apply_kernel_options(q, k, v, False, None)

    def step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return hop(q, k, v, lambda s, b, h, qi, ki: s, mask.as_tuple(), D ** -0.5,
                   options)[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = roofline.trace(step, q, k, v, train=True, loss_fn=lambda o: o.sum())
    by_phase = {op.phase: op.flops for op in _flex_ops(t)}
    assert by_phase == {"forward": DENSE * 3 // 4, "backward": DENSE * 3 // 4 * 5 // 2}
