"""Memory of a step: the storage table of the capture, roofline.memory and roofline.fits.

Expected values are derived by hand (bytes per parameter of fp32 AdamW) or measured by
torch's own machinery (the profiler's memory timeline, MemTracker), never read back from
the implementation.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import roofline
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


def test_capture_block_tags_kinds_without_trace() -> None:
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(BATCH, IN)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
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
    bad["storages"][0][-1] = "weights"
    with pytest.raises(ValueError, match="storage row 0: kind"):
        roofline.Trace.from_json(json.dumps(bad))


def test_peak_matches_the_profiler_memory_timeline() -> None:
    """A real CPU step: predicted peak against torch.profiler's memory timeline."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

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
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        loss(model(x)).backward()
        opt.step()
    live = measured = 0
    for _t, action, _key, size in prof._memory_profile().timeline:
        if action in (Action.PREEXISTING, Action.CREATE):
            live += size
        elif action == Action.DESTROY:
            live -= size
        measured = max(measured, live)
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
        model = _mlp()
        opt = torch.optim.AdamW(model.parameters())
        x = torch.randn(BATCH, IN)
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
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
