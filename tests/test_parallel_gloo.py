"""Real collectives: the fake-group trace records what 2 gloo processes really run.

Two processes (``torch.multiprocessing``, the gloo backend on this CPU, a free port on
127.0.0.1) run a steady-state DDP step and an FSDP2 step of the same small model, each
inside a roofline capture; the collectives they record (kind, bytes, group size, phase,
order) must equal those of ``roofline.trace(..., parallel=..., gpus=2)`` on the fake group.
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import roofline

BUCKET_MB = 0.05  # several DDP buckets for a 340 kB model
BATCH = 16  # global: 8 rows a rank


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def _collectives(t: roofline.Trace) -> list[tuple[str, int, int, str]]:
    return [(op.collective.kind, op.collective.bytes, op.collective.group_size, op.phase)
            for op in t.ops if op.collective is not None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel

        x = torch.randn(BATCH // 2, 64)
        ddp = DistributedDataParallel(_model(), bucket_cap_mb=BUCKET_MB)
        for _ in range(2):  # the first step's one bucket, then the rebuild in the second
            ddp(x).sum().backward()
        with roofline.capture() as t_ddp:
            ddp(x).sum().backward()
        model = _model()
        mesh = init_device_mesh("cpu", (2,))
        for layer in (model[0], model[2], model[4]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model(x).sum().backward()
        with roofline.capture() as t_fsdp:
            model(x).sum().backward()
        if rank == 0:
            torch.save({"ddp": _collectives(t_ddp), "fsdp": _collectives(t_fsdp)}, out)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("gloo") / "collectives.pt"
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=2, join=True)
    data: dict[str, Any] = torch.load(out)
    return data


def _fake(kind: str | roofline.Parallel) -> list[tuple[str, int, int, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = roofline.trace(_model(), torch.randn(BATCH, 64), train=True,
                           loss_fn=lambda o: o.sum(), parallel=kind, gpus=2)
    assert not dist.is_initialized()  # the fake group is destroyed afterwards
    return _collectives(t)


def test_ddp_collectives_equal_the_real_ones(real: dict[str, Any]) -> None:
    fake = _fake(roofline.Parallel("ddp", bucket_cap_mb=BUCKET_MB))
    assert len([c for c in real["ddp"] if c[0] == "all_reduce"]) >= 2  # several buckets
    assert fake == real["ddp"]


def test_ddp_buckets_sum_to_the_gradients(real: dict[str, Any]) -> None:
    """Every parameter's gradient is all-reduced once: the buckets hold 85,002 fp32
    values (64x256+256 + 256x256+256 + 256x10+10), counted by hand."""
    params = 64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10
    reduced = sum(c[1] for c in real["ddp"] if c[0] == "all_reduce")
    assert reduced == params * 4


def test_fsdp_collectives_equal_the_real_ones(real: dict[str, Any]) -> None:
    fake = _fake("fsdp")
    kinds = {c[0] for c in real["fsdp"]}
    assert kinds == {"all_gather", "reduce_scatter"}
    assert fake == real["fsdp"]


def test_worker_file_is_written(real: dict[str, Any], tmp_path: Path) -> None:
    assert set(real) == {"ddp", "fsdp"}
