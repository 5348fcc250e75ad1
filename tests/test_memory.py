"""Memory of a step (analysis/memory.py, fit.py, batch.py): the storage table of the
capture, ``roofline.memory``, ``roofline.fits`` and ``roofline.max_batch``.

Expected values are derived by hand (bytes per parameter of fp32 AdamW; Korthikanti et al.
2022's 34sbh + 5as^2b; torch's sharding rules for FSDP2 and tensor parallelism) or measured
by torch's own machinery (the profiler's allocation events, MemTracker), never read back from
the implementation.

Sharded traces (issue 22, item 1): FSDP2 (``fully_shard``) shards every parameter on dim 0,
padded to a multiple of the world size: rank 0 holds ``ceil(dim0 / world)`` rows
(torch/distributed/fsdp/_fully_shard/_fsdp_param.py, ``_init_sharded_param``:
``padded_sharded_size``); its gradient is that many rows of the reduce-scatter output, and
AdamW's ``exp_avg`` and ``exp_avg_sq`` are ``zeros_like`` the local shard, plus one 0-dim
fp32 ``step`` per parameter tensor. Tensor parallelism (the Megatron pair ``0:
ColwiseParallel``, ``2: RowwiseParallel``) holds 1/world of the column layer's weight and
bias rows, 1/world of the row layer's weight columns, the row layer's whole bias and every
parameter outside the plan whole. The same shapes run for real on 2 gloo processes in
test_parallel_gloo.py.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import (
    adamw_report,
    adamw_trace,
    assert_refused_by_name,
    mlp_build,
    profiled_peak_bytes,
    small_device,
    small_mlp,
)
from torch import nn

import roofline
import roofline.tracing
from roofline.tracing.records import STORAGE_KINDS

IN, HIDDEN, OUT, BATCH = 64, 128, 10, 32


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))


# 64*128 + 128 + 128*10 + 10 parameters in 4 tensors
N_PARAMS = IN * HIDDEN + HIDDEN + HIDDEN * OUT + OUT


N_TENSORS = 4


def _train_trace(fake: bool, model: nn.Module | None = None) -> roofline.Trace:
    model = model or _mlp()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(BATCH, IN)
    if not fake:  # a steady-state step: the optimizer state exists before it
        model(x).sum().backward()
        opt.step()
    return roofline.trace(model, x, train=True, optimizer=opt, loss_fn=lambda o: o.sum(),
                          fake=fake)


@pytest.mark.parametrize("fake", [True, False])
def test_fp32_adamw_is_16_bytes_per_parameter(fake: bool) -> None:
    r = roofline.memory(_train_trace(fake))
    assert r.parameters_bytes == 4 * N_PARAMS
    assert r.gradients_bytes == 4 * N_PARAMS
    # exp_avg and exp_avg_sq: 4 + 4 bytes per parameter; plus one 0-dim fp32 `step`
    # counter per parameter tensor (AdamW keeps it as a tensor unless fused/capturable)
    assert r.optimizer_state_bytes == 8 * N_PARAMS + 4 * N_TENSORS
    assert (r.parameters_bytes + r.gradients_bytes + r.optimizer_state_bytes
            == 16 * N_PARAMS + 4 * N_TENSORS)
    assert r.inputs_bytes == BATCH * IN * 4
    # relu's output is saved for backward (threshold_backward, and the second Linear's
    # weight gradient read it); the scalar loss is read by backward's seed: 4 bytes
    assert r.activations_bytes == BATCH * HIDDEN * 4 + 4
    # the peak holds every parameter, gradient and optimizer state at once
    assert r.peak_bytes >= 16 * N_PARAMS + BATCH * IN * 4
    assert r.peak_phase == "optimizer"
    assert max(r.timeline) == r.peak_bytes == r.timeline[r.peak_op]
    assert "MemoryReport(peak" in repr(r)


def test_unused_parameters_take_memory() -> None:
    model = _mlp()
    model.spare = nn.Linear(10, 7)  # never called by forward
    r = roofline.memory(_train_trace(fake=True, model=model))
    assert r.parameters_bytes == 4 * (N_PARAMS + 10 * 7 + 7)


def test_storage_ids_are_not_reused_after_a_free() -> None:
    """Each temporary is its own storage, though the allocator reuses its StorageImpl."""
    x = torch.randn(256)

    def step(x: torch.Tensor) -> torch.Tensor:
        total = x.sum()
        for _ in range(20):
            total = total + (x * 2).sum()  # x * 2 is freed at once each time
        return total

    tr = roofline.trace(step, x)
    muls = [op for op in tr.ops if op.name == "aten.mul.Tensor"]
    assert len({op.output_ids[0] for op in muls}) == 20
    for op in muls:
        s = tr.storages[op.output_ids[0]]
        assert s.bytes == 256 * 4 and s.kind == "temporary" and s.created


def _stepped_mlp() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """The MLP, its AdamW after one real step (state exists) and an input batch."""
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(BATCH, IN)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    return model, opt, x


def test_capture_block_tags_kinds_without_trace() -> None:
    model, opt, x = _stepped_mlp()
    with roofline.capture() as t:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()  # gradients are gone at the end: the optimizer hook saw them
    r = roofline.memory(t)
    assert r.parameters_bytes == 4 * N_PARAMS
    assert r.gradients_bytes == 4 * N_PARAMS
    assert r.optimizer_state_bytes == 8 * N_PARAMS + 4 * N_TENSORS


def test_storage_table_round_trips_and_old_json_loads() -> None:
    tr = _train_trace(fake=True)
    back = roofline.Trace.from_json(tr.to_json())
    assert back.storages == tr.storages
    assert roofline.memory(back).peak_bytes == roofline.memory(tr).peak_bytes
    old = json.loads(tr.to_json())
    del old["storages"], old["storage_fields"]
    legacy = roofline.Trace.from_json(json.dumps(old))
    assert legacy.storages == {} and len(legacy.ops) == len(tr.ops)
    with pytest.raises(ValueError, match="no storage table"):
        roofline.memory(legacy)
    with pytest.raises(ValueError, match="no storage table"):
        roofline.memory(tr.filter(lambda op: op.phase == "forward"))
    bad = json.loads(tr.to_json())
    bad["storages"][0][bad["storage_fields"].index("kind")] = "weights"
    with pytest.raises(ValueError, match="storage row 0: kind"):
        roofline.Trace.from_json(json.dumps(bad))
    # a table written before `held_to` existed: every storage freed at its last use
    before = json.loads(tr.to_json())
    assert before["storage_fields"][-1] == "held_to"
    before["storage_fields"].pop()
    for row in before["storages"]:
        row.pop()
    assert roofline.Trace.from_json(json.dumps(before)).storages == tr.storages
    bad = json.loads(tr.to_json())
    bad["storages"][0][-1] = 10**6
    with pytest.raises(ValueError, match="storage row 0: op index"):
        roofline.Trace.from_json(json.dumps(bad))


def test_peak_matches_the_profilers_allocation_peak() -> None:
    """A real CPU step: predicted peak against the allocator's peak, from torch.profiler's
    allocation events (``profiled_peak_bytes``)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))

    def loss(o: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(o, y)

    loss(model(x)).backward()
    opt.step()
    predicted = roofline.memory(roofline.trace(model, x, train=True, optimizer=opt,
                                               loss_fn=loss)).peak_bytes
    opt.zero_grad(set_to_none=True)

    def step() -> None:
        loss(model(x)).backward()
        opt.step()

    states = [v for state in opt.state.values() for v in state.values()]
    measured = profiled_peak_bytes(step, [*model.parameters(), *states, x, y])
    assert measured > 16 * sum(p.numel() for p in model.parameters())  # it saw the state
    assert predicted == pytest.approx(measured, rel=0.10)


def test_memtracker_under_fake_mode_agrees_on_the_categories() -> None:
    """torch's MemTracker does run a fake step; its totals are roofline's.

    What it falls short on (why the capture tracks storages itself): it refuses a second
    iteration in one tracker, so the optimizer's state must be made before it starts; it
    must be given the model and optimizer (a capture block has neither); it counts
    temporaries made inside optimizer.step() as optimizer state; and its peak has no op,
    module or phase.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    ours = roofline.memory(_train_trace(fake=True))
    with FakeTensorMode():
        model, opt, x = _stepped_mlp()
        # the fake trace runs AdamW's foreach kernels, as CUDA does; left to itself, torch
        # would run fake CPU tensors through the per-parameter loop
        opt.param_groups[0]["foreach"] = True
        tracker = MemTracker()
        tracker.track_external(model, opt, x)
        with tracker:
            model(x).sum().backward()
            opt.step()
        (peak,) = tracker.get_tracker_snapshot("peak").values()
        (end,) = tracker.get_tracker_snapshot("current").values()
    by_name = {getattr(k, "value", k): v for k, v in end.items()}
    assert by_name["Parameter"] == ours.parameters_bytes
    assert by_name["Gradient"] == ours.gradients_bytes
    assert by_name["Optstate"] == ours.optimizer_state_bytes
    assert by_name["Other"] == ours.inputs_bytes
    assert peak["Total"] == pytest.approx(ours.peak_bytes, rel=0.02)


def test_the_memory_peak_is_named_in_one_phrase() -> None:
    from roofline.analysis import MemoryReport

    def report(module: str) -> MemoryReport:
        return MemoryReport({}, 10, 28, "aten.mm.default", module, "backward", {}, [], {})

    assert report("MLP.net.3").where == "aten.mm.default (op 28, backward, MLP.net.3)"
    assert report("").where == "aten.mm.default (op 28, backward)"


def _device(memory_bytes: int, vendor: str = "NVIDIA") -> roofline.DeviceSpec:
    base = roofline.get_device("h100")
    return base.model_copy(update={"memory_bytes": memory_bytes, "vendor": vendor,
                                   "name": f"test {vendor} {memory_bytes}"})


def test_fits_against_a_hand_set_capacity() -> None:
    r = roofline.memory(_train_trace(fake=True))
    # off NVIDIA only tensor bytes count: the peak itself is the boundary
    assert roofline.fits(r, _device(r.peak_bytes, vendor="Other")).margin_bytes == 0
    tight = roofline.fits(r, _device(r.peak_bytes - 1, vendor="Other"))
    assert not tight.fits and tight.margin_bytes == -1
    # on NVIDIA: context and workspace as passed, rounding to 512 B per live storage
    fit = roofline.fits(r, _device(10**9), context_bytes=1000, workspace_bytes=24)
    assert fit.overheads["cuda context"] == 1000 and fit.overheads["cublas workspace"] == 24
    live_storages = len(r.storages)
    assert 0 <= fit.overheads["block rounding"] < 512 * live_storages
    assert fit.required_bytes == r.peak_bytes + 1024 + fit.overheads["block rounding"]
    assert fit.fits and fit.margin_bytes == 10**9 - fit.required_bytes
    assert fit.margin_fraction == pytest.approx(fit.margin_bytes / 10**9)
    assert any("512" in a for a in fit.assumptions)
    with pytest.raises(ValueError, match="memory_bytes"):
        roofline.fits(r, _device(0).model_copy(update={"memory_bytes": None}))


def test_kinds_are_the_documented_ones() -> None:
    tr = _train_trace(fake=True)
    assert {s.kind for s in tr.storages.values()} <= set(STORAGE_KINDS)


# --- mixed precision, and a GPT layer against Korthikanti et al. ------------------------
def test_bf16_autocast_with_fp32_adamw_keeps_fp32_master_state() -> None:
    """CPU bf16 autocast, fp32 AdamW: what torch keeps, derived by mechanism.

    The parameters stay fp32 (autocast casts copies, never the module); their gradients
    are fp32 (the backward of autocast's ``_to_copy`` casts the bf16 gradient back to the
    leaf's dtype); AdamW's state follows the parameters: 4 + 4 + 8 bytes per parameter, as
    in fp32. The bf16 copies autocast makes are extra: 2 bytes per element of the weights
    and biases, held while used: a copy backward needs is saved (an activation), the rest
    are temporaries. Layer 1's weight copy is not saved (its input ``x`` needs no grad, so
    no grad-input GEMM reads it), layer 2's is (the gradient of relu's output needs it);
    biases never are (their gradient is a sum of the output gradient).

    Autocast's cast cache (``cached_cast``, aten/src/ATen/autocast_mode.cpp: fp32 leaves
    that require grad) keeps every parameter's copy until the autocast region exits, here
    after the optimizer step: 2 bytes per parameter element, all live at the optimizer's
    peak, though the copies' last use is in forward or backward. ``x``'s copy (no grad)
    is not cached: it dies at its last use.
    """
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(BATCH, IN)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(model, x, train=True, optimizer=opt,
                           loss_fn=lambda o: o.float().sum(), fake=True)
    r = roofline.memory(t)
    assert r.parameters_bytes == 4 * N_PARAMS
    assert r.gradients_bytes == 4 * N_PARAMS
    assert r.optimizer_state_bytes == 8 * N_PARAMS + 4 * N_TENSORS
    # saved for backward: x in bf16 (layer 1's weight gradient), relu's bf16 output,
    # layer 2's bf16 weight copy, and the fp32 scalar loss
    assert r.activations_bytes == 2 * BATCH * IN + 2 * BATCH * HIDDEN + 2 * HIDDEN * OUT + 4
    copies = {(s.bytes, s.kind) for s in t.storages.values()
              if t.ops[s.first].name == "aten._to_copy.default" and t.ops[s.first].phase ==
              "forward" and s.dtype == "bfloat16" and s.bytes != 2 * BATCH * IN}
    assert copies == {(2 * IN * HIDDEN, "temporary"), (2 * HIDDEN, "temporary"),
                      (2 * HIDDEN * OUT, "activation"), (2 * OUT, "temporary")}
    last = len(t.ops) - 1
    held = [s for s in t.storages.values() if s.held_to >= 0]
    assert sorted(s.bytes for s in held) == sorted(2 * n for n in (IN * HIDDEN, HIDDEN,
                                                                   HIDDEN * OUT, OUT))
    assert all(s.held_to == last > s.last for s in held)
    assert r.held_bytes == r.peak_held_bytes == 2 * N_PARAMS
    assert r.peak_phase == "optimizer"
    x_copy = next(s for s in t.storages.values() if s.dtype == "bfloat16"
                  and s.bytes == 2 * BATCH * IN)
    assert x_copy.held_to == -1
    # without autocast's cache (the region disabled it) the copies die at their last use
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        t = roofline.trace(model, x, train=True, optimizer=opt,
                           loss_fn=lambda o: o.float().sum(), fake=True)
    r_uncached = roofline.memory(t)
    # only layer 2's copy outlives its last use, saved by addmm's autograd node until the
    # node has run (its last op in backward)
    (saved,) = [s for s in t.storages.values() if s.held_to >= 0]
    assert saved.bytes == r_uncached.held_bytes == 2 * HIDDEN * OUT
    relu_backward = next(i for i, op in enumerate(t.ops)
                         if op.name == "aten.threshold_backward.default")
    assert saved.last < saved.held_to < relu_backward  # freed before the next node runs
    assert t.ops[saved.held_to].phase == "backward"
    assert r.peak_bytes - r_uncached.peak_bytes == 2 * N_PARAMS
    back = roofline.Trace.from_json(t.to_json())
    assert back.storages == t.storages


def test_autocast_region_inside_forward_frees_the_cached_copies_before_backward() -> None:
    """A model that autocasts its own forward: the region exits (and torch clears the
    cast cache) before backward, so the cached copies are held to the end of forward."""
    model = _mlp()

    def step(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        return out.float().sum()

    t = roofline.trace(step, torch.randn(BATCH, IN), train=True, fake=True)
    end_of_forward = max(i for i, op in enumerate(t.ops) if op.phase == "forward")
    held = [s for s in t.storages.values() if s.held_to >= 0]
    # the region's last op is layer 2's addmm: layer 2's bias copy dies there, at its last
    # use, and its weight copy is saved for backward; layer 1's two copies, last used by
    # layer 1's addmm, are held by the cache to the region's exit, after layer 2's addmm
    region_end = max(i for i, op in enumerate(t.ops) if op.name == "aten.addmm.default"
                     and op.phase == "forward")
    assert region_end < end_of_forward  # the float() cast and the sum run outside it
    in_forward = [s for s in held if t.ops[s.last].phase == "forward"]
    assert sorted(s.bytes for s in in_forward) == [2 * HIDDEN, 2 * IN * HIDDEN]
    assert all(s.last < s.held_to == region_end for s in in_forward)
    # layer 2's weight copy only outlives its last use while its autograd node runs
    assert all(t.ops[s.held_to].phase == "backward" for s in held if s not in in_forward)


# --- activation checkpointing -----------------------------------------------------------
CB, CD, CH = 256, 16, 256  # batch, block width, block hidden width


class _Blocks(nn.Module):
    """Two MLP blocks, Linear(CD, CH) ReLU Linear(CH, CD), optionally checkpointed."""

    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.checkpointed = checkpointed
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(CD, CH), nn.ReLU(),
                                                  nn.Linear(CH, CD)) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return x


@pytest.mark.parametrize("fake", [True, False])
def test_activation_checkpointing_less_memory_and_recomputed_flops(fake: bool) -> None:
    """Two blocks with and without ``checkpoint(block, x, use_reentrant=False)``, fp32.

    Saved for backward without checkpointing: each block's ReLU output r (4 b h bytes,
    read by threshold_backward and the second Linear's weight gradient), block 1's output
    y1 (4 b d, block 2's first weight gradient reads it) and the scalar loss (4). With it:
    y1 (the checkpoint's input) and the loss only; r is remade in backward.

    Recomputed: checkpoint stops rerunning once the last tensor backward needs is remade
    (early stop), the second Linear's transposed weight, before its addmm: each block
    reruns its first addmm (2 b d h FLOPs, bias not counted) and ReLU (b h).

    The peaks, in the ReLU backward (threshold_backward: r, its gradient and the result,
    4 b h each) of block 2 without and of block 1 with checkpointing:
    without, params + block 2's second-Linear grads + x + r1 + r2 + y1 + 2 (4 b h);
    with, params + block 2's grads + block 1's second-Linear grads + x + 3 (4 b h).
    """
    x = torch.randn(CB, CD)
    plain, ckpt = (roofline.trace(_Blocks(c), x, train=True, loss_fn=lambda o: o.sum(),
                                  fake=fake) for c in (False, True))
    r0, r1 = roofline.memory(plain), roofline.memory(ckpt)
    act, y1, loss = 4 * CB * CH, 4 * CB * CD, 4
    assert r0.activations_bytes == 2 * act + y1 + loss
    assert r1.activations_bytes == y1 + loss
    assert r0.peak_by_kind["activation"] == 2 * act + y1
    assert r1.peak_by_kind["activation"] == 0
    params = 4 * 2 * (CD * CH + CH + CH * CD + CD)
    linear2_grads, linear1_grads = 4 * (CH * CD + CD), 4 * (CD * CH + CH)
    assert r0.peak_bytes == params + linear2_grads + 4 * CB * CD + 2 * act + y1 + 2 * act
    assert r1.peak_bytes == (params + 2 * linear2_grads + linear1_grads + 4 * CB * CD
                             + 3 * act)
    rerun = 2 * (2 * CB * CD * CH + CB * CH)
    assert r0.recompute_flops == 0 and r1.recompute_flops == rerun
    assert (ckpt.by_phase()["backward"].flops - plain.by_phase()["backward"].flops
            == rerun)
    assert ckpt.by_phase()["forward"].flops == plain.by_phase()["forward"].flops
    reran = [op.name for op in ckpt.ops if op.recompute]
    assert reran.count("aten.addmm.default") == 2 and reran.count("aten.relu.default") == 2
    assert all(op.phase == "backward" for op in ckpt.ops if op.recompute)
    back = roofline.Trace.from_json(ckpt.to_json())
    assert [op.recompute for op in back.ops] == [op.recompute for op in ckpt.ops]
    assert roofline.memory(back).recompute_flops == rerun


class _CheckpointedAttention(nn.Module):
    """qkv Linear(D, 3D) then SDPA with dropout over NH heads, under a non-reentrant
    checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(AD, 3 * AD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        def block(x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).view(AB, AT, 3, NH, AD // NH).permute(2, 0, 3, 1, 4)
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)

        return checkpoint(block, x, use_reentrant=False).sum()


AB, AT, AD, NH = 2, 16, 32, 4


@pytest.mark.parametrize(("attention", "fake"), [("fused", True), ("eager", True),
                                                  ("eager", False), ("as-run", False)])
def test_checkpointed_attention_with_dropout_recomputes_as_rerouted(attention: str,
                                                                    fake: bool) -> None:
    """Checkpoint's recomputation must meet the same attention as the forward did: the
    reroute stays active through backward (before, recomputing the CPU's own SDPA saved
    other tensors and checkpoint raised CheckpointError).

    Fused, recomputed up to the attention kernel (its outputs are what backward needs):
    the qkv addmm, 2 b t d 3d FLOPs, and the flash forward, QK^T and PV, 2 b a t t (d/a)
    each, 4 b t t d together. Eager writes attention out; its recomputation reruns the
    QK^T batched matmul.
    """
    x = torch.randn(AB, AT, AD)
    t = roofline.trace(_CheckpointedAttention(), x, train=True, fake=fake,
                       attention=attention)
    reran = [op for op in t.ops if op.recompute]
    assert all(op.phase == "backward" for op in reran)
    assert "aten.addmm.default" in [op.name for op in reran]
    if attention == "fused":
        assert sum(op.flops for op in reran) == (2 * AB * AT * AD * 3 * AD
                                                  + 4 * AB * AT * AT * AD)
        assert any("flash_attention" in op.name for op in reran)
    elif attention == "eager":
        assert any(op.name == "aten.bmm.default" and op.flops == 2 * AB * AT * AT * AD
                   for op in reran)


S, B, H, A = 128, 2, 256, 4  # sequence, batch, hidden, heads


class _GPTLayer(nn.Module):
    """A Megatron-style pre-LN GPT layer in plain torch, attention written out (eager)."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(H), nn.LayerNorm(H)
        self.qkv, self.proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.fc1, self.fc2 = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
        self.register_buffer("future", torch.ones(S, S, dtype=torch.bool).triu(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (s, b, h), as in the paper
        def heads(t: torch.Tensor) -> torch.Tensor:  # (b*a, s, h/a)
            return t.reshape(S, B * A, H // A).transpose(0, 1)

        q, k, v = (heads(t) for t in self.qkv(self.ln1(x)).split(H, dim=-1))
        scores = torch.bmm(q, k.transpose(1, 2)) / (H // A) ** 0.5
        scores = scores.masked_fill(self.future, float("-inf"))  # causal
        p = F.dropout(F.softmax(scores, dim=-1), 0.1, self.training)
        ctx = torch.bmm(p, v).transpose(0, 1).reshape(S, B, H)
        x = x + F.dropout(self.proj(ctx), 0.1, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), 0.1, self.training)


def test_gpt_layer_activations_against_korthikanti() -> None:
    """Saved activations of one layer vs Korthikanti et al. 2022, Sec. 4: 34sbh + 5as^2b.

    The formula (16-bit, no flash attention, no recomputation) counts: LayerNorm inputs
    2 x 2sbh; QKV input 2sbh; Q, K 4sbh; softmax output 2as^2b; its dropout mask as^2b
    (1 byte); dropout output 2as^2b; V 2sbh; projection input 2sbh; its dropout mask sbh;
    fc1 input 2sbh; GeLU input 8sbh; fc2 input 8sbh; its dropout mask sbh. Eager torch on
    the CPU keeps exactly these (a fake trace records dropout as CUDA's ``native_dropout``,
    with its 1-byte mask) plus:

    * LayerNorm's mean and rstd, (s, b, 1) each, in bf16 on the CPU: + 2 x 2 x 2sb = 8sb;
    * the fp32 scalar loss, read by backward's seed: + 4.

    Q, K, V are the three copies that ``reshape`` makes of the split QKV output (the split
    is not viewable as heads), so they are 6sbh as in the formula. The layer's input
    ``x`` (2sbh, LayerNorm 1's input) is an ``input`` of this trace, added back here.
    """
    model = _GPTLayer().to(torch.bfloat16)
    x = torch.randn(S, B, H, dtype=torch.bfloat16, requires_grad=True)
    t = roofline.trace(model, x, train=True, loss_fn=lambda o: o.float().sum(), fake=True)
    r = roofline.memory(t)
    saved = r.activations_bytes + 2 * S * B * H
    formula = 34 * S * B * H + 5 * A * S * S * B
    assert saved == formula + 8 * S * B + 4
    assert t.info.fused_dropout_calls == 3
    # a CPU-run trace keeps the masks in the input's dtype: 2 bytes, not 1
    cpu = roofline.trace(model, x, train=True, loss_fn=lambda o: o.float().sum(), fake=True,
                         attention="as-run")
    masks = A * S * S * B + 2 * S * B * H
    assert roofline.memory(cpu).activations_bytes + 2 * S * B * H == saved + masks
    # all of it is live at the end of forward, with the parameters and the input
    end_of_forward = max(i for i, op in enumerate(t.ops) if op.phase == "forward")
    assert r.timeline[end_of_forward] >= saved + r.parameters_bytes + r.buffers_bytes


# --- sharded traces hold their shards (issue 22, item 1) ----------------------------------

FP32 = 4


ADAMW_STEP = 4  # one 0-dim fp32 ``step`` tensor per parameter tensor


SHAPES = [(256, 64), (256,), (64, 256), (64,), (10, 64), (10,)]  # small_mlp()'s parameters


N_FULL = sum(math.prod(s) for s in SHAPES)  # 33,738


def _fsdp_shard(shape: tuple[int, ...], world: int) -> int:
    """Elements rank 0 holds of one FSDP2-sharded parameter (dim 0 padded to world)."""
    return -(-shape[0] // world) * math.prod(shape[1:])


def _sharded_trace(parallel: str | None, gpus: int | None, batch: int = 32) -> roofline.Trace:
    model = small_mlp()
    opt = torch.optim.AdamW(model.parameters())
    if parallel is None:
        return roofline.trace(model, torch.randn(batch, 64), train=True, optimizer=opt,
                              loss_fn=lambda o: o.sum(), fake=True)
    return roofline.trace(model, torch.randn(batch, 64), train=True, optimizer=opt,
                          loss_fn=lambda o: o.sum(), parallel=parallel, gpus=gpus)


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("world", [2, 4])
def test_fsdp_parameters_gradients_and_state_are_rank_zeros_shards(world: int) -> None:
    # world 4: 64 + 16 + 3 rows of the three weights (10 rows pad to 12: 3 a rank),
    # 8,467 elements; world 2: 128 + 32 + 5 rows, 16,869 elements
    local = sum(_fsdp_shard(s, world) for s in SHAPES)
    assert local == {2: 16_869, 4: 8_467}[world]
    r = roofline.memory(_sharded_trace("fsdp", world))
    assert r.parameters_bytes == FP32 * local
    assert r.gradients_bytes == FP32 * local
    assert r.optimizer_state_bytes == 2 * FP32 * local + ADAMW_STEP * len(SHAPES)


@pytest.mark.usefixtures("quiet")
def test_tensor_parallel_parameters_gradients_and_state_are_local() -> None:
    world = 4
    # column layer: 64 of 256 weight rows and bias; row layer: 64 of 256 weight columns,
    # whole bias; the last Linear is outside the plan: whole
    local = (256 // world * 64 + 256 // world) + (64 * 256 // world + 64) + (10 * 64 + 10)
    assert local == 8_970
    r = roofline.memory(_sharded_trace("tp", world, batch=16))
    assert r.parameters_bytes == FP32 * local
    assert r.gradients_bytes == FP32 * local
    assert r.optimizer_state_bytes == 2 * FP32 * local + ADAMW_STEP * len(SHAPES)


@pytest.mark.usefixtures("quiet")
def test_fsdp_on_four_gpus_peaks_below_one_unsharded_gpu() -> None:
    """"Does FSDP make it fit?": rank 0 of 4 runs a quarter of the batch and holds a
    quarter of the state; its peak is below one GPU running the whole step (today it is
    above: every sharded tensor is counted whole, and its shard again)."""
    one = roofline.memory(_sharded_trace(None, None))
    fsdp = roofline.memory(_sharded_trace("fsdp", 4))
    assert one.parameters_bytes == FP32 * N_FULL  # the baseline is counted right
    assert fsdp.peak_bytes < one.peak_bytes
    # and it still holds at least its own shards of everything kept over the step
    local = sum(_fsdp_shard(s, 4) for s in SHAPES)
    assert fsdp.peak_bytes >= 4 * FP32 * local


# --- the largest batch ---------------------------------------------------------------
W_IN, W_HID, W_OUT = 128, 256, 128


# parameters of Linear(128, 256) and Linear(256, 128), fp32
P_BYTES = 4 * (W_IN * W_HID + W_HID + W_HID * W_OUT + W_OUT)


# inference, per sample: x (4 * 128, live all step) + at relu its input and output
# (4 * 256 each, not in place); at the second Linear x + relu out + out = 4 * 512 < that
PER_SAMPLE = 4 * W_IN + 2 * 4 * W_HID


def _inference_build(calls: list[int] | None = None,
                     fails_above: int | None = None) -> Any:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(W_IN, W_HID), nn.ReLU(), nn.Linear(W_HID, W_OUT))

    def build(batch: int) -> roofline.Trace:
        if calls is not None:
            calls.append(batch)
        if fails_above is not None and batch > fails_above:
            raise RuntimeError("no such shape")
        return roofline.trace(model, torch.randn(batch, W_IN), fake=True)

    return build


@pytest.mark.parametrize("vendor", ["Other", "NVIDIA"])
def test_max_batch_against_the_hand_derived_line(vendor: str) -> None:
    # on NVIDIA, context and workspace as passed; every storage is a multiple of 512 B,
    # so block rounding adds nothing
    extra = 1000 + 24 if vendor == "NVIDIA" else 0
    capacity = P_BYTES + extra + PER_SAMPLE * 37 + PER_SAMPLE // 2
    m = roofline.max_batch(_inference_build(), _device(capacity, vendor),
                           context_bytes=1000, workspace_bytes=24)
    assert m.batch == 37 and m.predicted_batch == 37
    assert m.bytes_per_sample == PER_SAMPLE
    assert m.fixed_bytes == P_BYTES + extra
    assert m.required_bytes == P_BYTES + extra + PER_SAMPLE * 37 == m.fit.required_bytes
    assert m.fit.fits and m.capacity_bytes == capacity
    assert m.affine and m.fit_error == 0
    # both sides of the boundary were traced
    assert m.traced[37][0] <= capacity < m.traced[38][0]
    assert m.samples_per_s == pytest.approx(37 / m.seconds)
    assert "batch 37 fits" in repr(m)


def test_max_batch_says_when_memory_is_not_affine() -> None:
    """x @ x.T holds 4 b^2 bytes: the fit is off, the traced search still finds the batch."""
    def build(batch: int) -> roofline.Trace:
        return roofline.trace(lambda x: (x @ x.T).sum(), torch.randn(batch, 64), fake=True)

    # at the sum: x (256 b), the b x b product (4 b^2) and the scalar (4)
    def peak(b: int) -> int:
        return 256 * b + 4 * b * b + 4

    capacity = peak(50) + 10
    with pytest.warns(roofline.RooflineWarning, match="not affine"):
        m = roofline.max_batch(build, _device(capacity, "Other"))
    assert m.batch == 50 and peak(51) > capacity
    assert not m.affine and m.fit_error > m.tolerance
    assert m.predicted_batch > 50  # the line from batches 1 and 2 underestimates b^2


def test_max_batch_when_the_peak_moves_from_optimizer_to_backward() -> None:
    """At batches 1 and 2 the peak is the optimizer's (it grows only by the input); at the
    answer it is backward's. One line through the two peaks (2 KiB per sample) would
    overshoot by far; a line per op predicts the traced answer exactly."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
    opt = torch.optim.AdamW(model.parameters(), foreach=True)

    def build(batch: int) -> roofline.Trace:
        return roofline.trace(model, torch.randn(batch, 512), train=True, optimizer=opt,
                              loss_fn=lambda o: o.sum(), fake=True)

    n_params = 2 * (512 * 512 + 512)
    m = roofline.max_batch(build, _device(40 * 4 * n_params, "Other"))
    assert roofline.memory(build(1)).peak_phase == "optimizer"
    assert m.traced[2][0] - m.traced[1][0] == 4 * 512  # one more input row
    assert m.memory.peak_phase != "optimizer"
    assert m.affine and m.batch == m.predicted_batch > 2


def test_compare_at_max_batch_each_device_at_its_own_batch() -> None:
    calls: list[int] = []
    small = _device(P_BYTES + PER_SAMPLE * 37, "Other")
    big = _device(P_BYTES + PER_SAMPLE * 80, "Other")
    c = roofline.compare_at_max_batch(_inference_build(calls), small, big)
    assert (c.src.batch, c.dst.batch) == (37, 80)
    # same FLOP/s and bandwidth: the larger batch alone makes the difference
    assert c.speedup == pytest.approx((80 / c.dst.seconds) / (37 / c.src.seconds))
    assert c.speedup >= 1
    assert sorted(calls) == [1, 2, 37, 38, 80, 81]  # fit sizes traced once for both
    assert "samples/s" in repr(c)


def test_max_batch_bad_input() -> None:
    fits_37 = _device(P_BYTES + PER_SAMPLE * 37, "Other")
    with pytest.raises(ValueError, match=r"build\(37\) failed .*RuntimeError: no such shape"):
        roofline.max_batch(_inference_build(fails_above=5), fits_37)
    with pytest.raises(ValueError, match=r"does not fit .* even at batch 1"):
        roofline.max_batch(_inference_build(), _device(P_BYTES, "Other"))
    with pytest.raises(TypeError, match=r"must return a roofline\.Trace"):
        roofline.max_batch(lambda b: None, fits_37)  # type: ignore[arg-type, return-value]
    fixed = _inference_build()
    with pytest.raises(ValueError, match="does not grow with the batch"):
        roofline.max_batch(lambda b: fixed(4), fits_37)
    with pytest.raises(ValueError, match=r"still fits .* at batch 100"):
        roofline.max_batch(_inference_build(), _device(10**12, "Other"), limit=100)
    with pytest.raises(ValueError, match="fit_batches"):
        roofline.max_batch(_inference_build(), fits_37, fit_batches=(2, 2))


def _huge_linear(features: int) -> Any:
    with torch.device("meta"):  # no weights: the fake trace makes fakes of meta tensors
        model = nn.Linear(features, features, bias=False)
    opt = torch.optim.AdamW(model.parameters())

    def build(batch: int) -> roofline.Trace:
        return roofline.trace(model, torch.randn(batch, features, device="meta"),
                              train=True, optimizer=opt, loss_fn=lambda o: o.sum(),
                              fake=True)

    return build


def test_a_model_that_fits_no_listed_device() -> None:
    # 4e10 fp32 parameters: 16 bytes each with AdamW (weights, gradients, two moments)
    # is 640 GB before any activation or temporary, more than any device in the registry
    largest = max(d.memory_bytes or 0 for d in roofline.list_devices())
    features = 200_000
    assert 16 * features**2 > largest
    with pytest.raises(ValueError, match="no listed device has memory for its tensors"):
        roofline.max_batch(_huge_linear(features), "h100")
    # 6.4e9 parameters (102 GB + temporaries): not an H100, but listed devices have room
    with pytest.raises(ValueError, match=r"does not fit H100 SXM even at batch 1.*MI300X"):
        roofline.max_batch(_huge_linear(80_000), "h100")


# --- bad arguments, refused by name (issue 22, item 10) -----------------------------------

NAN, INF = float("nan"), float("inf")


@functools.cache
def _adamw_analysis() -> roofline.Analysis:
    return roofline.analyze(adamw_trace(), "h100")


def _one_gb() -> roofline.DeviceSpec:
    return roofline.get_device("h100").model_copy(update={"memory_bytes": 10**9,
                                                          "name": "1 GB"})


# (id, call, the argument the error must name, may a warning do instead)
BAD_ARGUMENTS: list[tuple[str, Callable[[], Any], str, bool]] = [
    # roofline.memory
    ("memory-trace-None", lambda: roofline.memory(None), "trace", False),
    ("memory-trace-str", lambda: roofline.memory("x"), "trace", False),
    ("memory-trace-Analysis", lambda: roofline.memory(_adamw_analysis()), "trace", False),
    ("memory-trace-MemoryReport", lambda: roofline.memory(adamw_report()), "trace", False),
    ("memory-depth--1", lambda: roofline.memory(adamw_trace(), depth=-1), "depth", False),
    ("memory-depth-nan", lambda: roofline.memory(adamw_trace(), depth=NAN), "depth", False),
    ("memory-depth-inf", lambda: roofline.memory(adamw_trace(), depth=INF), "depth", False),
    ("memory-depth-str", lambda: roofline.memory(adamw_trace(), depth="2"), "depth", False),
    ("memory-depth-2.5", lambda: roofline.memory(adamw_trace(), depth=2.5), "depth", False),
    # roofline.fits
    ("fits-trace-Analysis", lambda: roofline.fits(_adamw_analysis(), "h100"), "trace", False),
    ("fits-trace-None", lambda: roofline.fits(None, "h100"), "trace", False),
    ("fits-trace-str", lambda: roofline.fits("x", "h100"), "trace", False),
    *[(f"fits-{arg}-{label}", (lambda arg=arg, v=v: roofline.fits(adamw_report(), "h100",
                                                                   **{arg: v})), arg, False)
      for arg in ("context_bytes", "workspace_bytes")
      for label, v in [("-1", -1), ("-1e12", -10**12), ("nan", NAN), ("inf", INF),
                       ("-inf", -INF), ("str", "1"), ("True", True), ("1.5", 1.5)]],
    ("fits-context_bytes-not-NVIDIA",
     lambda: roofline.fits(adamw_report(), "mi300x", context_bytes=10**12), "context_bytes",
     True),
    # roofline.max_batch / compare_at_max_batch
    ("max_batch-tolerance-nan",
     lambda: roofline.max_batch(mlp_build, small_device(), tolerance=NAN), "tolerance", False),
    ("max_batch-tolerance--1",
     lambda: roofline.max_batch(mlp_build, small_device(), tolerance=-1), "tolerance", False),
    ("max_batch-tolerance-str",
     lambda: roofline.max_batch(mlp_build, small_device(), tolerance="0.05"), "tolerance",
     False),
    *[(f"max_batch-limit-{label}",
       (lambda v=v: roofline.max_batch(mlp_build, small_device(), limit=v)), "limit", False)
      for label, v in [("inf", INF), ("2.5", 2.5), ("str", "100")]],
    ("max_batch-fit_batches-3", lambda: roofline.max_batch(mlp_build, small_device(),
                                                           fit_batches=(1, 2, 3)),
     "fit_batches", False),
    ("max_batch-fit_batches-bool", lambda: roofline.max_batch(mlp_build, small_device(),
                                                              fit_batches=(True, 2)),
     "fit_batches", False),
    *[(f"max_batch-context_bytes-{label}",
       (lambda v=v: roofline.max_batch(mlp_build, _one_gb(), context_bytes=v)),
       "context_bytes", False)
      for label, v in [("-1", -1), ("nan", NAN), ("inf", INF), ("-inf", -INF)]],
    ("compare_at_max_batch-tolerance-nan",
     lambda: roofline.compare_at_max_batch(mlp_build, small_device(), small_device(),
                                           tolerance=NAN),
     "tolerance", False),
]


@pytest.mark.parametrize(("call", "argument", "warning_will_do"),
                         [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_argument_is_refused_by_name(call: Callable[[], Any], argument: str,
                                           warning_will_do: bool) -> None:
    """``memory``, ``fits``, ``max_batch`` and ``compare_at_max_batch`` (issue 22, item 10)."""
    assert_refused_by_name(call, argument, warning_will_do)


# --- issue 24, item 8: the fit passes through the batches it prints -------------------------

def _adamw_build(batch: int) -> roofline.Trace:
    """Two 512 x 512 layers with AdamW: the optimizer's peak (parameters, gradients, two
    moments and its foreach temporaries, ~10 MB at any batch) holds small batches, the
    activations (a few kB per sample) large ones."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
    opt = torch.optim.AdamW(model.parameters())
    return roofline.trace(model, torch.randn(batch, 512), train=True, optimizer=opt,
                          loss_fn=lambda y: y.sum(), fake=True)


def test_max_batch_fit_is_the_envelope_through_every_traced_batch() -> None:
    m = roofline.max_batch(_adamw_build, _device(40 * 2 ** 20, vendor="Other"))
    assert m.affine and len(m.pieces) >= 2
    assert m.pieces[0].bytes_per_sample < m.pieces[-1].bytes_per_sample
    assert (m.pieces[-1].bytes_per_sample, m.pieces[-1].fixed_bytes) == (
        m.bytes_per_sample, m.fixed_bytes)  # the line that limits the batch
    assert [p.start for p in m.pieces] == sorted(p.start for p in m.pieces)
    for b, (required, _) in m.traced.items():
        assert m.fit_bytes(b) == pytest.approx(required, rel=1e-12), b
    # the first piece alone misses the boundary by far: one line could not pass through all
    first = m.pieces[0]
    assert first.fixed_bytes + first.bytes_per_sample * m.batch < 0.9 * m.required_bytes
    assert np.allclose(m.fit_bytes(np.array(sorted(m.traced))),
                       [m.traced[b][0] for b in sorted(m.traced)])
