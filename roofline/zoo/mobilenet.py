"""MobileNetV2 (Sandler et al. 2018): inverted residuals, linear bottlenecks, ReLU6, BatchNorm."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# (expansion t, output channels c, repeats n, first stride s), from Table 2 of the paper.
SETTINGS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round ``v`` to a multiple of ``divisor`` without going more than 10% below it."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def conv_bn(c_in: int, c_out: int, k: int, stride: int = 1, groups: int = 1,
            act: bool = True) -> nn.Sequential:
    """``Conv2d(bias=False) -> BatchNorm2d [-> ReLU6]`` with "same" padding."""
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out),
    ]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """1x1 expand -> 3x3 depthwise -> 1x1 linear projection, residual when shapes allow."""

    def __init__(self, c_in: int, c_out: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = c_in * expand
        layers = [conv_bn(c_in, hidden, 1)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   conv_bn(hidden, c_out, 1, act=False)]
        self.conv = nn.Sequential(*layers)
        self.use_res = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Block forward."""
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 classifier, same layout and parameter count as torchvision ``mobilenet_v2``.

    Parameters
    ----------
    num_classes : int
        Number of output logits.
    width_mult : float
        Channel multiplier (1.0 gives 3,504,872 parameters).
    dropout : float
        Dropout before the classifier.
    """

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 dropout: float = 0.2) -> None:
        super().__init__()
        c_in = make_divisible(32 * width_mult)
        last = make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [conv_bn(3, c_in, 3, stride=2)]
        for t, c, n, s in SETTINGS:
            c_out = make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(c_in, c_out, s if i == 0 else 1, t))
                c_in = c_out
        features.append(conv_bn(c_in, last, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Return logits ``(B, num_classes)``, or the cross-entropy loss if ``targets`` given."""
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        logits = self.classifier(x)
        if targets is None:
            return logits
        return F.cross_entropy(logits, targets)


DEFAULTS: dict[str, Any] = {
    "batch_size": 32,
    "image_size": 224,
    "num_classes": 1000,
    "width_mult": 1.0,
    "dropout": 0.2,
}


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    model = MobileNetV2(cfg["num_classes"], cfg["width_mult"], cfg["dropout"])
    b, s = cfg["batch_size"], cfg["image_size"]
    x = torch.randn(b, 3, s, s)
    y = torch.randint(0, cfg["num_classes"], (b,))
    return model, (x,), (x, y)
