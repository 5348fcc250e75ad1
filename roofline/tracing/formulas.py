"""FLOP formulas for the op families torch.utils.flop_counter leaves out.

Conventions (one place, used everywhere):

* A FLOP is one floating-point operation; a multiply-add is 2 FLOPs.
* A formula's parameters are named as the op's schema names its arguments
  (``self``, ``input``, ``grad_output``, ``query``, ``is_causal``...); it takes the
  ones it needs and ignores the rest with ``**_``. Tensors arrive as shapes, the
  output's as ``out_shape``.
* Pointwise ops cost, per output element, the arithmetic of their defining
  formula; a transcendental (exp, log, tanh, erf, sqrt, rsqrt, sin, cos) or a
  comparison/select counts 1. The per-op counts are in the tables below.
* Complex dtypes: formulas count real arithmetic, and the registry multiplies by
  the family's ``complex_flops`` (:mod:`roofline.tracing.ops`): a complex add or
  subtract is 2 real FLOPs, a multiply ``(a+bi)(c+di)`` 4 products + 2 adds = 6, a
  multiply-add 8 (a matmul, counted at 2 per multiply-add, has factor 4: an
  ``(m, k) @ (k, n)`` complex matmul is ``8mkn``). With one operand real the
  defining formula is cheaper and is what is counted: ``(a+bi)x`` is 2 products,
  ``(a+bi) + x`` 1 add (the imaginary part passes through), whatever the kernel does
  with the promoted operand. Ops without a factor (exp, abs, softmax... of complex
  tensors) are recorded uncounted, not guessed.
* Reductions cost one FLOP per input element (a sum of n values is n-1 adds,
  rounded to n), plus the final arithmetic per output element where there is
  some (mean: one divide).
* Sorting counts comparisons as FLOPs (as the pointwise comparisons are): a sort
  of ``n`` values compares ``n log2 n`` times per sorted row (a comparison sort's
  order of work), a top-k ``n log2 k`` (a size-k heap: each value sifts through
  ``log2 k`` levels, at least one comparison with the heap's minimum).
* Scatters that accumulate (``scatter_add``, ``index_add``, ``index_put`` with
  ``accumulate``, ``scatter``/``scatter_reduce`` with a ``reduce``) cost one FLOP
  per source element they use; plain scatters and gathers move data only.
* Causal attention counts only the query-key pairs the kernel computes: with
  torch's top-left causal mask, query ``i`` sees keys ``0..i``, so a square
  ``L x L`` head computes ``L(L+1)/2`` pairs instead of ``L^2``. Each pair costs
  ``2 d_qk`` (QK^T) plus ``2 d_v`` (PV) FLOPs forward; the backward recomputes the
  scores and runs four more matmuls, 2.5x the forward, as torch counts it. The
  softmax inside fused attention is not counted (FlashAttention's convention).
* Bag reductions (``embedding_bag``) cost one FLOP per gathered element (an add or,
  for ``max``, a compare), one more with per-sample weights (the multiply), and for
  ``mean`` one divide per output element.
* Data movement (copies, gathers, views, fills, allocation) is 0 FLOPs; see
  :mod:`roofline.tracing.ops` for the ops registered as such.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

from roofline.tracing.ops import (
    LATE,
    ComplexOperands,
    aten,
    copy_from_src,
    fused_optimizer,
    gather,
    gathered_rows,
    index_add_bytes,
    index_copy_bytes,
    index_fill_bytes,
    index_put_bytes,
    indexed_numel,
    nll_loss_backward_bytes,
    nll_loss_gather,
    no_bytes,
    put_bytes,
    register_formula,
    register_no_flops,
    scatter_add_bytes,
    scatter_bytes,
    view_copy_bytes,
    write_only,
)


def numel(shape: Any) -> int:
    """Elements of a shape; of the first shape for a tuple/list of outputs."""
    if shape is None:
        return 0
    if isinstance(shape, (list, tuple)) and shape and not isinstance(shape[0], int):
        return numel(shape[0])
    return math.prod(shape)


def _total(shapes: Sequence[Any]) -> int:
    return sum(math.prod(s) for s in shapes if s is not None)


# Real FLOPs per counted FLOP of a pointwise op in a complex dtype, by which operand is
# real (ComplexOperands(both complex, first real, second real)), z = a+bi, w = c+di, x real:
# * mul: zw = (ac-bd) + (ad+bc)i is 4 products + 2 adds (6); zx = ax + bxi is 2 products.
# * add: z + w adds both parts (2); z + x = (a+x) + bi adds the real part only (1).
# * sub (self - other): z - w (2), z - x (1); x - z = (x-a) - bi also negates b (2).
# * rsub (other - self): the same with the operands swapped.
# * neg: -z negates both parts (2).
# The kernel promotes a real operand to complex and may multiply by its zero imaginary
# part; those products are not arithmetic the op needs, so they are not counted.
_COMPLEX_POINTWISE: dict[Any, int | ComplexOperands] = {
    aten.mul: ComplexOperands(6, 2, 2),
    aten.add: ComplexOperands(2, 1, 1),
    aten.sub: ComplexOperands(2, 2, 1),
    aten.rsub: ComplexOperands(2, 1, 2),
    aten.neg: 2,
}


# --- pointwise --------------------------------------------------------------------

_POINTWISE: dict[int, list[Any]] = {
    # x + y, x * y, |x|, max(x, 0), x > y, where(c, x, y), exp(x), sqrt(x), ...
    1: [aten.add, aten.sub, aten.mul, aten.div, aten.neg, aten.abs, aten.reciprocal,
        aten.rsub, aten.sqrt, aten.rsqrt, aten.exp, aten.exp2, aten.expm1, aten.log,
        aten.log1p, aten.log2, aten.sin, aten.cos, aten.tanh, aten.erf, aten.relu,
        aten.clamp_min, aten.clamp_max, aten.maximum, aten.minimum, aten.eq, aten.ne,
        aten.lt, aten.le, aten.gt, aten.ge, aten.where, aten.masked_fill, aten.sign,
        aten.floor, aten.ceil, aten.round, aten.trunc, aten.square, aten.pow,
        aten.threshold, aten.threshold_backward, aten.logical_not, aten.logical_and,
        aten.logical_or, aten.isnan, aten.isinf, aten.fmod, aten.remainder,
        aten.xlogy, aten.erfinv, aten.atan2, aten.sgn],
    # clamp(x, lo, hi) = min(max(x, lo), hi); hardtanh (ReLU6) likewise;
    # hardtanh_backward: two compares select grad; leaky_relu: compare + scale
    2: [aten.clamp, aten.hardtanh, aten.hardtanh_backward, aten.leaky_relu,
        aten.leaky_relu_backward],
    # addcmul: a + v*b*c; addcdiv: a + v*b/c; lerp: a + w*(b-a); softplus: log(1+exp(x));
    # sigmoid_backward: g*y*(1-y); tanh_backward: g*(1-y^2); hardsigmoid: clamp(x/6+1/2)
    3: [aten.addcmul, aten.addcdiv, aten.lerp, aten.softplus, aten.sigmoid_backward,
        aten.tanh_backward, aten.hardsigmoid, aten.elu],
    # sigmoid: 1/(1+exp(-x)); hardswish: x*clamp(x/6+1/2)
    4: [aten.sigmoid, aten.hardswish, aten.hardsigmoid_backward],
    # silu: x*sigmoid(x); mish: x*tanh(softplus(x))
    5: [aten.silu, aten.mish, aten.elu_backward, aten.softplus_backward],
    # silu_backward: s = sigmoid(x) (4), g*s*(1 + x*(1-s)) (5)
    9: [aten.silu_backward, aten.hardswish_backward],
}

for _cost, _ops in _POINTWISE.items():
    def _make(cost: int) -> Any:
        def pointwise_flop(out_shape: Any = None, self: Any = None, **_: Any) -> int:
            # per output element; an op returning nothing (an in-place form): per element
            # of the tensor it mutates
            return cost * numel(self if out_shape is None else out_shape)
        return pointwise_flop

    for _op in _ops:
        register_formula(_op, category="pointwise",
                         complex_flops=_COMPLEX_POINTWISE.get(_op))(_make(_cost))


@register_formula(aten.gelu, category="pointwise")
def gelu_flop(self: Any, approximate: str = "none", **_: Any) -> int:
    # erf form: 0.5*x*(1+erf(x/sqrt2)) = 5;
    # tanh form: 0.5*x*(1+tanh(k*(x+0.044715*x^3))) = x^3 (2) + 7 = 9
    return (9 if approximate == "tanh" else 5) * numel(self)


@register_formula(aten.gelu_backward, category="pointwise")
def gelu_backward_flop(grad_output: Any, approximate: str = "none", **_: Any) -> int:
    # erf: cdf (4) + pdf x*exp(-x^2/2)/sqrt(2pi) (5) + cdf + x*pdf (2) + *grad (1) = 12;
    # tanh: inner (4) + tanh (1) + 0.5(1+t) (2) + 1-t^2 (2) + k(1+3c x^2) (3)
    #       + products (3) + sum (1) + *grad (1) = 17
    return (17 if approximate == "tanh" else 12) * numel(grad_output)


# --- reductions ---------------------------------------------------------------------

# a complex sum adds both parts (2 per element); a complex product multiplies (6)
@register_formula(aten.sum, aten.cumsum, aten.nansum, category="reduction", complex_flops=2)
@register_formula(aten.prod, category="reduction", complex_flops=6)
@register_formula(aten.amax, aten.amin, aten.max, aten.min, aten.argmax, aten.argmin,
                  aten.any, aten.all, aten.logsumexp, category="reduction")
def reduction_flop(self: Any, **_: Any) -> int:
    # one op per input element; max/min with two tensors are elementwise: same count
    return numel(self)


@register_formula(aten.dot, aten.vdot, category="reduction", complex_flops=4)
def dot_flop(self: Any, **_: Any) -> int:
    # a multiply-add per element: 2 FLOPs (complex: 8 per element, counted by complex_flops)
    return 2 * numel(self)


@register_formula(aten.mv, category="matmul")
def mv_flop(self: Any, **_: Any) -> int:
    # (m x n) @ (n): a multiply-add per matrix element
    return 2 * numel(self)


@register_formula(aten.addmv, category="matmul")
def addmv_flop(self: Any, mat: Any = None, **_: Any) -> int:
    # beta * self + alpha * (mat @ vec): the GEMV's multiply-adds and one add per output
    return 2 * numel(mat) + numel(self)


@register_formula(aten.mean, category="reduction", complex_flops=2)
def mean_flop(self: Any, out_shape: Any = None, **_: Any) -> int:
    # sum (n) + one divide per output (complex: both parts divided by the real count)
    return numel(self) + numel(out_shape)


@register_formula(aten.var, aten.std, aten.var_mean, aten.std_mean, category="reduction")
def var_flop(self: Any, out_shape: Any = None, **_: Any) -> int:
    # mean (n), x - mean (n), square (n), sum (n) + divides per output
    return 4 * numel(self) + 2 * numel(out_shape)


@register_formula(aten.linalg_vector_norm, aten.norm, category="reduction")
def norm_flop(self: Any, out_shape: Any = None, **_: Any) -> int:
    # |x|^p (n) + sum (n) + root per output
    return 2 * numel(self) + numel(out_shape)


# --- sorting ------------------------------------------------------------------------------

def _rows_and_length(shape: Any, dim: int) -> tuple[int, int]:
    """(independent rows, length of each) of an op along ``dim``."""
    if not shape:  # a 0-d tensor is one row of one value
        return 1, 1
    n = shape[dim]
    return (numel(shape) // n if n else 0), n


@register_formula(aten.sort, aten.argsort, category="copy")
def sort_flop(self: Any, dim: int = -1, **_: Any) -> int:
    # a comparison sort of n values: n log2 n comparisons per sorted row
    rows, n = _rows_and_length(self, dim)
    return round(rows * n * math.log2(n)) if n > 1 else 0


@register_formula(aten.topk, category="copy")
def topk_flop(self: Any, k: int, dim: int = -1, **_: Any) -> int:
    # a size-k heap per row: each of the n values is compared with the heap's minimum
    # and, if it enters, sifts down log2 k levels: n log2 k, at least n
    rows, n = _rows_and_length(self, dim)
    return round(rows * n * max(1.0, math.log2(k))) if k > 0 else 0


# --- scatters and indexed writes ----------------------------------------------------------

@register_formula(aten.scatter, category="copy", bytes_rule=scatter_bytes)
def scatter_flop(index: Any, reduce: str | None = None, **_: Any) -> int:
    # a plain scatter moves data; with reduce ("add", "multiply") one op per index element
    return numel(index) if reduce is not None else 0


@register_formula(aten.scatter_add, category="copy", bytes_rule=scatter_add_bytes)
def scatter_add_flop(index: Any, **_: Any) -> int:
    # one add per source element used: src is read at the index's positions only
    return numel(index)


@register_formula(aten.scatter_reduce, category="copy", bytes_rule=scatter_bytes)
def scatter_reduce_flop(self: Any, index: Any, reduce: str, **_: Any) -> int:
    # sum/prod/amax/amin: one op per source element used; mean also counts each source
    # element (n adds into a count tensor) and ATen then divides the whole output by the
    # counts (one divide per element of self)
    if reduce == "mean":
        return 2 * numel(index) + numel(self)
    return numel(index)


@register_formula(aten.index_add, category="copy", bytes_rule=index_add_bytes)
def index_add_flop(source: Any, alpha: Any = 1, **_: Any) -> int:
    # one add per source element, and a multiply when scaled by alpha
    return (1 if alpha == 1 else 2) * numel(source)


register_no_flops("copy", aten.index_copy, bytes_rule=index_copy_bytes)
# a fill of the indexed slices: data movement
register_no_flops("copy", aten.index_fill, bytes_rule=index_fill_bytes)


@register_formula(aten.put, category="copy", bytes_rule=put_bytes)
def put_flop(index: Any, accumulate: bool = False, **_: Any) -> int:
    # x.flatten()[i] += v: one add per index element; x.flatten()[i] = v moves data only
    return numel(index) if accumulate else 0


@register_formula(aten.index_put, category="copy", bytes_rule=index_put_bytes, get_raw=True)
def index_put_flop(self: Any, indices: Any, accumulate: bool = False, **_: Any) -> int:
    # x[idx] += v: one add per indexed element; x[idx] = v moves data only
    return indexed_numel(self, indices) if accumulate else 0


# --- softmax ----------------------------------------------------------------------------

@register_formula(aten._softmax, aten._log_softmax, aten._safe_softmax,
                  category="softmax")
def softmax_flop(self: Any, **_: Any) -> int:
    # max (n), x - max (n), exp (n), sum (n), divide (n) -- log_softmax: log per row
    # and a subtract instead of the divide: same 5n
    return 5 * numel(self)


@register_formula(aten._softmax_backward_data, aten._log_softmax_backward_data,
                  category="softmax")
def softmax_backward_flop(grad_output: Any, **_: Any) -> int:
    # softmax: s = sum(g*y) (2n), y*(g - s) (2n); log_softmax: g - exp(y)*sum(g) (4n)
    return 4 * numel(grad_output)


# --- normalization ----------------------------------------------------------------------

def _affine(weight: Any, bias: Any) -> int:
    return (weight is not None) + (bias is not None)


@register_formula(aten.native_layer_norm, aten.native_group_norm, category="normalization")
def layer_norm_flop(input: Any, weight: Any = None, bias: Any = None, **_: Any) -> int:
    # mean (n), x - mean (n), square (n), sum (n), * rstd (n) = 5n, + affine (n each)
    return (5 + _affine(weight, bias)) * numel(input)


@register_formula(aten.native_batch_norm, aten._native_batch_norm_legit,
                  aten._native_batch_norm_legit_functional, aten._batch_norm_with_update,
                  category="normalization")
def batch_norm_flop(input: Any, weight: Any = None, bias: Any = None, training: bool = True,
                    **_: Any) -> int:
    # training: statistics (4n) + normalise (1n) + affine; running-stat update is per channel.
    # eval (training=False): (x - mean) * rstd (2n) + affine. _batch_norm_with_update has
    # no training argument: it always computes statistics.
    return ((5 if training else 2) + _affine(weight, bias)) * numel(input)


@register_formula(aten._native_batch_norm_legit_no_training, aten._batch_norm_no_update,
                  category="normalization")
def batch_norm_inference_flop(input: Any, weight: Any = None, bias: Any = None,
                              **_: Any) -> int:
    # (x - mean) * rstd: 2n, + affine
    return (2 + _affine(weight, bias)) * numel(input)


@register_formula(aten.native_layer_norm_backward, aten.native_batch_norm_backward,
                  aten.batch_norm_backward, aten.native_group_norm_backward,
                  category="normalization")
def norm_backward_flop(input: Any, output_mask: Sequence[bool], **_: Any) -> int:
    # grad_input: xhat (2n), g*w (n), two row sums (3n), combine (4n) = 10n;
    # grad_weight: sum(g*xhat) (2n); grad_bias: sum(g) (n)
    return (10 * output_mask[0] + 2 * output_mask[1] + output_mask[2]) * numel(input)


@register_formula(aten._fused_rms_norm, category="normalization")
def rms_norm_flop(input: Any, weight: Any = None, **_: Any) -> int:
    # square (n), sum (n), * rstd (n), * weight (n)
    return (3 + (weight is not None)) * numel(input)


@register_formula(aten._fused_rms_norm_backward, category="normalization")
def rms_norm_backward_flop(input: Any, output_mask: Sequence[bool], **_: Any) -> int:
    # grad_input: g*w (n), xhat (n), row sum of g*w*xhat (2n), combine (3n) = 7n;
    # grad_weight: sum(g*xhat) (2n)
    return (7 * output_mask[0] + 2 * output_mask[1]) * numel(input)


# --- attention (CPU kernel missing from torch's registry; causal-aware everywhere) -----

def _causal_pairs(s_q: int, s_k: int) -> int:
    # top-left aligned causal mask: query i attends keys 0..i (clipped at s_k)
    full = min(s_q, s_k)
    return full * (full + 1) // 2 + max(0, s_q - s_k) * s_k


def _pairs(s_q: int, s_k: int, mask: str, left: int | None = None,
           right: int | None = None) -> int:
    """Query-key pairs a kernel computes: all (``mask="none"``), causal aligned top-left
    (query i sees keys 0..i) or bottom-right (query i sees keys 0..i + s_k - s_q), and
    within a sliding window of ``left`` keys before and ``right`` after the aligned
    diagonal where one is given (None or -1: unbounded)."""
    if s_q <= 0 or s_k <= 0:
        return 0
    if mask == "top_left" and left in (None, -1) and right in (None, -1):
        return _causal_pairs(s_q, s_k)
    shift = s_k - s_q if mask == "bottom_right" else 0
    diagonal = np.arange(s_q, dtype=np.int64) + shift  # the key each query is aligned with
    hi = np.full(s_q, s_k - 1, dtype=np.int64) if mask == "none" else diagonal
    if right not in (None, -1):
        hi = np.minimum(hi, diagonal + int(right))  # type: ignore[arg-type]
    lo = np.zeros(s_q, dtype=np.int64)
    if left not in (None, -1):
        lo = diagonal - int(left)  # type: ignore[arg-type]
    lo, hi = np.clip(lo, 0, s_k - 1), np.clip(hi, -1, s_k - 1)
    return int(np.maximum(hi - lo + 1, 0).sum())


def _attention(q: Any, k: Any, v: Any, is_causal: bool, backward: bool,
               pairs: int | None = None) -> int:
    """FLOPs of attention of (B, H, S, D) shapes, dense or over ``pairs`` query-key pairs
    per head (causal: top-left; the matmuls' count scales with the pairs computed)."""
    q, k, v = tuple(q), tuple(k), tuple(v)
    if len(q) > 2 and k[-3] != q[-3]:
        # grouped-query attention (enable_gqa=True: CUDA's flash kernels take the shared K/V
        # heads as they are): each query head does the work of one with its own K/V head
        k, v = (*k[:-3], q[-3], *k[-2:]), (*v[:-3], q[-3], *v[-2:])
    flops = (sdpa_backward_flop_count(q[:-1] + v[-1:], q, k, v) if backward
             else sdpa_flop_count(q, k, v))
    s_q, s_k = q[-2], k[-2]
    if pairs is None and is_causal:
        pairs = _causal_pairs(s_q, s_k)
    if pairs is not None and s_q * s_k:
        flops = flops * pairs // (s_q * s_k)
    return flops


# A complex SDPA does not exist in torch; the factor is the matmul one for consistency.
@register_formula(aten._scaled_dot_product_flash_attention_for_cpu,
                  aten._scaled_dot_product_flash_attention,
                  aten._scaled_dot_product_efficient_attention,
                  aten._scaled_dot_product_cudnn_attention, category="attention",
                  complex_flops=4)
def sdpa_flop(query: Any, key: Any, value: Any, is_causal: bool = False, **_: Any) -> int:
    return _attention(query, key, value, bool(is_causal), backward=False)


@register_formula(aten._scaled_dot_product_flash_attention_for_cpu_backward,
                  aten._scaled_dot_product_flash_attention_backward,
                  aten._scaled_dot_product_efficient_attention_backward,
                  aten._scaled_dot_product_cudnn_attention_backward, category="attention",
                  complex_flops=4)
def sdpa_backward_flop(query: Any, key: Any, value: Any, is_causal: bool = False,
                       **_: Any) -> int:
    return _attention(query, key, value, bool(is_causal), backward=True)


# The kernels SDPA calls, called directly (flash-attention style training code, varlen
# attention): they take (B, S, H, D), or packed (total, H, D) sequences with cumulative
# offsets, where SDPA takes (B, H, S, D). torch 2.13's formulas for the flash and efficient
# kernels read (B, S, H, D) as (B, H, S, D) (fixed upstream in pytorch/pytorch#184348) and
# ignore causality; these count per sequence, causal and windowed as the kernel computes.

def _values(t: Any) -> list[int] | None:
    """The integer values of a tensor, or None when it has none (meta; a fake one without
    the constant a fake trace keeps for small integer inputs)."""
    if isinstance(t, FakeTensor):
        t = getattr(t, "constant", None)
    if t is None or t.device.type == "meta":
        return None
    with _disable_current_modes():  # the fake mode below must not see a real tensor read
        return [int(x) for x in t.tolist()]


def _lengths(offsets: Any, longest: int) -> list[int]:
    """Sequence lengths from cumulative offsets; without values, as many sequences of the
    longest length (an upper bound)."""
    values = _values(offsets)
    if values is None:
        return [int(longest)] * (offsets.shape[0] - 1)
    return [b - a for a, b in itertools.pairwise(values)]


def _kernel_attention(query: Any, key: Any, value: Any, cum_q: Any, cum_k: Any, max_q: Any,
                      max_k: Any, mask: str, backward: bool, heads_first: bool = False,
                      left: int | None = None, right: int | None = None) -> int:
    """FLOPs of an attention kernel over (B, S, H, D) inputs (``heads_first``: (B, H, S, D)),
    or over packed (total, H, D) sequences when ``cum_q`` gives their offsets."""
    h, d, h_kv, d_v = query.shape[-2], query.shape[-1], key.shape[-2], value.shape[-1]
    if cum_q is not None:
        lengths_q = _lengths(cum_q, max_q)
        lengths_k = _lengths(cum_k if cum_k is not None else cum_q, max_k)
        seqs = list(zip(lengths_q, lengths_k, strict=False))
    elif heads_first:
        h, h_kv = query.shape[1], key.shape[1]
        seqs = [(query.shape[2], key.shape[2])] * query.shape[0]
    else:
        seqs = [(query.shape[1], key.shape[1])] * query.shape[0]
    total = 0
    for (s_q, s_k), count in Counter(seqs).items():
        shapes = ((1, h, s_q, d), (1, h_kv, s_k, d), (1, h_kv, s_k, d_v))
        total += count * _attention(*shapes, False, backward,
                                    pairs=_pairs(s_q, s_k, mask, left, right))
    return total


def _flash_mask(is_causal: bool) -> str:
    return "top_left" if is_causal else "none"


@register_formula(aten._flash_attention_forward, aten._flash_attention_forward_no_dropout_inplace,
                  category="attention", get_raw=True)
def flash_attention_flop(query: Any, key: Any, value: Any, cum_seq_q: Any = None,
                         cum_seq_k: Any = None, max_q: int = 0, max_k: int = 0,
                         is_causal: bool = False, window_size_left: int | None = None,
                         window_size_right: int | None = None, **_: Any) -> int:
    return _kernel_attention(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k,
                             _flash_mask(is_causal), False, left=window_size_left,
                             right=window_size_right)


@register_formula(aten._flash_attention_backward, category="attention", get_raw=True)
def flash_attention_backward_flop(query: Any, key: Any, value: Any, cum_seq_q: Any = None,
                                  cum_seq_k: Any = None, max_q: int = 0, max_k: int = 0,
                                  is_causal: bool = False,
                                  window_size_left: int | None = None,
                                  window_size_right: int | None = None, **_: Any) -> int:
    return _kernel_attention(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k,
                             _flash_mask(is_causal), True, left=window_size_left,
                             right=window_size_right)


# the efficient kernel's custom_mask_type (aten/src/ATen/native/transformers/cuda/
# mem_eff_attention: CustomMaskType): 0 none, 1 causal from the top left, 2 from the
# bottom right; window_size: the keys at most that far before the diagonal
_EFFICIENT_MASKS = {0: "none", 1: "top_left", 2: "bottom_right"}


@register_formula(aten._efficient_attention_forward, category="attention", get_raw=True)
def efficient_attention_flop(query: Any, key: Any, value: Any, cu_seqlens_q: Any = None,
                             cu_seqlens_k: Any = None, max_seqlen_q: int | None = None,
                             max_seqlen_k: int | None = None, custom_mask_type: int = 0,
                             window_size: int | None = None, **_: Any) -> int:
    return _kernel_attention(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q or 0,
                             max_seqlen_k or 0, _EFFICIENT_MASKS.get(custom_mask_type, "none"),
                             False, left=window_size)


@register_formula(aten._efficient_attention_backward, category="attention", get_raw=True)
def efficient_attention_backward_flop(query: Any, key: Any, value: Any,
                                      cu_seqlens_q: Any = None, cu_seqlens_k: Any = None,
                                      max_seqlen_q: int = 0, max_seqlen_k: int = 0,
                                      custom_mask_type: int = 0,
                                      window_size: int | None = None, **_: Any) -> int:
    return _kernel_attention(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                             max_seqlen_k, _EFFICIENT_MASKS.get(custom_mask_type, "none"),
                             True, left=window_size)


# cuDNN's kernel takes SDPA's (B, H, S, D), or packed sequences with offsets (varlen)
@register_formula(aten._cudnn_attention_forward, category="attention", get_raw=True)
def cudnn_attention_flop(query: Any, key: Any, value: Any, cum_seq_q: Any = None,
                         cum_seq_k: Any = None, max_q: int = 0, max_k: int = 0,
                         is_causal: bool = False, **_: Any) -> int:
    return _kernel_attention(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k,
                             _flash_mask(is_causal), False, heads_first=True)


@register_formula(aten._cudnn_attention_backward, category="attention", get_raw=True)
def cudnn_attention_backward_flop(query: Any, key: Any, value: Any, cum_seq_q: Any = None,
                                  cum_seq_k: Any = None, max_q: int = 0, max_k: int = 0,
                                  is_causal: bool = False, **_: Any) -> int:
    return _kernel_attention(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k,
                             _flash_mask(is_causal), True, heads_first=True)


@register_formula(aten._scaled_dot_product_fused_attention_overrideable,
                  category="attention", complex_flops=4)
def fused_attention_overrideable_flop(query: Any, key: Any, value: Any,
                                      is_causal: bool = False, **_: Any) -> int:
    return _attention(query, key, value, bool(is_causal), backward=False)


@register_formula(aten._scaled_dot_product_fused_attention_overrideable_backward,
                  category="attention", complex_flops=4)
def fused_attention_overrideable_backward_flop(query: Any, key: Any, value: Any,
                                               is_causal: bool = False, **_: Any) -> int:
    return _attention(query, key, value, bool(is_causal), backward=True)


def _varlen_mask(is_causal: bool, window_size: Any) -> tuple[str, int | None, int | None]:
    """torch.nn.attention.varlen: ``window_size=(left, right)``, ``(-1, 0)`` causal."""
    left, right = (*tuple(window_size), None, None)[:2] if window_size else (None, None)
    causal = is_causal or (left == -1 and right == 0)
    return ("top_left" if causal else "none"), left, (None if causal else right)


def _register_varlen() -> None:
    """torch.nn.attention.varlen's custom ops (``torch.ops.torch_attn``). They exist once a
    model has imported that module, which imports torch._dynamo (a second at start-up):
    so they are registered when the first of them is looked up, not imported here."""
    try:
        ops = torch.ops.torch_attn
        forward, out, backward = ops._varlen_attn, ops._varlen_attn_out, ops._varlen_attn_backward
    except (AttributeError, RuntimeError):  # a torch without varlen attention
        return

    @register_formula(forward, out, category="attention", get_raw=True)
    def varlen_attention_flop(query: Any, key: Any, value: Any, cu_seq_q: Any,
                              cu_seq_k: Any = None, max_q: int = 0, max_k: int = 0,
                              is_causal: bool = False, window_size: Any = None,
                              **_: Any) -> int:
        mask, left, right = _varlen_mask(is_causal, window_size)
        return _kernel_attention(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, mask,
                                 False, left=left, right=right)

    @register_formula(backward, category="attention", get_raw=True)
    def varlen_attention_backward_flop(query: Any, key: Any, value: Any, cu_seq_q: Any,
                                       cu_seq_k: Any = None, max_q: int = 0, max_k: int = 0,
                                       is_causal: bool = False, window_size: Any = None,
                                       **_: Any) -> int:
        mask, left, right = _varlen_mask(is_causal, window_size)
        return _kernel_attention(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, mask,
                                 True, left=left, right=right)


LATE["torch_attn"] = _register_varlen


# --- convolution backward (torch's formula ignores groups: depthwise convs come out
# ~groups times too high) -------------------------------------------------------------

@register_formula(aten.convolution_backward, category="conv", complex_flops=4)
def conv_backward_flop(grad_output: Any, input: Any, weight: Any, transposed: bool,
                       output_mask: Sequence[bool], **_: Any) -> int:
    # weight is [C_out, C_in/groups, *k] (transposed: [C_in, C_out/groups, *k]), so one
    # multiply-add per weight element per position of the strided side already counts
    # each group once. grad_input and grad_weight are each one such convolution; the
    # bias gradient is a sum over grad_out.
    positions = math.prod(input[2:]) if transposed else math.prod(grad_output[2:])
    conv = 2 * input[0] * positions * math.prod(weight)
    return conv * (output_mask[0] + output_mask[1]) + output_mask[2] * numel(grad_output)


# --- embedding, losses, pooling, upsampling, dropout -------------------------------

register_no_flops("embedding", aten.embedding, bytes_rule=gather)

# _embedding_bag's mode argument
_BAG_SUM, _BAG_MEAN, _BAG_MAX = 0, 1, 2


@register_formula(aten._embedding_bag, aten._embedding_bag_forward_only, category="embedding",
                  bytes_rule=gathered_rows)
def embedding_bag_flop(weight: Any, indices: Any, mode: int = _BAG_SUM,
                       per_sample_weights: Any = None, out_shape: Any = None,
                       **_: Any) -> int:
    # each index gathers one row of weight.shape[-1] values into its bag: sum adds each
    # (and first multiplies it by its per-sample weight), max compares each with the bag's
    # running maximum, mean adds each and divides every output element by the bag size
    gathered = numel(indices) * weight[-1]
    if mode == _BAG_MAX:
        return gathered
    flops = gathered * (2 if per_sample_weights is not None else 1)
    return flops + (numel(out_shape) if mode == _BAG_MEAN else 0)


@register_formula(aten._embedding_bag_backward, aten._embedding_bag_dense_backward,
                  category="embedding")
def embedding_bag_backward_flop(grad: Any, indices: Any, mode: int,
                                per_sample_weights: Any = None,
                                scale_grad_by_freq: bool = False, **_: Any) -> int:
    # max: each bag's gradient element is added to the row that held the maximum;
    # sum/mean: each index adds its bag's gradient row into its weight row (1 per element),
    # scaled first by 1/bag_size (mean) or its per-sample weight (1 more), and by
    # 1/frequency of the index with scale_grad_by_freq (1 more)
    if mode == _BAG_MAX:
        return numel(grad)
    scaled = mode == _BAG_MEAN or per_sample_weights is not None
    return numel(indices) * grad[-1] * (1 + scaled + bool(scale_grad_by_freq))


@register_formula(aten._embedding_bag_per_sample_weights_backward, category="embedding",
                  bytes_rule=gathered_rows)
def embedding_bag_per_sample_weights_backward_flop(grad: Any, indices: Any,
                                                   **_: Any) -> int:
    # d(loss)/d(w_i) = <grad of i's bag, weight row of i>: a dot product of
    # grad.shape[-1] multiply-adds per index
    return 2 * numel(indices) * grad[-1]


@register_formula(aten.embedding_dense_backward, category="embedding")
def embedding_backward_flop(grad_output: Any, **_: Any) -> int:
    # scatter-add of each gradient row into the weight gradient
    return numel(grad_output)


@register_formula(aten.nll_loss_forward, aten.nll_loss2d_forward, category="loss",
                  bytes_rule=nll_loss_gather)
def nll_loss_flop(target: Any, **_: Any) -> int:
    # forward: gather one log-probability per target and sum them (weights: one more
    # multiply); backward: -grad * weight / total at one position per target
    return 2 * numel(target)


# the backward zero-fills grad_input (a kernel of its own) before it writes the targets
register_formula(aten.nll_loss_backward, aten.nll_loss2d_backward, category="loss",
                 bytes_rule=nll_loss_backward_bytes, kernels=2)(nll_loss_flop)


@register_formula(aten.mse_loss, aten.l1_loss, aten.smooth_l1_loss, aten.huber_loss,
                  category="loss")
def regression_loss_flop(self: Any, **_: Any) -> int:
    # difference (n), square/abs (n), reduce (n)
    return 3 * numel(self)


@register_formula(aten.mse_loss_backward, aten.smooth_l1_loss_backward,
                  aten.huber_loss_backward, category="loss")
def regression_loss_backward_flop(self: Any, **_: Any) -> int:
    # 2 * (x - y) * g / n
    return 3 * numel(self)


@register_formula(aten.binary_cross_entropy, aten.binary_cross_entropy_with_logits,
                  category="loss")
def bce_flop(self: Any, **_: Any) -> int:
    # with logits: log-sigmoid of x and -x (about 6n) + weighting and sum (2n)
    return 8 * numel(self)


@register_formula(aten.binary_cross_entropy_backward, category="loss")
def bce_backward_flop(self: Any, **_: Any) -> int:
    # g * (x - y) / (x (1 - x))
    return 5 * numel(self)


def _window(kernel: Sequence[int]) -> int:
    k = list(kernel)
    return math.prod(k * 2 if len(k) == 1 else k)


@register_formula(aten.max_pool2d_with_indices, aten.max_pool2d, category="pooling")
def max_pool_flop(kernel_size: Sequence[int], out_shape: Any = None, **_: Any) -> int:
    # one compare per window element per output
    return _window(kernel_size) * numel(out_shape)


@register_formula(aten.avg_pool2d, category="pooling")
def avg_pool_flop(kernel_size: Sequence[int], out_shape: Any = None, **_: Any) -> int:
    # window sum + one divide per output
    return (_window(kernel_size) + 1) * numel(out_shape)


@register_formula(aten.upsample_nearest2d_backward, category="upsample")
@register_formula(aten.max_pool2d_with_indices_backward, category="pooling")
def scatter_gradient_flop(grad_output: Any, **_: Any) -> int:
    # each gradient element is added once into the input position it came from (the
    # window's max; the source pixel of a nearest-neighbour upsample)
    return numel(grad_output)


@register_formula(aten.avg_pool2d_backward, category="pooling")
def avg_pool_backward_flop(grad_output: Any, kernel_size: Sequence[int], **_: Any) -> int:
    # each gradient divided by the window and added to every element of it
    return _window(kernel_size) * numel(grad_output)


@register_formula(aten._adaptive_avg_pool2d, aten.adaptive_avg_pool2d, category="pooling")
def adaptive_avg_pool_flop(self: Any, out_shape: Any = None, **_: Any) -> int:
    # every input element summed into one output, one divide per output
    return numel(self) + numel(out_shape)


@register_formula(aten._adaptive_avg_pool2d_backward, category="pooling")
def adaptive_avg_pool_backward_flop(self: Any, **_: Any) -> int:
    # grad / window, spread to each input element
    return numel(self)


register_no_flops("upsample", aten.upsample_nearest2d, aten.upsample_nearest1d,
                  aten.upsample_nearest3d)


@register_formula(aten.upsample_bilinear2d, aten.upsample_bilinear2d_backward,
                  category="upsample")
def upsample_bilinear_flop(self: Any = None, input: Any = None, grad_output: Any = None,
                           out_shape: Any = None, **_: Any) -> int:
    # three lerps (3 FLOPs each) per output element; backward: the same per gradient element
    source = next(s for s in (self, input, grad_output) if s is not None)
    return 9 * max(numel(out_shape), numel(source))


@register_formula(aten.native_dropout, category="dropout")
def dropout_flop(input: Any, **_: Any) -> int:
    # draw vs p (1), x * mask * scale (2)
    return 3 * numel(input)


@register_formula(aten.native_dropout_backward, category="dropout")
def dropout_backward_flop(grad_output: Any, **_: Any) -> int:
    # g * mask * scale
    return 2 * numel(grad_output)


register_no_flops("dropout", aten.bernoulli, aten.rand, aten.rand_like, aten.randn,
                  aten.randn_like, aten.uniform, aten.normal, aten.randint, aten.randint_like,
                  aten.randperm, bytes_rule=write_only)


# --- optimizers --------------------------------------------------------------------------

_FOREACH: dict[int, list[Any]] = {
    1: [aten._foreach_add, aten._foreach_add_, aten._foreach_sub, aten._foreach_sub_,
        aten._foreach_mul, aten._foreach_mul_, aten._foreach_div, aten._foreach_div_,
        aten._foreach_neg, aten._foreach_neg_, aten._foreach_sqrt, aten._foreach_sqrt_,
        aten._foreach_reciprocal, aten._foreach_reciprocal_, aten._foreach_maximum,
        aten._foreach_maximum_, aten._foreach_minimum, aten._foreach_minimum_,
        aten._foreach_clamp_min, aten._foreach_clamp_min_, aten._foreach_clamp_max,
        aten._foreach_clamp_max_, aten._foreach_abs, aten._foreach_abs_, aten._foreach_exp,
        aten._foreach_exp_, aten._foreach_sign, aten._foreach_sign_, aten._foreach_pow,
        aten._foreach_pow_, aten._foreach_rsqrt, aten._foreach_rsqrt_],
    # a + v*b*c, a + v*b/c, a + w*(b - a)
    3: [aten._foreach_addcmul, aten._foreach_addcmul_, aten._foreach_addcdiv,
        aten._foreach_addcdiv_, aten._foreach_lerp, aten._foreach_lerp_],
    # |x|^2 (n) and the sum (n) per tensor
    2: [aten._foreach_norm],
}

for _cost, _ops in _FOREACH.items():
    def _make_foreach(cost: int) -> Any:
        def foreach_flop(self: Sequence[Any], **_: Any) -> int:
            return cost * _total(self)
        return foreach_flop

    register_formula(*_ops, category="optimizer")(_make_foreach(_cost))

register_no_flops("optimizer", aten._foreach_copy_, bytes_rule=copy_from_src)
register_no_flops("optimizer", aten._foreach_zero_, bytes_rule=write_only)


@register_formula(aten._fused_adam_, aten._fused_adamw_, category="optimizer",
                  bytes_rule=fused_optimizer)
def fused_adam_flop(self: Sequence[Any], **_: Any) -> int:
    # per parameter: m = lerp(m, g, 1-b1) (3), v = b2 v + (1-b2) g^2 (4),
    # denom = sqrt(v)/c2 + eps (3), p -= lr * m / c1 / denom (3), decay p *= 1 - lr*wd (1)
    return 14 * _total(self)


@register_formula(aten._fused_sgd_, category="optimizer", bytes_rule=fused_optimizer)
def fused_sgd_flop(self: Sequence[Any], **_: Any) -> int:
    # decay g + wd p (2), momentum b = mu b + g (2), p -= lr b (2)
    return 6 * _total(self)


# --- ops that move data or only metadata ---------------------------------------------

register_no_flops(
    "view", aten.view, aten._unsafe_view, aten.reshape, aten.expand, aten.permute,
    aten.transpose, aten.t, aten.slice, aten.select, aten.unsqueeze, aten.squeeze,
    aten.as_strided, aten.detach, aten.alias, aten.split, aten.split_with_sizes,
    aten.unbind, aten.chunk, aten.narrow, aten.diagonal, aten.unfold, aten.view_as_real,
    aten.view_as_complex, aten.lift_fresh, aten.numpy_T, aten.expand_as, aten.view_as,
    aten.flatten, aten.unflatten, aten.movedim, aten.swapaxes, aten._reshape_alias,
    aten.set_, aten.resize_, aten.is_same_size,
    aten.real, aten.imag, aten.conj, aten._conj, aten._neg_view, aten.resolve_conj,
    aten.resolve_neg, aten.sym_size, aten.sym_stride, aten.sym_numel, aten.dim,
    aten.is_contiguous, aten.stride, aten.size, aten.numel,
    bytes_rule=no_bytes, kernels=0)
register_no_flops(
    "allocation", aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty,
    aten.new_empty_strided, aten.empty_permuted, aten.scalar_tensor,
    bytes_rule=no_bytes, kernels=0)
register_no_flops(
    "copy", aten.zeros, aten.zeros_like, aten.ones, aten.ones_like, aten.full,
    aten.full_like, aten.new_zeros, aten.new_ones, aten.new_full, aten.fill, aten.fill_,
    aten.zero_, aten.arange, aten.linspace, aten.tril_indices, aten.triu_indices, aten.eye,
    bytes_rule=write_only)
register_no_flops(
    "copy", aten._to_copy, aten.clone, aten.contiguous, aten.cat, aten.stack,
    aten.constant_pad_nd, aten.slice_scatter, aten.select_scatter, aten.repeat,
    aten.tril, aten.triu, aten.flip, aten.roll, aten.lift_fresh_copy, aten.expand_copy,
    aten.permute_copy, aten.view_copy, aten.t_copy, aten.transpose_copy,
    aten.unsqueeze_copy, aten.alias_copy, aten._local_scalar_dense, aten.masked_select,
    aten.nonzero, aten.one_hot, aten.pad, aten.reflection_pad2d,
    aten.replication_pad2d, aten.masked_scatter, aten.diag_embed, aten.split_copy,
    aten.unbind_copy, aten.repeat_interleave, aten.im2col, aten.col2im)
register_no_flops("copy", aten.copy_, aten.copy, bytes_rule=copy_from_src)
# the gradient of a slice, select or diagonal: zeros of the input's size with the gradient
# written into its part (it reads the gradient and writes the whole)
register_no_flops("copy", aten.slice_backward, aten.select_backward, aten.diagonal_backward)
# a new tensor built from self and src, both read whole (as slice_scatter, select_scatter)
register_no_flops("copy", aten.diagonal_scatter, aten.as_strided_scatter)
# copies of a view read the view, not self: a one-column narrow_copy of a cache reads a column
register_no_flops("copy", aten.narrow_copy, bytes_rule=view_copy_bytes(
    lambda b: b["self"].narrow(b["dim"], b["start"], b["length"])))
register_no_flops("copy", aten.slice_copy, bytes_rule=view_copy_bytes(
    lambda b: aten.slice.Tensor(b["self"], b["dim"], b["start"], b["end"], b["step"])))
register_no_flops("copy", aten.select_copy, bytes_rule=view_copy_bytes(
    lambda b: b["self"].select(b["dim"], b["index"])))
register_no_flops("copy", aten.diagonal_copy, bytes_rule=view_copy_bytes(
    lambda b: b["self"].diagonal(b["offset"], b["dim1"], b["dim2"])))
register_no_flops("copy", aten.as_strided_copy, bytes_rule=view_copy_bytes(
    lambda b: b["self"].as_strided(b["size"], b["stride"], b["storage_offset"])))
register_no_flops("copy", aten.index_select, aten.gather, aten.index, aten.take,
                  bytes_rule=gather)


# --- ops met in inductor's graphs (they run eagerly too) ------------------------------

@register_formula(aten._unsafe_masked_index_put_accumulate, category="embedding")
def masked_index_put_accumulate_flop(values: Any, **_: Any) -> int:
    # embedding backward as inductor decomposes it: one add per gradient element
    # scattered into the weight gradient (embedding_dense_backward's count)
    return numel(values)

register_no_flops("copy", torch.ops.prims.convert_element_type)
# integer and boolean work (masks), no floating-point operation
register_no_flops("pointwise", aten.bitwise_and, aten.bitwise_or, aten.bitwise_xor,
                  aten.bitwise_not)
register_no_flops("allocation", torch.ops.prims.iota, bytes_rule=write_only)

# --- the prims inductor's decompositions make (compiled traces) --------------------------

@functools.cache
def register_inductor_prims() -> None:
    """Formulas for the prims that inductor's decompositions and passes put in a compiled
    graph; they exist once ``torch._inductor`` is imported, so they register then."""
    import torch._inductor.inductor_prims  # defines prims.prepare_softmax_online...

    prims = torch.ops.prims

    @register_formula(prims.fma, category="pointwise")
    def fma_flop(out_shape: Any = None, **_: Any) -> int:
        # a * b + c: one multiply-add per element
        return 2 * numel(out_shape)

    @register_formula(prims.prepare_softmax_online, category="softmax")
    def prepare_softmax_online_flop(a: Any, **_: Any) -> int:
        # the row max and the sum of exp(x - max) in one pass: max (n), x - max (n),
        # exp (n), sum (n); softmax's own divide is the separate div that follows
        return 4 * numel(a)

    register_no_flops("dropout", prims.inductor_random, prims.inductor_randint,
                      prims.inductor_seeds, bytes_rule=write_only)
    register_no_flops("dropout", prims.inductor_lookup_seed, bytes_rule=no_bytes)
