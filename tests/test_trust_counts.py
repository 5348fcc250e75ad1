"""Op formulas and op records: regressions for issue 13 (items 8, 9) and issue 12.

Every expected number is derived by hand from shapes and itemsizes in the test itself.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import roofline
from roofline.tracing import MATRIX_CATEGORIES, Category, OpRecord, Trace, register_formula

aten = torch.ops.aten
LONG = 8  # bytes of an int64 index
HALF = 2  # bytes of a float16 element


def _capture(fn: Callable[..., Any], *args: Any) -> Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uncounted-op warnings are asserted explicitly
        with roofline.capture() as t:
            fn(*args)
    return t


def _only(t: Trace, prefix: str) -> OpRecord:
    ops = [op for op in t.ops if op.name.startswith(prefix)]
    assert len(ops) == 1, [op.name for op in t.ops]
    return ops[0]


# --- item A: partial writes and reads move what they touch ------------------------------

B, H, S, D = 2, 4, 4096, 64  # a KV cache of 4096 positions


def test_one_token_index_copy_into_a_kv_cache_moves_one_token() -> None:
    cache = torch.zeros(B, H, S, D, dtype=torch.float16)
    token = torch.randn(B, H, 1, D, dtype=torch.float16)
    pos = torch.tensor([17])
    op = _only(_capture(lambda: cache.index_copy_(2, pos, token)), "aten.index_copy_")
    one_token = B * H * 1 * D * HALF  # 1 KiB; the cache is 4 MiB
    assert op.bytes_read == 1 * LONG + one_token  # the index and the new token
    assert op.bytes_written == one_token
    assert op.flops == 0 and op.counted


def test_one_token_write_into_a_7b_sized_cache_under_fake_tensors() -> None:
    # (1, 32, 4096, 128) fp16: 32 MiB, read and written whole before (67 MB)
    def step(cache: torch.Tensor, token: torch.Tensor) -> None:
        cache.index_copy_(2, torch.tensor([5]), token)

    t = roofline.trace(step, torch.zeros(1, 32, 4096, 128, dtype=torch.float16),
                       torch.randn(1, 32, 1, 128, dtype=torch.float16), fake=True)
    op = _only(t, "aten.index_copy_")
    assert op.bytes_written == 32 * 128 * HALF
    assert op.bytes_read == LONG + 32 * 128 * HALF


def test_index_put_writes_the_indexed_region() -> None:
    cache = torch.zeros(B, H, S, D, dtype=torch.float16)
    token = torch.randn(B, H, 1, D, dtype=torch.float16)
    pos = torch.tensor([3])

    def write() -> None:
        cache[:, :, pos] = token  # index_put_ with indices (None, None, pos)

    op = _only(_capture(write), "aten.index_put_")
    # region: the index's one position times the dims no index covers (B, H, D)
    region = B * H * D
    assert op.bytes_written == region * HALF
    assert op.bytes_read == LONG + region * HALF
    assert op.flops == 0


def test_index_put_accumulate_reads_the_region_and_adds_once_per_element() -> None:
    x = torch.zeros(10, 6)
    rows = torch.tensor([1, 4, 4])  # three rows of 6 floats, one repeated
    values = torch.ones(3, 6)
    op = _only(_capture(lambda: x.index_put_((rows,), values, accumulate=True)),
               "aten.index_put_")
    assert op.flops == 3 * 6
    assert op.bytes_read == 3 * LONG + 3 * 6 * 4 + 3 * 6 * 4  # index, values, region
    assert op.bytes_written == 3 * 6 * 4


def test_index_put_with_a_boolean_mask_counts_the_mask_as_an_upper_bound() -> None:
    x = torch.zeros(8, 5)
    mask = torch.zeros(8, dtype=torch.bool)
    mask[2] = True
    op = _only(_capture(lambda: x.index_put_((mask,), torch.ones(5), accumulate=True)),
               "aten.index_put_")
    # which rows are true is data: all 8 rows of 5 are counted (1 is touched)
    assert op.flops == 8 * 5
    assert op.bytes_written == 8 * 5 * 4


def test_scatter_reads_only_the_source_elements_the_index_uses() -> None:
    x = torch.zeros(16, 8)
    index = torch.zeros(2, 8, dtype=torch.long)
    src = torch.randn(4, 8)  # larger than the index: only its first 2 rows are used
    op = _only(_capture(lambda: x.scatter_(0, index, src)), "aten.scatter_")
    assert op.bytes_read == 2 * 8 * LONG + 2 * 8 * 4
    assert op.bytes_written == 2 * 8 * 4
    assert op.flops == 0


def test_scatter_add_adds_once_per_source_element_and_reads_the_destination() -> None:
    x = torch.zeros(16, 8)
    index = torch.randint(0, 16, (3, 8))
    src = torch.randn(5, 8)
    op = _only(_capture(lambda: x.scatter_add_(0, index, src)), "aten.scatter_add_")
    used = 3 * 8
    assert op.flops == used
    assert op.bytes_read == used * LONG + used * 4 + used * 4  # index, src, destination
    assert op.bytes_written == used * 4


def test_scatter_reduce_counts_and_include_self_decides_the_destination_read() -> None:
    x = torch.zeros(16, 8)
    index = torch.randint(0, 16, (3, 8))
    src = torch.randn(3, 8)
    used = 3 * 8
    t = _capture(lambda: x.scatter_reduce_(0, index, src, "amax"))
    op = _only(t, "aten.scatter_reduce_")
    assert op.flops == used
    assert op.bytes_read == used * LONG + used * 4 + used * 4
    t = _capture(lambda: x.scatter_reduce_(0, index, src, "sum", include_self=False))
    assert _only(t, "aten.scatter_reduce_").bytes_read == used * LONG + used * 4
    assert not t.uncounted


def test_index_add_accumulates_source_slices() -> None:
    x = torch.zeros(100, 16)
    index = torch.tensor([3, 9])
    source = torch.randn(2, 16)
    op = _only(_capture(lambda: x.index_add_(0, index, source)), "aten.index_add_")
    assert op.flops == 2 * 16
    assert op.bytes_read == 2 * LONG + 2 * 16 * 4 + 2 * 16 * 4
    assert op.bytes_written == 2 * 16 * 4
    scaled = _only(_capture(lambda: x.index_add_(0, index, source, alpha=0.5)),
                   "aten.index_add_")
    assert scaled.flops == 2 * (2 * 16)  # a multiply and an add per element


def test_out_of_place_index_copy_builds_a_whole_new_tensor() -> None:
    x = torch.zeros(100, 16)
    op = _only(_capture(lambda: x.index_copy(0, torch.tensor([1]), torch.ones(1, 16))),
               "aten.index_copy")
    assert op.bytes_read == 100 * 16 * 4 + LONG + 16 * 4
    assert op.bytes_written == 100 * 16 * 4


@pytest.mark.parametrize("gather", [
    lambda table, idx: torch.index_select(table, 0, idx),
    lambda table, idx: table[idx],
    lambda table, idx: F.embedding(idx, table),
    lambda table, idx: torch.gather(table, 0, idx[:, None].expand(len(idx), 16).contiguous()),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_gathers_read_the_index_and_the_rows_they_gather(gather: Callable[..., Any],
                                                         dtype: torch.dtype) -> None:
    # an integer table is not mistaken for an index (it used to be read whole)
    table = torch.arange(1000 * 16).reshape(1000, 16).to(dtype)
    idx = torch.tensor([5, 7, 900])
    t = _capture(gather, table, idx)
    op = next(op for op in t.ops if op.category in ("copy", "embedding")
              and op.name.split(".")[1] in ("index_select", "index", "embedding", "gather"))
    row_bytes = 16 * table.element_size()
    index_bytes = 3 * LONG if "gather" not in op.name else 3 * 16 * LONG
    assert op.bytes_written == 3 * row_bytes
    assert op.bytes_read == index_bytes + 3 * row_bytes


# --- item A: complex dtypes count real arithmetic -------------------------------------

def test_complex_matmul_is_8mkn_real_flops() -> None:
    m, k, n = 8, 12, 5
    a = torch.randn(m, k, dtype=torch.complex64)
    b = torch.randn(k, n, dtype=torch.complex64)
    assert _only(_capture(torch.mm, a, b), "aten.mm").flops == 8 * m * k * n
    real = torch.randn(m, k)
    assert _only(_capture(torch.mm, real, real.t()), "aten.mm").flops == 2 * m * k * m
    batched = torch.randn(3, m, k, dtype=torch.complex128)
    assert _only(_capture(torch.bmm, batched, batched.transpose(1, 2)), "aten.bmm").flops \
        == 3 * 8 * m * k * m


def test_complex_elementwise_multiply_is_6_and_add_is_2() -> None:
    z = torch.randn(4, 10, dtype=torch.complex64)
    t = _capture(lambda: (z * z, z + z, z.sum()))
    assert _only(t, "aten.mul").flops == 6 * 40  # (a+bi)(c+di): 4 products, 2 adds
    assert _only(t, "aten.add").flops == 2 * 40
    assert _only(t, "aten.sum").flops == 2 * 40


def test_complex_op_without_a_complex_rule_is_reported_not_guessed() -> None:
    z = torch.randn(4, 10, dtype=torch.complex64)
    with pytest.warns(roofline.RooflineWarning, match="without a FLOP formula"), \
            roofline.capture() as t:
        z.exp()
    op = _only(t, "aten.exp")
    assert not op.counted and op.flops == 0
    assert "aten.exp.default" in t.uncounted
    # the same op on a real tensor is counted
    assert _only(_capture(lambda: z.real.exp()), "aten.exp").counted


# --- item A: sort, top-k, no silent zeros -----------------------------------------------

def test_sort_counts_n_log2_n_comparisons_per_row() -> None:
    t = _capture(lambda: torch.sort(torch.randn(4, 1024)))
    assert _only(t, "aten.sort").flops == 4 * 1024 * 10  # log2(1024) = 10
    # along dim 0: 3 rows of 8 values, log2(8) = 3
    t = _capture(lambda: torch.sort(torch.randn(8, 3), dim=0, stable=True))
    assert _only(t, "aten.sort").flops == 3 * 8 * 3
    assert not t.uncounted


def test_topk_counts_n_log2_k_comparisons_per_row() -> None:
    x = torch.randn(4, 1024)
    assert _only(_capture(torch.topk, x, 8), "aten.topk").flops == 4 * 1024 * 3
    # k = 1 still compares every value once
    assert _only(_capture(torch.topk, x, 1), "aten.topk").flops == 4 * 1024
    t = _capture(lambda: torch.topk(x, 4, dim=0))  # 1024 rows of 4 values, log2(4) = 2
    assert _only(t, "aten.topk").flops == 1024 * 4 * 2 and not t.uncounted


# --- issue 12: arguments by schema name; one SDPA-backward formula -------------------------

def _efficient(q: torch.Tensor, causal: bool) -> None:
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(
        q, q, q, None, True, 0.0, causal)
    aten._scaled_dot_product_efficient_attention_backward(
        out, q, q, q, None, out, lse, seed, offset, 0.0, [True, True, True, False], causal)


def _flash(q: torch.Tensor, causal: bool) -> None:
    out, lse, cq, ck, mq, mk, seed, offset, _ = aten._scaled_dot_product_flash_attention(
        q, q, q, 0.0, causal)
    aten._scaled_dot_product_flash_attention_backward(
        out, q, q, q, out, lse, cq, ck, mq, mk, 0.0, causal, seed, offset)


def _cudnn(q: torch.Tensor, causal: bool) -> None:
    out, lse, cq, ck, mq, mk, seed, offset, _ = aten._scaled_dot_product_cudnn_attention(
        q, q, q, None, True, 0.0, causal, False)
    aten._scaled_dot_product_cudnn_attention_backward(
        out, q, q, q, out, lse, seed, offset, None, cq, ck, mq, mk, 0.0, causal)


def _cpu(q: torch.Tensor, causal: bool) -> None:
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.0, causal)
    aten._scaled_dot_product_flash_attention_for_cpu_backward(out, q, q, q, out, lse, 0.0,
                                                              causal)


@pytest.mark.parametrize("kernel", [_efficient, _flash, _cudnn, _cpu])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward_reads_is_causal_by_name(kernel: Callable[..., None],
                                              causal: bool) -> None:
    # is_causal sits at argument 7, 11 or 14 depending on the kernel
    b, h, s, d = 2, 4, 64, 16
    t = roofline.trace(kernel, torch.randn(b, h, s, d), causal, fake=True)
    pairs = s * (s + 1) // 2 if causal else s * s
    forward = 2 * (2 * b * h * pairs * d)  # QK^T and PV
    fwd, bwd = [op for op in t.ops if op.category == "attention"]
    assert fwd.flops == forward and not fwd.backward_kernel
    assert bwd.flops == forward * 5 // 2 and bwd.backward_kernel  # 2.5x: torch's convention


# --- issue 12: categories --------------------------------------------------------------------

def test_category_is_a_string_enum_with_the_matrix_set_next_to_it() -> None:
    assert {"matmul", "conv", "attention"} == MATRIX_CATEGORIES
    assert all(isinstance(c, Category) for c in MATRIX_CATEGORIES)
    assert Category.MATMUL == "matmul" and f"{Category.CONV}" == "conv"
    assert json.dumps([Category.POINTWISE]) == '["pointwise"]'
    t = _capture(torch.mm, torch.randn(2, 3), torch.randn(3, 4))
    assert t.ops[0].category is Category.MATMUL and t.by_category()["matmul"].flops == 48


def test_register_formula_refuses_an_unknown_category() -> None:
    with pytest.raises(ValueError, match=r"unknown op category 'matmull'.*matmul"):
        register_formula(aten.cummax, category="matmull")
    assert roofline.tracing.ops.lookup(aten.cummax.default) is None  # nothing registered


# --- issue 12: gradient kernels are recorded as such -------------------------------------

def test_backward_kernel_is_set_from_the_op_not_the_phase() -> None:
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    t = roofline.trace(lambda: F.conv2d(F.relu(x), w).sum().backward())
    conv_bwd = _only(t, "aten.convolution_backward")
    assert conv_bwd.backward_kernel and conv_bwd.phase == "backward"
    assert _only(t, "aten.threshold_backward").backward_kernel
    assert not _only(t, "aten.convolution.").backward_kernel
    # a gradient kernel called outside autograd runs in the forward phase: still one
    direct = _capture(lambda: aten.convolution_backward(
        torch.randn(2, 4, 6, 6), torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), [4],
        [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]))
    called = _only(direct, "aten.convolution_backward")
    assert called.phase == "forward" and called.backward_kernel
    # a matmul run by autograd is a backward-phase op, not a gradient kernel by name
    wm = torch.randn(5, 3, requires_grad=True)
    m = roofline.trace(lambda: (torch.randn(4, 5) @ wm).sum().backward())
    assert any(op.category == "matmul" and op.phase == "backward" for op in m.ops)
    assert not any(op.backward_kernel for op in m.ops if op.category == "matmul")


def test_backward_kernel_round_trips_and_old_json_derives_it() -> None:
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    t = roofline.trace(lambda: F.conv2d(x, torch.randn(4, 3, 3, 3)).sum().backward())
    back = Trace.from_json(t.to_json())
    assert back.ops == t.ops and any(op.backward_kernel for op in back.ops)
    assert list(t.to_dataframe()["backward_kernel"]) == [op.backward_kernel for op in t.ops]
    # a trace written before the field existed
    data = json.loads(t.to_json())
    i = data["fields"].index("backward_kernel")
    data["fields"].pop(i)
    for row in data["ops"]:
        row.pop(i)
    old = Trace.from_json(json.dumps(data))
    assert [op.backward_kernel for op in old.ops] == [op.backward_kernel for op in t.ops]


# --- item B: from_json validates ---------------------------------------------------------

def _doc() -> dict:
    t = _capture(torch.mm, torch.randn(2, 3), torch.randn(3, 4))
    t.ops *= 3
    return json.loads(t.to_json())


def _set(doc: dict, row: int, field: str, value: object) -> str:
    doc["ops"][row][doc["fields"].index(field)] = value
    return json.dumps(doc)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("flops", float("nan"), "non-negative integer, got nan"),
    ("flops", -48, "non-negative integer, got -48"),
    ("bytes_read", float("inf"), "non-negative integer, got inf"),
    ("bytes_written", -1, "non-negative integer"),
    ("bytes_read", "80", "non-negative integer, got '80'"),
    ("flops", 4.5, "non-negative integer, got 4.5"),
    ("kernels", -1, "non-negative integer"),
    ("kernels", True, "non-negative integer, got True"),
    ("counted", 1, "true or false, got 1"),
    ("category", "matmull", "unknown op category 'matmull'"),
    ("phase", "sideways", "forward, backward, optimizer"),
    ("name", None, "expected a string"),
    ("input_shapes", [[2, -3]], "non-negative integer, got -3"),
    ("output_ids", "7", "list of integers"),
])
def test_from_json_rejects_bad_values_naming_row_and_field(field: str, value: object,
                                                           message: str) -> None:
    with pytest.raises(ValueError, match=rf"op row 2, field '{field}': .*{message}"):
        Trace.from_json(_set(_doc(), 2, field, value))


def test_from_json_rejects_malformed_rows_and_fields() -> None:
    doc = _doc()
    n = len(doc["fields"])  # one value per OpRecord field
    doc["ops"][1] = doc["ops"][1][:-2]
    with pytest.raises(ValueError, match=rf"op row 1: expected a list of {n} values .* "
                                         rf"got {n - 2}"):
        Trace.from_json(json.dumps(doc))
    doc = _doc()
    i = doc["fields"].index("flops")
    doc["fields"].pop(i)
    for row in doc["ops"]:
        row.pop(i)
    with pytest.raises(ValueError, match=r"\['flops'\] are missing"):
        Trace.from_json(json.dumps(doc))
    doc = _doc()
    doc["fields"][0] = "nmae"
    with pytest.raises(ValueError, match=r"unknown op field.*'nmae'"):
        Trace.from_json(json.dumps(doc))
    with pytest.raises(ValueError, match="'ops' must be a list"):
        Trace.from_json(json.dumps({"version": 1, "fields": [], "ops": 3}))
    with pytest.raises(ValueError, match="must be an object"):
        Trace.from_json("[1, 2]")


def test_from_json_accepts_what_to_json_writes_and_integral_floats() -> None:
    doc = _doc()
    back = Trace.from_json(_set(doc, 0, "flops", 48.0))
    assert back.ops[0].flops == 48 and isinstance(back.ops[0].flops, int)
    assert back.ops[0].category is Category.MATMUL
    assert back.ops[0].input_shapes == ((2, 3), (3, 4))
    assert math.isclose(back.total_flops, 3 * 2 * 2 * 3 * 4)


# --- review of item 8: partial fills, copies of views, bags -------------------------------

def test_index_fill_writes_only_the_filled_slices() -> None:
    # (1, 4096, 4096) fp16, 32 MiB: one column (index 5 along dim 1) is 1 x 4096 elements
    def fill(cache: torch.Tensor) -> None:
        cache.index_fill_(1, torch.tensor([5]), 0.0)

    t = roofline.trace(fill, torch.zeros(1, 4096, 4096, dtype=torch.float16), fake=True)
    op = _only(t, "aten.index_fill_")
    assert op.bytes_read == LONG  # the index; a fill reads nothing else
    assert op.bytes_written == 4096 * HALF
    assert op.flops == 0 and op.counted and not t.uncounted
    # two indices along dim 0 of a (10, 3, 4) tensor: 2 slices of 12; a tensor value is read
    x = torch.zeros(10, 3, 4)
    op = _only(_capture(lambda: x.index_fill_(0, torch.tensor([1, 8]), torch.tensor(2.0))),
               "aten.index_fill_")
    assert (op.bytes_read, op.bytes_written) == (2 * LONG + 4, 2 * 12 * 4)
    # out of place: a new tensor, self read and the output written whole
    op = _only(_capture(lambda: x.index_fill(0, torch.tensor([1]), 0.0)), "aten.index_fill")
    assert (op.bytes_read, op.bytes_written) == (120 * 4 + LONG, 120 * 4)


def test_copies_of_a_view_read_the_view_not_the_tensor() -> None:
    def narrow(cache: torch.Tensor) -> torch.Tensor:
        return cache.narrow_copy(1, 0, 1)

    t = roofline.trace(narrow, torch.zeros(1, 4096, 4096, dtype=torch.float16), fake=True)
    op = _only(t, "aten.narrow_copy")
    assert (op.bytes_read, op.bytes_written) == (4096 * HALF, 4096 * HALF)
    assert op.flops == 0 and op.counted
    x = torch.randn(6, 20)
    t = _capture(lambda: (aten.slice_copy(x, 1, 0, 10, 2),  # (6, 5)
                          aten.select_copy(x, 0, 2),  # (20,)
                          aten.diagonal_copy(x),  # (6,)
                          aten.as_strided_copy(x, (2, 4), (20, 1))))  # (2, 4)
    moved = {op.name.split(".")[1]: (op.bytes_read, op.bytes_written) for op in t.ops}
    assert moved == {"slice_copy": (30 * 4, 30 * 4), "select_copy": (20 * 4, 20 * 4),
                     "diagonal_copy": (6 * 4, 6 * 4), "as_strided_copy": (8 * 4, 8 * 4)}
    assert not t.uncounted
    # an expanded (stride-0) tensor: 8 rows of one stored row of 64 floats read once
    wide = torch.randn(1, 64).expand(4096, 64)
    op = _only(_capture(lambda: wide.narrow_copy(0, 0, 8)), "aten.narrow_copy")
    assert (op.bytes_read, op.bytes_written) == (64 * 4, 8 * 64 * 4)


def test_put_writes_one_element_per_index() -> None:
    x = torch.zeros(10, 6)
    index = torch.tensor([1, 5, 59])
    source = torch.ones(3)
    op = _only(_capture(lambda: x.put_(index, source, accumulate=True)), "aten.put_")
    assert op.flops == 3
    assert op.bytes_read == 3 * LONG + 3 * 4 + 3 * 4  # index, source, destination
    assert op.bytes_written == 3 * 4
    op = _only(_capture(lambda: x.put_(index, source)), "aten.put_")
    assert (op.flops, op.bytes_read, op.bytes_written) == (0, 3 * LONG + 3 * 4, 3 * 4)


def test_out_of_place_scatters_into_views_move_the_whole_tensor() -> None:
    x = torch.zeros(6, 6)
    t = _capture(lambda: torch.diagonal_scatter(x, torch.ones(6)))
    op = _only(t, "aten.diagonal_scatter")
    assert (op.bytes_read, op.bytes_written) == (36 * 4 + 6 * 4, 36 * 4)
    assert op.flops == 0 and not t.uncounted


BAG_INDEX = torch.tensor([3, 7, 9, 3])  # 4 gathered rows (one repeated)
BAG_OFFSETS = torch.tensor([0, 2])  # 2 bags of 2
BAG_DIM = 64


@pytest.mark.parametrize(("mode", "weighted", "flops"), [
    ("sum", False, 4 * BAG_DIM),  # one add per gathered element
    ("sum", True, 2 * 4 * BAG_DIM),  # a multiply by the sample's weight and an add
    ("mean", False, 4 * BAG_DIM + 2 * BAG_DIM),  # adds, and one divide per output element
    ("max", False, 4 * BAG_DIM),  # one compare per gathered element
])
def test_embedding_bag_reads_the_rows_it_gathers(mode: str, weighted: bool,
                                                 flops: int) -> None:
    weights = torch.rand(4) if weighted else None

    def bag(table: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(BAG_INDEX, table, BAG_OFFSETS, mode=mode,
                               per_sample_weights=weights)

    # the table (50000 x 1024 fp32 would be 205 MB) is not read: a larger one costs the same
    reads = set()
    for rows in (1000, 50000):
        with torch.no_grad():  # _embedding_bag_forward_only
            t = roofline.trace(bag, torch.randn(rows, BAG_DIM), fake=True)
        op = _only(t, "aten._embedding_bag")
        assert op.flops == flops and op.counted and not t.uncounted
        reads.add(op.bytes_read)
        out = 2 * BAG_DIM * 4
        # the output and the bookkeeping ATen returns (offset2bag, bag sizes, argmax
        # indices: at most one int64 per index, per bag and per output element each)
        assert out <= op.bytes_written <= out + (4 + 2 + 2 * BAG_DIM) * LONG
    small = 4 * LONG + 2 * LONG + (4 * 4 if weighted else 0)  # index, offsets, weights
    assert reads == {small + 4 * BAG_DIM * 4}


@pytest.mark.parametrize(("mode", "grad_flops"), [
    ("sum", 4 * BAG_DIM),  # each gathered element's bag gradient added to its row
    ("mean", 2 * 4 * BAG_DIM),  # divided by the bag size, then added
    ("max", 2 * BAG_DIM),  # each output gradient added to the argmax row
])
def test_embedding_bag_backward_in_a_training_step(mode: str, grad_flops: int) -> None:
    model = torch.nn.EmbeddingBag(50000, BAG_DIM, mode=mode)
    t = roofline.trace(lambda: model(BAG_INDEX, BAG_OFFSETS).sum(), train=True, fake=True)
    op = _only(t, "aten._embedding_bag_backward")
    assert op.flops == grad_flops and op.counted and op.phase == "backward"
    assert not t.uncounted
    # the dense weight gradient is written whole: 50000 rows
    assert op.bytes_written == 50000 * BAG_DIM * 4


def test_embedding_bag_per_sample_weights_gradient_reads_only_gathered_rows() -> None:
    model = torch.nn.EmbeddingBag(50000, BAG_DIM, mode="sum")
    weights = torch.rand(4, requires_grad=True)
    t = roofline.trace(lambda: model(BAG_INDEX, BAG_OFFSETS, per_sample_weights=weights).sum(),
                       train=True, fake=True)
    op = _only(t, "aten._embedding_bag_per_sample_weights_backward")
    assert op.flops == 4 * 2 * BAG_DIM  # a dot product of 64 multiply-adds per index
    assert op.bytes_written == 4 * 4  # one float per sample weight
    # the bag gradient (sum's gradient: one float broadcast to (2, 64), stride 0), the 4
    # gathered rows, index and offsets; offset2bag: at most an int64 per index (the
    # 50000-row table would be 12.8 MB)
    least = 4 + 4 * BAG_DIM * 4 + 4 * LONG + 2 * LONG
    assert least <= op.bytes_read <= least + 4 * LONG
    # weighted sum: its weight gradient scales each row by the weight (2 per element)
    assert _only(t, "aten._embedding_bag_backward").flops == 2 * 4 * BAG_DIM


# --- review of item 8: complex times real ---------------------------------------------

Z = torch.randn(8, dtype=torch.complex64)
X = torch.randn(8)


@pytest.mark.parametrize(("expr", "per_element"), [
    pytest.param(lambda: Z * X, 2, id="Z * X"),  # (a+bi)x = ax + bxi: 2 products
    pytest.param(lambda: X * Z, 2, id="X * Z"),
    pytest.param(lambda: Z * 2.0, 2, id="Z * 2.0"),  # a real Python scalar is a real factor
    pytest.param(lambda: Z * Z, 6, id="Z * Z"),  # (ac-bd) + (ad+bc)i: 4 products, 2 adds
    pytest.param(lambda: Z * 2j, 6, id="Z * 2j"),
    pytest.param(lambda: Z + X, 1, id="Z + X"),  # (a+x) + bi: only the real part changes
    pytest.param(lambda: Z + Z, 2, id="Z + Z"),
    pytest.param(lambda: Z - X, 1, id="Z - X"),
    pytest.param(lambda: X - Z, 2, id="X - Z"),  # (x-a) - bi: a subtract and a negate
    pytest.param(lambda: 1 - Z, 2, id="1 - Z"),  # rsub, real minus complex
    pytest.param(lambda: 1j - X, 1, id="1j - X"),  # rsub, complex minus real
    pytest.param(lambda: Z.clone().add_(X), 1, id="Z.clone().add_(X)"),
    # real arithmetic written to a complex out=
    pytest.param(lambda: torch.mul(X, X, out=torch.empty(8, dtype=torch.complex64)), 1,
                 id="mul(X, X, out=complex)"),
])
def test_complex_factor_follows_the_operands_dtypes(expr: Callable[[], Any],
                                                     per_element: int) -> None:
    t = _capture(expr)
    op = next(op for op in t.ops if op.category == "pointwise")
    assert op.flops == per_element * 8 and op.counted


def test_complex_times_real_matmul_is_4mkn() -> None:
    # ATen's mm refuses mixed dtypes, so the registry's rule is checked directly:
    # z*x + acc is 2 products + 2 adds per multiply-add
    from roofline.tracing.ops import ComplexOperands, lookup

    m, k, n = 3, 5, 7
    z, x = torch.randn(m, k, dtype=torch.complex64), torch.randn(k, n)
    info = lookup(aten.mm.default)
    assert info is not None

    def flops(a: torch.Tensor, b: torch.Tensor) -> int | None:
        return info.count_flops((a, b), {}, {"self": a, "mat2": b}, None, [a, b])

    assert flops(z, x) == 4 * m * k * n
    assert flops(x.t(), z.t()) == 4 * n * k * m  # real @ complex
    assert flops(z, x.to(torch.complex64)) == 8 * m * k * n
    assert flops(z.real, x) == 2 * m * k * n
    with pytest.raises(ValueError, match="positive integers"):
        ComplexOperands(6, 0, 2)
