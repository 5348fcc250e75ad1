"""Attention as the predicted device runs it (tracing/attention.py): SDPA with dropout
traced as the fused kernel, written out as CUDA AMP's eager path, or recorded as the CPU ran
it.

FLOPs are derived by hand: QK^T and PV are 2 x (2 t t d) per sequence over all heads; a
causal kernel keeps t(t+1)/2 pairs.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import no_global_state
from torch import nn

import roofline


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
    assert no_global_state()
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
    # softmax and dropout in fp32 (CUDA autocast's softmax policy), on b h t t elements:
    # CUDA's softmax reads the fp16 scores and writes fp32 in one kernel (half_to_float)
    soft = [op for op in fwd if op.category == "softmax"]
    n = b * h * t * t
    assert len(soft) == 1 and (soft[0].bytes_read, soft[0].bytes_written) == (2 * n, 4 * n)
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
    assert no_global_state()
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
    assert no_global_state()


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_counts_each_query_head_once(causal: bool) -> None:
    # CUDA's flash kernels take enable_gqa's shared K/V heads as they are (seen on an H200,
    # torch 2.11): 8 query heads over 2 K/V heads do the matmuls of 8 heads, 4*B*H*S^2*D
    # FLOPs dense (QK^T and PV, 2 FLOPs per multiply-add), the causal pairs' share of it.
    from roofline.tracing.formulas import _attention

    b, h, s, d = 2, 8, 128, 64
    dense = 4 * b * h * s * s * d
    pairs = s * (s + 1) // 2
    want = dense * pairs // (s * s) if causal else dense
    q, kv = (b, h, s, d), (b, 2, s, d)
    assert _attention(q, kv, kv, causal, backward=False) == want
    assert _attention(q, kv, kv, causal, backward=True) == \
        _attention(q, q, q, causal, backward=True) == 5 * want // 2
