"""Bad and careless input to the analysis: finite numbers, honest factors, clear errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import roofline
from roofline import RooflineWarning
from roofline.hardware.curves import MemoryPoint
from roofline.tracing.records import OpRecord, Trace
from roofline.zoo import get_model


def _op(category: str, flops: int, nbytes: int, kernels: int = 1,
        shapes: tuple[tuple[int, ...], ...] = ((1024, 1024),)) -> OpRecord:
    return OpRecord(f"aten.{category}.default", category, "forward", "", "bfloat16", flops,
                    nbytes, 0, kernels=kernels, output_shapes=shapes)


# --------------------------------------------------------------- 5: zero-size ops
class _Experts(nn.Module):
    """Two experts; the second gets no tokens (an empty mixture-of-experts slice)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x).sum() + self.b(x[:0]).sum()


@pytest.mark.parametrize("build", [
    lambda: (_Experts(), torch.randn(8, 16)),
    lambda: (nn.Linear(16, 16), torch.randn(0, 16)),
    lambda: (nn.Conv2d(3, 8, 3), torch.randn(0, 3, 16, 16)),
])
def test_zero_size_matmuls_and_convs_give_finite_times(build) -> None:  # type: ignore[no-untyped-def]
    model, x = build()
    t = roofline.trace(model, x)
    for device in ("a100", "h100", "t4"):
        a = roofline.analyze(t, device)
        assert np.isfinite(a.op_seconds).all() and math.isfinite(a.seconds)
    c = roofline.compare(t, "a100", "h100")
    assert math.isfinite(c.speedup) and c.speedup > 0
    assert "nan" not in roofline.explain(c)


def test_empty_gemm_costs_no_compute_time() -> None:
    # (0 x 1024) @ (1024 x 1024): no output tiles, no FLOPs, no compute time
    empty = _op("matmul", 0, 4 * 1024 * 1024, shapes=((0, 1024),))
    a = roofline.analyze(Trace([empty]), "a100", overhead=False, peaks="datasheet")
    assert a.compute_seconds[0] == 0.0
    assert a.memory_seconds[0] == pytest.approx(4 * 1024 * 1024 / 2.039e12)  # A100 SXM 80GB


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "1"])
def test_host_seconds_must_be_finite(bad: object) -> None:
    t = Trace([_op("pointwise", 10, 10)])
    with pytest.raises(ValueError, match="host_seconds"):
        roofline.analyze(t, "a100", host_seconds=bad)


@pytest.mark.parametrize("bad", [math.nan, 1.0, -0.1])
def test_host_fraction_must_be_in_range(bad: float) -> None:
    with pytest.raises(ValueError, match="host_fraction"):
        roofline.analyze(Trace([_op("pointwise", 10, 10)]), "a100", host_fraction=bad)


def test_efficiency_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="efficiency"):
        roofline.analyze(Trace([_op("pointwise", 10, 10)]), "a100", efficiency=math.nan)


# --------------------------------------------------------------- 6: what-if factors
def test_a_factor_not_given_stays_one() -> None:
    t = Trace([_op("matmul", 10**12, 10**9), _op("pointwise", 10**6, 10**9)])
    a100 = roofline.get_device("a100")
    bw = roofline.what_if(t, a100, bandwidth=2.0)
    assert bw.dst.device.matrix_flops_per_s == a100.matrix_flops_per_s
    assert bw.dst.device.bandwidth_bytes_per_s == 2 * a100.bandwidth_bytes_per_s
    fl = roofline.what_if(t, a100, flops=3.0)
    assert fl.dst.device.bandwidth_bytes_per_s == a100.bandwidth_bytes_per_s
    assert fl.dst.device.matrix_flops_per_s["bf16"] == 3 * 312e12  # A100 bf16 dense peak
    seed = roofline.what_if(t, a100)  # no factor at all: the seed question, 2x FLOP/s
    assert seed.dst.device.matrix_flops_per_s["bf16"] == 2 * 312e12
    assert seed.dst.device.bandwidth_bytes_per_s == a100.bandwidth_bytes_per_s


@pytest.mark.parametrize("bad", [0, -2, math.nan, math.inf, True])
def test_bad_factors_are_refused(bad: object) -> None:
    t = Trace([_op("pointwise", 10, 10)])
    with pytest.raises(ValueError, match="factor"):
        roofline.what_if(t, "a100", flops=bad)  # type: ignore[arg-type]


