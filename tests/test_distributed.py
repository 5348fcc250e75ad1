"""One rank of a parallel step, without a cluster (tracing/distributed.py): the fake
group, the batch split, the user's own group and wrapped model, and the user's optimizer
with its parameter subset and param groups (issue 22, item 3).

Expected numbers are counted by hand from shapes: AdamW's foreach step is 14 FLOPs per
element (lerp, addcmul and addcdiv 3 each; mul, mul, sqrt, div and add 1 each; see
torch/optim/adam.py ``_multi_tensor_adam``) plus one per ``step`` counter.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
from conftest import optimizer_flops, small_mlp, sum_loss
from torch import nn

import roofline
from roofline.tracing import FakeModeError
from roofline.tracing.strategies import fake_allreduce_hook

pytestmark = pytest.mark.usefixtures("quiet")


# --- the fake group and the batch ---------------------------------------------------------

def test_batch_that_does_not_split() -> None:
    with pytest.raises(ValueError, match="global batch of 10 does not split over 4 GPUs"):
        roofline.trace(small_mlp(), torch.randn(10, 64), train=True, loss_fn=sum_loss,
                       parallel="ddp", gpus=4)
    assert not dist.is_initialized()


def test_gpus_without_parallel_and_parallel_without_gpus() -> None:
    with pytest.raises(ValueError, match="pass parallel="):
        roofline.trace(small_mlp(), torch.randn(8, 64), gpus=4)
    with pytest.raises(ValueError, match="needs gpus=N"):
        roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                       parallel="ddp")


def test_the_users_group_and_wrapped_model() -> None:
    """In the user's own (fake) group: a parallel trace uses it and leaves it; the user's
    DDP model is traced as it is on real tensors (with the hook a fake group needs), and
    refused on fake ones."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        t = roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                           parallel="ddp")
        assert t.info.world_size == 2 and dist.is_initialized()
        ddp = nn.parallel.DistributedDataParallel(small_mlp())
        ddp.register_comm_hook(None, fake_allreduce_hook)
        mine = roofline.trace(ddp, torch.randn(4, 64), train=True, loss_fn=sum_loss)
        kinds = [op.collective.kind for op in mine.ops if op.collective is not None]
        assert kinds.count("all_reduce") >= 1
        with pytest.raises(FakeModeError, match="cannot trace a model you wrapped"):
            roofline.trace(ddp, torch.randn(4, 64), train=True, loss_fn=sum_loss, fake=True)
        with pytest.raises(ValueError, match="already wrapped"):
            roofline.trace(ddp, torch.randn(4, 64), train=True, loss_fn=sum_loss, parallel="ddp")
    finally:
        dist.destroy_process_group()
    assert math.isfinite(roofline.parallel(mine, "h100").seconds)


# --- the user's optimizer, not its class defaults (issue 22, item 3) ----------------------

FP32 = 4


ADAMW_FLOPS_PER_ELEMENT = 14


HEAD = 64 * 10 + 10  # the last Linear: 650 elements in 2 tensors


@pytest.mark.parametrize(("kind", "head_local"), [
    ("ddp", HEAD),  # replicated
    ("fsdp", 5 * 64 + 5),  # 10 rows over 2 ranks: 5 on rank 0
    ("tp", HEAD),  # outside the MLP pair: whole
])
def test_a_head_only_optimizer_steps_the_head_alone(kind: str, head_local: int) -> None:
    model = small_mlp()
    opt = torch.optim.AdamW(model[4].parameters(), foreach=True)
    t = roofline.trace(model, torch.randn(32, 64), train=True, loss_fn=sum_loss, optimizer=opt,
                       parallel=kind, gpus=2)
    assert optimizer_flops(t) == ADAMW_FLOPS_PER_ELEMENT * head_local + 2
    state = roofline.memory(t).optimizer_state_bytes
    assert state == 2 * FP32 * head_local + 4 * 2  # exp_avg, exp_avg_sq; two steps


def test_the_parallel_optimizer_equals_the_single_gpu_one_for_ddp() -> None:
    """DDP replicates every parameter: its rank steps what one GPU steps."""
    model = small_mlp()
    opt = torch.optim.AdamW(model[4].parameters(), foreach=True)
    one = roofline.trace(model, torch.randn(32, 64), train=True, loss_fn=sum_loss,
                         optimizer=opt, fake=True)
    ddp = roofline.trace(model, torch.randn(32, 64), train=True, loss_fn=sum_loss,
                         optimizer=opt, parallel="ddp", gpus=2)
    assert optimizer_flops(ddp) == optimizer_flops(one) == 14 * HEAD + 2
    assert (roofline.memory(ddp).optimizer_state_bytes
            == roofline.memory(one).optimizer_state_bytes)


def test_a_param_groups_momentum_is_kept() -> None:
    """SGD with momentum 0.9 on the body and none on the head: one momentum buffer per
    body parameter (33,088 elements), none for the head."""
    model = small_mlp()
    body = [p for m in (model[0], model[2]) for p in m.parameters()]
    opt = torch.optim.SGD([{"params": body, "momentum": 0.9},
                           {"params": model[4].parameters()}], lr=0.1)
    t = roofline.trace(model, torch.randn(32, 64), train=True, loss_fn=sum_loss, optimizer=opt,
                       parallel="ddp", gpus=2)
    n_body = 64 * 256 + 256 + 256 * 64 + 64
    assert roofline.memory(t).optimizer_state_bytes == FP32 * n_body
    assert not math.isnan(optimizer_flops(t))
