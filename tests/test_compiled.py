"""``trace(..., compile=True)``: the step as inductor fuses it for a GPU (issue 25).

Bytes are hand-derived per kernel (what leaves it: inputs once, outputs once); FLOPs are
checked against the eager trace of the same step (conserved, up to the recomputation the
partitioner reports and the decompositions named in each test).
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import no_global_state
from torch import nn

import roofline
from roofline import CompileError, RooflineWarning
from roofline.tracing import gpu_target


def _kernels(t: roofline.Trace, phase: str = "forward") -> list[roofline.OpRecord]:
    """The ops of ``phase`` that are kernels (views and allocations run none)."""
    return [op for op in t.ops if op.phase == phase and op.kernels
            and op.category not in ("view", "allocation")]


class LnMlp(nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear -> softmax."""

    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc2(F.gelu(self.fc1(self.ln(x)))), -1)


def test_a_pointwise_chain_is_one_kernel_reading_its_input_once():
    x = torch.randn(1024, 256)
    t = roofline.trace(lambda v: torch.relu(torch.sin(v * 2 + 1)) - 0.5, x, compile=True)
    (k,) = _kernels(t)
    # eager: five kernels, each reading and writing 1 MiB; fused: read x once, write once
    assert (k.bytes_read, k.bytes_written) == (x.numel() * 4, x.numel() * 4)
    assert k.fused == ("aten.mul.Tensor", "aten.add.Tensor", "aten.sin.default",
                       "aten.relu.default", "aten.sub.Tensor")
    eager = roofline.trace(lambda v: torch.relu(torch.sin(v * 2 + 1)) - 0.5, x, fake=True)
    assert k.flops == eager.total_flops == 5 * x.numel()  # mul, add, sin, relu, sub
    assert eager.total_bytes == 5 * 2 * x.numel() * 4


def test_softmax_forward_is_one_online_kernel():
    x = torch.randn(32, 512)
    t = roofline.trace(lambda v: torch.softmax(v, -1), x, compile=True)
    (k,) = _kernels(t)
    assert k.category == "softmax"
    assert (k.bytes_read, k.bytes_written) == (x.numel() * 4, x.numel() * 4)
    # inductor's online softmax: max and sum of exp in one pass (4n), then exp(x - max)
    # again and the divide (3n), where eager's kernel counts 5n
    assert k.flops == 7 * x.numel()


def test_layer_norm_forward_and_backward_fuse_as_inductor_does():
    d, rows = 64, 8
    ln = nn.LayerNorm(d)
    x = torch.randn(rows, d, requires_grad=True)
    t = roofline.trace(ln, x, train=True, loss_fn=lambda y: (y * y).sum(), compile=True)
    norm = [op for op in _kernels(t) if op.category == "normalization"]
    assert len(norm) == 1
    # reads x, weight, bias; writes y and, for backward, each row's mean and 1/std (fp32)
    assert norm[0].bytes_read == (rows * d + 2 * d) * 4
    assert norm[0].bytes_written == (rows * d + 2 * rows) * 4
    backward = [op for op in _kernels(t, "backward")
                if "aten.native_layer_norm_backward.default" in op.fused]
    assert backward, [op.fused for op in _kernels(t, "backward")]


def test_training_flops_are_conserved_up_to_the_reported_recompute():
    model, x = LnMlp(), torch.randn(8, 64)
    opt = torch.optim.AdamW(model.parameters())
    kw = dict(train=True, optimizer=opt, loss_fn=lambda y: y.sum())
    eager = roofline.trace(model, x, fake=True, **kw)
    compiled = roofline.trace(model, x, compile=True, **kw)
    # GEMMs stay cuBLAS calls: the same FLOPs, op for op
    for phase in ("forward", "backward"):
        gemms = [sorted(op.flops for op in t.ops if op.phase == phase
                        and op.category == "matmul") for t in (eager, compiled)]
        assert gemms[0] == gemms[1]
    assert compiled.info.recompute_flops > 0  # min-cut recomputes GELU in backward
    # the rest differs only as decompositions count: the online softmax's second exp(x -
    # max) (+2n), layer norm as var_mean and pointwise ops, and GELU's backward, whose
    # decomposition shares terms with the recomputed forward
    net = compiled.total_flops - compiled.info.recompute_flops
    assert abs(net - eager.total_flops) < 0.01 * eager.total_flops
    assert {op.phase for op in compiled.ops} == {"forward", "backward", "optimizer"}
    assert [op.module for op in _kernels(compiled) if op.category == "matmul"] == \
        ["LnMlp.fc1", "LnMlp.fc2"]


