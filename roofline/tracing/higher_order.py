"""Higher-order operators (``flex_attention``...): what one call computes and moves.

A higher-order operator (``torch._higher_order_ops``) reaches a dispatch mode whole, with
its subgraphs (a score or mask function) as arguments, not as ATen ops. The capture runs it
below its own mode and records it as one op; a rule here says its family and FLOPs. An
operator with no rule is recorded uncounted (its bytes counted), and the trace's warning
names it.

``flex_attention`` counts as scaled-dot-product attention over the blocks its block mask
computes: ``density = computed blocks / all blocks`` as ``BlockMask.sparsity()`` defines it
(``torch/nn/attention/flex_attention.py``; partial blocks count whole, since the kernel
computes them), times torch's dense count (``sdpa_flop_count``, grouped-query aware; the
backward ``sdpa_backward_flop_count``, 2.5x). A block mask whose block counts have no values
(made inside a fake step) is counted dense, an upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

from roofline.tracing.records import Category


@dataclass(frozen=True)
class Call:
    """What one call of a higher-order operator did: family, FLOPs, tensors read and
    written (``flops`` None: no rule, uncounted)."""

    category: Category
    flops: int | None
    reads: list[torch.Tensor]
    writes: list[torch.Tensor]


def _tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _density(block_mask: tuple[Any, ...]) -> float | None:
    """Share of the (query block, key block) pairs a block mask computes (None: unknown).

    ``BlockMask.as_tuple()``: [0] Q_LEN, [1] KV_LEN, [2] kv_num_blocks, [4]
    full_kv_num_blocks, [-3] Q_BLOCK_SIZE, [-2] KV_BLOCK_SIZE.
    """
    q_len, kv_len, kv_num, full_kv_num = block_mask[0], block_mask[1], block_mask[2], \
        block_mask[4]
    q_block, kv_block = block_mask[-3], block_mask[-2]
    counts = [t for t in (kv_num, full_kv_num) if isinstance(t, torch.Tensor)]
    if not counts or any(isinstance(t, FakeTensor) or t.device.type == "meta"
                         for t in counts):
        return None
    with _disable_current_modes():  # a real read: no fake mode may see it
        computed = sum(int(t.sum()) for t in counts) * q_block * kv_block
    total = math.prod(kv_num.shape[:-1]) * q_len * kv_len
    return min(1.0, computed / total) if total else None


def _flex(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Call:
    query, key, value, _score_mod, block_mask = args[:5]
    density = _density(block_mask)
    dense = sdpa_flop_count(query.shape, key.shape, value.shape)
    flops = dense if density is None else round(dense * density)
    reads = _tensors((query, key, value, block_mask[2:6], args[7:], kwargs))
    return Call(Category.ATTENTION, flops, reads, _tensors(out))


def _flex_backward(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Call:
    query, key, value, attn_out, logsumexp, grad_out = args[:6]
    block_mask = args[9]
    density = _density(block_mask)
    grad_shape = grad_out.shape if grad_out is not None else attn_out.shape
    dense = sdpa_backward_flop_count(grad_shape, query.shape, key.shape, value.shape)
    flops = dense if density is None else round(dense * density)
    reads = _tensors((query, key, value, attn_out, logsumexp, grad_out, block_mask[2:14]))
    return Call(Category.ATTENTION, flops, reads, _tensors(out))


def _rules() -> dict[Any, Callable[[tuple[Any, ...], dict[str, Any], Any], Call]]:
    try:
        from torch._higher_order_ops.flex_attention import (
            flex_attention,
            flex_attention_backward,
        )
    except ImportError:  # a torch without flex attention
        return {}
    return {flex_attention: _flex, flex_attention_backward: _flex_backward}


RULES = _rules()


def describe(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Call:
    """The :class:`Call` of one higher-order operator call: by its rule, else uncounted."""
    rule = RULES.get(func)
    if rule is not None:
        return rule(args, kwargs, out)
    return Call(Category.UNCOUNTED, None, _tensors((args, kwargs)), _tensors(out))
