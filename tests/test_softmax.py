"""An fp32 softmax of an fp16 tensor as CUDA runs it (tracing/softmax.py): one kernel that
reads fp16 and writes fp32 (SoftMax.cpp's half_to_float path), not a cast and an fp32
softmax. Bytes are elements times element size.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from conftest import no_global_state
from torch import nn

import roofline

ROWS, D = 16, 32
CALLS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "F.softmax": lambda h: F.softmax(h, dim=-1, dtype=torch.float32),
    "torch.log_softmax": lambda h: torch.log_softmax(h, -1, dtype=torch.float32),
    "Tensor.softmax": lambda h: h.softmax(-1, dtype=torch.float32),
}


class _Net(nn.Module):
    def __init__(self, call: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fc, self.call = nn.Linear(D, D), call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.call(self.fc(x))


def _softmax_ops(t: roofline.Trace) -> list[roofline.OpRecord]:
    return [op for op in t.ops if op.module == "_Net" and op.phase == "forward" and op.bytes]


@pytest.mark.parametrize("call", list(CALLS))
def test_fp16_in_fp32_out_is_one_kernel_in_a_fake_trace(call: str) -> None:
    net, x = _Net(CALLS[call]).half(), torch.randn(ROWS, D, dtype=torch.float16)
    t = roofline.trace(net, x, train=True, loss_fn=lambda o: o.sum(), fake=True)
    n = ROWS * D
    (op,) = _softmax_ops(t)
    assert op.name in ("aten._softmax.default", "aten._log_softmax.default")
    assert (op.bytes_read, op.bytes_written) == (2 * n, 4 * n)
    # backward: the fp32 gradient into an fp16 input gradient, as CUDA's backward kernel
    assert any(o.phase == "backward" and o.category == "softmax" for o in t.ops)
    assert t.info.fused_softmax_calls == 1
    assert any(a.startswith("softmax calls with an fp32 dtype over fp16 tensors (1)")
               for a in roofline.analyze(t, "a100").assumptions)
    assert no_global_state()


def test_real_bf16_and_as_run_traces_cast_first() -> None:
    n = ROWS * D
    call = CALLS["F.softmax"]
    half, x16 = _Net(call).half(), torch.randn(ROWS, D, dtype=torch.float16)
    for t in (roofline.trace(half, x16, fake=True, attention="as-run"),
              roofline.trace(_Net(call).bfloat16(), torch.randn(ROWS, D, dtype=torch.bfloat16),
                             fake=True)):
        cast, softmax = _softmax_ops(t)
        assert t.info.fused_softmax_calls == 0
        assert cast.name == "aten._to_copy.default" and cast.bytes == (2 + 4) * n
        assert softmax.bytes == (4 + 4) * n
