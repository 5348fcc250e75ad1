"""Bytes in flight (roofline.analysis.inflight): kernel grids from PyTorch's sources, and
the Little's-law cap they put on an attention kernel's bandwidth."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import roofline
from roofline.analysis.inflight import (
    BATCH_NORM_FORWARD,
    MAX_POOL_BACKWARD,
    batch_norm_transform,
    dependent_loads,
    in_flight_bytes,
    max_pool_backward,
    max_pool_windows,
    num_splits,
)
from roofline.hardware.achievable import figures
from roofline.tracing.records import OpRecord, Trace


def test_num_splits_follows_the_heuristics_own_example() -> None:
    # flash_api.cpp: "batch * n_heads = 48 and we have 108 SMs, having 2 splits
    # (efficiency = 0.89) is better than having 3 splits (efficiency = 0.67)"
    assert num_splits(48, 108, 64) == 2
    assert num_splits(87, 108, 64) == 1  # 87 rows fill 80% of 108: no split
    assert num_splits(8, 264, 9) == 9  # 8 rows, 9 key blocks: every block its own split


def _decode(batch: int, kv_len: int, mask: bool) -> roofline.Trace:
    """One decode step's attention, Llama-3-8B heads: 8 K/V heads, 4 query heads each."""
    q = torch.empty(batch, 8, 4, 128, dtype=torch.bfloat16, device="meta")
    k = torch.empty(batch, 8, kv_len, 128, dtype=torch.bfloat16, device="meta")
    if not mask:
        return roofline.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
                              q, k, k.clone(), fake=True)
    m = torch.ones(batch, 1, 1, kv_len, dtype=torch.bool, device="meta")
    return roofline.trace(lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m), q, k, k.clone(), m, fake=True)


def _attention(trace: roofline.Trace) -> int:
    return next(i for i, op in enumerate(trace.ops) if op.category == "attention")


def test_grid_of_flash_and_memory_efficient_decode() -> None:
    flash, masked = _decode(1, 1025, mask=False), _decode(1, 1025, mask=True)
    # flash: 8 rows (the 4 query heads folded into each K/V head), 9 key blocks of 128,
    # 9 splits; one 128 x 128 bf16 tile each
    assert in_flight_bytes(flash.ops[_attention(flash)], 132) == 72 * 128 * 128 * 2
    # memory-efficient (a mask): one block per 64 queries x head x batch, 128-key tiles
    assert in_flight_bytes(masked.ops[_attention(masked)], 132) == 8 * 128 * 128 * 2
    # no more blocks than two per SM
    big = _decode(64, 4097, mask=True)
    assert in_flight_bytes(big.ops[_attention(big)], 132) == 264 * 128 * 128 * 2
    assert in_flight_bytes(masked.ops[_attention(masked)], None) is None
    q = torch.empty(1, 8, 4, 128, device="meta")
    k = torch.empty(1, 8, 1025, 128, device="meta")
    fp32 = roofline.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k,
                          k.clone(), fake=True)
    assert in_flight_bytes(fp32.ops[_attention(fp32)], 132) is None  # other tiles: no model


def test_few_blocks_stream_at_bytes_in_flight_over_latency() -> None:
    t = _decode(1, 1025, mask=True)
    i = _attention(t)
    capped = roofline.analyze(t, "h100")
    free = roofline.analyze(t, "h100", bytes_in_flight=False)
    latency = figures(roofline.get_device("h100")).dram_latency()
    assert latency is not None
    moved = t.ops[i].bytes
    assert capped.latency_seconds[i] == pytest.approx(moved * latency.value / (8 * 128 * 128 * 2))
    assert capped.memory_seconds[i] == pytest.approx(free.memory_seconds[i])
    assert capped.latency_seconds[i] > 3 * capped.memory_seconds[i]
    assert capped.bound[i] == "latency" and free.bound[i] != "latency"
    assert "latency" in capped.by_bound() and "latency" not in free.by_bound()
    assert any("Little's law" in a for a in capped.assumptions)
    assert not any("Little's law" in a for a in free.assumptions)
    # the datasheet roofline has no latency, and a large grid keeps enough in flight
    assert roofline.analyze(t, "h100", peaks="datasheet").latency_seconds[i] == 0
    big = _decode(64, 4097, mask=True)
    j = _attention(big)
    a = roofline.analyze(big, "h100")
    assert a.bound[j] == "memory" and a.latency_seconds[j] < a.memory_seconds[j]


