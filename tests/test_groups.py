"""Ops in groups (presentation/groups.py, issue 24, items 3 and 4): by op and shapes with a
count, and by module with only identical repeated blocks folded."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

import roofline
from roofline.presentation.groups import grouped


def _groups(model: nn.Module, x: torch.Tensor, group_by: str) -> dict[str, int]:
    t = roofline.trace(model, x, fake=True)
    return {g.label: g.count for g in grouped(roofline.analyze(t, "a100"), group_by).values()}


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def test_identical_blocks_fold_into_one_group() -> None:
    """Four identical blocks run the same ops on the same shapes: one group ``blocks.*``
    holding all four blocks' ops (addmm and relu each, plus the views of nn.Linear)."""
    model = nn.Sequential(*[_Block(32) for _ in range(4)])
    one = _groups(nn.Sequential(_Block(32)), torch.randn(8, 32), "module")
    groups = _groups(model, torch.randn(8, 32), "module")
    assert set(groups) == {"Sequential.*.fc", "Sequential.*"}
    assert groups["Sequential.*.fc"] == 4 * one["Sequential.0.fc"]


def test_a_cnns_different_stages_stay_apart() -> None:
    """An nn.Sequential of eight convolutions of different widths: eight layers, not one
    dot (the stride-2 stages differ in shape from their neighbours)."""
    widths = [3, 8, 16, 16, 32, 32, 64, 64, 128]
    layers = [nn.Conv2d(a, b, 3, stride=2 if a != b else 1, padding=1)
              for a, b in itertools.pairwise(widths)]
    groups = _groups(nn.Sequential(*layers), torch.randn(2, 3, 64, 64), "module")
    assert len([g for g in groups if g.startswith("Sequential.")]) == 8
    assert not [g for g in groups if "*" in g]


def test_some_alike_siblings_fold_into_their_indices() -> None:
    model = nn.Sequential(_Block(32), _Block(32), nn.Linear(32, 16), _Block(16), _Block(16))
    groups = _groups(model, torch.randn(8, 32), "module")
    assert {"Sequential.[0-1].fc", "Sequential.2", "Sequential.[3-4].fc"} <= set(groups)


@pytest.mark.parametrize("repeats", [1, 3])
def test_ops_group_by_op_and_shapes_with_a_count(repeats: int) -> None:
    model = nn.Sequential(*[_Block(32) for _ in range(repeats)])
    groups = _groups(model, torch.randn(8, 32), "op")
    assert groups["addmm 32 8x32 32x32"] == repeats  # bias, input, weight^T
    assert groups["relu 8x32"] == repeats


def test_groups_of_one_label_and_two_dtypes_say_their_dtype() -> None:
    """Casting a 64 x 64 weight to bf16 and a gradient back to fp32 are two groups of one
    op and shape: their labels name the dtype."""
    w = torch.randn(64, 64)
    t = roofline.trace(lambda w: (w.to(torch.bfloat16), w.to(torch.bfloat16).float()), w)
    labels = [g.label for g in grouped(roofline.analyze(t, "a100")).values()]
    assert "_to_copy 64x64 (bf16)" in labels and "_to_copy 64x64 (fp32)" in labels
    assert len(labels) == len(set(labels))
