"""Op records and traces (tracing/records.py, tracing/info.py): categories, the JSON form
and what ``Trace.from_json`` accepts (issue 12; issue 13, item 9).

Expected values are the trace's own fields before the round trip, or hand-built documents.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import captured, small_mlp, sum_loss

import roofline
from roofline.tracing import MATRIX_CATEGORIES, Category, Trace
from roofline.zoo import get_model

# --- JSON and dataframes ------------------------------------------------------------------

def test_json_round_trip_and_dataframe() -> None:
    zm = get_model("mlp", batch_size=2)
    t = roofline.trace(zm.model, *zm.train_inputs, train=True)
    back = Trace.from_json(t.to_json())
    assert back.ops == t.ops and back.meta == t.meta and back.info == t.info
    df = t.to_dataframe()
    assert len(df) == len(t) and df["flops"].sum() == t.total_flops
    assert set(t.by_phase()) == {"forward", "backward"}


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


@pytest.mark.usefixtures("quiet")
def test_json_round_trip_keeps_collectives() -> None:
    t = roofline.trace(small_mlp(), torch.randn(8, 64), train=True, loss_fn=sum_loss,
                       parallel="ddp", gpus=2)
    back = Trace.from_json(t.to_json())
    assert [op.collective for op in back.ops] == [op.collective for op in t.ops]


# --- categories (issue 12) ----------------------------------------------------------------

def test_category_is_a_string_enum_with_the_matrix_set_next_to_it() -> None:
    assert {"matmul", "conv", "attention"} == MATRIX_CATEGORIES
    assert all(isinstance(c, Category) for c in MATRIX_CATEGORIES)
    assert Category.MATMUL == "matmul" and f"{Category.CONV}" == "conv"
    assert json.dumps([Category.POINTWISE]) == '["pointwise"]'
    t = captured(torch.mm, torch.randn(2, 3), torch.randn(3, 4))
    assert t.ops[0].category is Category.MATMUL and t.by_category()["matmul"].flops == 48


# --- from_json validates (issue 13, item 9) -----------------------------------------------

def _doc() -> dict:
    t = captured(torch.mm, torch.randn(2, 3), torch.randn(3, 4))
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


def test_a_channels_last_input_is_recorded_and_kept_through_json() -> None:
    norm = torch.nn.BatchNorm2d(8)
    x = torch.randn(2, 8, 5, 5)
    plain = roofline.trace(norm, x, fake=True)
    last = roofline.trace(norm.to(memory_format=torch.channels_last),
                          x.to(memory_format=torch.channels_last), fake=True)
    assert not any(op.channels_last for op in plain.ops)
    assert "channels_last" not in json.loads(plain.to_json())["fields"]  # older readers' doc
    assert any(op.channels_last for op in last.ops)
    assert [op.channels_last for op in Trace.from_json(last.to_json()).ops] == \
        [op.channels_last for op in last.ops]