def test_more_bandwidth_does_not_lower_the_latency_roof() -> None:
    """Twice the bandwidth halves a streaming kernel's time, not a latency-bound one's; the
    explanation says which."""
    t = _decode(1, 4097, mask=True)
    i = _attention(t)
    w = roofline.what_if(t, "h100", bandwidth=2)
    assert w.dst.op_seconds[i] == pytest.approx(w.src.op_seconds[i])
    assert "waits on DRAM latency (attention" in roofline.explain(w)
    flash = _decode(64, 4097, mask=False)
    j = _attention(flash)
    w = roofline.what_if(flash, "h100", bandwidth=2)
    assert w.dst.memory_seconds[j] == pytest.approx(w.src.memory_seconds[j] / 2)


def test_bytes_in_flight_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="bytes_in_flight"):
        roofline.analyze(_decode(1, 65, mask=False), "h100", bytes_in_flight=1)


def test_an_empty_batch_costs_nothing_and_no_nan() -> None:
    """A grid of no blocks keeps nothing in flight and moves nothing: no cap, no 0 / 0."""
    op = OpRecord("aten._scaled_dot_product_flash_attention_for_cpu.default", "attention",
                  "forward", "", "bfloat16", 0, 0, 0,
                  input_shapes=((0, 8, 4, 128), (0, 8, 1025, 128), (0, 8, 1025, 128),
                                (0, 1, 1, 1025)), output_shapes=((0, 8, 4, 128),))
    assert in_flight_bytes(op, 132) == 0
    a = roofline.analyze(Trace([op]), "h100")
    assert np.isfinite(a.bytes_per_s).all() and a.memory_seconds[0] == 0


def _layer_norm(rows: int, width: int, dtype: torch.dtype = torch.float16) -> roofline.Trace:
    """A layer norm's forward and backward over ``rows`` rows of ``width``."""
    norm = torch.nn.LayerNorm(width, device="meta", dtype=dtype)
    x = torch.empty(rows, width, dtype=dtype, device="meta", requires_grad=True)
    return roofline.trace(lambda x: norm(x).sum().backward(), x, fake=True)


def _norm_ops(trace: roofline.Trace) -> list[int]:
    return [i for i, op in enumerate(trace.ops) if "native_layer_norm" in op.name]


def test_layer_norm_waits_two_rounds_per_block_width_of_its_row() -> None:
    # one block of 128 threads per row (CUDA), 4 elements per load, two loops over the row
    t = _layer_norm(3, 2560)
    fwd, bwd = (t.ops[i] for i in _norm_ops(t))
    assert dependent_loads(fwd, "NVIDIA") == 2 * 5  # 2,560 / 512 = 5 loads per loop
    assert dependent_loads(bwd, "NVIDIA") == 2 * 5
    assert dependent_loads(fwd, "AMD") == 2 * 1  # 1,024 threads on ROCm: one load per loop
    assert dependent_loads(fwd, "Intel") is None  # no build modelled
    wide = _layer_norm(2, 4100)  # 4,100 / 512: 9 loads per loop, the last one partial
    assert dependent_loads(wide.ops[_norm_ops(wide)[0]], "NVIDIA") == 18
    odd = _layer_norm(2, 2562)  # not a multiple of 4: PyTorch's scalar kernels, no model
    assert dependent_loads(odd.ops[_norm_ops(odd)[0]], "NVIDIA") is None
    double = _layer_norm(2, 2560, torch.float64)  # the vectorized kernel takes no fp64
    assert dependent_loads(double.ops[_norm_ops(double)[0]], "NVIDIA") is None