def test_a_gpt_block_moves_fewer_bytes_compiled_and_the_comparison_says_why():
    from roofline.zoo.registry import get_model

    zm = get_model("gpt2", device="meta", n_layer=1, batch_size=2, seq_len=256)
    kw = dict(train=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = roofline.trace(zm.model, *zm.train_inputs, fake=True, **kw)
        compiled = roofline.trace(zm.model, *zm.train_inputs, compile=True, **kw)
    # dropout + residual add + layer norm, GELU and its gradient, the loss's log-softmax
    # and its gradient: each a chain of eager kernels that inductor fuses (8% of the eager
    # step's bytes, 2.24 against 2.43 GB, now that both run the loss as CUDA autocast does
    # and eager's nll_loss reads one log-probability per target, not every logit)
    assert compiled.total_bytes < 0.95 * eager.total_bytes
    assert any(len(op.fused) >= 3 for op in compiled.ops)
    c = roofline.compare(eager, compiled, "a100")
    assert c.speedup > 1 and c.band is None
    assert c.fusion is not None
    before = sum(b for b, _ in c.fusion.values())
    after = sum(a for _, a in c.fusion.values())
    assert (before, after) == (eager.total_bytes, compiled.total_bytes)
    text = roofline.explain(c, assumptions=False)
    assert text.startswith("torch.compile on A100") and "fusion removes" in text
    assert any("torch.compile" in a for a in c.dst.assumptions)


def test_compare_of_two_traces_refuses_the_wrong_order_and_other_steps():
    model, x = LnMlp(), torch.randn(8, 64)
    eager = roofline.trace(model, x, fake=True)
    compiled = roofline.trace(model, x, compile=True)
    with pytest.raises(ValueError, match="eager trace first"):
        roofline.compare(compiled, eager, "a100")
    other = roofline.trace(model, torch.randn(16, 64), fake=True)
    with pytest.raises(ValueError, match="not of the same step"):
        roofline.compare(other, compiled, "a100")


def test_a_graph_break_is_listed_and_its_code_recorded_eagerly():
    def step(x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x) * 2
        print(end="")  # dynamo cannot trace print: a graph break
        return torch.sigmoid(y) + 1

    x = torch.randn(64, 64)
    with pytest.warns(RooflineWarning, match="graph break"):
        t = roofline.trace(step, x, compile=True)
    assert t.info.graph_breaks and t.info.compiled_graphs == 2
    assert len(_kernels(t)) == 2  # relu*2, then sigmoid+1: one kernel per graph
    with pytest.raises(CompileError, match="graph break"):
        roofline.trace(step, x, compile={"fullgraph": True})
    assert no_global_state()


def test_what_cannot_be_predicted_is_refused():
    model, x = LnMlp(), torch.randn(8, 64)
    with pytest.raises(ValueError, match="max-autotune"):
        roofline.trace(model, x, compile={"mode": "max-autotune"})
    with pytest.raises(ValueError, match="fake tensors"):
        roofline.trace(model, x, compile=True, fake=False)
    with pytest.raises(ValueError, match="parallel"):
        roofline.trace(model, x, compile=True, parallel="ddp", gpus=2)
    with pytest.raises(ValueError, match="compile= takes"):
        roofline.trace(model, x, compile={"backend": "eager"})
    t = roofline.trace(model, x, compile=True)
    with pytest.raises(ValueError, match="compiled trace"):
        roofline.memory(t)
    assert roofline.trace(model, x, compile={"mode": "reduce-overhead"}).info.compiled == \
        "reduce-overhead"


def test_nothing_is_left_behind_and_the_model_is_unchanged():
    from torch._dynamo import device_interface

    model, x = LnMlp(), torch.randn(8, 64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    device_interface.get_interface_for_device("cpu")  # torch's own lazy registration
    interfaces = dict(device_interface.device_interfaces)
    t = roofline.trace(model, x, train=True, loss_fn=lambda y: y.sum(), compile=True)
    assert t.info.compiled == "default"
    assert no_global_state()
    assert dict(device_interface.device_interfaces) == interfaces
    assert not torch.cuda.is_available() or torch.cuda.device_count() > 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None and type(p) is nn.Parameter for p in model.parameters())


@pytest.mark.skipif(torch.backends.cuda.is_built(), reason="a CUDA build has its own guard")
def test_the_fake_cuda_guard_is_registered_only_inside():
    from torch._subclasses.fake_tensor import FakeTensorMode

    def index_fake_cuda() -> None:
        with FakeTensorMode():
            torch.empty(4, device="cuda")[1]

    with gpu_target.cuda_guard() as registered:
        if not registered:
            pytest.skip("libc10's symbols are stripped")
        index_fake_cuda()
    with pytest.raises(RuntimeError, match="cuda"):
        index_fake_cuda()


def test_a_compiled_trace_survives_json():
    t = roofline.trace(LnMlp(), torch.randn(8, 64), compile=True)
    back = roofline.Trace.from_json(t.to_json())
    assert back.ops == t.ops and back.info == t.info
    doc = json.loads(t.to_json())
    assert "fused" in doc["fields"]
    doc["ops"][0][doc["fields"].index("fused")] = "aten.mm"
    with pytest.raises(ValueError, match="fused"):
        roofline.Trace.from_json(json.dumps(doc))


def test_attention_is_the_kernel_a_gpu_dispatches_to():
    q = torch.randn(2, 4, 128, 64, dtype=torch.bfloat16)
    t = roofline.trace(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                       q, q, q, compile=True)
    (k,) = _kernels(t)
    assert k.name == "aten._scaled_dot_product_flash_attention.default"
    eager = roofline.trace(lambda a, b, c: F.scaled_dot_product_attention(
        a, b, c, is_causal=True), q, q, q, fake=True)
    assert k.flops == eager.total_flops


def test_cli_what_if_compile_answers_against_eager(capsys):
    from roofline.presentation.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["what-if", "mlp", "--device", "h100", "--train", "--compile",
                     "--flops", "2"]) == 0
    out = capsys.readouterr().out
    assert "torch.compile:" in out and "over eager on H100" in out
    assert "eager (no compile), the same what-if:" in out