# --------------------------------------------------------------- 11: empty traces
@pytest.mark.parametrize("ops", [[], [OpRecord("aten.view.default", "view", "forward", "",
                                                "float32", 0, 0, 0, kernels=0)]])
def test_empty_and_views_only_traces_answer_plainly(ops: list[OpRecord]) -> None:
    t = Trace(ops)
    c = roofline.compare(t, "a100", "h100")
    assert c.speedup == 1.0
    assert c.speedup_limits() == {"infinite_flops": 1.0, "infinite_bandwidth": 1.0}
    assert "nothing to speed up" in roofline.explain(c)
    grid = roofline.sweep(t, "a100", flops=[1, 2], bandwidth=[1, 2])
    assert (grid.speedup == 1.0).all()
    assert roofline.what_if(t, "a100").speedup == 1.0
    a = roofline.analyze(t, "a100")
    assert a.seconds == 0 and a.mfu == 0 and a.achieved_flops_per_s == 0
    assert all(v["fraction"] == 0 for v in a.by_bound().values())


# --------------------------------------------------------------- 12: every device
_FAMILIES = {  # the zoo's families at their smallest useful sizes
    "mlp": {}, "resnet50": {"batch_size": 1, "image_size": 64},
    "mobilenet": {"batch_size": 1, "image_size": 64}, "gpt2": {"batch_size": 1, "seq_len": 32},
    "bert-base": {"batch_size": 1, "seq_len": 32}, "vit-b16": {"batch_size": 1},
    "llama-tiny": {"batch_size": 1, "seq_len": 32},
    "transformer": {"batch_size": 1, "seq_len": 16},
}


@pytest.fixture(scope="module")
def bf16_steps() -> dict[str, Trace]:
    out = {}
    for name, kw in _FAMILIES.items():
        zm = get_model(name, **kw)
        opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
        with warnings.catch_warnings(), torch.autocast("cpu", dtype=torch.bfloat16):
            warnings.simplefilter("ignore")
            out[name] = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                                       fake=True)
    return out


@pytest.mark.parametrize("device", [d.name for d in roofline.list_devices()])
def test_every_shipped_device_analyses_the_zoo_bf16_training_steps(
        device: str, bf16_steps: dict[str, Trace]) -> None:
    for name, t in bf16_steps.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = roofline.analyze(t, device)
        assert math.isfinite(a.seconds) and a.seconds > 0, (name, device)
        # a device with a gap in its peaks says so, in the result and as a warning
        gaps = [str(w.message) for w in caught if issubclass(w.category, RooflineWarning)]
        assert (a.unrated_flops_share > 0) == bool(gaps), (name, device)
        assert all(g in a.assumptions for g in gaps)
        # the step is at least as long as its bytes at the datasheet bandwidth
        assert a.seconds >= t.total_bytes / a.device.bandwidth_bytes_per_s * (1 - 1e-9)


def test_a_device_without_a_vector_rate_says_which_flops_it_did_not_cost() -> None:
    h100 = roofline.get_device("h100")
    no_vector = h100.with_overrides(name="matrix only", vector_flops_per_s={})
    t = Trace([_op("pointwise", 10**9, 10**6), _op("matmul", 10**12, 10**6)])
    with pytest.warns(RooflineWarning, match="no compute rate for bfloat16"):
        a = roofline.analyze(t, no_vector, overhead=False, peaks="datasheet")
    assert a.compute_seconds[0] == 0 and a.engine[0] is None
    assert a.unrated_flops_share == pytest.approx(10**9 / (10**9 + 10**12))
    assert a.compute_seconds[1] == pytest.approx(10**12 / 989.4e12)  # H100 SXM bf16
    assert any("no compute rate for bfloat16" in n and "0.1% of FLOPs" in n
               for n in a.assumptions)


# --------------------------------------------------------------- 13: wrong types
def test_analyze_a_model_says_trace_it_first() -> None:
    with pytest.raises(TypeError, match=r"roofline\.trace"):
        roofline.analyze(nn.Linear(2, 2), "a100")  # type: ignore[arg-type]


