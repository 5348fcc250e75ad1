"""Parallel traces and their cost: nccl-tests' factors, NCCL's constants, two streams."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

import roofline
from roofline.analysis.collectives import collective_cost
from roofline.analysis.parallel import _schedule
from roofline.hardware import get_device
from roofline.hardware.topology import topology
from roofline.tracing import FakeModeError
from roofline.tracing.records import Collective, OpRecord, Trace
from roofline.tracing.strategies import fake_allreduce_hook

# H100 SXM: NVLink 4, 900 GB/s both directions (the registry's datasheet figure), 450 a
# direction; NCCL's model: 20.6 GB/s per 25 GB/s link (nccl@5067397 src/graph/topo.h)
H100_BUS = 450e9 * 20.6 / 25


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def _sum(out: torch.Tensor) -> torch.Tensor:
    return out.sum()


# --- the cost of one collective --------------------------------------------------------

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


def test_no_interconnect_falls_back_to_pcie() -> None:
    spec = get_device("h100").model_copy(update={"interconnect": None})
    top = topology(spec, 8)
    assert top.intra.kind == "PCIe Gen5 x16"
    assert top.intra.bus_bytes_per_s == pytest.approx(32e9 * 128 / 130 / 8 * 16 * 12 / 15.75)
    assert any("PCIe" in a and "no interconnect" in a for a in top.assumptions)


def test_a_bridge_joins_two_gpus_only() -> None:
    spec = get_device("A100 PCIe 80GB")
    assert topology(spec, 2).intra.latency_class == "nvlink"
    assert topology(spec, 8).intra.kind.startswith("PCIe")


def test_no_link_at_all_is_an_error() -> None:
    spec = get_device("h100").model_copy(update={"interconnect": None, "host_link": None})
    with pytest.raises(ValueError, match="neither interconnect figures nor a PCIe host link"):
        topology(spec, 8)


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


# --- parallel traces ----------------------------------------------------------------------

def test_ddp_trace_records_every_bucket_and_overlaps() -> None:
    t = roofline.trace(_mlp(), torch.randn(32, 64), train=True, loss_fn=_sum,
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


def test_fsdp_and_tp_traces() -> None:
    t = roofline.trace(_mlp(), torch.randn(32, 64), train=True, loss_fn=_sum,
                       parallel="fsdp", gpus=4)
    kinds = {op.collective.kind for op in t.ops if op.collective is not None}
    assert kinds == {"all_gather", "reduce_scatter"}
    assert not t.uncounted  # FSDP's copy kernels are known
    t = roofline.trace(_mlp(), torch.randn(16, 64), train=True, loss_fn=_sum,
                       parallel="tp", gpus=4)
    reduces = [op.collective for op in t.ops
               if op.collective is not None and op.collective.kind == "all_reduce"]
    # the row-parallel layer's output: the whole batch of 16 x 64 fp32, summed over ranks
    assert reduces[0].bytes == 16 * 64 * 4 and reduces[0].group_size == 4
    mm = [op for op in t.ops if op.name == "aten.addmm.default"]
    assert mm[0].flops == 2 * 16 * 64 * (256 // 4)  # the local shard, not the global layer


def test_scaling_and_explain() -> None:
    s = roofline.scaling(_mlp(), (torch.randn(8, 64),), "rtx 4090", gpus=(1, 2, 4),
                         loss_fn=_sum)
    speedups = s.speedups()
    assert set(speedups) == {1, 2, 4} and all(0 < v <= n for n, v in speedups.items())
    text = roofline.explain(s.points[4])
    assert "4 RTX 4090" in text and "exposed" not in text.split(":")[0]


def test_json_round_trip_keeps_collectives() -> None:
    t = roofline.trace(_mlp(), torch.randn(8, 64), train=True, loss_fn=_sum,
                       parallel="ddp", gpus=2)
    back = Trace.from_json(t.to_json())
    assert [op.collective for op in back.ops] == [op.collective for op in t.ops]


# --- bad input -------------------------------------------------------------------------

def test_batch_that_does_not_split() -> None:
    with pytest.raises(ValueError, match="global batch of 10 does not split over 4 GPUs"):
        roofline.trace(_mlp(), torch.randn(10, 64), train=True, loss_fn=_sum,
                       parallel="ddp", gpus=4)
    assert not dist.is_initialized()


def test_gpus_without_parallel_and_parallel_without_gpus() -> None:
    with pytest.raises(ValueError, match="pass parallel="):
        roofline.trace(_mlp(), torch.randn(8, 64), gpus=4)
    with pytest.raises(ValueError, match="needs gpus=N"):
        roofline.trace(_mlp(), torch.randn(8, 64), train=True, loss_fn=_sum, parallel="ddp")


def test_fsdp_cannot_wrap_a_model_without_parameters() -> None:
    with pytest.raises(ValueError, match="FSDP cannot wrap"):
        roofline.trace(nn.ReLU(), torch.randn(8, 64, requires_grad=True), train=True,
                       loss_fn=_sum, parallel="fsdp", gpus=2)


def test_tp_without_a_linear_pair_asks_for_a_plan() -> None:
    with pytest.raises(ValueError, match="pass the plan"):
        roofline.trace(nn.Linear(64, 10), torch.randn(8, 64), train=True, loss_fn=_sum,
                       parallel="tp", gpus=2)


def test_fsdp_trace_is_not_recosted_for_another_size() -> None:
    t = roofline.trace(_mlp(), torch.randn(8, 64), train=True, loss_fn=_sum,
                       parallel="fsdp", gpus=2)
    with pytest.raises(ValueError, match="trace it again with gpus=4"):
        roofline.parallel(t, "h100", gpus=4)


def test_the_users_group_and_wrapped_model() -> None:
    """In the user's own (fake) group: a parallel trace uses it and leaves it; the user's
    DDP model is traced as it is on real tensors (with the hook a fake group needs), and
    refused on fake ones."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        t = roofline.trace(_mlp(), torch.randn(8, 64), train=True, loss_fn=_sum,
                           parallel="ddp")
        assert t.info.world_size == 2 and dist.is_initialized()
        ddp = nn.parallel.DistributedDataParallel(_mlp())
        ddp.register_comm_hook(None, fake_allreduce_hook)
        mine = roofline.trace(ddp, torch.randn(4, 64), train=True, loss_fn=_sum)
        kinds = [op.collective.kind for op in mine.ops if op.collective is not None]
        assert kinds.count("all_reduce") >= 1
        with pytest.raises(FakeModeError, match="cannot trace a model you wrapped"):
            roofline.trace(ddp, torch.randn(4, 64), train=True, loss_fn=_sum, fake=True)
        with pytest.raises(ValueError, match="already wrapped"):
            roofline.trace(ddp, torch.randn(4, 64), train=True, loss_fn=_sum, parallel="ddp")
    finally:
        dist.destroy_process_group()
    assert math.isfinite(roofline.parallel(mine, "h100").seconds)


