"""Vision Transformer (Dosovitskiy et al. 2021), pre-LN, class token, learned positions."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    """Bidirectional multi-head self-attention through ``F.scaled_dot_product_attention``."""

    tp_plan: ClassVar[dict[str, str]] = {"qkv": "colwise", "proj": "rowwise"}

    def __init__(self, dim: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, N, D) -> (B, N, D)``."""
        B, N, D = x.shape
        qkv = self.qkv(x).view(B, N, 3, -1, D // self.n_head).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], dropout_p=p)
        return self.proj(y.transpose(1, 2).reshape(B, N, -1))


class Block(nn.Module):
    """Pre-LN encoder block with a GELU (erf) MLP."""

    tp_plan: ClassVar[dict[str, str]] = {"mlp.0": "colwise", "mlp.3": "rowwise"}

    def __init__(self, dim: int, n_head: int, mlp_dim: int, dropout: float, eps: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, n_head, dropout)
        self.ln_2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(mlp_dim, dim), nn.Dropout(dropout))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, N, D) -> (B, N, D)``."""
        x = x + self.drop(self.attn(self.ln_1(x)))
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    """ViT image classifier (timm/torchvision layout, same parameter count as ``vit_b_16``).

    Parameters
    ----------
    image_size, patch_size : int
        Input resolution and patch size; ``(image_size // patch_size) ** 2 + 1`` tokens.
    dim, n_layer, n_head, mlp_dim : int
        Encoder sizes (ViT-B: 768, 12, 12, 3072).
    num_classes : int
        Number of output logits.
    dropout : float
        Dropout after embeddings, attention and MLP (0.0 here, as in fine-tuning).
    eps : float
        LayerNorm epsilon (1e-6).
    """

    def __init__(self, image_size: int, patch_size: int, dim: int, n_layer: int, n_head: int,
                 mlp_dim: int, num_classes: int, dropout: float = 0.0, eps: float = 1e-6) -> None:
        super().__init__()
        if image_size % patch_size or dim % n_head:
            raise ValueError("image_size must be divisible by patch_size and dim by n_head")
        n_tokens = (image_size // patch_size) ** 2 + 1
        self.patch_embed = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n_tokens, dim) * 0.02)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(dim, n_head, mlp_dim, dropout, eps) for _ in range(n_layer)
        )
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Return logits ``(B, num_classes)``, or the cross-entropy loss if ``targets`` given."""
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, N, D)
        x = torch.cat([self.cls_token.expand(x.size(0), -1, -1), x], dim=1)
        x = self.drop(x + self.pos_embed)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x)[:, 0])
        if targets is None:
            return logits
        return F.cross_entropy(logits, targets)


SIZES: dict[str, dict[str, int]] = {
    "vit-b16": {"patch_size": 16, "dim": 768, "n_layer": 12, "n_head": 12, "mlp_dim": 3072},
    "vit-l16": {"patch_size": 16, "dim": 1024, "n_layer": 24, "n_head": 16, "mlp_dim": 4096},
}


def defaults(size: str) -> dict[str, Any]:
    """Default configuration of a ViT size (a key of :data:`SIZES`)."""
    return {"batch_size": 32, "image_size": 224, **SIZES[size], "num_classes": 1000,
            "dropout": 0.0, "eps": 1e-6}


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    model = ViT(cfg["image_size"], cfg["patch_size"], cfg["dim"], cfg["n_layer"],
                cfg["n_head"], cfg["mlp_dim"], cfg["num_classes"], cfg["dropout"], cfg["eps"])
    b, s = cfg["batch_size"], cfg["image_size"]
    x = torch.randn(b, 3, s, s)
    y = torch.randint(0, cfg["num_classes"], (b,))
    return model, (x,), (x, y)
