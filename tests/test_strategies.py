"""The parallel strategies a trace wraps a model in (tracing/strategies.py): what DDP,
FSDP and tensor parallelism record, the default tensor-parallel plan (issue 22, item 2: a
foreach optimizer, parameters outside the plan, the zoo's attention and MLP projections
split), and ``Parallel``'s arguments (issue 22, item 10).

Expected numbers are counted by hand from shapes: AdamW's foreach step is 14 FLOPs per
element plus one per ``step`` counter (torch/optim/adam.py ``_multi_tensor_adam``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from conftest import assert_refused_by_name, optimizer_flops, small_mlp, sum_loss
from torch import nn

import roofline
from roofline.zoo import get_model

pytestmark = pytest.mark.usefixtures("quiet")


# --- what each strategy records -----------------------------------------------------------

def test_fsdp_and_tp_traces() -> None:
    t = roofline.trace(small_mlp(), torch.randn(32, 64), train=True, loss_fn=sum_loss,
                       parallel="fsdp", gpus=4)
    kinds = {op.collective.kind for op in t.ops if op.collective is not None}
    assert kinds == {"all_gather", "reduce_scatter"}
    assert not t.uncounted  # FSDP's copy kernels are known
    t = roofline.trace(small_mlp(), torch.randn(16, 64), train=True, loss_fn=sum_loss,
                       parallel="tp", gpus=4)
    reduces = [op.collective for op in t.ops
               if op.collective is not None and op.collective.kind == "all_reduce"]
    # the row-parallel layer's output: the whole batch of 16 x 64 fp32, summed over ranks
    assert reduces[0].bytes == 16 * 64 * 4 and reduces[0].group_size == 4
    mm = [op for op in t.ops if op.name == "aten.addmm.default"]
    assert mm[0].flops == 2 * 16 * 64 * (256 // 4)  # the local shard, not the global layer


def test_fsdp_cannot_wrap_a_model_without_parameters() -> None:
    with pytest.raises(ValueError, match="FSDP cannot wrap"):
        roofline.trace(nn.ReLU(), torch.randn(8, 64, requires_grad=True), train=True,
                       loss_fn=sum_loss, parallel="fsdp", gpus=2)


@pytest.mark.filterwarnings("default")
def test_tp_without_a_linear_pair_is_traced_replicated_and_says_so() -> None:
    """One Linear has no pair to split: every GPU runs the whole step (issue 22, item 2)."""
    model, x = nn.Linear(64, 10), torch.randn(8, 64)
    with pytest.warns(roofline.RooflineWarning, match="parallel='ddp' or 'fsdp'") as caught:
        t = roofline.trace(model, x, train=True, loss_fn=sum_loss, parallel="tp", gpus=2)
    assert caught[0].filename == __file__  # the user's line, not the library's
    assert not [op for op in t.ops if op.collective is not None]
    addmm = next(op for op in t.ops if op.name == "aten.addmm.default")
    assert addmm.flops == 2 * 8 * 64 * 10  # the whole layer on each GPU


# --- tensor parallelism with a foreach optimizer (issue 22, item 2) -----------------------

ADAMW_FLOPS_PER_ELEMENT = 14


class _NormedMLP(nn.Module):
    """A LayerNorm (outside any TP plan) before an MLP pair (inside it)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.ln = nn.LayerNorm(64)
        self.up = nn.Linear(64, 256)
        self.down = nn.Linear(256, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(self.ln(x))))


def test_tensor_parallel_with_a_foreach_optimizer_and_a_layernorm() -> None:
    model = _NormedMLP()
    opt = torch.optim.AdamW(model.parameters(), foreach=True)
    t = roofline.trace(model, torch.randn(8, 64), train=True, loss_fn=sum_loss, optimizer=opt,
                       parallel="tp", gpus=2)
    # up: column-wise, 128 of 256 output features on rank 0: 2 x 8 x 64 x 128 FLOPs
    addmm = [op for op in t.ops if op.name == "aten.addmm.default" and op.phase == "forward"]
    assert addmm[0].flops == 2 * 8 * 64 * 128
    # every local element is stepped once: LayerNorm 64 + 64, up 128 x 64 + 128,
    # down 64 x 128 (its columns) + 64 (its bias, replicated)
    local = 128 + (128 * 64 + 128) + (64 * 128 + 64)
    assert optimizer_flops(t) == ADAMW_FLOPS_PER_ELEMENT * local + 6  # 6 step counters


