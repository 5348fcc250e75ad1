"""Serving an LLM (issue 26): prefill and decode traced from the real model, the KV cache,
TTFT, TPOT, tokens/s, capacity, and device swaps; every number derived by hand from the
model's sizes, not read back from the code under test."""

from __future__ import annotations

import functools
import itertools
import json
import math
import warnings
from typing import Any

import pytest
import torch
from conftest import no_global_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import roofline
from roofline.tracing.quantized import kv_bytes
from roofline.zoo import get_model

transformers = pytest.importorskip("transformers")

# a tiny grouped-query Llama: 2 layers, hidden 256, 8 query heads and 4 KV heads of 32
LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB = 2, 256, 8, 4, 688, 1000
HEAD_DIM = HIDDEN // HEADS


def hf_llama(dtype: torch.dtype = torch.bfloat16, **overrides: Any) -> nn.Module:
    """A transformers Llama on the meta device (no weights), in ``dtype``."""
    sizes = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
             "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
             "num_key_value_heads": KV_HEADS, "max_position_embeddings": 4096, **overrides}
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**sizes))
    return model.to(dtype)


@functools.cache
def tiny_trace(prompt: int = 256, new: int = 64, batch: int = 4,
               kv_dtype: str | None = None) -> roofline.ServingTrace:
    return roofline.trace_serving(hf_llama(), prompt_tokens=prompt, new_tokens=new,
                                  batch=batch, kv_dtype=kv_dtype)


@functools.cache
def wide_trace() -> roofline.ServingTrace:
    """One layer of Llama-3-8B's shape (hidden 4096, SwiGLU 11008, GQA 32/8), 8 x 2048."""
    model = hf_llama(hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
                     num_key_value_heads=8, num_hidden_layers=1)
    return roofline.trace_serving(model, prompt_tokens=2048, new_tokens=16, batch=8)


# matmul weights of one layer (q, k, v, o; gate, up, down) and the untied head
LAYER_MATMUL_PARAMS = (HIDDEN * HIDDEN * 2 + HIDDEN * KV_HEADS * HEAD_DIM * 2
                       + 3 * HIDDEN * FFN)
HEAD_PARAMS = HIDDEN * VOCAB


def kv_per_token(itemsize: int) -> int:
    """K and V of one token: 2 x layers x KV heads x head_dim x bytes."""
    return 2 * LAYERS * KV_HEADS * HEAD_DIM * itemsize


# --- the KV cache ------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "kv_dtype", "itemsize"),
                         [(torch.bfloat16, None, 2), (torch.float32, None, 4),
                          (torch.bfloat16, "fp8", 1)])
def test_kv_bytes_per_token_is_two_layers_heads_dims_bytes(dtype: torch.dtype,
                                                           kv_dtype: str | None,
                                                           itemsize: int) -> None:
    st = roofline.trace_serving(hf_llama(dtype), prompt_tokens=64, new_tokens=8, batch=3,
                                kv_dtype=kv_dtype)
    assert st.kv_bytes_per_token == kv_per_token(itemsize)
    assert st.kv_bytes_per_sequence == kv_per_token(itemsize) * (64 + 8)
    for context, t in st.decode.items():  # the cache each decode step holds: C + 1 tokens
        assert kv_bytes(t) == kv_per_token(itemsize) * 3 * (context + 1)


def test_the_zoo_llama_and_transformers_agree() -> None:
    """Two implementations of one architecture: the same KV bytes and matmul FLOPs."""
    zoo = get_model("llama-tiny", device="meta", vocab_size=VOCAB, dim=HIDDEN,
                    n_layers=LAYERS, n_heads=HEADS, n_kv_heads=KV_HEADS,
                    hidden_dim=FFN).model
    a = roofline.trace_serving(zoo, prompt_tokens=64, new_tokens=8, batch=2,
                               dtype=torch.bfloat16)
    b = roofline.trace_serving(hf_llama(), prompt_tokens=64, new_tokens=8, batch=2)
    assert a.kv_bytes_per_token == b.kv_bytes_per_token == kv_per_token(2)
    for x, y in ((a.prefill, b.prefill), (a.decode[71], b.decode[71])):
        assert x.by_category()["matmul"].flops == y.by_category()["matmul"].flops
        assert x.by_category()["attention"].flops == y.by_category()["attention"].flops
    assert next(zoo.parameters()).dtype == torch.float32  # cast on a copy, not in place


# --- FLOPs of the steps --------------------------------------------------------------------


def test_decode_flops_are_two_per_weight_plus_attention_over_the_context() -> None:
    st = tiny_trace()
    batch = st.batch
    for context, t in st.decode.items():
        matmul = t.by_category()["matmul"].flops
        attention = t.by_category()["attention"].flops
        assert matmul == 2 * batch * (LAYERS * LAYER_MATMUL_PARAMS + HEAD_PARAMS)
        # q.k and p.v: 2 x 2 x head_dim per query head and cached token, new one included
        assert attention == LAYERS * batch * HEADS * (context + 1) * 4 * HEAD_DIM
        assert t.total_flops == pytest.approx(matmul + attention, rel=0.02)