def test_rms_norm_waits_as_layer_norm_does() -> None:
    """RMS norm runs layer norm's kernels (rms_norm=true): two loops of 128 threads x 4
    elements over each 4,096-wide row, forward and backward."""
    norm = torch.nn.RMSNorm(4096, device="meta", dtype=torch.bfloat16)
    x = torch.empty(2, 4096, dtype=torch.bfloat16, device="meta", requires_grad=True)
    t = roofline.trace(lambda x: norm(x).sum().backward(), x, fake=True)
    fwd, bwd = (op for op in t.ops if "_fused_rms_norm" in op.name)
    assert dependent_loads(fwd, "NVIDIA") == 2 * 8  # 4,096 / 512 = 8 loads per loop
    assert dependent_loads(bwd, "NVIDIA") == 2 * 8
    # the input needs no gradient: only the weight's column reduction runs, no row blocks
    leaf = torch.empty(2, 4096, dtype=torch.bfloat16, device="meta")
    t = roofline.trace(lambda x: norm(x).sum().backward(), leaf, fake=True)
    (bwd,) = (op for op in t.ops if op.name == "aten._fused_rms_norm_backward.default")
    assert bwd.output_shapes == ((4096,),)
    assert dependent_loads(bwd, "NVIDIA") is None

def test_a_layer_norm_of_few_rows_waits_on_latency_not_bandwidth() -> None:
    t = _layer_norm(1, 2560)
    i = _norm_ops(t)[0]
    a = roofline.analyze(t, "a100-sxm-80gb")
    latency = figures(roofline.get_device("a100-sxm-80gb")).dram_latency()
    assert latency is not None and latency.origin == "measured"
    # ten rounds, the first held by the launch overhead
    assert a.latency_seconds[i] == pytest.approx(9 * latency.value)
    assert a.bound[i] == "latency" and a.latency_seconds[i] > 100 * a.memory_seconds[i]
    assert any("one after another" in s for s in a.assumptions)
    off = roofline.analyze(t, "a100-sxm-80gb", bytes_in_flight=False)
    assert off.latency_seconds[i] == 0 and off.bound[i] != "latency"
    assert not any("one after another" in s for s in off.assumptions)
    w = roofline.what_if(t, "a100-sxm-80gb", bandwidth=2)
    assert w.dst.op_seconds[i] == pytest.approx(w.src.op_seconds[i])
    # many rows fill the chip: the stream binds, the note is not given
    big = _layer_norm(16384, 2560)
    b = roofline.analyze(big, "a100-sxm-80gb")
    j = _norm_ops(big)[0]
    assert b.bound[j] == "memory" and b.latency_seconds[j] == pytest.approx(9 * latency.value)
    assert not any("one after another" in s for s in b.assumptions)
    # the datasheet roofline has no latency figure
    assert roofline.analyze(t, "a100-sxm-80gb", peaks="datasheet").latency_seconds[i] == 0


def _batch_norm(shape: tuple[int, ...], dtype: torch.dtype = torch.bfloat16,
                train: bool = True, fmt: torch.memory_format = torch.contiguous_format,
                ) -> roofline.Trace:
    """A batch norm's forward (and backward, training) over an input of ``shape``."""
    norm = torch.nn.BatchNorm2d(shape[1], device="meta").to(memory_format=fmt)
    x = torch.empty(*shape, dtype=dtype, device="meta").to(memory_format=fmt)
    if not train:
        return roofline.trace(norm, x, fake=True)
    return roofline.trace(norm, x.requires_grad_(), train=True, fake=True,
                          loss_fn=lambda y: y.float().sum())


def _bn(trace: roofline.Trace) -> list[OpRecord]:
    return [op for op in trace.ops if "batch_norm" in op.name]


def test_bf16_channels_first_batch_norm_waits_one_round_per_512_elements_of_a_channel() -> None:
    # one block of 512 threads per channel (Normalization.cuh): a plane of 56 x 56 = 3,136
    # takes blocks of 512 x 1 threads, 7 loads per image, 8 images: 56 rounds; the fused
    # backward loops twice (reduce, then the input gradient)
    fwd, bwd = _bn(_batch_norm((8, 64, 56, 56)))
    assert dependent_loads(fwd, "NVIDIA", 132) == 7 * 8
    assert dependent_loads(bwd, "NVIDIA", 132) == 2 * 7 * 8
    # a 7 x 7 plane: 64 x 8 threads, one load per thread for each 8 images
    fwd, _ = _bn(_batch_norm((32, 64, 7, 7)))
    assert dependent_loads(fwd, "NVIDIA", 132) == 1 * 4
    # 2,048 channels on 100 SMs of four 512-thread blocks each: 6 waves
    fwd, _ = _bn(_batch_norm((8, 2048, 7, 7)))
    assert dependent_loads(fwd, "NVIDIA", 100) == 1 * 1 * 6


