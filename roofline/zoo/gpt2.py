"""GPT-2 (Radford et al. 2019) in the style of nanoGPT: pre-LN decoder, tied lm_head."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through ``F.scaled_dot_product_attention``.

    Heads are counted from the projection's width (``view(..., -1, head_dim)``), so a
    tensor-parallel rank holding ``n_head / world`` of them runs as it is (``tp_plan``).
    """

    #: tensor parallelism (Megatron): the fused q/k/v projection split by columns, the
    #: output projection by rows (roofline.tracing.strategies.tp_plan reads it)
    tp_plan: ClassVar[dict[str, str]] = {"c_attn": "colwise", "c_proj": "rowwise"}

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, C) -> (B, T, C)``."""
        B, T, C = x.shape
        qkv = self.c_attn(x)
        q, k, v = qkv.split(qkv.size(-1) // 3, dim=2)
        q, k, v = (t.view(B, T, -1, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, -1)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """``Linear(C, 4C) -> GELU(tanh) -> Linear(4C, C) -> Dropout``."""

    tp_plan: ClassVar[dict[str, str]] = {"c_fc": "colwise", "c_proj": "rowwise"}

    def __init__(self, n_embd: int, dropout: float) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, C) -> (B, T, C)``."""
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(ln(x))``, ``x + mlp(ln(x))``."""

    def __init__(self, n_embd: int, n_head: int, dropout: float, eps: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=eps)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd, eps=eps)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, C) -> (B, T, C)``."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 language model; parameter names follow Hugging Face ``GPT2LMHeadModel``.

    (Without the ``transformer.`` prefix; ``nn.Linear`` weights are the transpose of the
    Hugging Face ``Conv1D`` ones.)

    Parameters
    ----------
    vocab_size, n_positions, n_layer, n_head, n_embd : int
        Architecture sizes (GPT-2 small: 50257, 1024, 12, 12, 768).
    dropout : float
        Embedding, attention and residual dropout (0.1 in GPT-2).
    layer_norm_epsilon : float
        LayerNorm epsilon (1e-5).
    """

    def __init__(self, vocab_size: int, n_positions: int, n_layer: int, n_head: int,
                 n_embd: int, dropout: float = 0.1, layer_norm_epsilon: float = 1e-5) -> None:
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd={n_embd} is not divisible by n_head={n_head}")
        self.n_positions = n_positions
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(
            Block(n_embd, n_head, dropout, layer_norm_epsilon) for _ in range(n_layer)
        )
        self.ln_f = nn.LayerNorm(n_embd, eps=layer_norm_epsilon)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Return logits ``(B, T, vocab)``, or the mean next-token loss if ``targets`` given."""
        t = idx.size(1)
        if t > self.n_positions:
            raise ValueError(f"sequence length {t} > n_positions {self.n_positions}")
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


SIZES: dict[str, dict[str, int]] = {
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768},
    "gpt2-medium": {"n_layer": 24, "n_head": 16, "n_embd": 1024},
    "gpt2-large": {"n_layer": 36, "n_head": 20, "n_embd": 1280},
    "gpt2-xl": {"n_layer": 48, "n_head": 25, "n_embd": 1600},
}


def defaults(size: str) -> dict[str, Any]:
    """Default configuration of a GPT-2 size (a key of :data:`SIZES`)."""
    return {
        "batch_size": 8,
        "seq_len": 1024,
        "vocab_size": 50257,
        "n_positions": 1024,
        **SIZES[size],
        "dropout": 0.1,
        "layer_norm_epsilon": 1e-5,
    }


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    if cfg["seq_len"] > cfg["n_positions"]:
        raise ValueError(f"seq_len={cfg['seq_len']} > n_positions={cfg['n_positions']}; "
                         "pass n_positions=... to enlarge the position table")
    model = GPT(cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"], cfg["n_head"],
                cfg["n_embd"], cfg["dropout"], cfg["layer_norm_epsilon"])
    shape = (cfg["batch_size"], cfg["seq_len"])
    idx = torch.randint(0, cfg["vocab_size"], shape)
    targets = torch.randint(0, cfg["vocab_size"], shape)
    return model, (idx,), (idx, targets)