def test_prefill_counts_causal_attention_and_the_last_logits_only() -> None:
    st = tiny_trace()
    b, p = st.batch, st.prompt_tokens
    t = st.prefill
    assert t.by_category()["matmul"].flops == 2 * b * (p * LAYERS * LAYER_MATMUL_PARAMS
                                                       + HEAD_PARAMS)
    assert t.by_category()["attention"].flops == LAYERS * b * HEADS * p * (p + 1) // 2 \
        * 4 * HEAD_DIM


@pytest.mark.parametrize("zoo", [False, True])
def test_a_chunked_prefill_attends_each_chunk_over_the_ones_before(zoo: bool) -> None:
    model = get_model("llama3-8b", device="meta", dim=HIDDEN, n_layers=LAYERS,
                      n_heads=HEADS, n_kv_heads=KV_HEADS, hidden_dim=FFN,
                      vocab_size=VOCAB).model if zoo else hf_llama()
    b, p, chunk = 2, 256, 100
    st = roofline.trace_serving(model, prompt_tokens=p, new_tokens=4, batch=b,
                                prefill_chunk=chunk)
    t = st.prefill
    assert st.prefill_chunk == chunk and t.meta["chunks"] == [100, 100, 56]
    # every token through every layer's matmuls once; each chunk's last token's logits
    assert t.by_category()["matmul"].flops == 2 * b * (p * LAYERS * LAYER_MATMUL_PARAMS
                                                       + 3 * HEAD_PARAMS)
    # the first chunk causal (c(c+1)/2 pairs), each later one's c queries over every key
    # cached and its own, masked in place rather than skipped: 5050 + 100 x 200 + 56 x 256
    pairs = 100 * 101 // 2 + 100 * 200 + 56 * 256
    assert t.by_category()["attention"].flops == LAYERS * b * HEADS * pairs * 4 * HEAD_DIM
    ids = [i for op in t.ops for i in (*op.input_ids, *op.output_ids)]
    assert not t.storages and ids  # the chunks' storages kept apart, no table over them
    one = roofline.trace_serving(model, prompt_tokens=p, new_tokens=4, batch=b,
                                 prefill_chunk=p)  # a chunk as long as the prompt: one pass
    assert one.prefill_chunk is None and "chunks" not in one.prefill.meta
    assert "prefill in chunks of 100" in repr(st) and "chunks" not in repr(one)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", roofline.RooflineWarning)
        chunked, whole = roofline.serve(st, "h100"), roofline.serve(one, "h100")
    assert chunked.ttft_seconds > 0 and whole.ttft_seconds > 0


def test_attention_written_out_is_a_matmul_over_every_pair_of_each_chunk() -> None:
    b, p, chunk = 1, 256, 128
    fused = roofline.trace_serving(hf_llama(), prompt_tokens=p, new_tokens=2, batch=b,
                                   prefill_chunk=chunk)
    eager = roofline.trace_serving(hf_llama(), prompt_tokens=p, new_tokens=2, batch=b,
                                   prefill_chunk=chunk, attention="eager")
    assert "attention" not in eager.prefill.by_category()
    assert eager.prefill.by_category()["softmax"].count == 2 * LAYERS
    # q.k and p.v as matmuls over the whole square of the first chunk, unmasked
    pairs = 128 * 128 + 128 * 256
    extra = LAYERS * b * HEADS * pairs * 4 * HEAD_DIM
    assert eager.prefill.by_category()["matmul"].flops == \
        fused.prefill.by_category()["matmul"].flops + extra


def test_fp8_kv_halves_the_cache_traffic_not_the_flops() -> None:
    bf16, fp8 = tiny_trace(), tiny_trace(kv_dtype="fp8")
    c = max(bf16.decode)
    a, b = bf16.decode[c], fp8.decode[c]
    kv_read = 2 * LAYERS * bf16.batch * KV_HEADS * (c + 1) * HEAD_DIM * 2  # K and V, bf16
    attn = [op for op in a.ops if op.category == "attention"]
    attn8 = [op for op in b.ops if op.category == "attention"]
    assert sum(o.bytes_read for o in attn) - sum(o.bytes_read for o in attn8) == kv_read // 2
    assert a.total_flops == b.total_flops
    writes = [op for op in b.ops if op.name.startswith("aten.index_copy_")]
    assert len(writes) == 2 * LAYERS
    assert all(op.bytes_written == bf16.batch * KV_HEADS * HEAD_DIM for op in writes)


