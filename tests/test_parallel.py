"""A parallel trace costed on two streams (analysis/parallel.py) with NCCL's cost of
each collective (analysis/collectives.py).

Collective times are derived by hand from nccl-tests' bus-bandwidth factors
(t = S x 2(n-1)/n / B for all-reduce) and NCCL's constants (nccl@5067397
src/graph/tuning.cc, topo.h). The one-GPU baseline (issue 22, item 4) is checked against
two independent figures: the one-GPU step's seconds (``roofline.analyze`` of its trace) and
the parallel step's seconds, each at the batch its trace ran: speedup = (global batch /
p.seconds) / (one-GPU batch / t1).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
from conftest import assert_refused_by_name, small_mlp, sum_loss
from torch import nn

import roofline
from roofline.analysis.collectives import collective_cost
from roofline.analysis.parallel import _schedule
from roofline.hardware import get_device
from roofline.hardware.topology import topology
from roofline.tracing.records import Collective, OpRecord, Trace

pytestmark = pytest.mark.usefixtures("quiet")


# H100 SXM: NVLink 4, 900 GB/s both directions (the registry's datasheet figure), 450 a
# direction; NCCL's model: 20.6 GB/s per 25 GB/s link (nccl@5067397 src/graph/topo.h)
H100_BUS = 450e9 * 20.6 / 25


# --- the cost of one collective (analysis/collectives.py) ---------------------------------

def test_ring_all_reduce_matches_the_hand_derived_time() -> None:
    """100 MB over 8 H100s: ring, Simple protocol. NCCL's latency: base 8.4 us plus
    2(n-1) = 14 steps of 3.4 us (NVLink, ring, Simple); bandwidth term: nccl-tests'
    t = S x 2(n-1)/n / B."""
    top = topology(get_device("h100"), 8)
    cost = collective_cost(Collective("all_reduce", 10**8, 8, "float32"), top)
    expected = 8.4e-6 + 14 * 3.4e-6 + 1e8 * (2 * 7 / 8) / H100_BUS
    assert (cost.algorithm, cost.protocol) == ("ring", "Simple")
    assert cost.seconds == pytest.approx(expected, rel=1e-9)
    assert cost.bus_bytes_per_s == pytest.approx(H100_BUS)
    assert cost.algorithm_bytes_per_s == pytest.approx(H100_BUS / (2 * 7 / 8))


def test_small_all_reduce_takes_the_low_latency_protocol() -> None:
    """4 kB: LL (base 6.6 us + 14 x 0.6 us, half the bus bandwidth) beats Simple."""
    top = topology(get_device("h100"), 8)
    cost = collective_cost(Collective("all_reduce", 4096, 8, "float32"), top)
    expected = 6.6e-6 + 14 * 0.6e-6 + 4096 * 1.75 / (H100_BUS / 2)
    assert cost.protocol == "LL"
    assert cost.seconds == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("kind", "factor", "steps"), [
    ("all_gather", 3 / 4, 3), ("reduce_scatter", 3 / 4, 3), ("broadcast", 1.0, 4)])
def test_factors_of_the_other_collectives(kind: str, factor: float, steps: int) -> None:
    top = topology(get_device("h100"), 4)
    cost = collective_cost(Collective(kind, 10**9, 4, "float32"), top)
    assert cost.seconds == pytest.approx(8.4e-6 + steps * 3.4e-6 + 1e9 * factor / H100_BUS)


def test_one_rank_moves_nothing() -> None:
    cost = collective_cost(Collective("all_reduce", 10**9, 1), topology(get_device("h100"), 1))
    assert cost.seconds == 0.0


def test_two_nodes_are_bound_by_the_network() -> None:
    """16 H100s on 2 nodes of 4 x 200 Gb/s (100 GB/s a node) at NCCL's 12/12.5: below
    NVLink's 370.8 GB/s; the ring's 2(nodes-1) = 2 network steps cost 14 us each."""
    top = topology(get_device("h100"), 16, nodes=2, nics=4, nic_bits_per_s=200e9)
    cost = collective_cost(Collective("all_reduce", 10**9, 16), top)
    net = 4 * 200e9 / 8 * 12 / 12.5
    assert net < H100_BUS
    expected = 8.4e-6 + 28 * 3.4e-6 + 2 * 14e-6 + 1e9 * (2 * 15 / 16) / net
    assert cost.seconds == pytest.approx(expected, rel=1e-9)


# --- the two streams --------------------------------------------------------------------
def _op(name: str, inputs: tuple[int, ...] = (), outputs: tuple[int, ...] = (),
        collective: Collective | None = None) -> OpRecord:
    return OpRecord(name, "collective" if collective else "pointwise", "backward", "", "",
                    0, 0, 0, input_ids=inputs, output_ids=outputs, collective=collective)


def test_schedule_overlaps_and_waits() -> None:
    """A (1 s) then a collective C (2 s, writes storage 7), D (0.5 s) and B (1 s, reads 7):
    C starts when A ends (1), D runs beside it (1-1.5), B waits for C (3) and ends at 4."""
    c = Collective("all_reduce", 1, 2)
    t = Trace([_op("A", outputs=(5,)), _op("C", (5,), (7,), c), _op("D"), _op("B", (7,))])
    start, end = _schedule(t, np.array([1.0, 0.0, 0.5, 1.0]), np.array([0.0, 2.0, 0.0, 0.0]))
    assert list(start) == [0.0, 1.0, 1.0, 3.0]
    assert list(end) == [1.0, 3.0, 1.5, 4.0]


# --- parallel steps -----------------------------------------------------------------------

def test_ddp_trace_records_every_bucket_and_overlaps() -> None:
    t = roofline.trace(small_mlp(), torch.randn(32, 64), train=True, loss_fn=sum_loss,
                       parallel=roofline.Parallel("ddp", bucket_cap_mb=0.02), gpus=4)
    assert not dist.is_initialized()
    assert t.info.world_size == 4 and t.info.rank_batch == 8
    reduces = [op.collective for op in t.ops if op.collective is not None]
    params = 64 * 256 + 256 + 256 * 64 + 64 + 64 * 10 + 10
    assert sum(c.bytes for c in reduces) == params * 4 and len(reduces) >= 2
    p = roofline.parallel(t, "rtx 4090")  # PCIe: slow enough for communication to show
    assert p.communication_seconds > 0
    assert p.exposed_communication_seconds < p.communication_seconds  # some of it hidden
    assert p.seconds == pytest.approx(p.compute_total_seconds
                                      + p.exposed_communication_seconds)
    assert p.batch == 32


def test_scaling_and_explain() -> None:
    s = roofline.scaling(small_mlp(), (torch.randn(8, 64),), "rtx 4090", gpus=(1, 2, 4),
                         loss_fn=sum_loss)
    speedups = s.speedups()
    assert set(speedups) == {1, 2, 4} and all(0 < v <= n for n, v in speedups.items())
    text = roofline.explain(s.points[4])
    assert "4 RTX 4090" in text and "exposed" not in text.split(":")[0]


def test_fsdp_trace_is_not_recosted_for_another_size() -> None:
    t = roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                       parallel="fsdp", gpus=2)
    with pytest.raises(ValueError, match="trace it again with gpus=4"):
        roofline.parallel(t, "h100", gpus=4)


# --- careless use (review of the first version) ----------------------------------------
def _ddp_trace(gpus: int = 4) -> Trace:
    return roofline.trace(small_mlp(), torch.randn(32, 64), train=True, loss_fn=sum_loss,
                          parallel="ddp", gpus=gpus)


def test_analyze_of_a_parallel_trace_says_its_collectives_are_not_costed() -> None:
    t = _ddp_trace()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        a = roofline.analyze(t, "h100")
    assert any("collectives not costed" in str(w.message) for w in seen)
    assert any("roofline.parallel" in n for n in a.assumptions)
    with warnings.catch_warnings(record=True) as seen:  # parallel() costs them: no warning
        warnings.simplefilter("always")
        p = roofline.parallel(t, "h100")
    assert not any("collectives not costed" in str(w.message) for w in seen)
    assert not any("collectives not costed" in n for n in p.assumptions)


def test_the_scaling_curve_recosts_with_the_same_options_and_network() -> None:
    """Each point of the curve is what parallel() says for that count with the same
    options and network, whatever they are."""
    t = _ddp_trace(8)
    opts = {"peaks": "datasheet", "host_seconds": 0.001, "nics": 1, "nic_bits_per_s": 100e9}
    p = roofline.parallel(t, "h100", one_gpu=0.002, one_gpu_batch=4, **opts)
    ax = roofline.plot.scaling_curve(p)
    xs, ys = ax.get_lines()[1].get_data()
    two = roofline.parallel(t, "h100", gpus=2, one_gpu=0.002, one_gpu_batch=4, **opts)
    assert ys[list(xs).index(2)] == pytest.approx(two.speedup_vs_one_gpu)


def test_bad_gpu_counts_and_a_real_parallel_trace_are_refused() -> None:
    t = _ddp_trace()
    with pytest.raises(ValueError, match="gpus=0: expected a whole number"):
        roofline.parallel(t, "h100", gpus=0)
    with pytest.raises(ValueError, match="GPU counts are whole numbers"):
        roofline.scaling(small_mlp(), (torch.randn(8, 64),), "h100", gpus=(0, 2), loss_fn=sum_loss)
    with pytest.raises(ValueError, match="fake=True"):
        roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                       parallel="ddp", gpus=2, fake=False)
    assert not dist.is_initialized()


def test_a_parallel_result_states_the_gpus_per_node() -> None:
    p = roofline.parallel(_ddp_trace(), "h100", gpus=16, nodes=2)
    assert "16 GPUs: 2 nodes of 8" in p.assumptions
    big = roofline.parallel(_ddp_trace(), "h100", gpus=16)
    assert any("16 GPUs in one node" in n and "nodes=" in n for n in big.assumptions)


# --- the one-GPU baseline at its own batch (issue 22, item 4) -----------------------------

GLOBAL = 64


def _wide_mlp() -> nn.Module:
    """The zoo's mlp shape with a second hidden layer: 784-1024-1024-10, seeded."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def _one_gpu(batch: int) -> roofline.Trace:
    return roofline.trace(_wide_mlp(), torch.randn(batch, 784), train=True, loss_fn=sum_loss,
                          fake=True)