def test_charts_draw_headless() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = roofline.scaling(_mlp(), (torch.randn(8, 64),), "rtx 4090", gpus=(1, 2, 4),
                         loss_fn=_sum)
    ax = roofline.plot.scaling_curve(s)
    ideal = ax.get_lines()[0]
    assert list(ideal.get_xdata()) == [1, 2, 4] == list(ideal.get_ydata())
    ax2 = roofline.plot.stream_timeline(s.points[4])
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["communication", "compute"]
    with pytest.raises(TypeError, match="ParallelAnalysis"):
        roofline.plot.stream_timeline(s)  # type: ignore[arg-type]
    plt.close("all")


def test_cli_parallel(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    assert main(["analyze", "mlp", "--device", "h100", "--train", "--gpus", "4",
                 "--parallel", "ddp", "--batch-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "4 H100 SXMs (ddp over NVLink 4)" in out and "all_reduce" in out
    assert main(["analyze", "mlp", "--device", "h100", "--train", "--gpus", "4",
                 "--nodes", "3"]) == 1
    assert "does not spread evenly" in capsys.readouterr().err


# --- careless use (review of the first version) ----------------------------------------

def _ddp_trace(gpus: int = 4) -> Trace:
    return roofline.trace(_mlp(), torch.randn(32, 64), train=True, loss_fn=_sum,
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
        roofline.scaling(_mlp(), (torch.randn(8, 64),), "h100", gpus=(0, 2), loss_fn=_sum)
    with pytest.raises(ValueError, match="fake=True"):
        roofline.trace(_mlp(), torch.randn(8, 64), train=True, loss_fn=_sum,
                       parallel="ddp", gpus=2, fake=False)
    assert not dist.is_initialized()


def test_a_parallel_result_states_the_gpus_per_node() -> None:
    p = roofline.parallel(_ddp_trace(), "h100", gpus=16, nodes=2)
    assert "16 GPUs: 2 nodes of 8" in p.assumptions
    big = roofline.parallel(_ddp_trace(), "h100", gpus=16)
    assert any("16 GPUs in one node" in n and "nodes=" in n for n in big.assumptions)


@pytest.mark.parametrize(("argv", "message"), [
    (["--parallel", "tp"], "pass --gpus N"),
    (["--nodes", "2"], "pass --gpus N"),
    (["--gpus", "4", "--compare", "a100", "--train"], "--compare"),
    (["--gpus", "4"], "add --train"),
    (["--gpus", "4", "--train", "--html", "x.html"], "--html"),
])
def test_cli_refuses_parallel_flags_it_would_ignore(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    from roofline.presentation.cli import main

    assert main(["analyze", "mlp", "--device", "h100", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "traced" not in err  # refused before any tracing


def test_cli_json_names_the_device_and_links(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.presentation.cli import main

    assert main(["--json", "analyze", "mlp", "--device", "h100", "--train", "--gpus", "4",
                 "--batch-size", "16"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "H100 SXM" and data["gpus_per_node"] == 4
    assert data["links"]["intra_node"]["kind"] == "NVLink 4"
    assert data["collectives"][0]["link"] == "NVLink 4"
    assert data["one_gpu_seconds"] > 0