def test_fp8_weights_read_one_byte_per_weight_at_the_fp8_rate() -> None:
    st = roofline.trace_serving(hf_llama(), prompt_tokens=64, new_tokens=4, batch=1,
                                weight_dtype="fp8")
    mms = [op for op in st.decode[67].ops if op.category == "matmul"]
    assert {op.dtype for op in mms} == {"float8_e4m3fn"}
    weights = LAYERS * LAYER_MATMUL_PARAMS + HEAD_PARAMS
    assert sum(op.bytes_read for op in mms) == weights + len(mms) * HIDDEN \
        + LAYERS * (FFN - HIDDEN)  # one byte per weight and per activation read
    embedding = VOCAB * HIDDEN * 2
    norms = (2 * LAYERS + 1) * HIDDEN * 2
    assert st.parameter_bytes == weights + embedding + norms


def test_nvfp4_weights_read_their_packed_bytes_and_quantize_each_activation() -> None:
    """W4A4: a weight is 0.5625 bytes (two e2m1 a byte, an e4m3 scale per 16); each
    matmul's bf16 activation is read by its quantization, which writes the fp4 copy that
    the GEMM reads (2 + 2 x 0.5625 bytes an element)."""
    st = roofline.trace_serving(hf_llama(), prompt_tokens=64, new_tokens=4, batch=1,
                                weight_dtype="nvfp4")
    assert st.weight_dtype == "nvfp4"
    mms = [op for op in st.decode[67].ops if op.category == "matmul"]
    assert {op.dtype for op in mms} == {"nvfp4"}
    weights = LAYERS * LAYER_MATMUL_PARAMS + HEAD_PARAMS
    activations = len(mms) * HIDDEN + LAYERS * (FFN - HIDDEN)
    assert sum(op.bytes_read for op in mms) == pytest.approx(
        weights * 0.5625 + activations * (2 + 0.5625), abs=len(mms))
    outputs = sum(math.prod(op.output_shapes[0]) * 2 for op in mms)
    assert sum(op.bytes_written for op in mms) == pytest.approx(
        outputs + activations * 0.5625, abs=len(mms))
    embedding, norms = VOCAB * HIDDEN * 2, (2 * LAYERS + 1) * HIDDEN * 2
    assert st.parameter_bytes == weights * 0.5625 + embedding + norms


def test_nvfp4_packs_a_linear_weight_and_leaves_its_bias() -> None:
    """Linear(64, 128) at batch 8 in bf16: the 64 x 128 weight at 0.5625 bytes, the bias
    at 2, the activation read (2 bytes), its fp4 copy written and read (0.5625 each)."""
    from roofline.tracing.quantized import NVFP4, requantize

    model = nn.Linear(64, 128).to(torch.bfloat16)
    t = requantize(roofline.trace(model, torch.randn(8, 64, dtype=torch.bfloat16), fake=True),
                   weight_dtype=NVFP4)
    (mm,) = [op for op in t.ops if op.category == "matmul"]
    assert mm.dtype == "nvfp4"
    assert mm.bytes_read == 64 * 128 * 0.5625 + 128 * 2 + 8 * 64 * (2 + 0.5625)
    assert mm.bytes_written == 8 * 128 * 2 + 8 * 64 * 0.5625
    params = sorted(s.bytes for s in t.storages.values() if s.kind == "parameter")
    assert params == [128 * 2, 64 * 128 * 0.5625]


def test_nvfp4_serving_needs_fp4_matrix_units() -> None:
    st = roofline.trace_serving(hf_llama(), prompt_tokens=16, new_tokens=2,
                                weight_dtype="nvfp4")
    with pytest.raises(ValueError, match="H100 SXM has no fp4 matrix units"):
        roofline.serve(st, "h100")
    s = roofline.serve(st, "b200", capacity=False)
    assert any("fp4" in note and "fitted" in note for note in s.assumptions)


# --- time on a device ----------------------------------------------------------------------


def test_prefill_is_compute_bound_and_decode_memory_bound_on_a_pure_roofline() -> None:
    """Without launch overhead: a 2048-token prefill of a 4096-wide layer is compute-bound
    (the eager step's elementwise ops take the rest), a decode step reads its weights and
    cache at the stream bandwidth."""
    st = wide_trace()
    s = roofline.serve(st, "h100", overhead=False, capacity=False)
    prefill, decode = s.prefill_bounds(), s.decode_bounds()
    assert max(prefill, key=lambda b: prefill[b]["fraction"]) == "compute"
    assert decode["memory"]["fraction"] > 0.9
    last = s.decode[max(s.decode)]
    assert last.seconds == pytest.approx(st.decode[max(s.decode)].total_bytes
                                         / last.stream_bytes_per_s("read"), rel=0.1)


