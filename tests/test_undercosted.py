"""Kernels measured slower than costed on the lent H200 are named in the assumptions
(analysis/undercosted.py): which ops match, how many calls, and where the note is left out.

The counts are derived by hand from the model: each linear layer with a bias sums its
output gradient over the rows once in backward (addmm's bias gradient), one embedding
gradient per embedding, one layer-norm backward per layer norm.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import roofline
from roofline.analysis import undercosted
from roofline.tracing import OpRecord, Trace
from roofline.zoo import get_model

NOTE = "ran at a fraction of their costed speed on a lent H200"


class _Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.ln = nn.Embedding(100, 64), nn.LayerNorm(64)
        self.fc1, self.fc2 = nn.Linear(64, 64), nn.Linear(64, 10)

    def forward(self, idx: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        h = self.fc2(torch.relu(self.fc1(self.ln(self.emb(idx)))))
        return h if y is None else nn.functional.cross_entropy(h.view(-1, 10), y.view(-1))


def _notes(device: str, train: bool = True) -> list[str]:
    idx, y = torch.randint(0, 100, (8, 128)), torch.randint(0, 10, (8, 128))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = roofline.trace(_Small(), *((idx, y) if train else (idx,)), train=train, fake=True)
        return [n for n in roofline.analyze(t, device).assumptions if NOTE in n]


def test_a_training_step_names_each_kind_and_its_calls() -> None:
    (note,) = _notes("H100 SXM")
    assert "column sums (the gradients of biases and of broadcast weights, every dimension " \
        "but the last summed), 2 calls, at 0.11-0.42" in note
    assert "embedding gradients, 1 calls, at 0.03-0.09" in note
    assert "layer-norm backwards with weight gradients, 1 calls, at 0.63-0.70" in note
    assert "attention" not in note  # no attention in the model


@pytest.mark.parametrize("device", ["MI300X", "EPYC 9654"])
def test_no_note_where_nothing_was_measured(device: str) -> None:
    assert _notes(device) == []


def test_no_note_without_a_backward() -> None:
    assert _notes("H100 SXM", train=False) == []


def _layer_norm_backward(rows: int, features: int) -> OpRecord:
    x, stat = (rows, features), (rows, 1)
    return OpRecord("aten.native_layer_norm_backward.default", "normalization", "backward", "",
                    "bfloat16", 10 * rows * features, 6 * rows * features, 2 * rows * features,
                    input_shapes=(x, x, stat, stat, (features,), (features,)),
                    output_shapes=(x, (features,), (features,)))


@pytest.mark.parametrize(("rows", "features", "few_blocks"), [
    (1024, 768, True),  # 24 blocks of 32 features over every row
    (65536, 768, True),  # the rows are split over blocks only beyond 65,536
    (131072, 768, False),  # beyond, with 24 blocks under half the H100's 132 SMs: split
    (131072, 4096, True),  # 128 blocks, more than half the SMs: not split, under the 132 SMs
    (1024, 8192, False),  # 256 blocks: more than the chip has SMs
])
def test_the_layer_norm_weight_gradient_follows_its_launch(rows: int, features: int,
                                                           few_blocks: bool) -> None:
    h100 = roofline.get_device("H100 SXM")
    assert h100.compute_units == 132
    op = _layer_norm_backward(rows, features)
    gap = next(g for g in undercosted.GAPS if g.kind.startswith("layer-norm"))
    assert gap.matches(op, h100) is few_blocks
    assert bool(undercosted.note(Trace([op]), h100)) is few_blocks


def test_a_sum_that_keeps_more_than_the_last_dimension_is_not_a_column_sum() -> None:
    """The position embedding's gradient sums over the batch only, (8, 1024, 768) -> (1,
    1024, 768): it ran at its costed speed on the H200, and is not named."""
    h100 = roofline.get_device("H100 SXM")
    gap = undercosted.GAPS[0]
    kept = OpRecord("aten.sum.dim_IntList", "reduction", "backward", "", "float32", 0, 0, 0,
                    input_shapes=((8, 1024, 768),), output_shapes=((1, 1024, 768),))
    column = OpRecord("aten.sum.dim_IntList", "reduction", "backward", "", "bfloat16", 0, 0,
                      0, input_shapes=((8192, 768),), output_shapes=((1, 768),))
    assert not gap.matches(kept, h100) and gap.matches(column, h100)


@pytest.mark.parametrize(("autocast", "named"), [(True, True), (False, False)])
def test_fused_attention_with_dropout_is_named_in_16_bits_only(autocast: bool,
                                                               named: bool) -> None:
    """GPT-2 (2 layers) trains with attention dropout: two fused attention calls in bf16
    under autocast, named; in fp32 no cuDNN or flash kernel takes them, not named."""
    zm = get_model("gpt2", batch_size=2, seq_len=64, n_layer=2)
    with warnings.catch_warnings(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                   enabled=autocast):
        warnings.simplefilter("ignore")
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, fake=True)
        notes = [n for n in roofline.analyze(t, "H100 SXM").assumptions if NOTE in n]
    assert ("fused attention with dropout, 2 calls, at 0.14-0.38" in notes[0]) is named


@pytest.mark.parametrize(("cols", "dtype", "named"), [
    (4096, torch.bfloat16, True),  # 8 KiB rows: the cached kernel
    (2048, torch.float16, True),
    (1024, torch.bfloat16, False),  # the persistent warp kernel (up to 1,024 elements)
    (4096, torch.float32, False),  # fp32: 0.6-1.3 of its costed speed there, not named
    (32768, torch.bfloat16, False),  # 64 KiB rows: beyond the 48 KiB a block caches
])
def test_16_bit_softmax_over_cached_rows_is_named(cols: int, dtype: torch.dtype,
                                                  named: bool) -> None:
    x = torch.empty(64, cols, dtype=dtype, device="meta")
    t = roofline.trace(lambda a: torch.softmax(a, -1), x, fake=True)
    notes = [n for n in roofline.analyze(t, "H100 SXM").assumptions if NOTE in n]
    assert bool(notes) == named
    if named:
        assert "16-bit softmax over rows of 1,025 elements up to what a block caches in " \
            "shared memory, 1 calls, at 0.34-0.71" in notes[0]
