"""GEMMs whose stored rows are off a multiple of 16 bytes (roofline.analysis.alignment).

Which GEMMs of a step are slowed follows from where their operands' rows lie in memory:
in ``x @ W.t()`` the output's rows are the out-features; autograd's weight gradient
``dy.t() @ x`` reads ``dy`` transposed, whose stored rows are still the out-features;
the token count is never a row length. The shares themselves were measured on an H200.
"""

from __future__ import annotations

import torch
from torch import nn

import roofline
from roofline.analysis import alignment


def _step(vocab: int, tokens: int = 512, width: int = 768, dtype: torch.dtype = torch.bfloat16,
          ) -> roofline.Trace:
    head = nn.Linear(width, vocab, bias=False, dtype=dtype)
    x = torch.randn(tokens, width, dtype=dtype, requires_grad=True)  # an input gradient too
    return roofline.trace(head, x, train=True, fake=True, loss_fn=lambda y: y.float().sum())


def _mm_seconds(trace: roofline.Trace, device: str, **options: object) -> list[float]:
    a = roofline.analyze(trace, device, **options)
    return [float(s) for op, s in zip(trace.ops, a.op_seconds, strict=True)
            if op.name == "aten.mm.default"]


def test_every_gemm_of_an_odd_vocabulary_is_slowed_on_hopper_and_its_padded_twin_is_not() -> None:
    odd, padded = _step(50257), _step(50304)
    slow, fast = _mm_seconds(odd, "h100"), _mm_seconds(padded, "h100")
    assert len(slow) == len(fast) == 3  # forward, input gradient, weight gradient
    flops = 50257 / 50304
    # each at least the 8-byte share's slowdown over its twin (a 2-byte row: the 2-byte one)
    worst = min(alignment.MISALIGNED_SHARE.values())
    for s, f in zip(slow, fast, strict=True):
        assert s / (f * flops) > 1 / max(alignment.MISALIGNED_SHARE.values())
        assert abs(s / (f * flops) - 1 / worst) / (1 / worst) < 0.05
    a = roofline.analyze(odd, "h100")
    assert alignment.NOTE in a.assumptions and a.misaligned_share() > 0.5
    assert roofline.analyze(padded, "h100").misaligned_share() == 0.0


def test_rows_four_bytes_off_get_the_larger_share() -> None:
    # 50258 bf16 elements are 100516 bytes: a multiple of 4, not of 16
    ratio = _mm_seconds(_step(50258), "h100")[0] / _mm_seconds(_step(50304), "h100")[0]
    assert abs(ratio * 50304 / 50258 - 1 / alignment.MISALIGNED_SHARE[4]) < 0.05 * ratio


def test_an_odd_token_count_is_no_row_length() -> None:
    odd, even = _step(3072, tokens=8191), _step(3072, tokens=8192)
    assert roofline.analyze(odd, "h100").misaligned_share() == 0.0
    for s, f in zip(_mm_seconds(odd, "h100"), _mm_seconds(even, "h100"), strict=True):
        assert s <= f * 1.01


def test_other_parts_and_the_cuda_cores_keep_the_aligned_rate_and_say_so() -> None:
    odd, padded = _step(50257), _step(50304)
    for s, f in zip(_mm_seconds(odd, "a100"), _mm_seconds(padded, "a100"), strict=True):
        assert s < f * 1.01  # Ampere: not measured, costed as aligned ...
    assert alignment.OFF_HOPPER in roofline.analyze(odd, "a100").assumptions  # ... and said
    fp32 = _step(50257, dtype=torch.float32)  # SIMT SGEMM: no 16-byte tensor-core loads
    assert roofline.analyze(fp32, "h100").misaligned_share() == 0.0
    tf32 = roofline.analyze(fp32, "h100", tf32_matmul=True)  # 4-byte rows on TF32 cores
    assert tf32.misaligned_share() > 0.5


def test_a_transposed_view_keeps_its_source_rows() -> None:
    first = alignment.first_shapes(_step(50257))
    mm = [op for op in _step(50257).ops if op.name == "aten.mm.default"]
    weight_grad = mm[1] if mm[1].input_shapes[0][0] == 50257 else mm[2]
    assert weight_grad.input_shapes[0] == (50257, 512)  # dy.t(): the vocabulary as rows
    # stored as dy: rows of 50257
    assert alignment.row_length(weight_grad.input_shapes[0],
                                first[weight_grad.input_ids[0]]) == 50257


def test_a_flattened_input_is_read_as_contiguous_rows() -> None:
    # ResNet's classifier: the pooled (N, 2048, 1, 1) map flattened to (N, 2048) has rows of
    # 2048, not of its first shape's last dimension, 1
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))
    head = head.to(torch.bfloat16)
    x = torch.randn(256, 2048, 7, 7, dtype=torch.bfloat16, requires_grad=True)
    t = roofline.trace(head, x, train=True, fake=True, loss_fn=lambda y: y.float().sum())
    assert roofline.analyze(t, "h100").misaligned_share() == 0.0
    assert alignment.row_length((256, 2048), (256, 2048, 1, 1)) == 2048


def test_explain_says_where_the_time_goes() -> None:
    text = roofline.explain(roofline.compare(_step(50257), "a100", "h100"), assumptions=False)
    assert "On H100 SXM, GEMMs with rows off a multiple of 16 bytes take" in text


def test_a_gemm_bound_by_its_bytes_slows_by_the_same_share() -> None:
    # one token through a 4097 x 4096 bf16 weight: bound by the 33 MB of weights it streams;
    # its output's rows of 4097 elements (8194 bytes) are a multiple of 2 bytes only
    def one_token(out_features: int) -> roofline.Trace:
        layer = nn.Linear(4096, out_features, bias=False, dtype=torch.bfloat16)
        return roofline.trace(layer, torch.randn(1, 4096, dtype=torch.bfloat16), fake=True)

    odd, even = roofline.analyze(one_token(4097), "h100"), roofline.analyze(one_token(4096), "h100")
    assert odd.memory_seconds.sum() > odd.compute_seconds.sum()  # bytes, not math, bound it
    ratio = odd.memory_seconds.sum() / (even.memory_seconds.sum() * 4097 / 4096)
    assert abs(ratio - 1 / alignment.MISALIGNED_SHARE[2]) < 0.02 * ratio
    on_a100 = roofline.analyze(one_token(4097), "a100")  # not measured off Hopper: aligned
    aligned_a100 = roofline.analyze(one_token(4096), "a100")
    assert on_a100.memory_seconds.sum() < aligned_a100.memory_seconds.sum() * 4097 / 4096 * 1.01