def test_attention_under_autocast_runs_in_its_low_precision_as_cuda_autocast_does():
    q = torch.randn(1, 2, 256, 64)  # fp32, as RoPE leaves queries and keys
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(lambda a: F.scaled_dot_product_attention(a, a, a, is_causal=True),
                           q, compile=True)
    (k,) = [op for op in _kernels(t) if op.category == "attention"]
    assert k.name == "aten._scaled_dot_product_flash_attention.default"
    assert k.dtype == "bfloat16"


def test_the_before_and_after_chart_draws_both_steps_on_one_view():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model, x = LnMlp(), torch.randn(8, 64)
    kw = dict(train=True, loss_fn=lambda y: y.sum())
    c = roofline.compare(roofline.trace(model, x, fake=True, **kw),
                         roofline.trace(model, x, compile=True, **kw), "h100")
    ax = roofline.plot.compile_chart(c)
    fig = ax.get_figure()
    left, right, bars = fig.axes[:3]
    assert left.get_xlim() == right.get_xlim() and left.get_ylim() == right.get_ylim()
    assert right.get_title(loc="left").startswith("torch.compile:")
    assert [t.get_text() for t in bars.get_yticklabels()] == [
        "torch.compile\nby category", "eager\nby category", "torch.compile\nby bound",
        "eager\nby bound"]
    plt.close(fig)
    with pytest.raises(ValueError, match="compile_chart"):
        roofline.plot.roofline_chart(c)
    with pytest.raises(TypeError, match="compile_chart"):
        roofline.plot.compile_chart(roofline.compare(c.src.trace, "a100", "h100"))


