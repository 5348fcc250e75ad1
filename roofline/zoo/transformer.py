"""The original "Transformer base" encoder-decoder for translation (Vaswani et al. 2017).

Post-LN, sinusoidal positions, one vocabulary shared by source, target and the pre-softmax
projection (three-way weight tying), label-smoothed cross-entropy (0.1).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    """Self- (``mem is None``) or cross-attention through ``F.scaled_dot_product_attention``."""

    tp_plan: ClassVar[dict[str, str]] = {"q_proj": "colwise", "k_proj": "colwise",
                                         "v_proj": "colwise", "out_proj": "rowwise"}

    def __init__(self, d_model: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, mem: torch.Tensor | None = None,
                causal: bool = False) -> torch.Tensor:
        """Queries from ``x`` ``(B, T, D)``, keys/values from ``mem`` (or ``x``)."""
        kv = x if mem is None else mem
        B, T, D = x.shape
        hd = D // self.n_head  # heads from the width: a tensor-parallel rank holds a share
        q = self.q_proj(x).view(B, T, -1, hd).transpose(1, 2)
        k = self.k_proj(kv).view(B, kv.size(1), -1, hd).transpose(1, 2)
        v = self.v_proj(kv).view(B, kv.size(1), -1, hd).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, -1))


def feed_forward(d_model: int, d_ff: int) -> nn.Sequential:
    """Position-wise ``Linear -> ReLU -> Linear``."""
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """``LN(x + self_attn(x))`` then ``LN(x + ffn(x))``."""

    tp_plan: ClassVar[dict[str, str]] = {"ffn.0": "colwise", "ffn.2": "rowwise"}

    def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout)
        self.ln_1 = nn.LayerNorm(d_model)
        self.ffn = feed_forward(d_model, d_ff)
        self.ln_2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, S, D) -> (B, S, D)``."""
        x = self.ln_1(x + self.drop(self.self_attn(x)))
        return self.ln_2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the encoder output, FFN; all post-LN."""

    tp_plan: ClassVar[dict[str, str]] = {"ffn.0": "colwise", "ffn.2": "rowwise"}

    def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout)
        self.ln_1 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_head, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.ffn = feed_forward(d_model, d_ff)
        self.ln_3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mem: torch.Tensor) -> torch.Tensor:
        """``(B, T, D), (B, S, D) -> (B, T, D)``."""
        x = self.ln_1(x + self.drop(self.self_attn(x, causal=True)))
        x = self.ln_2(x + self.drop(self.cross_attn(x, mem)))
        return self.ln_3(x + self.drop(self.ffn(x)))


class Transformer(nn.Module):
    """Encoder-decoder translation model.

    Parameters
    ----------
    vocab_size : int
        Shared source/target vocabulary size.
    d_model, n_head, d_ff, n_enc_layers, n_dec_layers : int
        Architecture sizes (base: 512, 8, 2048, 6, 6).
    max_len : int
        Length of the sinusoidal position table.
    dropout : float
        Residual, embedding and attention dropout (0.1).
    label_smoothing : float
        Label smoothing of the training loss (0.1).
    """

    pos_table: torch.Tensor

    def __init__(self, vocab_size: int, d_model: int, n_head: int, d_ff: int,
                 n_enc_layers: int, n_dec_layers: int, max_len: int, dropout: float = 0.1,
                 label_smoothing: float = 0.1) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} is not divisible by n_head={n_head}")
        self.d_model, self.max_len, self.label_smoothing = d_model, max_len, label_smoothing
        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            EncoderLayer(d_model, n_head, d_ff, dropout) for _ in range(n_enc_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(d_model, n_head, d_ff, dropout) for _ in range(n_dec_layers)
        )
        self.generator = nn.Linear(d_model, vocab_size, bias=False)
        self.register_buffer("pos_table", torch.empty(max_len, d_model), persistent=False)
        self.init_positions()
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
        nn.init.normal_(self.embed.weight, mean=0.0, std=d_model**-0.5)
        self.generator.weight = self.embed.weight  # three-way weight tying

    @torch.no_grad()
    def init_positions(self) -> None:
        """(Re)compute the sinusoidal position table in place (e.g. after ``to_empty()``)."""
        dev = self.pos_table.device
        pos = torch.arange(self.max_len, device=dev, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, self.d_model, 2, device=dev, dtype=torch.float32)
                        * (-math.log(10000.0) / self.d_model))
        self.pos_table[:, 0::2] = torch.sin(pos * div)
        self.pos_table[:, 1::2] = torch.cos(pos * div)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * math.sqrt(self.d_model)
        return self.drop(x + self.pos_table[: tokens.size(1)].to(x.dtype))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor,
                targets: torch.Tensor | None = None) -> torch.Tensor:
        """Return logits ``(B, T, vocab)`` for the (shifted) target ``tgt`` given ``src``.

        With ``targets`` ``(B, T)``, return the label-smoothed cross-entropy instead.
        """
        if max(src.size(1), tgt.size(1)) > self.max_len:
            raise ValueError(f"sequence longer than max_len={self.max_len}")
        mem = self._embed(src)
        for layer in self.encoder:
            mem = layer(mem)
        x = self._embed(tgt)
        for layer in self.decoder:
            x = layer(x, mem)
        logits = self.generator(x)
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               label_smoothing=self.label_smoothing)


DEFAULTS: dict[str, Any] = {
    # 32 sentence pairs x 128 tokens = 4096 source + 4096 target tokens per step, the
    # per-GPU batch of tensor2tensor ``transformer_base`` / fairseq ``--max-tokens 4096``.
    "batch_size": 32,
    "seq_len": 128,
    "vocab_size": 32768,  # joined BPE vocabulary of WMT En-De (~33k; the paper used ~37k)
    "d_model": 512,
    "n_head": 8,
    "d_ff": 2048,
    "n_enc_layers": 6,
    "n_dec_layers": 6,
    "max_len": 1024,
    "dropout": 0.1,
    "label_smoothing": 0.1,
}


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device.

    ``seq_len`` is used for both the source and the target sentences.
    """
    if cfg["seq_len"] > cfg["max_len"]:
        raise ValueError(f"seq_len={cfg['seq_len']} > max_len={cfg['max_len']}")
    keys = ("vocab_size", "d_model", "n_head", "d_ff", "n_enc_layers", "n_dec_layers",
            "max_len", "dropout", "label_smoothing")
    model = Transformer(*(cfg[k] for k in keys))
    shape = (cfg["batch_size"], cfg["seq_len"])
    src = torch.randint(0, cfg["vocab_size"], shape)
    tgt = torch.randint(0, cfg["vocab_size"], shape)
    targets = torch.randint(0, cfg["vocab_size"], shape)
    return model, (src, tgt), (src, tgt, targets)
