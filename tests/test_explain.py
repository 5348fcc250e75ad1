"""The reasons of a speedup in words (presentation/explain.py): every category has
words, a step without FLOPs or rates is explained without a ratio, and anything that is not
a prediction is refused saying what explain takes (issue 13, items 11 and 13).
"""

from __future__ import annotations

import pytest
from conftest import make_op, make_op_4096

import roofline
from roofline import RooflineWarning
from roofline.tracing.records import Trace


def test_every_category_has_words_in_the_explanation() -> None:
    from roofline.presentation.explain import CATEGORY_WORDS
    from roofline.tracing.records import Category

    assert set(CATEGORY_WORDS) == set(Category)


def test_a_trace_without_flops_is_explained_without_a_flops_ratio() -> None:
    copy = make_op("copy", 0, 10**9)
    text = roofline.explain(roofline.what_if(Trace([copy]), "a100"))
    assert "the step has no FLOPs" in text and "nan" not in text
    h100 = roofline.get_device("h100")
    no_rates = h100.with_overrides(name="no rates", vector_flops_per_s={}, matrix_flops_per_s={},
                                   matrix_sparse_flops_per_s={})
    with pytest.warns(RooflineWarning):
        text = roofline.explain(roofline.compare(Trace([make_op("pointwise", 10**9, 10**6)]),
                                                 no_rates, "h100"))
    assert "no rates lists no compute rate for the step's FLOPs" in text


@pytest.mark.parametrize("wrong", ["trace", "analysis"])
def test_explain_of_something_not_a_prediction_says_what_it_takes(wrong: str) -> None:
    t = Trace([make_op("matmul", 10**12, 10**6)])
    thing = t if wrong == "trace" else roofline.analyze(t, "a100")
    with pytest.raises(TypeError, match="what_if"):
        roofline.explain(thing)  # type: ignore[arg-type]


def test_the_rates_each_device_reaches_are_named_when_they_differ_from_the_datasheet() -> None:
    """An fp32 matmul (TF32 off) on the CUDA cores: the datasheets give the H100 SXM 66.9
    against the A100's 19.5 TFLOPS (3.43x), the SGEMM each reaches 51.995 against 19.18
    (zzc-db's fp32 column; 2.71x), and a compute-bound step follows the second."""
    t = Trace([make_op_4096("matmul", 10**13, 10**6, dtype="float32")])
    c = roofline.compare(t, "a100", "h100")
    assert c.flops_ratio == pytest.approx(66.9 / 19.5)
    assert c.achievable_flops_ratio == pytest.approx(51.995 / 19.18)
    assert c.speedup == pytest.approx(51.995 / 19.18, rel=0.01)
    assert "3.4x the FLOP/s (2.7x at the rates each reaches)" in roofline.explain(c)
    datasheet = roofline.compare(t, "a100", "h100", peaks="datasheet")
    assert datasheet.achievable_flops_ratio == pytest.approx(datasheet.flops_ratio)
    assert "at the rates each reaches" not in roofline.explain(datasheet)