def test_tpot_is_affine_in_the_context_and_integrates_over_the_new_tokens() -> None:
    st = tiny_trace(prompt=512, new=257)
    s = roofline.serve(st, "a100", capacity=False)
    first, _, last = st.contexts
    assert (first, last) == (512, 512 + 257 - 1)
    t = [s.tpot_seconds(c) for c in st.contexts]
    assert t[0] < t[1] < t[2]
    assert t[1] == pytest.approx((t[0] + t[2]) / 2, rel=0.01)  # three points on a line
    steps = range(512, 512 + 257 - 1)  # the first new token comes out of the prefill
    assert s.decode_seconds == pytest.approx(sum(s.tpot_seconds(c) for c in steps), rel=1e-9)
    assert s.total_seconds == pytest.approx(s.ttft_seconds + s.decode_seconds)
    assert s.mean_tpot_seconds == pytest.approx(s.decode_seconds / 256)
    assert s.tokens_per_s == pytest.approx(st.batch * s.tokens_per_s_per_sequence)
    assert s.output_tokens_per_s == pytest.approx(st.batch * 257 / s.total_seconds)
    split = s.decode_bounds()
    assert sum(v["seconds"] for v in split.values()) == pytest.approx(s.decode_seconds)


def test_one_new_token_is_the_prefill_alone() -> None:
    st = roofline.trace_serving(hf_llama(), prompt_tokens=32, new_tokens=1)
    s = roofline.serve(st, "h100", capacity=False)
    assert st.contexts == [32]
    assert s.decode_seconds == 0.0 and s.total_seconds == s.ttft_seconds
    assert s.mean_tpot_seconds == s.tpot_seconds(32) > 0
    assert math.isfinite(s.tokens_per_s) and s.tokens_per_s > 0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.integers(1, 300), new=st.integers(1, 40), batch=st.integers(1, 9))
def test_every_rate_is_positive_and_finite(prompt: int, new: int, batch: int) -> None:
    s = roofline.serve(hf_llama(), "l4", prompt_tokens=prompt, new_tokens=new, batch=batch,
                       capacity=False)
    for name in ("ttft_seconds", "mean_tpot_seconds", "total_seconds", "tokens_per_s",
                 "tokens_per_s_per_sequence", "output_tokens_per_s", "prefill_tokens_per_s"):
        value = getattr(s, name)
        assert math.isfinite(value) and value > 0, name
    assert s.trace.contexts[0] == prompt and s.trace.contexts[-1] == prompt + new - 1
    assert s.decode_seconds >= 0


@settings(max_examples=8, deadline=None)
@given(factor=st.floats(1.1, 8.0))
def test_what_if_speedups_stay_within_the_factor(factor: float) -> None:
    st_ = tiny_trace()
    flops = roofline.what_if(st_, "h100", flops=factor)
    bandwidth = roofline.what_if(st_, "h100", bandwidth=factor)
    for c in (flops, bandwidth):
        for speedup in (c.prefill_speedup, c.decode_speedup, c.speedup):
            assert 1.0 - 1e-9 <= speedup <= factor + 1e-9
    assert bandwidth.decode_speedup > flops.decode_speedup  # decode reads, it does not compute


def test_a_device_swap_speeds_prefill_and_decode_up_for_their_own_reasons() -> None:
    st = wide_trace()
    c = roofline.compare(st, "a100", "h100", overhead=False)
    assert isinstance(c, roofline.ServingComparison)
    a100, h100 = roofline.get_device("a100"), roofline.get_device("h100")
    reasons = c.reasons()
    bw = h100.bandwidth_bytes_per_s / a100.bandwidth_bytes_per_s
    assert reasons["decode"].datasheet_ratios["memory"] == pytest.approx(bw)
    assert c.decode_speedup == pytest.approx(reasons["decode"].roof_ratios["memory"], rel=0.05)
    assert c.prefill_speedup > c.decode_speedup
    text = c.explain()
    assert "prefill: " in text and "FLOP/s" in text.splitlines()[1]
    assert "decode: " in text and "bandwidth" in text.splitlines()[2]
    assert c.speedup == pytest.approx(c.src.total_seconds / c.dst.total_seconds)


# --- capacity ----------------------------------------------------------------------------


def test_the_largest_batch_fits_and_one_more_does_not() -> None:
    st = tiny_trace(prompt=1024, new=1024)
    s = roofline.serve(st, "t4")
    cap = s.capacity
    assert cap is not None and cap.fits and cap.search is not None
    assert roofline.fits(st.decode_step(cap.max_batch), "t4").fits
    assert not roofline.fits(st.decode_step(cap.max_batch + 1), "t4").fits
    per_sequence = kv_per_token(2) * 2048  # the cache dominates what a sequence adds
    assert per_sequence <= cap.search.bytes_per_sample <= 1.05 * per_sequence
    free = roofline.get_device("t4").memory_bytes - cap.search.fixed_bytes
    assert cap.max_batch == pytest.approx(free / cap.search.bytes_per_sample, abs=2)


def test_a_batch_that_does_not_fit_is_answered_with_a_warning() -> None:
    st = tiny_trace(prompt=1024, new=1024, batch=20_000)  # 20,000 x 8 MB of cache
    with pytest.warns(roofline.RooflineWarning, match="does not fit"):
        s = roofline.serve(st, "t4")
    assert s.capacity is not None and not s.capacity.fits
    assert 0 < s.capacity.max_batch < 20_000
    assert math.isfinite(s.tokens_per_s) and s.tokens_per_s > 0


