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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from roofline.analysis.passes import LAYER_NORM_BACKWARD, LAYER_NORM_FORWARD, input_gradient
from roofline.tracing.records import OpRecord

InFlight = Callable[[OpRecord, int], "float | None"]
_KERNELS: dict[str, InFlight] = {}
Rounds = Callable[[OpRecord, int], "int | None"]
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


def dependent_loads(op: OpRecord, vendor: str) -> int | None:
    """Loads a thread block of ``op``'s GPU kernel waits on one after another, on a GPU of
    ``vendor``; None when the kernel or the vendor's build of it is not modelled."""
    fn, threads = _ROUNDS.get(op.name), ROW_THREADS.get(vendor)
    return fn(op, threads) if fn is not None and threads else None


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
def _layer_norm(op: OpRecord, threads: int) -> int | None:
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