@pytest.mark.parametrize(("cc", "resident"), [(80, 4), (90, 4), (100, 4), (86, 3), (89, 3),
                                              (120, 3), (75, 2), (87, 4), (None, 4)])
def test_an_sms_threads_and_block_limit_set_the_waves_by_compute_capability(
        cc: int | None, resident: int) -> None:
    # 512-thread blocks: 2,048 threads hold four (sm_80, sm_90, sm_100), 1,536 three (sm_86,
    # sm_89, sm_120), 1,024 two (sm_75); sm_87, which NVIDIA's table does not list, takes
    # sm_80's.
    # 2,048 channels of 7 x 7 at batch 8 (one round each) on 100 SMs
    fwd, _ = _bn(_batch_norm((8, 2048, 7, 7)))
    assert dependent_loads(fwd, "NVIDIA", 100, cc) == -(-2048 // (100 * resident))


def test_the_block_limit_binds_small_blocks_where_threads_do_not() -> None:
    # the transform's blocks on an 8 x 8 plane: tf = max(getNumThreads(16),
    # min(getNumThreads(64), 64)) = 64 threads, tb = 1, one block per channel of one image.
    # 2,048 threads hold 32 such blocks (sm_80's limit, 32); 1,536 hold 24, sm_89's limit,
    # and sm_86's limit of 16 blocks binds before its threads do
    fwd, _ = _bn(_batch_norm((1, 4096, 8, 8)))
    per_wave = batch_norm_transform(fwd, "NVIDIA", 1, cc=80)
    assert per_wave is not None
    grid = 4096  # one block per channel (one image)
    rounds = per_wave // -(-grid // 32)
    assert batch_norm_transform(fwd, "NVIDIA", 1, cc=89) == rounds * -(-grid // 24)
    assert batch_norm_transform(fwd, "NVIDIA", 1, cc=86) == rounds * -(-grid // 16)


@pytest.mark.parametrize("case", ["channels_last", "eval"])
def test_batch_norms_another_grid_runs_have_no_rounds(case: str) -> None:
    # channels-last takes a 2-D grid; evaluation runs the elementwise transform alone
    fmt = torch.channels_last if case == "channels_last" else torch.contiguous_format
    trace = _batch_norm((8, 64, 56, 56), train=case != "eval", fmt=fmt)
    assert all(dependent_loads(op, "NVIDIA", 132) is None for op in _bn(trace))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fp16_and_fp32_batch_norms_take_the_per_channel_rounds_on_nvidia_only(
        dtype: torch.dtype) -> None:
    # PyTorch's own kernel (fp16 weights) or cuDNN's NCHW one (fp32 weights, fp32), given
    # the same grid on NVIDIA GPUs: 7 loads per image of 56 x 56, 8 images; MIOpen's are
    # not modelled, nor is any kernel on a vendor with no build of them
    fwd, bwd = _bn(_batch_norm((8, 64, 56, 56), dtype))
    assert dependent_loads(fwd, "NVIDIA", 132) == 7 * 8
    assert dependent_loads(bwd, "NVIDIA", 132) == 2 * 7 * 8
    assert dependent_loads(fwd, "AMD", 304) is None
    bf16, _ = _bn(_batch_norm((8, 64, 56, 56)))
    assert dependent_loads(bf16, "AMD", 304) is not None  # PyTorch's own kernel on ROCm too
    assert dependent_loads(bf16, "Intel", 64) is None


def test_rocms_batch_norm_blocks_take_1024_threads_and_fold_four_loads_at_a_time() -> None:
    # ROCm's Normalization.cuh: MAX_BLOCK_SIZE 1,024, getNumThreads from 64, and its
    # reduction loops load UNRL = 4 elements per thread before folding them. A plane of
    # 56 x 56 = 3,136 takes 1,024 x 1 threads: ceil(3,136 / 4,096) = 1 round per image,
    # 8 images; the backward's input-gradient loop loads one at a time: 4 more per image
    fwd, bwd = _bn(_batch_norm((8, 64, 56, 56)))
    assert dependent_loads(fwd, "AMD", 304) == 1 * 8
    assert dependent_loads(bwd, "AMD", 304) == (1 + 4) * 8
    # 7 x 7: 64 x 16 threads, one round per 16 images; 2,048 channels on 100 CUs of two
    # 1,024-thread blocks each: 11 waves
    fwd, _ = _bn(_batch_norm((32, 2048, 7, 7)))
    assert dependent_loads(fwd, "AMD", 100) == 1 * 2 * 11


def test_the_transform_kernel_of_a_bf16_batch_norm_forward_takes_its_own_rounds() -> None:
    # batch_norm_elemt_cuda_template: tf = max(getNumThreads(H*W / 4),
    # min(getNumThreads(H*W), 64)), tb = max(64 / tf, 1); C x min(262,144 / C, ceil(N / tb))
    # blocks; one round for the channel's parameters, then one per element a thread handles
    fwd, bwd = _bn(_batch_norm((128, 64, 56, 56)))
    # 3,136 / 4 = 784 -> tf 512, tb 1, 64 x 128 blocks; 7 elements per thread; 4 blocks of
    # 512 threads per SM on 132 SMs: ceil(8,192 / 528) = 16 waves of 1 + 7 rounds
    assert batch_norm_transform(fwd, "NVIDIA", 132) == 16 * (1 + 7)
    # 7 x 7: tf = max(32, 64) = 64, tb 1, 2,048 x 128 blocks of 64 threads, 32 per SM: 63
    # waves of one parameter round and one element
    fwd, _ = _bn(_batch_norm((128, 2048, 7, 7)))
    assert batch_norm_transform(fwd, "NVIDIA", 132) == 63 * (1 + 1)
    # 4 x 4 = 16: tf = max(32, min(32, 64)) = 32, tb = 2; 8 images over ceil(8 / 2) = 4
    # block rows, 16 channels: 64 blocks of 64 threads, one wave; 1 element per thread
    fwd, _ = _bn(_batch_norm((8, 16, 4, 4)))
    assert batch_norm_transform(fwd, "NVIDIA", 132) == 1 * (1 + 1)
    # 8 channels leave 32,768 block rows per channel, more than the 16 images: 16 rows
    fwd, _ = _bn(_batch_norm((16, 8, 32, 32)))
    assert batch_norm_transform(fwd, "NVIDIA", 132) == 1 * (1 + 1024 // 256)
    # not the backward, not fp16 or fp32 (cuDNN's with fp32 weights), not channels-last,
    # not another vendor's build
    assert batch_norm_transform(bwd, "NVIDIA", 132) is None
    half, _ = _bn(_batch_norm((128, 64, 56, 56), torch.float16))
    assert batch_norm_transform(half, "NVIDIA", 132) is None
    # fp16 runs PyTorch's own kernels with fp16 weights (a .half() model), cuDNN's with fp32
    assert batch_norm_transform(half, "NVIDIA", 132, "float16") == 16 * (1 + 7)
    assert batch_norm_transform(half, "NVIDIA", 132, "float32") is None
    last, _ = _bn(_batch_norm((128, 64, 56, 56), fmt=torch.channels_last))
    assert batch_norm_transform(last, "NVIDIA", 132) is None
    assert batch_norm_transform(fwd, "AMD", 304) is None


def test_a_bf16_batch_norm_forward_adds_its_transform_to_its_statistics() -> None:
    h100 = roofline.get_device("h100")
    latency = figures(h100).dram_latency()
    assert latency is not None
    units = h100.compute_units or 0
    train = roofline.analyze(_batch_norm((128, 256, 56, 56)), h100)
    i = next(i for i, op in enumerate(train.trace.ops) if op.name in BATCH_NORM_FORWARD)
    op = train.trace.ops[i]
    stats, transform = dependent_loads(op, "NVIDIA", units), batch_norm_transform(
        op, "NVIDIA", units)
    assert stats and transform
    # two kernels one after the other: the statistics' rounds (the launch holds the
    # first), then the transform's rounds or its bytes at the bandwidth, whichever is longer
    expected = (stats - 1) * latency.value + max(train.memory_seconds[i],
                                                 transform * latency.value)
    assert train.latency_seconds[i] == pytest.approx(expected)
    assert train.op_seconds[i] >= expected
    # in evaluation the transform is the only kernel
    infer = roofline.analyze(_batch_norm((128, 256, 56, 56), train=False), h100)
    j = next(i for i, op in enumerate(infer.trace.ops) if op.name in BATCH_NORM_FORWARD)
    assert infer.latency_seconds[j] == pytest.approx(
        max(infer.memory_seconds[j], (transform - 1) * latency.value))
    # with bytes_in_flight off neither kernel's rounds are counted
    off = roofline.analyze(train.trace, h100, bytes_in_flight=False)
    assert off.latency_seconds[i] == 0


def test_a_channels_first_bf16_batch_norm_takes_its_rounds_of_dram_latency() -> None:
    h100 = roofline.get_device("h100")
    latency = figures(h100).dram_latency()
    assert latency is not None
    first, last = (roofline.analyze(_batch_norm((128, 64, 112, 112), fmt=f), h100)
                   for f in (torch.contiguous_format, torch.channels_last))
    # forward: 25 loads per image of 12,544 elements, 128 images; the launch holds the first
    rounds = 25 * 128
    fwd = next(i for i, op in enumerate(first.trace.ops) if op.name.startswith(
        "aten.native_batch_norm.default"))
    assert first.op_seconds[fwd] >= (rounds - 1) * latency.value
    assert last.op_seconds[fwd] < 0.2 * (rounds - 1) * latency.value  # streamed instead
    assert any("batch-norm or max-pool kernel(s) wait on their loads" in a
               for a in first.assumptions)
    assert not any("cuDNN's closed NCHW kernels" in a for a in first.assumptions)


def test_an_autocast_batch_norm_says_cudnns_kernels_are_given_the_rounds() -> None:
    h100 = roofline.get_device("h100")
    a = roofline.analyze(_batch_norm((128, 64, 112, 112), torch.float16), h100)
    fwd = next(i for i, op in enumerate(a.trace.ops) if "batch_norm" in op.name)
    latency = figures(h100).dram_latency()
    assert latency is not None
    assert a.op_seconds[fwd] >= (25 * 128 - 1) * latency.value
    assert any("wait on their loads" in s and "; 2 of them fp16 or fp32 batch norms" in s
               for s in a.assumptions)
    off = roofline.analyze(a.trace, h100, bytes_in_flight=False)
    assert off.op_seconds[fwd] < 0.2 * a.op_seconds[fwd]
    assert not any("cuDNN's closed NCHW kernels" in s for s in off.assumptions)


def _max_pool(shape: tuple[int, ...], kernel: int, stride: int, padding: int,
              fmt: torch.memory_format = torch.contiguous_format) -> OpRecord:
    pool = torch.nn.MaxPool2d(kernel, stride, padding)
    x = torch.empty(*shape, dtype=torch.bfloat16, device="meta").to(memory_format=fmt)
    ops = roofline.trace(pool, x, fake=True).ops
    return next(op for op in ops if op.name == "aten.max_pool2d_with_indices.default")


def test_a_channels_first_max_pool_waits_one_round_per_window_element() -> None:
    # one thread per output, 256 to a block, loading its window one element at a time:
    # ResNet's 3 x 3 stride-2 pool over 8 x 64 x 112 x 112 has 8 x 64 x 56 x 56 = 1,605,632
    # outputs, 6,272 blocks; 132 SMs of eight such blocks take ceil(6,272 / 1,056) = 6 waves
    # of 9 rounds
    op = _max_pool((8, 64, 112, 112), 3, 2, 1)
    assert dependent_loads(op, "NVIDIA", 132) == 6 * 9
    # a 2 x 2 stride-2 window has the same outputs, and 4 rounds; 16 channels, a quarter
    # of the blocks (1,568): 2 waves
    op = _max_pool((8, 64, 112, 112), 2, 2, 0)
    assert dependent_loads(op, "NVIDIA", 132) == 6 * 4
    op = _max_pool((8, 16, 112, 112), 2, 2, 0)
    assert dependent_loads(op, "NVIDIA", 132) == 2 * 4
    # the channels-last kernel and other vendors' builds are not modelled
    last = _max_pool((8, 64, 112, 112), 3, 2, 1, torch.channels_last)
    assert last.channels_last and dependent_loads(last, "NVIDIA", 132) is None
    assert dependent_loads(_max_pool((8, 64, 112, 112), 3, 2, 1), "AMD", 304) is None


def _pool_step(shape: tuple[int, ...], kernel: int | tuple[int, int], stride: int,
               padding: int, fmt: torch.memory_format = torch.contiguous_format,
               ) -> roofline.Trace:
    pool = torch.nn.MaxPool2d(kernel, stride, padding)
    x = torch.empty(*shape, dtype=torch.bfloat16, device="meta").to(memory_format=fmt)
    return roofline.trace(lambda x: pool(x).float().sum().backward(),
                          x.requires_grad_(), fake=True)


def _pool_backward(trace: roofline.Trace) -> tuple[int, OpRecord, int | None]:
    i, op = next((i, op) for i, op in enumerate(trace.ops) if op.name == MAX_POOL_BACKWARD)
    return i, op, max_pool_windows(trace.ops).get(op.input_ids[2])


def test_a_channels_first_max_pool_backward_waits_two_rounds_per_window() -> None:
    # one thread per input element, 256 to a block, over 8 images x 64 channels x
    # ceil(112 x 112 / 256) = 49 blocks each: 25,088 blocks, 132 SMs of eight: 24 waves.
    # A 3 x 3 stride-2 window: a row lies in 3 / 2 windows of output rows on average, a
    # warp's lanes in up to 2 along the row; two loads (the argmax, then the gradient) each
    _, op, window = _pool_backward(_pool_step((8, 64, 112, 112), 3, 2, 1))
    assert window == 9  # found through the indices the forward returned
    assert max_pool_backward(op, 9, "NVIDIA", 132) == 24 * round(2 * 1.5 * 2)
    # 2 x 2 stride 2: each element in one window: 2 rounds
    _, op, window = _pool_backward(_pool_step((8, 64, 112, 112), 2, 2, 0))
    assert window == 4 and max_pool_backward(op, window, "NVIDIA", 132) == 24 * 2
    # a window that is not square, the channels-last kernel, another vendor: not modelled
    _, op, window = _pool_backward(_pool_step((8, 64, 112, 112), (3, 2), 2, 1))
    assert window == 6 and max_pool_backward(op, window, "NVIDIA", 132) is None
    _, last, window = _pool_backward(_pool_step((8, 64, 112, 112), 3, 2, 1,
                                                torch.channels_last))
    assert window == 9 and max_pool_backward(last, 9, "NVIDIA", 132) is None
    assert max_pool_backward(op, 9, "AMD", 304) is None


def test_a_max_pool_backward_takes_its_rounds_after_the_fill_of_its_gradient() -> None:
    h100 = roofline.get_device("h100")
    latency = figures(h100).dram_latency()
    assert latency is not None and h100.compute_units
    a = roofline.analyze(_pool_step((128, 64, 112, 112), 3, 2, 1), h100)
    i, op, window = _pool_backward(a.trace)
    assert window is not None
    rounds = max_pool_backward(op, window, "NVIDIA", h100.compute_units)
    assert rounds
    # gradInput.zero_() writes the gradient at the op's bandwidth, then the rounds
    fill = a.memory_seconds[i] * op.bytes_written / op.bytes
    assert a.latency_seconds[i] == pytest.approx((rounds - 1) * latency.value + fill)
    assert a.bound[i] == "latency"
    off = roofline.analyze(a.trace, h100, bytes_in_flight=False)
    assert off.latency_seconds[i] == 0


def test_a_half_models_batch_norm_takes_the_transform_and_autocasts_does_not() -> None:
    # the weight's dtype comes from the trace's storages: fp16 weights (model.half()) run
    # PyTorch's transform kernel after the statistics; fp32 weights (autocast) run cuDNN's
    h100 = roofline.get_device("h100")
    x = torch.empty(128, 64, 56, 56, dtype=torch.float16, device="meta", requires_grad=True)
    half = torch.nn.BatchNorm2d(64, device="meta").half()
    fp32 = torch.nn.BatchNorm2d(64, device="meta")
    traces = [roofline.trace(m, x, train=True, fake=True, loss_fn=lambda y: y.float().sum())
              for m in (half, fp32)]
    seconds = []
    for t in traces:
        a = roofline.analyze(t, h100)
        i = next(i for i, op in enumerate(t.ops) if op.name in BATCH_NORM_FORWARD)
        weight = t.storages[t.ops[i].input_ids[1]].dtype
        seconds.append((weight, a.latency_seconds[i]))
    (w_half, s_half), (w_fp32, s_fp32) = seconds
    assert (w_half, w_fp32) == ("float16", "float32")
    latency = figures(h100).dram_latency()
    assert latency is not None
    # the same statistics' rounds; the transform's 16 waves of 8 rounds on top
    assert s_half - s_fp32 >= 16 * 8 * latency.value