def test_a_device_with_no_memory_size_has_no_capacity() -> None:
    s = roofline.serve(tiny_trace(), "EPYC 7763")
    assert s.capacity is None and s.ttft_seconds > 0
    assert "at most" not in repr(s)


def test_weights_that_do_not_fit_leave_no_batch() -> None:
    # embedding and head of 4.5M x 256 fp32 weights each: 9.2 GB, over an RTX 3070's 8 GB
    model = hf_llama(torch.float32, vocab_size=4_500_000, num_hidden_layers=1)
    st = roofline.trace_serving(model, prompt_tokens=16, new_tokens=4)
    with pytest.warns(roofline.RooflineWarning, match="at most 0 sequences"):
        s = roofline.serve(st, "rtx 3070")
    assert s.capacity is not None and s.capacity.max_batch == 0 and s.capacity.search is None


# --- bad input -----------------------------------------------------------------------------


def test_a_model_without_a_cache_is_told_how_to_pass_one() -> None:
    with pytest.raises(roofline.NoKVCacheError, match="make_kv_cache") as caught:
        roofline.trace_serving(get_model("gpt2", device="meta").model, prompt_tokens=8,
                               new_tokens=2)
    assert "AutoModelForCausalLM" in str(caught.value)
    assert isinstance(caught.value, TypeError)
    with pytest.raises(roofline.NoKVCacheError, match=r"pass ZooModel\.model"):
        roofline.trace_serving(get_model("llama-tiny", device="meta"), prompt_tokens=8,
                               new_tokens=2)