# --------------------------------------------------------------- the roofs as data
def test_ridge_point_is_where_the_time_model_switches_bound() -> None:
    """An op above its reported ridge point is compute-bound, below it memory-bound, also
    on a calibrated memory curve where the flat bandwidth would give another ridge."""
    h100 = roofline.get_device("h100")
    curve = [MemoryPoint(bytes=2**k, bytes_per_s=bw) for k, bw in
             ((10, 1e10), (20, 5e11), (30, 3e12))]
    calibrated = h100.with_overrides(memory_curve=curve)
    ops = [_op("matmul", f, b) for f in (10**6, 10**9, 10**12) for b in (2**12, 2**22, 2**28)]
    for spec in (h100, calibrated):
        a = roofline.analyze(Trace(ops), spec, overhead=False)
        for i, bound in enumerate(a.bound):
            if a.intensity[i] > a.ridge_point[i] * (1 + 1e-9):
                assert bound == "compute", (spec.name, i)
            elif a.intensity[i] < a.ridge_point[i] * (1 - 1e-9):
                assert bound == "memory", (spec.name, i)
    flat = roofline.analyze(Trace(ops), calibrated, overhead=False)
    assert flat.ridge_point[0] != pytest.approx(989.4e12 / 3.35e12)  # the curve's, not flat


def test_seconds_with_scales_named_roofs() -> None:
    t = Trace([_op("matmul", 10**12, 10**6), _op("pointwise", 10**3, 10**10)])
    a = roofline.analyze(t, "h100", overhead=False, peaks="datasheet")
    compute, memory = 10**12 / 989.4e12, 10**10 / 3.35e12  # H100 SXM datasheet
    assert a.seconds == pytest.approx(compute + memory)
    assert a.seconds_with(compute=2.0) == pytest.approx(compute / 2 + memory)
    assert a.seconds_with(memory=math.inf) == pytest.approx(compute)
    with pytest.raises(ValueError, match="unknown roof"):
        a.seconds_with(link=2.0)


def test_every_category_has_words_in_the_explanation() -> None:
    from roofline.presentation.explain import CATEGORY_WORDS
    from roofline.tracing.records import Category

    assert set(CATEGORY_WORDS) == set(Category)


# --------------------------------------------------------------- careless option values
@pytest.mark.parametrize(("name", "bad"), [("tf32_matmul", "no"), ("tf32_conv", 0),
                                           ("fp16_accumulate", None), ("overhead", "off"),
                                           ("efficiency", True)])
def test_option_values_of_the_wrong_type_are_refused(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=name):
        roofline.analyze(Trace([_op("matmul", 10**12, 10**6)]), "a100", **{name: bad})


def test_seconds_with_refuses_a_bool_factor() -> None:
    a = roofline.analyze(Trace([_op("matmul", 10**12, 10**6)]), "a100")
    with pytest.raises(ValueError, match="compute factor"):
        a.seconds_with(compute=True)


@pytest.mark.parametrize("wrong", ["trace", "analysis"])
def test_explain_of_something_not_a_prediction_says_what_it_takes(wrong: str) -> None:
    t = Trace([_op("matmul", 10**12, 10**6)])
    thing = t if wrong == "trace" else roofline.analyze(t, "a100")
    with pytest.raises(TypeError, match="what_if"):
        roofline.explain(thing)  # type: ignore[arg-type]


def test_ops_that_take_no_time_have_no_bound() -> None:
    view = OpRecord("aten.t.default", "view", "forward", "", "float32", 0, 0, 0, kernels=0)
    mm = _op("matmul", 2 * 64**3, 3 * 64 * 64 * 2)
    c = roofline.compare(Trace([view, mm]), "a100", "h100")
    assert c.src.bound[0] == "none"
    assert "none" not in c.src.by_bound()
    assert all("view" not in cats for cats in c.reasons().categories.values())


def test_a_trace_without_flops_is_explained_without_a_flops_ratio() -> None:
    copy = _op("copy", 0, 10**9)
    text = roofline.explain(roofline.what_if(Trace([copy]), "a100"))
    assert "the step has no FLOPs" in text and "nan" not in text
    h100 = roofline.get_device("h100")
    no_rates = h100.with_overrides(name="no rates", vector_flops_per_s={}, matrix_flops_per_s={},
                                   matrix_sparse_flops_per_s={})
    with pytest.warns(RooflineWarning):
        text = roofline.explain(roofline.compare(Trace([_op("pointwise", 10**9, 10**6)]),
                                                 no_rates, "h100"))
    assert "no rates lists no compute rate for the step's FLOPs" in text
