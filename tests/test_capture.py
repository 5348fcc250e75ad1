"""Capture: FLOPs and bytes checked against hand derivations and other counters."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode
from torch.utils.flop_counter import FlopCounterMode

import roofline
from roofline.tracing import FakeModeError, RooflineWarning, Trace
from roofline.zoo import get_model

MATMUL = ("matmul", "conv", "attention")


def matmul_flops(t: Trace, phase: str | None = None, cats: tuple[str, ...] = MATMUL) -> int:
    return sum(op.flops for op in t.ops
               if op.category in cats and (phase is None or op.phase == phase))


def test_mlp_forward_backward_hand_derived() -> None:
    b, d_in, d_h, d_out = 16, 32, 64, 8
    model = nn.Sequential(nn.Linear(d_in, d_h), nn.ReLU(), nn.Linear(d_h, d_out))
    x = torch.randn(b, d_in)
    t = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum())
    fwd = 2 * b * d_in * d_h + 2 * b * d_h * d_out
    # backward: grad_weight for both layers, grad_input only for the second (x needs none)
    bwd = 2 * b * d_in * d_h + 2 * (2 * b * d_h * d_out)
    assert matmul_flops(t, "forward") == fwd
    assert matmul_flops(t, "backward") == bwd
    relu = [op for op in t.ops if op.name == "aten.relu.default"]
    assert relu[0].flops == b * d_h
    assert relu[0].bytes_read == relu[0].bytes_written == b * d_h * 4
    # the ops are attributed to the modules that ran them, forward and backward
    first = {op.phase for op in t.ops if op.module == "Sequential.0" and op.category == "matmul"}
    assert first == {"forward", "backward"}


def test_resnet50_forward_is_8_2_gflops_per_image() -> None:
    zm = get_model("resnet50", batch_size=1)
    zm.model.eval()
    with torch.no_grad():
        t = roofline.trace(zm.model, *zm.inputs)
    # 4.1 GMACs per 224x224 image (He et al. 2016 / torchvision) = 8.2 GFLOPs
    assert matmul_flops(t) == pytest.approx(8.2e9, rel=0.02)
    assert not t.uncounted


def _gpt2_forward_matmul(cfg: dict[str, int], b: int, s: int) -> int:
    d, layers, vocab = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    weights = layers * (d * 3 * d + d * d + d * 4 * d + 4 * d * d) + d * vocab  # + lm_head
    causal_pairs = s * (s + 1) // 2
    attention = layers * b * 2 * (2 * causal_pairs * d)  # QK^T and PV over all heads
    return 2 * weights * b * s + attention


def test_gpt2_matmul_flops_follow_the_parameter_count() -> None:
    b, s = 1, 64
    zm = get_model("gpt2", batch_size=b, seq_len=s)
    cfg = {"n_embd": 768, "n_layer": 12, "vocab_size": 50257}
    # eval(): without dropout, CPU SDPA runs its causal flash kernel (with dropout it
    # falls back to the math path, which computes the full L x L scores: counted as such)
    zm.model.eval()
    t = roofline.trace(zm.model, *zm.train_inputs, train=True, fake=True)
    assert matmul_flops(t, "forward") == _gpt2_forward_matmul(cfg, b, s)
    # backward of every dense matmul is two matmuls of the same size
    fwd_mm = matmul_flops(t, "forward", ("matmul",))
    assert matmul_flops(t, "backward", ("matmul",)) == 2 * fwd_mm
    # flash-attention backward recomputes QK^T: 2.5x the forward (torch's convention)
    assert matmul_flops(t, "backward", ("attention",)) == pytest.approx(
        2.5 * matmul_flops(t, "forward", ("attention",)))


def test_adamw_updates_every_parameter() -> None:
    zm = get_model("mlp", batch_size=4)
    n_params = sum(p.numel() for p in zm.model.parameters())
    for kw in ({"foreach": True}, {"fused": True}):
        opt = torch.optim.AdamW(zm.model.parameters(), **kw)
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
        opt_ops = [op for op in t.ops if op.phase == "optimizer" and op.category == "optimizer"]
        assert opt_ops, kw
        updated = max(sum(map(_numel, op.output_shapes)) for op in opt_ops)
        assert updated >= n_params
        if "fused" in kw:
            # fused AdamW reads p, g, m, v and writes p, m, v (fp32); one step-count add each
            fused = next(op for op in opt_ops if "fused" in op.name)
            assert fused.flops == 14 * n_params
            assert fused.bytes_written == 3 * 4 * n_params
            assert fused.bytes_read >= 4 * 4 * n_params


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@pytest.mark.parametrize("name", ["mlp", "resnet50", "mobilenet", "gpt2", "bert-base", "vit-b16"])
def test_matches_flop_counter_mode_and_explains_attention(name: str) -> None:
    kw = {"seq_len": 32} if name in ("gpt2", "bert-base") else {}
    zm = get_model(name, batch_size=1, **kw)
    zm.model.eval()
    with torch.no_grad():
        t = roofline.trace(zm.model, *zm.inputs)
        counter = FlopCounterMode(display=False)
        with counter:
            zm.model(*zm.inputs)
    # same formulas for matmul and conv; torch has none for the CPU attention kernel
    assert matmul_flops(t, cats=("matmul", "conv")) == counter.get_total_flops()
    attention = [op for op in t.ops if op.category == "attention"]
    assert all(op.name.startswith("aten._scaled_dot_product_flash_attention_for_cpu")
               for op in attention)


@pytest.mark.parametrize("name", ["mlp", "resnet50", "mobilenet"])
def test_matches_fvcore_times_two(name: str) -> None:
    fvcore = pytest.importorskip("fvcore.nn")
    zm = get_model(name, batch_size=2)
    zm.model.eval()
    with torch.no_grad():
        t = roofline.trace(zm.model, *zm.inputs)
    analysis = fvcore.FlopCountAnalysis(zm.model, zm.inputs)
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    by_op = analysis.by_operator()
    macs = sum(v for k, v in by_op.items() if k in ("conv", "linear", "addmm", "matmul", "bmm"))
    # fvcore counts one multiply-add as one "flop"; ours counts it as two
    assert matmul_flops(t, cats=("matmul", "conv")) == 2 * macs


def test_bytes_model() -> None:
    a = torch.randn(64, 32)
    bias = torch.randn(32)
    with roofline.capture() as t:
        c = a + bias  # bias broadcast: read once
        c.add_(1.0)  # in place: read and write
        c.view(-1).t()  # metadata only
    add, add_ = t.ops[0], t.ops[1]
    assert add.bytes_read == (64 * 32 + 32) * 4 and add.bytes_written == 64 * 32 * 4
    assert add_.bytes_read == add_.bytes_written == 64 * 32 * 4
    views = [op for op in t.ops if op.category == "view"]
    assert views and all(op.bytes == 0 and op.flops == 0 for op in views)
    emb = nn.Embedding(1000, 16)
    idx = torch.randint(0, 1000, (4, 8))
    with roofline.capture() as t2:
        emb(idx)
    gather = t2.ops[-1]
    # an embedding reads the indices and the 32 gathered rows, not the whole table
    assert gather.bytes_read == idx.numel() * 8 + 32 * 16 * 4
    assert gather.bytes_written == 32 * 16 * 4


def test_autocast_dtype_is_recorded() -> None:
    # the norm sees the fp32 input; autocast casts the linear's operands to bf16
    model = nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16))
    x = torch.randn(4, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(model, x)
    dtypes = {op.category: op.dtype for op in t.ops if op.category in ("matmul", "normalization")}
    assert dtypes == {"matmul": "bfloat16", "normalization": "float32"}


def test_inference_mode_counts_composite_copies() -> None:
    x = torch.randn(64, 32)
    with torch.inference_mode():
        t = roofline.trace(lambda x: x.t().reshape(-1), x)
    # reshape of a transposed tensor is a real copy, not a view
    assert t.total_bytes == 2 * 64 * 32 * 4


def test_pooling_and_eval_batch_norm_formulas() -> None:
    x = torch.randn(2, 8, 16, 16, requires_grad=True)
    t = roofline.trace(lambda x: F.max_pool2d(x, 3, 2, 1).sum().backward(), x)
    pool_bwd = next(op for op in t.ops if "max_pool2d_with_indices_backward" in op.name)
    assert pool_bwd.flops == 2 * 8 * 8 * 8  # one add per gradient element
    bn = nn.BatchNorm2d(8).eval()
    with torch.no_grad():
        t = roofline.trace(bn, torch.randn(2, 8, 4, 4))
    norm = [op for op in t.ops if op.category == "normalization"]
    assert sum(op.flops for op in norm) == (2 + 2) * 2 * 8 * 4 * 4  # (x-mean)*rstd, affine


def test_no_grad_and_inference_mode_are_counted() -> None:
    zm = get_model("mlp", batch_size=4)
    expected = roofline.trace(zm.model, *zm.inputs).total_flops
    with torch.no_grad():
        assert roofline.trace(zm.model, *zm.inputs).total_flops == expected
    with torch.inference_mode():
        assert roofline.trace(zm.model, *zm.inputs).total_flops == expected


def test_fake_equals_real_and_leaves_the_model_untouched() -> None:
    zm = get_model("mlp", batch_size=8)
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    before = [p.detach().clone() for p in zm.model.parameters()]
    fake = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    assert all(torch.equal(a, p) for a, p in zip(before, zm.model.parameters(), strict=True))
    assert all(p.grad is None for p in zm.model.parameters()) and not opt.state
    real = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt)
    for phase in ("forward", "backward"):
        f = fake.filter(lambda o, p=phase: o.phase == p)
        r = real.filter(lambda o, p=phase: o.phase == p)
        assert f.total_flops == r.total_flops and f.total_bytes == r.total_bytes


def test_meta_model_needs_no_memory() -> None:
    zm = get_model("llama-tiny", batch_size=1, seq_len=16, device="meta")
    t = roofline.trace(zm.model, *zm.train_inputs, train=True, fake=True)
    assert t.total_flops > 0 and t.by_phase()["backward"].flops > 0


def _no_global_state() -> bool:
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o

    return (_get_current_dispatch_mode() is None and not m._global_forward_hooks
            and not m._global_forward_pre_hooks and not o._global_optimizer_pre_hooks
            and not o._global_optimizer_post_hooks and not torch.is_autocast_enabled("cpu")
            and torch._C._len_torch_function_stack() == 0)


def test_failing_model_propagates_and_leaves_no_state() -> None:
    class Boom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise KeyError("boom")

    for fake in (False, True):
        with pytest.raises(KeyError, match="boom"):
            roofline.trace(Boom(), torch.randn(2), fake=fake)
        assert _no_global_state()
    assert roofline.trace(nn.Linear(2, 2), torch.randn(1, 2)).total_flops == 8


def test_data_dependent_ops_under_fake_are_refused() -> None:
    class Picky(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x.nonzero(as_tuple=True)]

    with pytest.raises(FakeModeError, match="real tensors"):
        roofline.trace(Picky(), torch.randn(8), fake=True)
    assert _no_global_state()
    assert len(roofline.trace(Picky(), torch.randn(8))) > 0


def test_train_needs_a_scalar_loss() -> None:
    with pytest.raises(ValueError, match="scalar loss"):
        roofline.trace(nn.Linear(4, 4), torch.randn(2, 4), train=True)
    assert _no_global_state()


def test_compiled_model_is_counted_once() -> None:
    model = nn.Linear(8, 8)
    x = torch.randn(2, 8)
    eager = roofline.trace(model, x)
    with pytest.warns(RooflineWarning, match="eagerly"):
        compiled = roofline.trace(torch.compile(model), x)
    assert compiled.total_flops == eager.total_flops
    assert len(compiled) == len(eager)


def test_empty_function_gives_empty_trace() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = roofline.trace(lambda: None)
    assert len(t) == 0 and t.total_flops == 0 and t.total_bytes == 0


def test_uncounted_ops_are_reported_not_zeroed_silently() -> None:
    x = torch.randn(8, 8)
    with pytest.warns(RooflineWarning, match="without a FLOP formula"), roofline.capture() as t:
        torch.linalg.qr(x)
    gaps = t.uncounted
    assert gaps and all(v.count >= 1 and v.bytes > 0 for v in gaps.values())


def test_json_round_trip_and_dataframe() -> None:
    zm = get_model("mlp", batch_size=2)
    t = roofline.trace(zm.model, *zm.train_inputs, train=True)
    back = Trace.from_json(t.to_json())
    assert back.ops == t.ops and back.meta == t.meta and back.info == t.info
    df = t.to_dataframe()
    assert len(df) == len(t) and df["flops"].sum() == t.total_flops
    assert set(t.by_phase()) == {"forward", "backward"}


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


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_grouped_conv_backward_is_twice_forward(groups: int) -> None:
    # torch's registered formula counts depthwise backward ~groups x too high
    conv = nn.Conv2d(16, 16, 3, padding=1, groups=groups)
    x = torch.randn(2, 16, 8, 8, requires_grad=True)
    t = roofline.trace(conv, x, train=True, loss_fn=lambda o: o.sum())
    forward = 2 * 2 * 8 * 8 * 16 * (16 // groups) * 9  # N * HW * C_out * C_in/g * k, x2
    assert matmul_flops(t, "forward") == forward
    # grad_input + grad_weight, each a convolution of the forward's size, + bias sum
    assert matmul_flops(t, "backward") == 2 * forward + 2 * 16 * 8 * 8


def _matmul_and_attention(t: Trace) -> dict[str, int]:
    return {k: v.flops for k, v in t.by_category().items() if k in ("matmul", "attention")}


def test_gpt2_and_bert_counts_match_hugging_face() -> None:
    transformers = pytest.importorskip("transformers")
    small = {"n_layer": 2, "n_head": 4, "vocab_size": 1000}
    zm = get_model("gpt2", batch_size=2, seq_len=32, dropout=0, n_embd=128, **small)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=128, bos_token_id=0, eos_token_id=0, **small))
    zb = get_model("bert-base", batch_size=2, seq_len=32, hidden=128, ffn=512, dropout=0,
                   **small)
    hb = transformers.BertForMaskedLM(transformers.BertConfig(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
        vocab_size=1000))
    for ours, theirs in ((zm, hf), (zb, hb)):
        ours.model.eval()
        theirs.eval()
        ids = ours.inputs[0]
        with torch.no_grad():
            a = roofline.trace(ours.model, ids)
            b = roofline.trace(lambda x, m=theirs: m(input_ids=x).logits, ids)
        # same linear layers (HF's Conv1D is addmm too) and the same attention kernel
        assert _matmul_and_attention(a) == _matmul_and_attention(b)


class _Attention(nn.Module):
    """One self-attention call with dropout, as HF and nanoGPT-style models make it."""

    def __init__(self, d: int, heads: int, p: float, causal: bool = False) -> None:
        super().__init__()
        self.qkv, self.heads, self.p, self.causal = nn.Linear(d, 3 * d), heads, p, causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for y in self.qkv(x).split(d, dim=2))
        p = self.p if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=self.causal)


@pytest.mark.parametrize("causal", [False, True])
def test_fake_dropout_attention_is_traced_as_the_fused_kernel(causal: bool) -> None:
    b, t, d, h = 2, 64, 32, 4
    model, x = _Attention(d, h, p=0.1, causal=causal), torch.randn(b, t, d)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(), fake=True)
        cpu = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(), fake=True,
                             attention="as-run")
    attn = [op for op in fused.ops if op.category == "attention"]
    assert [op.phase for op in attn] == ["forward", "backward"]
    assert all(op.dtype == "bfloat16" for op in attn)
    assert not any("bmm" in op.name or "softmax" in op.name for op in fused.ops)
    # QK^T and PV: 2 x (2 t t d) per sequence over all heads; causal keeps t(t+1)/2 pairs
    pairs = t * (t + 1) // 2 if causal else t * t
    assert attn[0].flops == b * 2 * 2 * pairs * d
    assert fused.info.attention_calls == 1 and fused.info.attention == "fused"
    # the CPU's own path: unfused, upcast to fp32, T x T scores in memory
    bmm = [op for op in cpu.ops if op.name.startswith("aten.bmm") and op.phase == "forward"]
    assert len(bmm) == 2 and all(op.dtype == "float32" for op in bmm)
    assert cpu.info.attention_calls == 0 and cpu.info.attention is None
    assert cpu.total_bytes > fused.total_bytes
    assert _no_global_state()
    a = roofline.analyze(fused, "a100")
    assert any("traced as one fused kernel" in n for n in a.assumptions)


def test_eager_attention_is_written_out_as_cuda_amp_runs_it() -> None:
    b, t, d, h = 2, 64, 32, 4
    model, x = _Attention(d, h, p=0.1, causal=True), torch.randn(b, t, d)
    with torch.autocast("cpu", dtype=torch.float16):
        eager = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(), fake=True,
                               attention="eager")
    fwd = eager.filter(lambda o: o.phase == "forward").ops
    bmm = [op for op in fwd if op.name.startswith("aten.bmm")]
    # both matmuls in fp16 over all t x t pairs (an eager kernel skips no masked pair)
    assert [op.dtype for op in bmm] == ["float16", "float16"]
    assert all(op.flops == b * 2 * t * t * d for op in bmm)
    # softmax and dropout in fp32 (CUDA autocast's softmax policy), on b h t t elements
    soft = [op for op in fwd if op.category == "softmax"]
    assert len(soft) == 1 and soft[0].dtype == "float32"
    assert soft[0].output_shapes[0] == (b, h, t, t)
    assert any(op.category == "dropout" and op.dtype == "float32" for op in fwd)
    assert eager.info.attention == "eager" and eager.info.attention_calls == 1
    # it runs on real tensors too, with the same matmuls and softmax; dropout stays as the
    # CPU runs it there (mask in the input's dtype), CUDA's fused kernel in a fake trace
    real = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(), attention="eager")
    fake = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum(), fake=True,
                          attention="eager")

    def main(t: roofline.Trace) -> list[tuple[str, int]]:
        return [(o.name, o.flops) for o in t.ops if o.category in ("matmul", "softmax")]

    assert main(real) == main(fake)
    # fp32 output (4 B) and bool mask (1 B) per element of the b h t t probabilities
    written = [[o.bytes_written for o in t.ops if o.name == "aten.native_dropout.default"]
               for t in (real, fake)]
    assert written == [[], [5 * b * h * t * t]]
    assert _no_global_state()
    with pytest.raises(ValueError, match="attention='flash'"):
        roofline.trace(model, x, fake=True, attention="flash")  # type: ignore[arg-type]


def test_real_and_dropout_free_attention_are_recorded_as_run() -> None:
    model, x = _Attention(32, 4, p=0.1), torch.randn(2, 16, 32)
    real = roofline.trace(model, x, train=True, loss_fn=lambda o: o.sum())
    assert any(op.name.startswith("aten.bmm") for op in real.ops)
    # recorded as the CPU ran it, and the analysis says so
    assert real.info.attention_calls == 0 and real.info.attention_unfused == 1
    assert any("as the CPU ran them" in n for n in roofline.analyze(real, "a100").assumptions)
    model.eval()  # p = 0: the CPU picks its fused kernel itself, nothing is rerouted
    t = roofline.trace(model, x, fake=True)
    assert [op.category for op in t.ops].count("attention") == 1
    assert t.info.attention_calls == 0 and t.info.attention is None


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3},
                                {"attn_mask": torch.randn(8, 8)},
                                {"attn_mask": torch.eye(8, dtype=torch.bool) | (
                                    torch.rand(8, 8, generator=torch.Generator().manual_seed(0))
                                    > 0.3)}])
def test_eager_attention_computes_what_sdpa_computes(kw: dict) -> None:
    from roofline.tracing.attention import _eager

    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 8, 16, generator=g)
    k, v = torch.randn(2, 2, 8, 16, generator=g), torch.randn(2, 2, 8, 16, generator=g)
    # grouped-query: each K/V head serves 2 query heads (SDPA's enable_gqa, torch >= 2.5)
    ref = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                         **kw)
    assert torch.allclose(_eager(q, k, v, enable_gqa=True, **kw), ref, atol=1e-5)


def test_fused_attention_takes_a_boolean_mask_and_reports_what_it_cannot_take() -> None:
    b, h, t, e = 2, 4, 16, 8
    q = torch.randn(b, h, t, e)
    mask = torch.rand(t, t, generator=torch.Generator().manual_seed(0)) > 0.2

    def step(*, gqa: bool = False, m: torch.Tensor | None = mask) -> torch.Tensor:
        kv = q[:, :2] if gqa else q
        kw = {"enable_gqa": True} if gqa else {}
        return F.scaled_dot_product_attention(q, kv, kv, attn_mask=m, dropout_p=0.1, **kw)

    t_mask = roofline.trace(step, fake=True)
    assert t_mask.info.attention_calls == 1
    attn = [op for op in t_mask.ops if op.category == "attention"]
    # the boolean mask became an additive one in the query's dtype (4 bytes an element), as
    # SDPA converts it; q, k and v are one tensor, read once
    assert len(attn) == 1 and attn[0].bytes_read == 4 * (b * h * t * e + t * t)
    if "enable_gqa" in F.scaled_dot_product_attention.__doc__:  # torch >= 2.5
        t_gqa = roofline.trace(lambda: step(gqa=True, m=None), fake=True)
        assert t_gqa.info.attention_calls == 0 and t_gqa.info.attention_unfused == 1
    assert _no_global_state()