@pytest.fixture(scope="module")
def ddp() -> roofline.Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return roofline.trace(_wide_mlp(), torch.randn(GLOBAL, 784), train=True, loss_fn=sum_loss,
                              parallel="ddp", gpus=2)  # 32 rows a rank


def _speedup_or_refusal(ddp: roofline.Trace, one_gpu: object, one_batch: int) -> None:
    """Either the right speedup, or a ValueError that names the batch (refusing a
    one-GPU step whose batch it cannot tell)."""
    try:
        p = roofline.parallel(ddp, "h100", one_gpu=one_gpu)
    except ValueError as e:
        assert "batch" in str(e)
        return
    t1 = roofline.analyze(_one_gpu(one_batch), "h100").seconds
    truth = (GLOBAL / p.seconds) / (one_batch / t1)
    assert p.speedup_vs_one_gpu == pytest.approx(truth, rel=1e-9)


@pytest.mark.parametrize("form", ["trace", "analysis"])
def test_one_gpu_step_at_the_global_batch(ddp: roofline.Trace, form: str) -> None:
    """Both sides given the same global batch of 64, the natural call: today the one-GPU
    step is taken to have run 32 samples and the speedup comes out twice the truth."""
    one = _one_gpu(GLOBAL)
    _speedup_or_refusal(ddp, one if form == "trace" else roofline.analyze(one, "h100"),
                        GLOBAL)