def test_a_context_beyond_the_model_is_refused() -> None:
    with pytest.raises(roofline.ContextLengthError, match="4097 tokens exceed the 4096"):
        roofline.trace_serving(hf_llama(), prompt_tokens=4000, new_tokens=97)
    zoo = get_model("llama-tiny", device="meta").model
    with pytest.raises(roofline.ContextLengthError, match="2048 positions"):
        roofline.trace_serving(zoo, prompt_tokens=2048, new_tokens=1)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"prompt_tokens": 0}, "prompt_tokens must be a whole number >= 1, got 0"),
    ({"new_tokens": 0}, "new_tokens must be a whole number >= 1, got 0"),
    ({"batch": 0}, "batch must be a whole number >= 1"),
    ({"batch": True}, "batch must be a whole number"),
    ({"contexts": 1}, "contexts must be a whole number >= 2"),
    ({"kv_dtype": "int8"}, "kv_dtype='int8' is not a floating-point dtype"),
    ({"weight_dtype": "bf16"}, "only fp8 weights .* and nvfp4"),
    ({"prefill_chunk": 0}, "prefill_chunk must be a whole number >= 1, got 0"),
])
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, Any], needle: str) -> None:
    args = {"prompt_tokens": 16, "new_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=needle):
        roofline.trace_serving(hf_llama(), **args)


def test_serve_needs_the_tokens_and_a_trace_keeps_its_own() -> None:
    with pytest.raises(ValueError, match="needs prompt_tokens= and new_tokens="):
        roofline.serve(hf_llama(), "h100")
    with pytest.raises(ValueError, match="drop prompt_tokens"):
        roofline.serve(tiny_trace(), "h100", prompt_tokens=3)


def test_a_model_with_weights_is_not_cast_behind_its_back() -> None:
    model = get_model("llama-tiny", n_layers=1).model
    with pytest.raises(ValueError, match="roofline does not change your model"):
        roofline.trace_serving(model, prompt_tokens=8, new_tokens=2, dtype="bf16")
    st = roofline.trace_serving(model, prompt_tokens=8, new_tokens=2)  # its own fp32: fine
    assert st.dtype == "float32"


def test_no_global_state_and_the_model_as_it_was() -> None:
    model = hf_llama()
    model.train()
    before = {n: (p.dtype, p.device, p.shape) for n, p in model.named_parameters()}
    with warnings.catch_warnings():
        warnings.simplefilter("error", roofline.RooflineWarning)
        roofline.serve(model, "h100", prompt_tokens=16, new_tokens=4, batch=2)
    assert no_global_state()
    assert model.training
    assert {n: (p.dtype, p.device, p.shape) for n, p in model.named_parameters()} == before


def test_reprs_say_what_was_served() -> None:
    st = tiny_trace()
    assert repr(st).startswith("ServingTrace(LlamaForCausalLM, batch 4, 256 prompt + 64 new")
    s = roofline.serve(st, "h100")
    text = repr(s)
    assert text.startswith("Serving(LlamaForCausalLM on H100 SXM, batch 4, 256 + 64 tokens")
    assert "TTFT" in text and "TPOT" in text and "fits" in text
    assert "ServingComparison(H100 SXM -> H200 SXM: prefill" in repr(
        roofline.compare(st, "h100", "h200"))


# --- tensor parallelism -------------------------------------------------------------------

# transformers 4.x's StaticCache allocates every KV head up front: refused, said so
needs_transformers_5 = pytest.mark.skipif(
    int(transformers.__version__.split(".")[0]) < 5,
    reason="tensor-parallel serving needs transformers 5's StaticCache")


@functools.cache
def split_trace(gpus: int = 2) -> roofline.ServingTrace:
    return roofline.trace_serving(hf_llama(), prompt_tokens=64, new_tokens=8, batch=2,
                                  tensor_parallel=gpus)


@needs_transformers_5
def test_tensor_parallel_gives_each_gpu_its_share_of_heads_columns_and_cache() -> None:
    st = split_trace()
    b, p = st.batch, st.prompt_tokens
    # every projection, the embedding and the head split in two; the norms whole
    assert st.parameter_bytes == 2 * ((LAYERS * LAYER_MATMUL_PARAMS + HEAD_PARAMS
                                       + VOCAB * HIDDEN) // 2 + (2 * LAYERS + 1) * HIDDEN)
    assert st.kv_bytes_per_token == kv_per_token(2) // 2
    for context, t in st.decode.items():
        assert t.by_category()["matmul"].flops == 2 * b * (LAYERS * LAYER_MATMUL_PARAMS
                                                           + HEAD_PARAMS) // 2
        assert t.by_category()["attention"].flops == LAYERS * b * (HEADS // 2) \
            * (context + 1) * 4 * HEAD_DIM
    assert st.prefill.by_category()["attention"].flops == LAYERS * b * (HEADS // 2) \
        * p * (p + 1) // 2 * 4 * HEAD_DIM  # the causal half, as on one GPU
    assert no_global_state()


@needs_transformers_5
def test_tensor_parallel_decode_all_reduces_the_hidden_state_twice_per_layer() -> None:
    st = split_trace()
    step = st.decode[st.contexts[0]]
    sent = [op.collective for op in step.ops
            if op.collective is not None and op.collective.kind != "wait"]
    # the embedding's partial lookups, then attention's and the MLP's output per layer:
    # batch x 1 token x hidden in bf16; then the head's logits gathered whole
    reduces = [c for c in sent if c.kind == "all_reduce"]
    assert len(reduces) == 1 + 2 * LAYERS
    assert {c.bytes for c in reduces} == {st.batch * HIDDEN * 2}
    assert [(c.kind, c.bytes) for c in sent if c.kind != "all_reduce"] == [
        ("all_gather", st.batch * VOCAB * 2)]
    assert {c.group_size for c in sent} == {2}


@needs_transformers_5
def test_tensor_parallel_serving_waits_for_every_collective() -> None:
    """The traced step waits for each collective at once (torch's functional collectives do
    while tracing), so none hides behind compute: the step's communication is the sum of
    its collectives' costs, and the assumptions name the link they were costed on."""
    from roofline.analysis.collectives import collective_cost
    from roofline.hardware.topology import topology

    st = split_trace()
    s = roofline.serve(st, "h100")
    top = topology(roofline.get_device("h100"), 2, 1)
    for context, t in st.decode.items():
        costs = sum(collective_cost(op.collective, top).seconds for op in t.ops
                    if op.collective is not None)
        assert s.decode_communication_seconds[context] == pytest.approx(costs, rel=1e-9)
        assert s.tpot_seconds(context) == pytest.approx(s.decode[context].seconds + costs)
    assert s.ttft_seconds > s.prefill.seconds
    assert s.decode_bounds()["communication"]["fraction"] > 0
    assert any(note.startswith("NVLink 4") for note in s.assumptions)
    whole = roofline.serve(roofline.trace_serving(hf_llama(), prompt_tokens=64, new_tokens=8,
                                                  batch=2), "h100")
    assert whole.decode_bounds()["communication"]["seconds"] == 0
    # half the cache per GPU: more sequences fit on each
    assert s.capacity is not None and whole.capacity is not None
    assert s.capacity.max_batch > whole.capacity.max_batch


@needs_transformers_5
def test_tensor_parallel_over_the_same_interconnect_speeds_no_collective_up() -> None:
    c = roofline.compare(split_trace(), "h100", "h200")
    reasons = c.reasons()
    assert sum(c.src.decode_communication_seconds.values()) > 0
    assert reasons["decode"].roof_ratios["communication"] == pytest.approx(1.0)
    assert c.src.decode_communication_seconds == pytest.approx(
        c.dst.decode_communication_seconds)


@needs_transformers_5
def test_tensor_parallel_of_the_zoo_llama_splits_the_same_layers() -> None:
    zoo = get_model("llama-tiny", device="meta", vocab_size=VOCAB, dim=HIDDEN,
                    n_layers=LAYERS, n_heads=HEADS, n_kv_heads=KV_HEADS,
                    hidden_dim=FFN).model
    a = roofline.trace_serving(zoo, prompt_tokens=64, new_tokens=8, batch=2,
                               dtype=torch.bfloat16, tensor_parallel=2)
    b = split_trace()
    assert a.kv_bytes_per_token == b.kv_bytes_per_token == kv_per_token(2) // 2
    x, y = a.decode[71], b.decode[71]
    assert x.by_category()["attention"].flops == y.by_category()["attention"].flops
    # roofline's own plan splits the blocks; the head, which no plan names, stays whole
    assert x.by_category()["matmul"].flops == y.by_category()["matmul"].flops \
        + 2 * a.batch * HEAD_PARAMS // 2


@needs_transformers_5
def test_tied_embeddings_are_one_shard_per_gpu() -> None:
    """Embedding and head share one table (tie_word_embeddings): split by vocabulary rows,
    each GPU holds half of it once, not once per module."""
    model = hf_llama(tie_word_embeddings=True)
    whole, split = (roofline.trace_serving(model, prompt_tokens=8, new_tokens=2,
                                           tensor_parallel=n).parameter_bytes for n in (1, 2))
    norms = (2 * LAYERS + 1) * HIDDEN
    assert whole == 2 * (LAYERS * LAYER_MATMUL_PARAMS + VOCAB * HIDDEN + norms)
    assert split == 2 * ((LAYERS * LAYER_MATMUL_PARAMS + VOCAB * HIDDEN) // 2 + norms)


@needs_transformers_5
@pytest.mark.parametrize(("gpus", "needle"), [
    (3, "4 KV heads, not divisible by 3"),
    (0, "tensor_parallel must be a whole number >= 1, got 0"),
])
def test_a_tensor_parallel_size_that_cannot_split_the_model_is_refused(gpus: int,
                                                                       needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        roofline.trace_serving(hf_llama(), prompt_tokens=8, new_tokens=2,
                               tensor_parallel=gpus)
    assert no_global_state()


def test_a_cache_that_cannot_be_split_is_refused() -> None:
    from roofline.zoo.llama import Llama

    class OneCache(Llama):
        def make_kv_cache(self, batch: int, max_tokens: int, *, filled: int = 0,
                          dtype: Any = None, device: Any = None) -> Any:
            return super().make_kv_cache(batch, max_tokens, filled=filled, dtype=dtype,
                                         device=device)

    with torch.device("meta"):
        model = OneCache(vocab_size=VOCAB, dim=HIDDEN, n_layers=1, n_heads=HEADS,
                         n_kv_heads=KV_HEADS, hidden_dim=FFN, max_seq_len=128)
    with pytest.raises(ValueError, match="takes no tensor_parallel= argument"):
        roofline.trace_serving(model, prompt_tokens=8, new_tokens=2, tensor_parallel=2)


# --- the command line --------------------------------------------------------------------

SERVE = ["serve", "llama-tiny", "--device", "h200", "--prompt", "64", "--new", "16",
         "--batch", "2"]


def test_serve_prints_the_answer_first(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    assert main([*SERVE, "--compare", "h100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("llama-tiny (bfloat16; batch 2, 64 prompt + 16 new tokens) on "
                      "H200 SXM:")
    assert out[1].startswith("TTFT ") and out[2].startswith("TPOT ")
    assert "at 64 -> " in out[2] and "at 79 tokens of context" in out[2]
    assert "tokens/s decoding" in out[3]
    assert out[4].startswith("KV cache 1.02 kB/token")  # 2 x 2 layers x 4 x 32 x 2 bytes
    assert "batch 2 fits" in out[4] and "at most" in out[4]
    assert out[5].startswith("H200 SXM -> H100 SXM: ")
    assert out[6].startswith("  prefill: ") and out[7].startswith("  decode: ")
    text = "\n".join(out)
    assert text.count("assumptions:") == 1 and "max batch" in text


def test_serve_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.presentation.cli import main

    assert main([*SERVE, "--json", "--kv-dtype", "fp8"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_token"] == 2 * 2 * 4 * 32 * 1
    assert data["kv_dtype"] == "float8_e4m3fn" and data["capacity"]["fits"]
    assert set(data["tpot_seconds"]) == {"64", "72", "79"}
    assert data["tokens_per_s"] == pytest.approx(2 / data["mean_tpot_seconds"])
    assert data["prefill_chunk"] is None


def test_serve_a_chunked_prefill_from_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    assert main([*SERVE, "--prefill-chunk", "32"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "llama-tiny (bfloat16; batch 2, 64 prompt + 16 new tokens, prefilled in chunks of 32)"
        " on H200 SXM:")
    assert main([*SERVE, "--json", "--prefill-chunk", "32"]) == 0
    chunked = json.loads(capsys.readouterr().out)
    assert main([*SERVE, "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert chunked["prefill_chunk"] == 32 and whole["prefill_chunk"] is None
    # the same decode; a prefill of two launches of every kernel takes longer
    assert chunked["tpot_seconds"] == whole["tpot_seconds"]
    assert chunked["ttft_seconds"] > whole["ttft_seconds"]


@pytest.mark.parametrize(("flags", "weights"), [
    (["--weights", "nvfp4", "--device", "b200"], "nvfp4"),
    (["--fp8-weights"], "float8_e4m3fn"),
])
def test_serve_weights_from_the_cli(flags: list[str], weights: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    assert main([*SERVE, "--json", *flags]) == 0
    assert json.loads(capsys.readouterr().out)["weight_dtype"] == weights


@pytest.mark.parametrize(("argv", "code", "needle"), [
    (["serve", "gpt2", "--device", "h100"], 1, "takes no KV cache"),
    (["serve", "llama-tiny", "--device", "h100", "--prompt", "2000", "--new", "100"], 1,
     "exceed the 2048 positions"),
    (["serve", "llama-tiny", "--device", "h100", "--new", "0"], 2, "must be >= 1"),
    ([*SERVE, "--weights", "nvfp4"], 1, "H200 SXM has no fp4 matrix units"),
    ([*SERVE, "--weights", "int4"], 2, "invalid choice: 'int4'"),
])
def test_serve_refuses_clearly(argv: list[str], code: int, needle: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    if code == 2:
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
    else:
        assert main(argv) == 1
    assert needle in capsys.readouterr().err


def test_serve_writes_both_charts(tmp_path: Any) -> None:
    from roofline.presentation.cli import main

    batch, roof = tmp_path / "batch.png", tmp_path / "roof.png"
    assert main([*SERVE, "--plot", str(batch), "--plot-roofline", str(roof)]) == 0
    assert batch.stat().st_size > 10_000 and roof.stat().st_size > 10_000


def test_serve_split_over_gpus_from_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    assert main([*SERVE, "--tp", "2", "--compare", "h100"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].endswith(" on 2 x H200 SXM (tensor parallel):")
    assert "communication" in lines[1] and "communication" in lines[2]
    assert "KV cache 512 B/token" in out and "per sequence per GPU" in out
    assert "2 x H200 SXM (tensor parallel) -> 2 x H100 SXM (tensor parallel)" in out
    assert "tensor parallel over 2 GPUs" in out


@pytest.mark.slow
def test_serve_a_transformers_config_from_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.presentation.cli import main

    assert main(["serve", "transformers:LlamaConfig", "--device", "h100", "--prompt", "512",
                 "--new", "64", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("LlamaConfig (bfloat16; batch 4, 512 prompt + 64 new tokens)")
    assert "KV cache 524 kB/token" in out  # Llama-2-7B: 2 x 32 x 32 x 128 x 2 bytes


# --- charts ------------------------------------------------------------------------------


def _label_boxes(ax: Any) -> list[Any]:
    """The pixel boxes of the chart's texts (an annotation's text alone, not its leader)."""
    from roofline.presentation.plots._style import text_box

    fig = ax.get_figure(root=True)
    fig.canvas.draw()
    rend = fig.canvas.get_renderer()
    return [text_box(t, rend) for t in ax.texts]


def test_the_batch_curve_shows_the_wall_and_the_asked_batch() -> None:
    import matplotlib.pyplot as plt

    s = roofline.serve(tiny_trace(prompt=1024, new=1024), "t4")
    ax = roofline.plot.serving_batch_curve(s)
    gids = {line.get_gid() for line in ax.get_lines()}
    assert {"tokens", "wall", "asked"} <= gids
    (wall,) = [line for line in ax.get_lines() if line.get_gid() == "wall"]
    assert wall.get_xdata()[0] == s.capacity.max_batch + 0.5  # type: ignore[union-attr]
    (tokens,) = [line for line in ax.get_lines() if line.get_gid() == "tokens"]
    rates = tokens.get_ydata()
    assert all(b >= a for a, b in itertools.pairwise(rates))  # more per batch
    plt.close(ax.get_figure(root=True))
    with pytest.raises(ValueError, match="capacity=True"):
        roofline.plot.serving_batch_curve(roofline.serve(tiny_trace(), "t4", capacity=False))
    with pytest.raises(TypeError, match="takes a Serving"):
        roofline.plot.serving_batch_curve(tiny_trace())  # type: ignore[arg-type]


def test_the_serving_roofline_places_both_phases_without_overlapping_labels() -> None:
    import matplotlib.pyplot as plt

    s = roofline.serve(wide_trace(), "h100", capacity=False)
    ax = roofline.plot.serving_roofline(s)
    gids = {c.get_gid() for c in ax.collections}
    assert {"prefill", "decode"} <= gids
    boxes = _label_boxes(ax)
    assert len(boxes) >= 4
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    labels = {t.get_text() for t in ax.texts}
    assert "self_attn: attention" in labels or "q_proj" in labels
    plt.close(ax.get_figure(root=True))