class ClsToken(nn.Module):
    """ViT's class token: concatenated in front, its row read at the end (a select in
    forward, a select_scatter that inductor re-inplaces in backward)."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls.expand(x.size(0), -1, -1), x], dim=1)
        return self.fc(x)[:, 0]


def test_a_backward_graph_whose_passes_run_ops_on_the_fake_gpu_compiles():
    t = roofline.trace(ClsToken(), torch.randn(2, 8, 32), train=True,
                       loss_fn=lambda y: y.sum(), compile=True)
    assert {op.phase for op in t.ops} >= {"forward", "backward"}
    assert any(op.fused for op in t.ops if op.phase == "backward")


class Stack(nn.Module):
    """Three identical blocks in an nn.ModuleList, a head outside them."""

    def __init__(self, d: int = 32, n: int = 3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(LnMlp(d) for _ in range(n))
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def test_regional_compile_compiles_the_block_once_and_names_each_call():
    model, x = Stack(), torch.randn(8, 32)
    kw = dict(train=True, loss_fn=lambda y: y.sum())
    t = roofline.trace(model, x, compile={"regional": True}, **kw)
    # one graph for the first block, whose input needs no gradient, and one reused by the
    # other two (dynamo guards on requires_grad): not one per block
    assert t.info.compiled_graphs == 2
    for phase in ("forward", "backward"):
        blocks = {op.module.split(".")[2] for op in t.ops
                  if op.phase == phase and op.fused and op.module.startswith("Stack.blocks.")}
        assert blocks == {"0", "1", "2"}, phase
    # the head is eager: recorded op by op, under its own module
    assert [op.name for op in t.ops if op.module == "Stack.head" and op.phase == "forward"
            and op.category == "matmul"] == ["aten.addmm.default"]
    eager = roofline.trace(model, x, fake=True, **kw)
    gemms = [sorted(op.flops for op in tr.ops if op.category == "matmul")
             for tr in (eager, t)]
    assert gemms[0] == gemms[1]
    assert all(b._compiled_call_impl is None for b in model.blocks)
    assert no_global_state()


def test_regional_compile_needs_repeated_blocks():
    with pytest.raises(ValueError, match="repeated block"):
        roofline.trace(LnMlp(), torch.randn(8, 64), compile={"regional": True})


def test_a_convolution_is_counted_once_though_generated_kernels_hold_its_pieces():
    # inductor splits the bias gradient out of convolution_backward into a generated
    # kernel: the convolution's FLOPs stay with the extern kernel that runs it
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1))
    x = torch.randn(4, 8, 16, 16)
    kw = dict(train=True, loss_fn=lambda y: y.sum())
    eager = roofline.trace(model, x, fake=True, **kw)
    compiled = roofline.trace(model, x, compile=True, **kw)
    conv = [sum(op.flops for op in t.ops if op.category == "conv") for t in (eager, compiled)]
    # eager's convolution_backward also sums the bias gradient: one add per output element
    # of each biased convolution (N x H x W x C_out = 4 x 16 x 16 x 16, twice)
    assert conv[0] - conv[1] == 2 * 4 * 16 * 16 * 16
    generated = sum(op.flops for op in compiled.ops if op.name.startswith("inductor."))
    assert generated < 0.05 * conv[1]
    net = compiled.total_flops - compiled.info.recompute_flops
    assert abs(net - eager.total_flops) < 0.02 * eager.total_flops


def test_compile_inside_a_capture_is_refused_with_the_reason():
    with roofline.capture(), pytest.raises(CompileError, match="dynamo"):
        roofline.trace(LnMlp(), torch.randn(8, 64), compile=True)
    assert no_global_state()


def test_reduce_overhead_is_analysed_with_cuda_graph_launches():
    model, x = LnMlp(), torch.randn(8, 64)
    default = roofline.trace(model, x, compile=True)
    graphs = roofline.trace(model, x, compile={"mode": "reduce-overhead"})
    # the same kernels, launched from a CUDA graph
    assert [op.name for op in graphs.ops] == [op.name for op in default.ops]
    assert roofline.analyze(graphs, "h100").seconds == \
        roofline.analyze(default, "h100", graphs=True).seconds
    assert roofline.analyze(graphs, "h100").seconds < roofline.analyze(default, "h100").seconds


class MakesAModule(nn.Module):
    """Registers a submodule in forward (as some models build caches and rotary tables)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.act = nn.ReLU()
        return self.act(self.fc(x)) * 2


def test_roofline_own_hooks_and_wrappers_add_no_graph_break():
    # the fake step's registration hooks and wrapped __setattr__ are off while dynamo
    # traces: with them on, this model broke into graphs at roofline's own code
    t = roofline.trace(MakesAModule(), torch.randn(4, 16), compile=True)
    assert t.info.graph_breaks == [] and t.info.compiled_graphs == 1
    assert no_global_state()
