"""A plain multi-layer perceptron classifier (MNIST-shaped by default)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Fully connected ReLU network, ``in_features -> hidden x (n_layers-1) -> num_classes``.

    Parameters
    ----------
    in_features : int
        Input width (784 for flattened 28x28 images).
    hidden : int
        Width of every hidden layer.
    num_classes : int
        Number of output logits.
    n_layers : int
        Number of ``nn.Linear`` layers (3 gives 784-1024-1024-10).
    """

    def __init__(self, in_features: int, hidden: int, num_classes: int, n_layers: int) -> None:
        super().__init__()
        widths = [in_features] + [hidden] * (n_layers - 1) + [num_classes]
        layers: list[nn.Module] = []
        for i, (w_in, w_out) in enumerate(pairwise(widths)):
            layers.append(nn.Linear(w_in, w_out))
            if i < n_layers - 1:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Return logits ``(B, num_classes)``, or the cross-entropy loss if ``targets`` given."""
        logits = self.net(x)
        if targets is None:
            return logits
        return F.cross_entropy(logits, targets)


DEFAULTS: dict[str, Any] = {
    "batch_size": 64,
    "in_features": 784,
    "hidden": 1024,
    "num_classes": 10,
    "n_layers": 3,
}


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    model = MLP(cfg["in_features"], cfg["hidden"], cfg["num_classes"], cfg["n_layers"])
    x = torch.randn(cfg["batch_size"], cfg["in_features"])
    y = torch.randint(0, cfg["num_classes"], (cfg["batch_size"],))
    return model, (x,), (x, y)
