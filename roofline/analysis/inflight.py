"""Bytes in flight: the bandwidth a kernel with few thread blocks can reach.

DRAM answers a load one latency ``λ`` after it is issued, so a kernel that keeps ``F``
bytes of loads in flight streams at most ``F / λ`` (Little's law), whatever the
memory's bandwidth. A large kernel keeps far more in flight than the bandwidth-latency
product (a few MB on HBM3); a decode step's attention over a short cache, at a small
batch, may launch a few thread blocks that each wait on one tile at a time.

Each op family's kernel grid is one small function of the op's shapes, registered by
name (:func:`register`), that returns the bytes the kernel keeps in flight, or None
where the kernel is not known. The grids follow PyTorch's CUDA sources:

* flash attention (``F.scaled_dot_product_attention`` of 16-bit tensors with no mask,
  head dim at most 256): ``flash_api.cpp`` (pytorch/pytorch@03b7c19dbe22). A decode
  query (one token, more query than K/V heads) is folded into ``ngroups`` rows per K/V
  head (``seqlenq_ngroups_swapped``); rows are cut in 64-row blocks, and the keys are
  split over ``num_splits_heuristic`` chunks when batch x heads x row blocks fills less
  than 80% of twice the SMs ("128 threads per block", two per SM). Tiles hold
  ``block_n`` keys (256, 128 or 64 for head dims up to 64, 128 and 256); a block issues
  its V tile before the Q K^T product and the next K tile after V has arrived
  (``flash_fwd_kernel.h``, pytorch/pytorch@1383ac0afe80, ``compute_attn_1rowblock``'s
  loop), so one tile is in flight at a time.
* memory-efficient attention (16-bit tensors with a mask):
  ``mem_eff_attention/kernels/cutlassF.h`` (pytorch/pytorch@5ef5abf4ca22): the first sm80
  kernel whose ``kMaxK`` holds the head dim, (64 queries, 64 keys) up to 64, (64, 128) up
  to 128, (32, 128) beyond; one block per query block x head x batch, no split over keys
  (``kernel_forward.h``, pytorch/pytorch@01b4eaefe431: ``getBlocksGrid``). A block
  streams K through a 4-stage pipeline of 32-wide slices of the head dim (three slices of
  128 keys in flight: 24 KiB) and preloads V (``kPreloadV``): about one tile of
  ``kKeysPerBlock`` keys in flight.

Resident blocks are at most two per SM in both (the flash heuristic's own assumption).
fp32 attention (other tiles) is not modelled. The analysis turns the bytes in flight into
the op's ``latency`` roof, ``bytes x λ / F`` (:mod:`roofline.analysis.timing`). cuBLAS's
GEMV and split-K grids are not public, so matmuls have no function here: the
GEMM model's measured floor and bandwidth stand for them.

A kernel with few rows is bound by another count: the loads each thread block waits on one
after another (:func:`dependent_loads`, registered with :func:`register_rounds`). A block
that issues a load and uses it before the next takes at least that many DRAM latencies,
however few its bytes and whatever the bandwidth; the launch overhead holds the first. The
row-wise kernels follow ``layer_norm_kernel.cu`` (pytorch/pytorch@0005c538e468):

* ``native_layer_norm`` (``vectorized_layer_norm_kernel``: rows a multiple of 4 elements)
  runs one block of ``num_threads()`` threads per row: four warps on CUDA
  (``thread_constants.h``, pytorch/pytorch@05da067bfdd4; 1,024 threads on ROCm 5.3 and
  later). Each thread loads ``vec_size`` = 4 elements at a time and folds them into its
  Welford sums before the next load (``compute_stats``), the block reduces, then a second
  loop reads the row again with the weight and bias and writes it: two rounds per
  ``threads x 4`` elements of the row.
* ``native_layer_norm_backward``'s input gradient (``layer_norm_grad_input_kernel_vectorized``,
  the same block per row) makes the same two loops over the input, the output gradient
  and the weight. Its weight and bias gradients are another kernel, not counted here;
  where no input gradient is asked for, only that kernel runs, and there are no rounds.
* RMS norm's ``_fused_rms_norm`` and its backward run these same kernels
  (:mod:`roofline.analysis.passes`).

Batch norm in training, channels-first. PyTorch runs its own kernels for bf16 input, and
for fp16 input with fp16 weights (``_batch_norm_impl_index`` sends neither to cuDNN:
``aten/src/ATen/native/Normalization.cpp``). ``Normalization.cuh``
(pytorch/pytorch@045df4353680) launches one block per channel, ``getNumThreads(H*W)`` x
``512 / that`` threads (512 in all), and each thread walks the batch and the plane one
element at a time:

* the forward's statistics (``batch_norm_collect_statistics_kernel``) fold each element
  into a Welford mean and variance before the next: one round per ``512`` elements of a
  channel's ``N*H*W`` (strictly: ``ceil(H*W / threads_x) * ceil(N / threads_y)``);
* its elementwise transform (``batch_norm_transform_input_kernel``: bf16, and fp16 with
  fp16 weights, the weight's dtype read from the trace's storages;
  :func:`batch_norm_transform`) is another kernel after it, and the only one in evaluation:
  blocks of 64 to 512 threads per channel and slice of the batch, each thread loading one
  element and writing it before the next. Its rounds (or its bytes at the bandwidth, if
  longer) add to the statistics'. On the lent H200 this took ResNet-50's 53 forward batch
  norms from 7.3 to 10.5 ms predicted against 12.6 measured (training, batch 128) and from
  3.7 to 6.3 against 10.2 ms (inference, batch 256); per call, the median error went from
  60% to 24% and from 68% to 42%. The 7 x 7 and 14 x 14 planes, where each 64-thread block
  handles one image's plane or less, stay at 0.2-0.8 of their time, which the rounds do
  not explain;
* the backward with an input gradient is one fused kernel per channel
  (``batch_norm_backward_kernel``, ``Normalization.cu``'s "Fused reduction & elementwise
  kernel"): a reduction loop that loads the input and the output gradient, then a loop
  that loads both again and writes the input gradient: two rounds per 512 elements.

fp16 with fp32 weights (autocast's) and fp32 go to cuDNN on NVIDIA GPUs, whose NCHW
training kernels are not public. What is public reads as per-channel kernels of the
same size, and no faster: profiles name them ``bn_fw_tr_1C11_kernel_NCHW<T, float, 512,
...>`` and ``bn_bw_1C11_kernel_new<..., 512, ...>`` (pytorch/pytorch#57034,
ryujaehun/pytorch-gpu-benchmark#8: statistics of shape 1 x C x 1 x 1, and 512 in the
template, PyTorch's block size too; a reading of the names), and where one input was
timed under both, cuDNN's kernel took 1.9x PyTorch's (PaddlePaddle's BatchNorm1D design
note, 2022-05-22: 133 ms against 71.5 ms for 2,000,000 x 1 x 3 fp32; its PyTorch snippet
reads 200,000 rows, but PyTorch runs its own kernel only beyond 880,801; and on a GTX 980
under 2016's cuDNN, tensorflow/tensorflow#1759: 30 and 118 ms per forward and backward of 32
channels of 64 x 64 and 128 x 128 at batch 128, about 20x both their bytes' time at 224
GB/s and the rounds given here at 450 ns each). So on NVIDIA GPUs
they are given the same rounds (the statistics' alone: cuDNN's forward is not known to run a
transform like PyTorch's), an assumption the analysis states; on other vendors only
PyTorch's own kernels (bf16) are. With it, Lambda's PyTorch ResNet-50 AMP rows (NCHW,
cuDNN's kernels) on the A100s and H100s went from 19-46% too fast to -2% to +3%, its V100
and GDDR parts moving by 5 points or less (``docs/validation.md``). ROCm's build of
``Normalization.cuh`` (cyyever/pytorch@0d188885a9a2, a fork of pytorch/pytorch's main branch)
takes blocks of up to 1,024 threads (``getNumThreads`` from 64), and its reduction loops load
four elements per thread before folding them (``UNRL``): a round there covers 4,096
elements of a channel.

Max pooling, channels-first (``DilatedMaxPool2d.cu``, cyyever/pytorch@0d188885a9a2):
``max_pool_forward_nchw`` runs one thread per output element, 256 to a block, each loading
its window one element at a time and comparing it before the next: a round per window
element (the record's FLOPs over its outputs), times the waves of blocks (eight of 256
threads per SM on sm_80 and sm_90; :data:`RESIDENCY`). On the lent H200, ResNet-50's pool
(3 x 3 over 64 channels of 112 x 112) went from 0.36 to 0.83 of its measured 0.41 ms at
batch 128. Its backward
(``max_pool_backward_nchw``: :func:`max_pool_backward`) runs one thread per input element
looping over the windows that hold it, two rounds each (the output's argmax index, then
its gradient where the index names the element), after a fill of the gradient; the
window comes from the forward whose indices it reads (:func:`max_pool_windows`), as its
own record holds no kernel size. There it went from 0.16 to 0.81 of its measured 1.18 ms.

Blocks beyond the chip's resident ones run in further waves, each its rounds again: an SM
holds as many blocks as its threads and its block limit allow, by compute capability in
NVIDIA's own table (:data:`RESIDENCY`): four of 512 threads on sm_80, sm_90 and sm_100
(2,048 threads), three on sm_86, sm_89 and sm_120 (1,536), two on sm_75 (1,024). On the
lent H200 (``benchmarks/lent_h200.py``: ResNet-50 at batch 128, bf16) these kernels took
1.5 ms forward and 2.7 ms backward at 64 channels of 112 x 112, against 0.13 ms each at
stream bandwidth: 3,200 and 6,400 rounds of DRAM latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from roofline.analysis.passes import LAYER_NORM_BACKWARD, LAYER_NORM_FORWARD, input_gradient
from roofline.tracing.records import OpRecord

InFlight = Callable[[OpRecord, int], "float | None"]
_KERNELS: dict[str, InFlight] = {}
Rounds = Callable[[OpRecord, str, int, "int | None"], "int | None"]
_ROUNDS: dict[str, Rounds] = {}
F = TypeVar("F", InFlight, Rounds)

#: Threads per block of PyTorch's row-wise kernels (``num_threads()``) per vendor's build.
ROW_THREADS = {"NVIDIA": 128, "AMD": 1024}
#: Elements a layer-norm thread loads at once (``vec_size``, every dtype).
LAYER_NORM_VECTOR = 4
_VECTORIZED = ("float32", "float16", "bfloat16")

#: Thread blocks resident per SM in the modelled kernels (flash_api.cpp: "we're using
#: 128 threads per block", and the SM count is doubled for it).
BLOCKS_PER_SM = 2
_SIZE = {"float16": 2, "bfloat16": 2}
_SDPA = ("aten._scaled_dot_product_flash_attention_for_cpu.default",
         "aten._scaled_dot_product_flash_attention.default",
         "aten._scaled_dot_product_efficient_attention.default")


def register(*names: str) -> Callable[[InFlight], InFlight]:
    """Register the bytes-in-flight function of the ops ``names``."""
    return _into(_KERNELS, names)


def register_rounds(*names: str) -> Callable[[Rounds], Rounds]:
    """Register the dependent-loads function of the ops ``names``."""
    return _into(_ROUNDS, names)


def _into(table: dict[str, F], names: tuple[str, ...]) -> Callable[[F], F]:
    def wrap(fn: F) -> F:
        for name in names:
            table[name] = fn
        return fn
    return wrap


def in_flight_bytes(op: OpRecord, compute_units: int | None) -> float | None:
    """Bytes ``op``'s GPU kernel keeps in flight on a chip of ``compute_units`` SMs, or
    None when the kernel is not modelled."""
    fn = _KERNELS.get(op.name)
    return fn(op, compute_units) if fn is not None and compute_units else None


def dependent_loads(op: OpRecord, vendor: str, compute_units: int | None = None,
                    compute_capability: int | None = None) -> int | None:
    """Loads a thread block of ``op``'s GPU kernel waits on one after another (times the
    waves its blocks take on ``compute_units`` SMs of ``compute_capability``, where that is
    known), on a GPU of ``vendor``; None when the kernel or the vendor's build of it is not
    modelled."""
    fn = _ROUNDS.get(op.name)
    return fn(op, vendor, compute_units or 0, compute_capability) if fn is not None else None


def num_splits(rows: int, slots: int, n_blocks: int, max_splits: int = 128) -> int:
    """flash_api.cpp's ``num_splits_heuristic``: the fewest key splits whose wave
    efficiency is within 85% of the best (one split when the rows fill 80% of the slots)."""
    if rows >= 0.8 * slots:
        return 1
    max_splits = min(max_splits, slots, n_blocks)
    eff: dict[int, float] = {}
    for s in range(1, max_splits + 1):
        if s == 1 or math.ceil(n_blocks / s) != math.ceil(n_blocks / (s - 1)):
            waves = rows * s / slots
            eff[s] = waves / math.ceil(waves)
    best = max(eff.values(), default=0.0)
    return next((s for s, e in eff.items() if e >= 0.85 * best), 1)


@register(*_SDPA)
def _attention(op: OpRecord, sms: int) -> float | None:
    shapes = op.input_shapes
    if len(shapes) < 3 or any(len(s) != 4 for s in shapes[:3]) or op.dtype not in _SIZE:
        return None
    (b, h, lq, d), (_, h_kv, lk, _) = shapes[0], shapes[1]
    size, masked = _SIZE[op.dtype], len(shapes) > 3 and bool(shapes[3])
    flash = op.name != _SDPA[2] and not masked and d <= 256
    slots = BLOCKS_PER_SM * sms
    if flash:
        if lq == 1 and h > h_kv:  # the query heads of a K/V head become its rows
            lq, h = h // max(h_kv, 1), h_kv
        block_n = 256 if d <= 64 else 128 if d <= 128 else 64
        rows = b * h * math.ceil(lq / 64)
        blocks = rows * num_splits(rows, slots, math.ceil(lk / block_n))
        keys = block_n
    else:
        queries, keys = (64, 64) if d <= 64 else (64, 128) if d <= 128 else (32, 128)
        blocks = math.ceil(lq / queries) * h * b
    return float(min(blocks, slots) * keys * d * size)  # one K or V tile per block


@register_rounds(*LAYER_NORM_FORWARD, *LAYER_NORM_BACKWARD)
def _layer_norm(op: OpRecord, vendor: str, units: int, cc: int | None = None) -> int | None:
    threads = ROW_THREADS.get(vendor)
    if threads is None:  # no build of the kernel modelled
        return None
    # rows: a per-row statistic (forward: output 1, the mean or RMS norm's rstd; backward:
    # input 2, the same), the rest is one row
    forward = op.name in LAYER_NORM_FORWARD
    stats = op.output_shapes[1:2] if forward else op.input_shapes[2:3]
    if not stats or not op.input_shapes or not op.input_shapes[0]:
        return None
    if not forward and not input_gradient(op):
        return None  # the block-per-row kernel computes the input gradient alone
    rows, elements = math.prod(stats[0]), math.prod(op.input_shapes[0])
    if rows == 0 or elements == 0:
        return 0
    n = elements // rows
    if n % LAYER_NORM_VECTOR or op.dtype not in _VECTORIZED:  # the scalar kernels
        return None
    return 2 * math.ceil(n / (threads * LAYER_NORM_VECTOR))


#: Batch norm's threads per block on CUDA (``MAX_BLOCK_SIZE``).
BATCH_NORM_THREADS = 512
#: Threads and thread blocks an SM holds at once, by compute capability: NVIDIA's own table
#: (``max_threads_per_multiprocessor`` and ``max_blocks_per_multiprocessor`` in
#: ``libcudacxx/include/cuda/__device/arch_traits.h``, NVIDIA/cccl@efee2cf61c8e; sm_103 and
#: sm_110 take sm_100's there). Parts it does not list (sm_52, sm_87) and other vendors take
#: sm_80's.
RESIDENCY: dict[int, tuple[int, int]] = {
    60: (2048, 32), 61: (2048, 32), 70: (2048, 32), 75: (1024, 16), 80: (2048, 32),
    86: (1536, 16), 89: (1536, 24), 90: (2048, 32), 100: (2048, 32), 103: (2048, 32),
    110: (2048, 32), 120: (1536, 32)}
#: Per build of ``Normalization.cuh``: ``getNumThreads``'s sizes (the last one is
#: ``MAX_BLOCK_SIZE``) and the elements a thread of the reduction loops loads before it folds
#: them (``UNRL``, ROCm's only).
BATCH_NORM_BUILDS = {"NVIDIA": ((32, 64, 128, 256, BATCH_NORM_THREADS), 1),
                     "AMD": ((64, 128, 256, 512, 1024), 4)}
#: Dtypes whose channels-first batch norm runs per-channel kernels on NVIDIA GPUs beyond bf16:
#: PyTorch's own (fp16 with fp16 weights) or cuDNN's NCHW ones, given the same rounds.
CUDNN_PER_CHANNEL = ("float16", "float32")
BATCH_NORM_FORWARD = ("aten.native_batch_norm.default",
                      "aten._native_batch_norm_legit.default",
                      "aten._native_batch_norm_legit_functional.default",
                      "aten._batch_norm_with_update.default")
BATCH_NORM_BACKWARD = ("aten.native_batch_norm_backward.default",
                       "aten.batch_norm_backward.default")
BATCH_NORM_ALL = BATCH_NORM_FORWARD + BATCH_NORM_BACKWARD


def residency(compute_capability: int | None) -> tuple[int, int]:
    """The threads and thread blocks an SM of this compute capability holds at once
    (:data:`RESIDENCY`; sm_80's where it is not listed or None)."""
    return RESIDENCY.get(compute_capability or 0, RESIDENCY[80])


def _waves(blocks: int, threads: int, units: int, cc: int | None = None) -> int:
    """Waves a grid of ``blocks`` blocks of ``threads`` threads takes on ``units`` SMs of
    compute capability ``cc``, each holding as many as its threads and blocks allow."""
    max_threads, max_blocks = residency(cc)
    resident = max(1, min(max_blocks, max_threads // threads))
    return math.ceil(blocks / (units * resident))


def _num_threads(n: int, vendor: str = "NVIDIA") -> int:
    """``getNumThreads``: the smallest of the build's sizes that holds ``n``, else the
    largest (CUDA: 32, 64, 128, 256, 512; ROCm: 64 up to 1,024)."""
    sizes = BATCH_NORM_BUILDS[vendor][0]
    return next((t for t in sizes if n <= t), sizes[-1])


@register_rounds(*BATCH_NORM_ALL)
def _batch_norm(op: OpRecord, vendor: str, units: int, cc: int | None = None) -> int | None:
    if vendor not in BATCH_NORM_BUILDS:  # no build of the kernels modelled
        return None
    shapes, forward = op.input_shapes, op.name in BATCH_NORM_FORWARD
    # the activation: the forward's first input, the backward's second (after grad_out)
    at = 0 if forward else 1
    x: tuple[int, ...] = tuple(shapes[at]) if len(shapes) > at else ()
    per_channel = ("bfloat16",) + (CUDNN_PER_CHANNEL if vendor == "NVIDIA" else ())
    if op.dtype not in per_channel or op.channels_last or len(x) < 3 or not units:
        return None  # another vendor's library, or the channels-last grid: not these
    stats = op.output_shapes[1] if len(op.output_shapes) > 1 else ()
    if forward and (not stats or 0 in stats):
        return None  # evaluation: the elementwise transform alone
    if not forward and not (op.output_shapes and op.output_shapes[0] == tuple(x)):
        return None  # no input gradient: the reduction kernels, not the fused one
    n, c, plane = x[0], x[1], math.prod(x[2:])
    sizes, unroll = BATCH_NORM_BUILDS[vendor]
    block = sizes[-1]  # MAX_BLOCK_SIZE
    tx = _num_threads(plane, vendor)
    ty = max(1, block // tx)
    # the reduction loop (ROCm's folds UNRL loads at a time), then the backward's
    # elementwise loop over the same elements, one load at a time on both builds
    per_row = math.ceil(plane / (tx * unroll)) + (0 if forward else math.ceil(plane / tx))
    rounds = per_row * math.ceil(n / ty)
    return rounds * _waves(c, block, units, cc)


#: Threads per block of PyTorch's channels-first max-pool kernels (``BLOCK_THREADS``).
POOL_THREADS = 256
MAX_POOL = ("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default")


def _pool_window(op: OpRecord, outputs: int) -> int:
    """A max pool's window (elements): its FLOPs are one compare per window element per
    output (roofline.tracing.formulas)."""
    return op.flops // outputs


@register_rounds(*MAX_POOL)
def _max_pool(op: OpRecord, vendor: str, units: int, cc: int | None = None) -> int | None:
    # DilatedMaxPool2d.cu (cyyever/pytorch@0d188885a9a2): max_pool_forward_nchw runs one
    # thread per output element, 256 to a block, which loads its window one element at a
    # time and compares each before the next: a round per window element
    out = math.prod(op.output_shapes[0]) if op.output_shapes else 0
    if vendor != "NVIDIA" or op.channels_last or not op.counted or not out or not units:
        return None  # the channels-last kernel (a 3-D grid over channels) is another
    return _waves(math.ceil(out / POOL_THREADS), POOL_THREADS, units, cc) * _pool_window(op, out)


MAX_POOL_BACKWARD = "aten.max_pool2d_with_indices_backward.default"


def max_pool_windows(ops: list[OpRecord]) -> dict[int, int]:
    """Each channels-first max pool's window (elements), by the storage id of the indices
    it returns, which its backward reads: the backward's record holds no kernel size."""
    out: dict[int, int] = {}
    for op in ops:
        if op.name == MAX_POOL[0] and op.counted and len(op.output_ids) > 1 \
                and op.output_shapes and (n := math.prod(op.output_shapes[0])):
            out[op.output_ids[1]] = _pool_window(op, n)
    return out


def max_pool_backward(op: OpRecord, window: int, vendor: str, units: int,
                      cc: int | None = None) -> int | None:
    """Loads each block of a channels-first max pool's backward waits on one after another,
    times its waves on ``units`` SMs of compute capability ``cc``, for a square ``window``
    of its forward; None where not modelled.

    ``max_pool_backward_nchw`` (``DilatedMaxPool2d.cu``, cyyever/pytorch@0d188885a9a2) runs
    one thread per input element, 256 to a block, over a grid of the image's plane x the
    batch x the channels. Each thread loops over the outputs whose windows hold its
    element, loading the output's argmax index and, where it names the element, then the
    output's gradient: two rounds per window a warp visits. An input row lies in the windows
    of ``k / s`` output rows on average, and a warp's lanes along it in those of up to
    ``ceil(k / s)`` output columns (the stride ``s`` taken as input over output size).
    ``gradInput.zero_()`` runs before it, a fill of the gradient (added by the analysis).
    """
    if vendor != "NVIDIA" or op.channels_last or len(op.input_shapes) < 2 or not units:
        return None
    out, x = op.input_shapes[0], op.input_shapes[1]
    k = math.isqrt(window)
    if len(x) != 4 or len(out) != 4 or k * k != window or 0 in out or 0 in x:
        return None  # a non-square window's sides are not known
    strides = [max(1, round(x[d] / out[d])) for d in (2, 3)]
    rounds = round(2 * k / strides[0] * math.ceil(k / strides[1]))
    blocks = math.ceil(x[2] * x[3] / POOL_THREADS) * x[0] * x[1]
    return _waves(blocks, POOL_THREADS, units, cc) * rounds


#: The transform kernel's grid: at most this many blocks over all channels before the batch
#: is looped over (``(256*1024) / C`` per channel), and CUDA's grid-height limit.
TRANSFORM_BLOCKS, MAX_GRID_SIZE = 256 * 1024, 65535


def batch_norm_transform(op: OpRecord, vendor: str, units: int,
                         weight_dtype: str | None = None, cc: int | None = None) -> int | None:
    """Loads each block of a channels-first batch-norm forward's elementwise transform waits
    on one after another, times its waves, on a GPU of ``vendor`` with ``units`` SMs of
    compute capability ``cc``; None where the kernel is not modelled. ``weight_dtype`` is
    the dtype of the op's weight (its second input) where the trace knows it.

    ``batch_norm_transform_input_kernel`` is a kernel of its own after the statistics (in
    training; the only one in evaluation). ``batch_norm_elemt_cuda_template``
    (``Normalization.cuh``, cyyever/pytorch@0d188885a9a2, a fork of pytorch/pytorch's main
    branch) launches ``C`` x ``min((256*1024) / C, ceil(N / tb))`` blocks of ``tf`` x ``tb``
    threads, ``tf = max(getNumThreads(H*W / 4), min(getNumThreads(H*W), 64))`` and
    ``tb = max(64 / tf, 1)``: 64 to 512 threads. A block loads its channel's weight, bias,
    mean and inverse deviation, then each thread loads an element and writes it before the
    next: one round for the parameters and one per element it handles. Modelled where
    PyTorch's own kernels run on NVIDIA GPUs: bf16, and fp16 with fp16 weights
    (``_select_batch_norm_backend`` sends fp16 to cuDNN only with fp32 weights, autocast's,
    and fp32 too, whose closed kernels are given the statistics' rounds alone). ROCm's build
    sizes its blocks differently.
    """
    x: tuple[int, ...] = tuple(op.input_shapes[0]) if op.input_shapes else ()
    own = op.dtype == "bfloat16" or (op.dtype == "float16" and weight_dtype == "float16")
    if vendor != "NVIDIA" or op.name not in BATCH_NORM_FORWARD or not own \
            or op.channels_last or len(x) < 3 or not units or 0 in x:
        return None
    n, c, plane = x[0], x[1], math.prod(x[2:])
    tf = max(_num_threads(plane // 4), min(_num_threads(plane), 64))
    tb = max(64 // tf, 1)
    rows = min(max(1, min(TRANSFORM_BLOCKS // c, math.ceil(n / tb))), MAX_GRID_SIZE)
    per_thread = math.ceil(n / (rows * tb)) * math.ceil(plane / tf)
    return _waves(c * rows, tf * tb, units, cc) * (1 + per_thread)
