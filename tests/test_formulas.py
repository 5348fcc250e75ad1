"""FLOP formulas and byte rules (tracing/formulas.py, tracing/ops.py).

Every expected number is derived by hand from shapes and itemsizes in the test itself, or
taken from a published count (ResNet-50's 4.1 GMACs per image, He et al. 2016 and
torchvision) or another counter (torch's FlopCounterMode, fvcore, Hugging Face's models).

Attention kernels called directly (issue 22, items 11 and 12): the CUDA kernels cannot run
on this CPU, their meta kernels can, so those ops are called on ``device="meta"`` tensors
inside ``roofline.capture()``. Layouts (torch 2.13): ``aten._flash_attention_forward/
_backward`` and ``aten._efficient_attention_forward/_backward`` take (B, S, H, D)
(``_scaled_dot_product_flash_attention`` transposes its (B, H, S, D) inputs before calling
the kernel; the efficient kernel's meta reads ``M = query.size(1)``, ``num_heads =
query.size(-2)``); torch 2.13's formulas (torch/utils/flop_counter.py:441-503, 549-612)
hand those shapes to ``sdpa_flop_count``, which unpacks (B, H, S, D). Fixed upstream for
flash in pytorch/pytorch#184348 and for efficient attention in #196132, whose table gives
B=2, H=16, M=N=1024, K=64: forward 8,589,934,592 = 4 B H M N K, backward 21,474,836,480 =
10 B H M N K; the same shapes are used here. ``aten._scaled_dot_product_cudnn_attention``
takes (B, H, S, D). ``torch.ops.torch_attn._varlen_attn`` (torch/nn/attention/varlen.py:45)
takes packed (total, H, D) with cumulative sequence offsets. Causal attention counts the
query-key pairs the kernel computes, L(L+1)/2 for a top-left L x L mask.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from conftest import captured, op_of
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import roofline
from roofline.tracing import OpRecord, Trace, register_formula
from roofline.tracing.ops import lookup
from roofline.zoo import get_model

# --- FLOPs against hand derivations and other counters ------------------------------------

MATMUL = ("matmul", "conv", "attention")


def matmul_flops(t: Trace, phase: str | None = None, cats: tuple[str, ...] = MATMUL) -> int:
    return sum(op.flops for op in t.ops
               if op.category in cats and (phase is None or op.phase == phase))


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


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


# --- bytes --------------------------------------------------------------------------------

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


aten = torch.ops.aten


LONG = 8  # bytes of an int64 index


HALF = 2  # bytes of a float16 element


# --- partial writes and reads move what they touch (issue 13, item 8) ---------------------

KV_B, KV_H, KV_S, KV_D = 2, 4, 4096, 64  # a KV cache of 4096 positions


def test_one_token_index_copy_into_a_kv_cache_moves_one_token() -> None:
    cache = torch.zeros(KV_B, KV_H, KV_S, KV_D, dtype=torch.float16)
    token = torch.randn(KV_B, KV_H, 1, KV_D, dtype=torch.float16)
    pos = torch.tensor([17])
    op = op_of(captured(lambda: cache.index_copy_(2, pos, token)), "aten.index_copy_")
    one_token = KV_B * KV_H * 1 * KV_D * HALF  # 1 KiB; the cache is 4 MiB
    assert op.bytes_read == 1 * LONG + one_token  # the index and the new token
    assert op.bytes_written == one_token
    assert op.flops == 0 and op.counted


def test_one_token_write_into_a_7b_sized_cache_under_fake_tensors() -> None:
    # (1, 32, 4096, 128) fp16: 32 MiB, read and written whole before (67 MB)
    def step(cache: torch.Tensor, token: torch.Tensor) -> None:
        cache.index_copy_(2, torch.tensor([5]), token)

    t = roofline.trace(step, torch.zeros(1, 32, 4096, 128, dtype=torch.float16),
                       torch.randn(1, 32, 1, 128, dtype=torch.float16), fake=True)
    op = op_of(t, "aten.index_copy_")
    assert op.bytes_written == 32 * 128 * HALF
    assert op.bytes_read == LONG + 32 * 128 * HALF


def test_index_put_writes_the_indexed_region() -> None:
    cache = torch.zeros(KV_B, KV_H, KV_S, KV_D, dtype=torch.float16)
    token = torch.randn(KV_B, KV_H, 1, KV_D, dtype=torch.float16)
    pos = torch.tensor([3])

    def write() -> None:
        cache[:, :, pos] = token  # index_put_ with indices (None, None, pos)

    op = op_of(captured(write), "aten.index_put_")
    # region: the index's one position times the dims no index covers (KV_B, KV_H, KV_D)
    region = KV_B * KV_H * KV_D
    assert op.bytes_written == region * HALF
    assert op.bytes_read == LONG + region * HALF
    assert op.flops == 0


def test_index_put_accumulate_reads_the_region_and_adds_once_per_element() -> None:
    x = torch.zeros(10, 6)
    rows = torch.tensor([1, 4, 4])  # three rows of 6 floats, one repeated
    values = torch.ones(3, 6)
    op = op_of(captured(lambda: x.index_put_((rows,), values, accumulate=True)),
               "aten.index_put_")
    assert op.flops == 3 * 6
    assert op.bytes_read == 3 * LONG + 3 * 6 * 4 + 3 * 6 * 4  # index, values, region
    assert op.bytes_written == 3 * 6 * 4


def test_index_put_with_a_boolean_mask_counts_the_mask_as_an_upper_bound() -> None:
    x = torch.zeros(8, 5)
    mask = torch.zeros(8, dtype=torch.bool)
    mask[2] = True
    op = op_of(captured(lambda: x.index_put_((mask,), torch.ones(5), accumulate=True)),
               "aten.index_put_")
    # which rows are true is data: all 8 rows of 5 are counted (1 is touched)
    assert op.flops == 8 * 5
    assert op.bytes_written == 8 * 5 * 4


def test_scatter_reads_only_the_source_elements_the_index_uses() -> None:
    x = torch.zeros(16, 8)
    index = torch.zeros(2, 8, dtype=torch.long)
    src = torch.randn(4, 8)  # larger than the index: only its first 2 rows are used
    op = op_of(captured(lambda: x.scatter_(0, index, src)), "aten.scatter_")
    assert op.bytes_read == 2 * 8 * LONG + 2 * 8 * 4
    assert op.bytes_written == 2 * 8 * 4
    assert op.flops == 0


def test_scatter_add_adds_once_per_source_element_and_reads_the_destination() -> None:
    x = torch.zeros(16, 8)
    index = torch.randint(0, 16, (3, 8))
    src = torch.randn(5, 8)
    op = op_of(captured(lambda: x.scatter_add_(0, index, src)), "aten.scatter_add_")
    used = 3 * 8
    assert op.flops == used
    assert op.bytes_read == used * LONG + used * 4 + used * 4  # index, src, destination
    assert op.bytes_written == used * 4


def test_scatter_reduce_counts_and_include_self_decides_the_destination_read() -> None:
    x = torch.zeros(16, 8)
    index = torch.randint(0, 16, (3, 8))
    src = torch.randn(3, 8)
    used = 3 * 8
    t = captured(lambda: x.scatter_reduce_(0, index, src, "amax"))
    op = op_of(t, "aten.scatter_reduce_")
    assert op.flops == used
    assert op.bytes_read == used * LONG + used * 4 + used * 4
    t = captured(lambda: x.scatter_reduce_(0, index, src, "sum", include_self=False))
    assert op_of(t, "aten.scatter_reduce_").bytes_read == used * LONG + used * 4
    assert not t.uncounted


def test_index_add_accumulates_source_slices() -> None:
    x = torch.zeros(100, 16)
    index = torch.tensor([3, 9])
    source = torch.randn(2, 16)
    op = op_of(captured(lambda: x.index_add_(0, index, source)), "aten.index_add_")
    assert op.flops == 2 * 16
    assert op.bytes_read == 2 * LONG + 2 * 16 * 4 + 2 * 16 * 4
    assert op.bytes_written == 2 * 16 * 4
    scaled = op_of(captured(lambda: x.index_add_(0, index, source, alpha=0.5)),
                   "aten.index_add_")
    assert scaled.flops == 2 * (2 * 16)  # a multiply and an add per element


def test_out_of_place_index_copy_builds_a_whole_new_tensor() -> None:
    x = torch.zeros(100, 16)
    op = op_of(captured(lambda: x.index_copy(0, torch.tensor([1]), torch.ones(1, 16))),
               "aten.index_copy")
    assert op.bytes_read == 100 * 16 * 4 + LONG + 16 * 4
    assert op.bytes_written == 100 * 16 * 4


@pytest.mark.parametrize("gather", [
    lambda table, idx: torch.index_select(table, 0, idx),
    lambda table, idx: table[idx],
    lambda table, idx: F.embedding(idx, table),
    lambda table, idx: torch.gather(table, 0, idx[:, None].expand(len(idx), 16).contiguous()),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_gathers_read_the_index_and_the_rows_they_gather(gather: Callable[..., Any],
                                                         dtype: torch.dtype) -> None:
    # an integer table is not mistaken for an index (it used to be read whole)
    table = torch.arange(1000 * 16).reshape(1000, 16).to(dtype)
    idx = torch.tensor([5, 7, 900])
    t = captured(gather, table, idx)
    op = next(op for op in t.ops if op.category in ("copy", "embedding")
              and op.name.split(".")[1] in ("index_select", "index", "embedding", "gather"))
    row_bytes = 16 * table.element_size()
    index_bytes = 3 * LONG if "gather" not in op.name else 3 * 16 * LONG
    assert op.bytes_written == 3 * row_bytes
    assert op.bytes_read == index_bytes + 3 * row_bytes


@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_reads_one_log_probability_per_target(weighted: bool) -> None:
    """Loss.cu gathers x[i, t_i] (and w[t_i]); its backward zero-fills the gradient, a
    kernel of its own, then writes one element per target: the classes are not read."""
    rows, classes = 6, 1000
    x = torch.randn(rows, classes, requires_grad=True)
    target, w = torch.randint(0, classes, (rows,)), torch.rand(classes)
    t = roofline.trace(lambda x, t: F.nll_loss(x, t, weight=w if weighted else None)
                       .backward(), x, target, fake=True)
    fwd, bwd = op_of(t, "aten.nll_loss_forward"), op_of(t, "aten.nll_loss_backward")
    weights = rows * 4 if weighted else 0
    assert fwd.bytes_read == rows * LONG + rows * 4 + weights
    assert fwd.bytes_written == 2 * 4  # the loss and the total weight, fp32 scalars
    assert bwd.bytes_read == rows * LONG + 4 + 4 + weights  # target, grad, total weight
    assert bwd.bytes_written == rows * classes * 4 + rows * 4  # the fill, the targets
    assert (fwd.kernels, bwd.kernels) == (1, 2)
    assert fwd.flops == bwd.flops == 2 * rows


# --- partial fills, copies of views, bags (review of issue 13, item 8) --------------------

def test_index_fill_writes_only_the_filled_slices() -> None:
    # (1, 4096, 4096) fp16, 32 MiB: one column (index 5 along dim 1) is 1 x 4096 elements
    def fill(cache: torch.Tensor) -> None:
        cache.index_fill_(1, torch.tensor([5]), 0.0)

    t = roofline.trace(fill, torch.zeros(1, 4096, 4096, dtype=torch.float16), fake=True)
    op = op_of(t, "aten.index_fill_")
    assert op.bytes_read == LONG  # the index; a fill reads nothing else
    assert op.bytes_written == 4096 * HALF
    assert op.flops == 0 and op.counted and not t.uncounted
    # two indices along dim 0 of a (10, 3, 4) tensor: 2 slices of 12; a tensor value is read
    x = torch.zeros(10, 3, 4)
    op = op_of(captured(lambda: x.index_fill_(0, torch.tensor([1, 8]), torch.tensor(2.0))),
               "aten.index_fill_")
    assert (op.bytes_read, op.bytes_written) == (2 * LONG + 4, 2 * 12 * 4)
    # out of place: a new tensor, self read and the output written whole
    op = op_of(captured(lambda: x.index_fill(0, torch.tensor([1]), 0.0)), "aten.index_fill")
    assert (op.bytes_read, op.bytes_written) == (120 * 4 + LONG, 120 * 4)


def test_copies_of_a_view_read_the_view_not_the_tensor() -> None:
    def narrow(cache: torch.Tensor) -> torch.Tensor:
        return cache.narrow_copy(1, 0, 1)

    t = roofline.trace(narrow, torch.zeros(1, 4096, 4096, dtype=torch.float16), fake=True)
    op = op_of(t, "aten.narrow_copy")
    assert (op.bytes_read, op.bytes_written) == (4096 * HALF, 4096 * HALF)
    assert op.flops == 0 and op.counted
    x = torch.randn(6, 20)
    t = captured(lambda: (aten.slice_copy(x, 1, 0, 10, 2),  # (6, 5)
                          aten.select_copy(x, 0, 2),  # (20,)
                          aten.diagonal_copy(x),  # (6,)
                          aten.as_strided_copy(x, (2, 4), (20, 1))))  # (2, 4)
    moved = {op.name.split(".")[1]: (op.bytes_read, op.bytes_written) for op in t.ops}
    assert moved == {"slice_copy": (30 * 4, 30 * 4), "select_copy": (20 * 4, 20 * 4),
                     "diagonal_copy": (6 * 4, 6 * 4), "as_strided_copy": (8 * 4, 8 * 4)}
    assert not t.uncounted
    # an expanded (stride-0) tensor: 8 rows of one stored row of 64 floats read once
    wide = torch.randn(1, 64).expand(4096, 64)
    op = op_of(captured(lambda: wide.narrow_copy(0, 0, 8)), "aten.narrow_copy")
    assert (op.bytes_read, op.bytes_written) == (64 * 4, 8 * 64 * 4)


def test_put_writes_one_element_per_index() -> None:
    x = torch.zeros(10, 6)
    index = torch.tensor([1, 5, 59])
    source = torch.ones(3)
    op = op_of(captured(lambda: x.put_(index, source, accumulate=True)), "aten.put_")
    assert op.flops == 3
    assert op.bytes_read == 3 * LONG + 3 * 4 + 3 * 4  # index, source, destination
    assert op.bytes_written == 3 * 4
    op = op_of(captured(lambda: x.put_(index, source)), "aten.put_")
    assert (op.flops, op.bytes_read, op.bytes_written) == (0, 3 * LONG + 3 * 4, 3 * 4)


def test_out_of_place_scatters_into_views_move_the_whole_tensor() -> None:
    x = torch.zeros(6, 6)
    t = captured(lambda: torch.diagonal_scatter(x, torch.ones(6)))
    op = op_of(t, "aten.diagonal_scatter")
    assert (op.bytes_read, op.bytes_written) == (36 * 4 + 6 * 4, 36 * 4)
    assert op.flops == 0 and not t.uncounted


BAG_INDEX = torch.tensor([3, 7, 9, 3])  # 4 gathered rows (one repeated)


BAG_OFFSETS = torch.tensor([0, 2])  # 2 bags of 2


BAG_DIM = 64


@pytest.mark.parametrize(("mode", "weighted", "flops"), [
    ("sum", False, 4 * BAG_DIM),  # one add per gathered element
    ("sum", True, 2 * 4 * BAG_DIM),  # a multiply by the sample's weight and an add
    ("mean", False, 4 * BAG_DIM + 2 * BAG_DIM),  # adds, and one divide per output element
    ("max", False, 4 * BAG_DIM),  # one compare per gathered element
])
def test_embedding_bag_reads_the_rows_it_gathers(mode: str, weighted: bool,
                                                 flops: int) -> None:
    weights = torch.rand(4) if weighted else None

    def bag(table: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(BAG_INDEX, table, BAG_OFFSETS, mode=mode,
                               per_sample_weights=weights)

    # the table (50000 x 1024 fp32 would be 205 MB) is not read: a larger one costs the same
    reads = set()
    for rows in (1000, 50000):
        with torch.no_grad():  # _embedding_bag_forward_only
            t = roofline.trace(bag, torch.randn(rows, BAG_DIM), fake=True)
        op = op_of(t, "aten._embedding_bag")
        assert op.flops == flops and op.counted and not t.uncounted
        reads.add(op.bytes_read)
        out = 2 * BAG_DIM * 4
        # the output and the bookkeeping ATen returns (offset2bag, bag sizes, argmax
        # indices: at most one int64 per index, per bag and per output element each)
        assert out <= op.bytes_written <= out + (4 + 2 + 2 * BAG_DIM) * LONG
    small = 4 * LONG + 2 * LONG + (4 * 4 if weighted else 0)  # index, offsets, weights
    assert reads == {small + 4 * BAG_DIM * 4}


@pytest.mark.parametrize(("mode", "grad_flops"), [
    ("sum", 4 * BAG_DIM),  # each gathered element's bag gradient added to its row
    ("mean", 2 * 4 * BAG_DIM),  # divided by the bag size, then added
    ("max", 2 * BAG_DIM),  # each output gradient added to the argmax row
])
def test_embedding_bag_backward_in_a_training_step(mode: str, grad_flops: int) -> None:
    model = torch.nn.EmbeddingBag(50000, BAG_DIM, mode=mode)
    t = roofline.trace(lambda: model(BAG_INDEX, BAG_OFFSETS).sum(), train=True, fake=True)
    op = op_of(t, "aten._embedding_bag_backward")
    assert op.flops == grad_flops and op.counted and op.phase == "backward"
    assert not t.uncounted
    # the dense weight gradient is written whole: 50000 rows
    assert op.bytes_written == 50000 * BAG_DIM * 4


def test_embedding_bag_per_sample_weights_gradient_reads_only_gathered_rows() -> None:
    model = torch.nn.EmbeddingBag(50000, BAG_DIM, mode="sum")
    weights = torch.rand(4, requires_grad=True)
    t = roofline.trace(lambda: model(BAG_INDEX, BAG_OFFSETS, per_sample_weights=weights).sum(),
                       train=True, fake=True)
    op = op_of(t, "aten._embedding_bag_per_sample_weights_backward")
    assert op.flops == 4 * 2 * BAG_DIM  # a dot product of 64 multiply-adds per index
    assert op.bytes_written == 4 * 4  # one float per sample weight
    # the bag gradient (sum's gradient: one float broadcast to (2, 64), stride 0), the 4
    # gathered rows, index and offsets; offset2bag: at most an int64 per index (the
    # 50000-row table would be 12.8 MB)
    least = 4 + 4 * BAG_DIM * 4 + 4 * LONG + 2 * LONG
    assert least <= op.bytes_read <= least + 4 * LONG
    # weighted sum: its weight gradient scales each row by the weight (2 per element)
    assert op_of(t, "aten._embedding_bag_backward").flops == 2 * 4 * BAG_DIM


# --- complex dtypes count real arithmetic (issue 13, item 8) ------------------------------

def test_complex_matmul_is_8mkn_real_flops() -> None:
    m, k, n = 8, 12, 5
    a = torch.randn(m, k, dtype=torch.complex64)
    b = torch.randn(k, n, dtype=torch.complex64)
    assert op_of(captured(torch.mm, a, b), "aten.mm").flops == 8 * m * k * n
    real = torch.randn(m, k)
    assert op_of(captured(torch.mm, real, real.t()), "aten.mm").flops == 2 * m * k * m
    batched = torch.randn(3, m, k, dtype=torch.complex128)
    assert op_of(captured(torch.bmm, batched, batched.transpose(1, 2)), "aten.bmm").flops \
        == 3 * 8 * m * k * m


def test_complex_elementwise_multiply_is_6_and_add_is_2() -> None:
    z = torch.randn(4, 10, dtype=torch.complex64)
    t = captured(lambda: (z * z, z + z, z.sum()))
    assert op_of(t, "aten.mul").flops == 6 * 40  # (a+bi)(c+di): 4 products, 2 adds
    assert op_of(t, "aten.add").flops == 2 * 40
    assert op_of(t, "aten.sum").flops == 2 * 40


def test_complex_op_without_a_complex_rule_is_reported_not_guessed() -> None:
    z = torch.randn(4, 10, dtype=torch.complex64)
    with pytest.warns(roofline.RooflineWarning, match="without a FLOP formula"), \
            roofline.capture() as t:
        z.exp()
    op = op_of(t, "aten.exp")
    assert not op.counted and op.flops == 0
    assert "aten.exp.default" in t.uncounted
    # the same op on a real tensor is counted
    assert op_of(captured(lambda: z.real.exp()), "aten.exp").counted


# --- complex times real (review of issue 13, item 8) --------------------------------------

Z = torch.randn(8, dtype=torch.complex64)


X = torch.randn(8)


@pytest.mark.parametrize(("expr", "per_element"), [
    pytest.param(lambda: Z * X, 2, id="Z * X"),  # (a+bi)x = ax + bxi: 2 products
    pytest.param(lambda: X * Z, 2, id="X * Z"),
    pytest.param(lambda: Z * 2.0, 2, id="Z * 2.0"),  # a real Python scalar is a real factor
    pytest.param(lambda: Z * Z, 6, id="Z * Z"),  # (ac-bd) + (ad+bc)i: 4 products, 2 adds
    pytest.param(lambda: Z * 2j, 6, id="Z * 2j"),
    pytest.param(lambda: Z + X, 1, id="Z + X"),  # (a+x) + bi: only the real part changes
    pytest.param(lambda: Z + Z, 2, id="Z + Z"),
    pytest.param(lambda: Z - X, 1, id="Z - X"),
    pytest.param(lambda: X - Z, 2, id="X - Z"),  # (x-a) - bi: a subtract and a negate
    pytest.param(lambda: 1 - Z, 2, id="1 - Z"),  # rsub, real minus complex
    pytest.param(lambda: 1j - X, 1, id="1j - X"),  # rsub, complex minus real
    pytest.param(lambda: Z.clone().add_(X), 1, id="Z.clone().add_(X)"),
    # real arithmetic written to a complex out=
    pytest.param(lambda: torch.mul(X, X, out=torch.empty(8, dtype=torch.complex64)), 1,
                 id="mul(X, X, out=complex)"),
])
def test_complex_factor_follows_the_operands_dtypes(expr: Callable[[], Any],
                                                     per_element: int) -> None:
    t = captured(expr)
    op = next(op for op in t.ops if op.category == "pointwise")
    assert op.flops == per_element * 8 and op.counted


def test_complex_times_real_matmul_is_4mkn() -> None:
    # ATen's mm refuses mixed dtypes, so the registry's rule is checked directly:
    # z*x + acc is 2 products + 2 adds per multiply-add
    from roofline.tracing.ops import ComplexOperands, lookup

    m, k, n = 3, 5, 7
    z, x = torch.randn(m, k, dtype=torch.complex64), torch.randn(k, n)
    info = lookup(aten.mm.default)
    assert info is not None

    def flops(a: torch.Tensor, b: torch.Tensor) -> int | None:
        return info.count_flops((a, b), {}, {"self": a, "mat2": b}, None, [a, b])

    assert flops(z, x) == 4 * m * k * n
    assert flops(x.t(), z.t()) == 4 * n * k * m  # real @ complex
    assert flops(z, x.to(torch.complex64)) == 8 * m * k * n
    assert flops(z.real, x) == 2 * m * k * n
    with pytest.raises(ValueError, match="positive integers"):
        ComplexOperands(6, 0, 2)


# --- sort, top-k, no silent zeros (issue 13, item 8) --------------------------------------

def test_sort_counts_n_log2_n_comparisons_per_row() -> None:
    t = captured(lambda: torch.sort(torch.randn(4, 1024)))
    assert op_of(t, "aten.sort").flops == 4 * 1024 * 10  # log2(1024) = 10
    # along dim 0: 3 rows of 8 values, log2(8) = 3
    t = captured(lambda: torch.sort(torch.randn(8, 3), dim=0, stable=True))
    assert op_of(t, "aten.sort").flops == 3 * 8 * 3
    assert not t.uncounted


def test_topk_counts_n_log2_k_comparisons_per_row() -> None:
    x = torch.randn(4, 1024)
    assert op_of(captured(torch.topk, x, 8), "aten.topk").flops == 4 * 1024 * 3
    # k = 1 still compares every value once
    assert op_of(captured(torch.topk, x, 1), "aten.topk").flops == 4 * 1024
    t = captured(lambda: torch.topk(x, 4, dim=0))  # 1024 rows of 4 values, log2(4) = 2
    assert op_of(t, "aten.topk").flops == 1024 * 4 * 2 and not t.uncounted


# --- arguments by schema name; one SDPA-backward formula (issue 12) -----------------------

def _efficient(q: torch.Tensor, causal: bool) -> None:
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(
        q, q, q, None, True, 0.0, causal)
    aten._scaled_dot_product_efficient_attention_backward(
        out, q, q, q, None, out, lse, seed, offset, 0.0, [True, True, True, False], causal)


def _flash(q: torch.Tensor, causal: bool) -> None:
    out, lse, cq, ck, mq, mk, seed, offset, _ = aten._scaled_dot_product_flash_attention(
        q, q, q, 0.0, causal)
    aten._scaled_dot_product_flash_attention_backward(
        out, q, q, q, out, lse, cq, ck, mq, mk, 0.0, causal, seed, offset)


def _cudnn(q: torch.Tensor, causal: bool) -> None:
    out, lse, cq, ck, mq, mk, seed, offset, _ = aten._scaled_dot_product_cudnn_attention(
        q, q, q, None, True, 0.0, causal, False)
    aten._scaled_dot_product_cudnn_attention_backward(
        out, q, q, q, out, lse, seed, offset, None, cq, ck, mq, mk, 0.0, causal)


def _cpu(q: torch.Tensor, causal: bool) -> None:
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.0, causal)
    aten._scaled_dot_product_flash_attention_for_cpu_backward(out, q, q, q, out, lse, 0.0,
                                                              causal)


@pytest.mark.parametrize("kernel", [_efficient, _flash, _cudnn, _cpu])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward_reads_is_causal_by_name(kernel: Callable[..., None],
                                              causal: bool) -> None:
    # is_causal sits at argument 7, 11 or 14 depending on the kernel
    b, h, s, d = 2, 4, 64, 16
    t = roofline.trace(kernel, torch.randn(b, h, s, d), causal, fake=True)
    pairs = s * (s + 1) // 2 if causal else s * s
    forward = 2 * (2 * b * h * pairs * d)  # QK^T and PV
    fwd, bwd = [op for op in t.ops if op.category == "attention"]
    assert fwd.flops == forward and not fwd.backward_kernel
    assert bwd.flops == forward * 5 // 2 and bwd.backward_kernel  # 2.5x: torch's convention


# --- attention kernels in (B, S, H, D) (issue 22, item 11) --------------------------------

# the shapes of pytorch/pytorch#196132's table
B, S, H, D = 2, 1024, 16, 64


DENSE_FWD = 4 * B * H * S * S * D  # 8,589,934,592


DENSE_BWD = 10 * B * H * S * S * D  # 21,474,836,480 (2.5x: scores recomputed)


CAUSAL = (S * (S + 1) // 2) / (S * S)  # share of query-key pairs a causal kernel computes


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta", dtype=torch.float16)


def _only(fn: Callable[[], Any], name: str) -> OpRecord:
    """The one op named ``name...`` that ``fn()`` runs, captured."""
    return op_of(captured(fn), name)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward_reads_batch_seq_heads_dim(causal: bool) -> None:
    q, k, v = _meta(B, S, H, D), _meta(B, S, H, D), _meta(B, S, H, D)
    op = _only(lambda: aten._flash_attention_forward(q, k, v, None, None, S, S, 0.0, causal,
                                                     False), "aten._flash_attention_forward")
    assert op.category == "attention"
    assert op.flops == round(DENSE_FWD * (CAUSAL if causal else 1))


def test_flash_attention_backward_reads_batch_seq_heads_dim() -> None:
    q, k, v = _meta(B, S, H, D), _meta(B, S, H, D), _meta(B, S, H, D)
    out, lse, seed, offset, _ = aten._flash_attention_forward(q, k, v, None, None, S, S, 0.0,
                                                              False, False)
    op = _only(lambda: aten._flash_attention_backward(
        _meta(B, S, H, D), q, k, v, out, lse, None, None, S, S, 0.0, False, seed, offset),
        "aten._flash_attention_backward")
    assert op.flops == DENSE_BWD


def test_flash_attention_with_grouped_kv_heads() -> None:
    """GQA: 16 query heads over 4 key/value heads; every query head attends."""
    q, kv = _meta(B, S, H, D), _meta(B, S, 4, D)
    op = _only(lambda: aten._flash_attention_forward(q, kv, kv, None, None, S, S, 0.0, False,
                                                     False), "aten._flash_attention_forward")
    assert op.flops == DENSE_FWD


@pytest.mark.parametrize("mask_type", [0, 1])  # 0: none; 1: causal from the top left
def test_efficient_attention_forward_reads_batch_seq_heads_dim(mask_type: int) -> None:
    q, k, v = _meta(B, S, H, D), _meta(B, S, H, D), _meta(B, S, H, D)
    op = _only(lambda: aten._efficient_attention_forward(q, k, v, None, None, None, S, S,
                                                         0.0, mask_type, True),
               "aten._efficient_attention_forward")
    assert op.flops == round(DENSE_FWD * (CAUSAL if mask_type else 1))


def test_efficient_attention_with_more_keys_than_queries() -> None:
    """Non-square (the efficient kernel allows it): 128 queries over 256 keys, 8 heads."""
    q, kv = _meta(1, 128, 8, D), _meta(1, 256, 8, D)
    op = _only(lambda: aten._efficient_attention_forward(q, kv, kv, None, None, None, 128,
                                                         256, 0.0, 0, True),
               "aten._efficient_attention_forward")
    assert op.flops == 4 * 1 * 8 * 128 * 256 * D


def test_efficient_attention_backward_reads_batch_seq_heads_dim() -> None:
    q, k, v = _meta(B, S, H, D), _meta(B, S, H, D), _meta(B, S, H, D)
    out, lse, seed, offset, _, _ = aten._efficient_attention_forward(
        q, k, v, None, None, None, S, S, 0.0, 0, True)
    op = _only(lambda: aten._efficient_attention_backward(
        _meta(B, S, H, D), q, k, v, None, out, None, None, S, S, lse, 0.0, seed, offset, 0,
        False), "aten._efficient_attention_backward")
    assert op.flops == DENSE_BWD


def test_cudnn_attention_keeps_its_batch_heads_seq_dim_count() -> None:
    """The SDPA-level cuDNN op takes (B, H, S, D): right today, and must stay so."""
    q = _meta(B, H, S, D)
    op = _only(lambda: aten._scaled_dot_product_cudnn_attention(q, q, q, None, True, 0.0,
                                                                False),
               "aten._scaled_dot_product_cudnn_attention")
    assert op.flops == DENSE_FWD


def test_the_same_count_on_fake_cuda_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(B, S, H, D, device="cuda", dtype=torch.float16)
        op = _only(lambda: aten._flash_attention_forward(q, q, q, None, None, S, S, 0.0,
                                                         False, False),
                   "aten._flash_attention_forward")
    assert op.flops == DENSE_FWD


# --- varlen attention (issue 22, item 12) -------------------------------------------------

VH, VD, LENS = 8, 64, (128, 64)


def _per_sequence(causal: bool) -> int:
    pairs = [L * (L + 1) // 2 if causal else L * L for L in LENS]
    return sum(4 * VH * VD * p for p in pairs)  # dense 41,943,040; causal 21,168,128


def _varlen(q: torch.Tensor, cu: torch.Tensor, causal: bool) -> torch.Tensor:
    from torch.nn.attention.varlen import varlen_attn

    return varlen_attn(q, q, q, cu, cu, max(LENS), max(LENS),
                       window_size=(-1, 0) if causal else (-1, -1))


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_attention_counts_each_sequence(causal: bool) -> None:
    q = _meta(sum(LENS), VH, VD)
    cu = torch.tensor([0, 128, 192], dtype=torch.int32)
    op = _only(lambda: _varlen(q, cu, causal), "torch_attn._varlen_attn")
    assert op.category == "attention"
    assert op.flops == _per_sequence(causal)


def test_varlen_attention_in_a_fake_trace_knows_its_sequences() -> None:
    """The offsets are a 3-element integer input: a fake trace can keep their values
    (today they become a fake without values, and torch's formula falls back to
    max_len for every sequence: 2 x 128^2 pairs instead of 128^2 + 64^2)."""
    q = torch.randn(sum(LENS), VH, VD, dtype=torch.float16)
    cu = torch.tensor([0, 128, 192], dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = roofline.trace(lambda q, cu: _varlen(q, cu, True), q.to("meta"), cu, fake=True)
    (op,) = [op for op in t.ops if op.name.startswith("torch_attn._varlen_attn")]
    assert op.flops == _per_sequence(True)


# --- categories (issue 12; issue 22, item 12) ---------------------------------------------

def test_register_formula_refuses_an_unknown_category() -> None:
    with pytest.raises(ValueError, match=r"unknown op category 'matmull'.*matmul"):
        register_formula(aten.cummax, category="matmull")
    assert roofline.tracing.ops.lookup(aten.cummax.default) is None  # nothing registered


# an explicit category for every op torch can count (issue 22, item 12)
EXPECTED_CATEGORY = {
    **dict.fromkeys(["mm", "addmm", "bmm", "baddbmm", "_scaled_mm"], "matmul"),
    **dict.fromkeys(["convolution", "_convolution", "cudnn_convolution",
                     "convolution_overrideable", "_slow_conv2d_forward",
                     "convolution_backward"], "conv"),
    **dict.fromkeys(["_scaled_dot_product_efficient_attention",
                     "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_cudnn_attention",
                     "_scaled_dot_product_efficient_attention_backward",
                     "_scaled_dot_product_flash_attention_backward",
                     "_scaled_dot_product_cudnn_attention_backward",
                     "_flash_attention_forward", "_efficient_attention_forward",
                     "_flash_attention_backward", "_efficient_attention_backward"],
                    "attention"),
}


VARLEN = ["_varlen_attn", "_varlen_attn_out", "_varlen_attn_backward"]


@pytest.mark.parametrize("name", [*EXPECTED_CATEGORY, *VARLEN])
def test_every_op_of_torchs_flop_registry_has_its_category(name: str) -> None:
    import torch.nn.attention.varlen  # registers the torch_attn ops

    packet = getattr(torch.ops.torch_attn if name in VARLEN else aten, name)
    info = lookup(packet.default)
    assert info is not None
    assert info.category == EXPECTED_CATEGORY.get(name, "attention")


def test_torchs_registry_holds_no_op_the_table_does_not_name() -> None:
    """A torch upgrade that adds a counted op must add it to the table (here: every
    OpOverloadPacket of torch 2.13's registry is named above)."""
    import torch.nn.attention.varlen  # registers the torch_attn ops
    from torch.utils.flop_counter import flop_registry

    named = {*EXPECTED_CATEGORY, *VARLEN}
    packets = [k for k in flop_registry if isinstance(k, torch._ops.OpOverloadPacket)]
    assert {k.__name__ for k in packets} <= named


def test_a_counted_op_the_library_does_not_know_is_not_filed_by_its_name() -> None:
    """A custom op with a formula in torch's registry, named like neither a matmul nor an
    attention: today it is filed "conv" by default (ops.py lookup's name-sniffing)."""
    from torch.utils.flop_counter import flop_registry

    lib = torch.library.Library("roofline_issue22", "DEF")  # kept alive while the op is looked up
    lib.define("mystery(Tensor x) -> Tensor")
    lib.impl("mystery", lambda x: x.clone(), "CompositeExplicitAutograd")
    packet = torch.ops.roofline_issue22.mystery
    flop_registry[packet] = lambda x, out_val=None, **_: 123
    try:
        info = lookup(packet.default)
        assert info is None or info.category not in ("conv", "attention", "matmul")
    finally:
        del flop_registry[packet]


# --- BLAS-1/2 and the gradients of slices (found uncounted by the docs' own pages) -------

def test_dot_mv_and_addmv_count_their_multiply_adds() -> None:
    x, a, b = torch.randn(100), torch.randn(30, 100), torch.randn(30)
    flops = {op.name: op.flops for op in roofline.trace(
        lambda: (x.dot(x), a.mv(x), torch.addmv(b, a, x))).ops}
    assert flops == {"aten.dot.default": 2 * 100, "aten.mv.default": 2 * 30 * 100,
                     "aten.addmv.default": 2 * 30 * 100 + 30}


def test_slice_select_and_diagonal_gradients_are_counted_copies() -> None:
    """Each makes zeros of the input's size (4 x 10 fp32, 160 B) and writes the gradient
    into its part: it reads the gradient and writes the whole, no FLOPs."""
    w = torch.randn(4, 10, requires_grad=True)
    u, v, d = torch.randn(4, 3), torch.randn(10), torch.randn(4)  # gradients materialised
    with warnings.catch_warnings():
        warnings.simplefilter("error", roofline.RooflineWarning)
        t = roofline.trace(lambda w: (w[:, 2:5] * u).sum() + (w[1] * v).sum()
                           + (w.diagonal() * d).sum(), w, train=True)
    grads = {op.name: op for op in t.ops if op.name.endswith("_backward.default")}
    assert set(grads) == {"aten.slice_backward.default", "aten.select_backward.default",
                          "aten.diagonal_backward.default"}
    read = {"aten.slice_backward.default": 4 * 3 * 4, "aten.select_backward.default": 10 * 4,
            "aten.diagonal_backward.default": 4 * 4}
    for name, op in grads.items():
        assert op.flops == 0 and op.counted and op.bytes_written == 160
        assert op.bytes_read == read[name]


def test_foreach_copy_reads_its_sources_and_foreach_zero_reads_nothing() -> None:
    """``_foreach_copy_`` moves each source once and writes each destination, as ``copy_``
    does (an fp16 gradient unscaled into an fp32 master copy: 2 bytes read, 4 written per
    element); ``_foreach_zero_`` is a fill."""
    dst = [torch.zeros(1000), torch.zeros(24)]
    src = [torch.ones(1000, dtype=torch.float16), torch.ones(24, dtype=torch.float16)]
    op = op_of(captured(lambda: torch._foreach_copy_(dst, src)), "aten._foreach_copy_")
    assert (op.bytes_read, op.bytes_written) == (1024 * HALF, 1024 * 4)
    op = op_of(captured(lambda: torch._foreach_zero_(dst)), "aten._foreach_zero_")
    assert (op.bytes_read, op.bytes_written) == (0, 1024 * 4)


def test_an_op_the_installed_torch_lacks_is_skipped_not_fatal() -> None:
    # torch 2.11 lacks aten._flash_attention_forward_no_dropout_inplace, which importing
    # roofline registered: one op of another release must not stop the import.
    from roofline.tracing.ops import _REGISTRY, MissingOp, aten, register_formula

    op = aten.an_op_no_torch_release_has
    assert isinstance(op, MissingOp) and "not in torch" in repr(op)
    before = dict(_REGISTRY)
    register_formula(op, aten.an_op_no_torch_release_has_either, category="pointwise")(
        lambda **_: 1)
    assert before == _REGISTRY
