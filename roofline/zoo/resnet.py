"""ResNet v1.5 (He et al. 2016, stride on the 3x3 conv as in torchvision/NVIDIA), written out."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride, "v1.5") -> 1x1 expand, plus identity/projection."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual block forward."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Bottleneck ResNet image classifier (torchvision ``resnet50`` layout and parameter names).

    Parameters
    ----------
    layers : sequence of int
        Blocks per stage, ``(3, 4, 6, 3)`` for ResNet-50.
    num_classes : int
        Number of output logits.
    width : int
        Base width of the first stage (64).
    """

    def __init__(self, layers: tuple[int, ...], num_classes: int = 1000, width: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        in_ch = width
        stages = []
        for i, n_blocks in enumerate(layers):
            w = width * 2**i
            blocks = [Bottleneck(in_ch, w, stride=1 if i == 0 else 2)]
            in_ch = w * Bottleneck.expansion
            blocks += [Bottleneck(in_ch, w) for _ in range(n_blocks - 1)]
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Return logits ``(B, num_classes)``, or the cross-entropy loss if ``targets`` given."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        logits = self.fc(torch.flatten(self.avgpool(x), 1))
        if targets is None:
            return logits
        return F.cross_entropy(logits, targets)


DEPTHS: dict[int, tuple[int, ...]] = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def defaults(depth: int) -> dict[str, Any]:
    """Default configuration of ResNet-``depth`` (50, 101 or 152)."""
    return {
        "batch_size": 32,
        "image_size": 224,
        "layers": DEPTHS[depth],
        "num_classes": 1000,
        "width": 64,
    }


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    if len(cfg["layers"]) != 4:
        raise ValueError(f"ResNet needs 4 stages, got layers={cfg['layers']}")
    model = ResNet(tuple(cfg["layers"]), cfg["num_classes"], cfg["width"])
    b, s = cfg["batch_size"], cfg["image_size"]
    x = torch.randn(b, 3, s, s)
    y = torch.randint(0, cfg["num_classes"], (b,))
    return model, (x,), (x, y)