# a small size of each zoo transformer: (name, overrides, query heads, kv heads)
ZOO_TP = [
    ("gpt2", dict(n_layer=2, seq_len=32, batch_size=2), 12, 12),
    ("bert-base", dict(n_layer=2, seq_len=32, batch_size=2), 12, 12),
    ("vit-b16", dict(n_layer=2, batch_size=2), 12, 12),
    ("llama-tiny", dict(seq_len=32, batch_size=2), 8, 4),
    ("transformer", dict(n_enc_layers=1, n_dec_layers=1, seq_len=16, batch_size=2), 8, 8),
]


@pytest.mark.parametrize(("name", "overrides", "heads", "kv_heads"), ZOO_TP,
                         ids=[z[0] for z in ZOO_TP])
def test_every_zoo_transformer_traces_under_tp_with_attention_split(
        name: str, overrides: dict[str, Any], heads: int, kv_heads: int) -> None:
    """The default plan splits attention (q, k, v column-wise, out row-wise) and the MLP:
    rank 0 of 2 runs attention on half the heads; every parameter is stepped by the
    CLI's AdamW(foreach=True)."""
    world = 2
    zm = get_model(name, device="meta", **overrides)
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                       parallel="tp", gpus=world)
    attention = [op for op in t.ops if op.category == "attention" and op.phase == "forward"]
    assert attention, [op.name for op in t.ops][:40]
    for op in attention:  # (B, H, S, D) query and key
        assert op.input_shapes[0][1] == heads // world
        assert op.input_shapes[1][1] == kv_heads // world
    assert any(op.collective is not None and op.collective.kind == "all_reduce"
               and op.phase == "forward" for op in t.ops)
    assert optimizer_flops(t) > 0


# --- bad arguments, refused by name (issue 22, item 10) -----------------------------------

NAN, INF = float("nan"), float("inf")


def _par_trace(**kw: Any) -> Any:
    return roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                          gpus=2, **kw)


def _plan() -> dict[str, Any]:
    from torch.distributed.tensor.parallel import ColwiseParallel

    return {"0": ColwiseParallel()}


# (id, call, the argument the error must name, may a warning do instead)
BAD_ARGUMENTS: list[tuple[str, Callable[[], Any], str, bool]] = [
    # roofline.Parallel
    *[(f"Parallel-bucket_cap_mb-{label}",
       (lambda v=v: roofline.Parallel("ddp", bucket_cap_mb=v)), "bucket_cap_mb", False)
      for label, v in [("-1", -1), ("nan", NAN), ("inf", INF), ("str", "25")]],
    *[(f"trace-Parallel-bucket_cap_mb-{label}",
       (lambda v=v: _par_trace(parallel=roofline.Parallel("ddp", bucket_cap_mb=v))),
       "bucket_cap_mb", False)
      for label, v in [("-1", -1), ("nan", NAN), ("inf", INF), ("str", "25")]],
    ("Parallel-plan-ddp", lambda: roofline.Parallel("ddp", plan=_plan()), "plan", False),
    ("Parallel-shard-ddp", lambda: roofline.Parallel("ddp", shard=["0"]), "shard", False),
    ("Parallel-bucket_cap_mb-fsdp", lambda: roofline.Parallel("fsdp", bucket_cap_mb=1),
     "bucket_cap_mb", False),
    ("Parallel-plan-fsdp", lambda: roofline.Parallel("fsdp", plan=_plan()), "plan", False),
    ("Parallel-shard-tp", lambda: roofline.Parallel("tp", shard=["0"]), "shard", False),
    ("Parallel-shard-str", lambda: _par_trace(parallel=roofline.Parallel("fsdp", shard="0")),
     "shard", False),
]


@pytest.mark.parametrize(("call", "argument", "warning_will_do"),
                         [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_argument_is_refused_by_name(call: Callable[[], Any], argument: str,
                                           warning_will_do: bool) -> None:
    """``Parallel``'s arguments, alone and in a trace (issue 22, item 10)."""
    assert_refused_by_name(call, argument, warning_will_do)