def test_one_gpu_step_at_the_per_rank_batch_is_still_right(ddp: roofline.Trace) -> None:
    """The case today's default was written for keeps its answer."""
    p = roofline.parallel(ddp, "h100", one_gpu=_one_gpu(GLOBAL // 2))
    t1 = roofline.analyze(_one_gpu(GLOBAL // 2), "h100").seconds
    assert p.speedup_vs_one_gpu == pytest.approx(
        (GLOBAL / p.seconds) / ((GLOBAL // 2) / t1), rel=1e-9)


def test_a_one_gpu_batch_that_contradicts_the_trace_is_refused(ddp: roofline.Trace) -> None:
    with pytest.raises(ValueError, match="one_gpu_batch"):
        roofline.parallel(ddp, "h100", one_gpu=_one_gpu(GLOBAL), one_gpu_batch=GLOBAL // 2)


# --- bad arguments, refused by name (issue 22, item 10) -----------------------------------

NAN, INF = float("nan"), float("inf")


@functools.cache
def _ddp() -> roofline.Trace:
    return roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                          parallel="ddp", gpus=2)


def _x8() -> tuple[torch.Tensor]:
    return (torch.randn(8, 64),)


# (id, call, the argument the error must name, may a warning do instead)
BAD_ARGUMENTS: list[tuple[str, Callable[[], Any], str, bool]] = [
    # roofline.parallel
    ("parallel-one_gpu-inf", lambda: roofline.parallel(_ddp(), "h100", one_gpu=INF),
     "one_gpu", False),
    *[(f"parallel-one_gpu_batch-{label}",
       (lambda v=v: roofline.parallel(_ddp(), "h100", one_gpu=1e-3, one_gpu_batch=v)),
       "one_gpu_batch", False)
      for label, v in [("-4", -4), ("0", 0), ("2.5", 2.5), ("nan", NAN), ("inf", INF),
                       ("str", "4")]],
    ("parallel-one_gpu_batch-without-one_gpu",
     lambda: roofline.parallel(_ddp(), "h100", one_gpu_batch=4), "one_gpu_batch", True),
    *[(f"parallel-nics-{label}",
       (lambda v=v: roofline.parallel(_ddp(), "h100", nodes=2, gpus=16, nics=v)), "nics",
       False)
      for label, v in [("nan", NAN), ("inf", INF), ("2.5", 2.5)]],
    ("parallel-nic_bits_per_s-inf",
     lambda: roofline.parallel(_ddp(), "h100", nodes=2, gpus=16, nic_bits_per_s=INF),
     "nic_bits_per_s", False),
    # roofline.scaling
    ("scaling-model-None", lambda: roofline.scaling(None, _x8(), "h100", gpus=(1, 2)),
     "model", False),
    ("scaling-inputs-tensor", lambda: roofline.scaling(small_mlp(), torch.randn(8, 64), "h100",
                                                       gpus=(1, 2), loss_fn=sum_loss),
     "inputs", False),
    ("scaling-inputs-empty", lambda: roofline.scaling(small_mlp(), (), "h100", gpus=(1, 2)),
     "inputs", False),
    ("scaling-gpus-empty", lambda: roofline.scaling(small_mlp(), _x8(), "h100", gpus=(),
                                                    loss_fn=sum_loss), "gpus", False),
    ("scaling-gpus-only-1", lambda: roofline.scaling(small_mlp(), _x8(), "h100", gpus=(1,),
                                                     loss_fn=sum_loss), "gpus", True),
    ("scaling-gpus-int", lambda: roofline.scaling(small_mlp(), _x8(), "h100", gpus=4,
                                                  loss_fn=sum_loss), "gpus", False),
    *[(f"scaling-gpus_per_node-{label}",
       (lambda v=v: roofline.scaling(small_mlp(), _x8(), "h100", gpus=(1, 2, 4), gpus_per_node=v,
                                     loss_fn=sum_loss)), "gpus_per_node", False)
      for label, v in [("0", 0), ("-1", -1), ("nan", NAN), ("2.5", 2.5)]],
]


@pytest.mark.parametrize(("call", "argument", "warning_will_do"),
                         [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_argument_is_refused_by_name(call: Callable[[], Any], argument: str,
                                           warning_will_do: bool) -> None:
    """``parallel`` and ``scaling`` (issue 22, item 10)."""
    assert_refused_by_name(call, argument, warning_will_do)
