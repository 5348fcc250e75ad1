"""Llama 2 / Llama 3 decoder (Touvron et al. 2023): RMSNorm, RoPE, SwiGLU, GQA, untied head.

With a :class:`KVCache` (``model.make_kv_cache(batch, max_tokens)``) the forward writes each
layer's new keys and values into the cache and attends over every token it holds: a prompt
(prefill) or one new token per sequence (decode), as a serving engine runs them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

_NATIVE_GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


class RMSNorm(nn.Module):
    """Root-mean-square LayerNorm without centering or bias, computed in float32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise the last dimension."""
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last dimension (Hugging Face RoPE convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class KVCache:
    """Every layer's keys and values, ``(batch, n_kv_heads, max_tokens, head_dim)`` each,
    and how many tokens they hold.

    ``length`` is a Python int, so a step on fake tensors needs no tensor values; the
    forward that writes tokens advances it.
    """

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor],
                 length: int = 0) -> None:
        self.keys, self.values, self.length = keys, values, length

    @property
    def max_tokens(self) -> int:
        """Tokens each sequence's cache has room for."""
        return self.keys[0].size(2) if self.keys else 0


class Attention(nn.Module):
    """Causal attention with rotary embeddings and grouped-query (``n_kv_heads``) K/V."""

    tp_plan: ClassVar[dict[str, str]] = {"wq": "colwise", "wk": "colwise", "wv": "colwise",
                                         "wo": "rowwise"}

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                start: int = 0) -> torch.Tensor:
        """``(B, T, D) -> (B, T, D)``; ``cos``/``sin`` are ``(T, head_dim)``.

        ``kv``: this layer's cache buffers, holding ``start`` tokens; the new keys and
        values are written after them and attention runs over all ``start + T``.
        """
        B, T, _ = x.shape
        # heads from the projections' widths: a tensor-parallel rank holds a share of them
        q = self.wq(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if kv is not None:
            y = _cached_attention(q, k, v, kv, start)
        elif k.size(1) == q.size(1):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif _NATIVE_GQA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:  # torch < 2.5: materialise the repeated K/V heads
            rep = q.size(1) // k.size(1)
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


def _cached_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      kv: tuple[torch.Tensor, torch.Tensor], start: int) -> torch.Tensor:
    """Write ``k``, ``v`` into the cache after its ``start`` tokens, attend over all.

    One new token per sequence (decode) sees every cached key: no mask, and the query
    heads that share a K/V head are stacked as rows (``(B, H_kv, H / H_kv, d)``), so the
    kernel reads each K/V head once, as decode kernels do. A prompt on an empty cache is
    causal; a chunk after cached tokens gets the causal mask shifted by ``start``.
    """
    keys, values = kv
    T = q.size(2)
    end = start + T
    keys[:, :, start:end] = k
    values[:, :, start:end] = v
    k, v = keys[:, :, :end], values[:, :, :end]
    B, H, _, d = q.shape
    rep = H // k.size(1)
    if T == 1:
        y = F.scaled_dot_product_attention(q.view(B, k.size(1), rep, d), k, v)
        return y.view(B, H, 1, d)
    if rep > 1 and not _NATIVE_GQA:  # torch < 2.5: materialise the repeated K/V heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        rep = 1
    gqa: dict[str, Any] = {"enable_gqa": True} if rep > 1 else {}
    mask = None if start == 0 else torch.ones(T, end, dtype=torch.bool,
                                              device=q.device).tril(diagonal=start)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=start == 0,
                                          **gqa)


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    tp_plan: ClassVar[dict[str, str]] = {"w1": "colwise", "w3": "colwise", "w2": "rowwise"}

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, D) -> (B, T, D)``."""
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-RMSNorm block: ``x + attn(norm(x))``, ``x + ffn(norm(x))``."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, hidden_dim: int,
                 eps: float) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(dim, eps)
        self.attention = Attention(dim, n_heads, n_kv_heads)
        self.ffn_norm = RMSNorm(dim, eps)
        self.feed_forward = FeedForward(dim, hidden_dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                start: int = 0) -> torch.Tensor:
        """``(B, T, D) -> (B, T, D)``; ``kv``, ``start``: as :meth:`Attention.forward`."""
        x = x + self.attention(self.attention_norm(x), cos, sin, kv, start)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """Llama language model; parameter names follow Meta's reference implementation.

    Parameters
    ----------
    vocab_size, dim, n_layers, n_heads, n_kv_heads, hidden_dim : int
        Architecture sizes (Llama-2-7B: 32000, 4096, 32, 32, 32, 11008).
    max_seq_len : int
        Length of the precomputed RoPE tables.
    rope_theta : float
        RoPE base (10000 for Llama 2, 500000 for Llama 3).
    norm_eps : float
        RMSNorm epsilon.
    """

    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, vocab_size: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int,
                 hidden_dim: int, max_seq_len: int, rope_theta: float = 10000.0,
                 norm_eps: float = 1e-5) -> None:
        super().__init__()
        if dim % n_heads or n_heads % n_kv_heads:
            raise ValueError("dim must be divisible by n_heads and n_heads by n_kv_heads")
        self.head_dim, self.max_seq_len, self.rope_theta = dim // n_heads, max_seq_len, rope_theta
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(
            TransformerBlock(dim, n_heads, n_kv_heads, hidden_dim, norm_eps)
            for _ in range(n_layers)
        )
        self.norm = RMSNorm(dim, norm_eps)
        self.output = nn.Linear(dim, vocab_size, bias=False)
        self.register_buffer("rope_cos", torch.empty(max_seq_len, self.head_dim), persistent=False)
        self.register_buffer("rope_sin", torch.empty(max_seq_len, self.head_dim), persistent=False)
        self.init_rope()
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    @torch.no_grad()
    def init_rope(self) -> None:
        """(Re)compute the RoPE tables in place, e.g. after ``to_empty()`` from meta."""
        dev = self.rope_cos.device
        inv_freq = 1.0 / self.rope_theta ** (
            torch.arange(0, self.head_dim, 2, device=dev, dtype=torch.float32) / self.head_dim)
        t = torch.arange(self.max_seq_len, device=dev, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.rope_cos.copy_(emb.cos())
        self.rope_sin.copy_(emb.sin())

    def make_kv_cache(self, batch: int, max_tokens: int, *, filled: int = 0,
                      dtype: torch.dtype | None = None,
                      device: torch.device | str | None = None,
                      tensor_parallel: int = 1) -> KVCache:
        """An empty :class:`KVCache` for ``batch`` sequences of up to ``max_tokens`` tokens,
        saying it already holds ``filled`` (its contents are left uninitialised).

        ``dtype`` and ``device`` default to the embedding weight's. ``tensor_parallel``:
        one rank's cache when the attention is split over that many GPUs (its share of the
        KV heads).
        """
        weight = self.tok_embeddings.weight
        if not 0 <= filled <= max_tokens:
            raise ValueError(f"filled={filled} must be between 0 and max_tokens={max_tokens}")
        first: Any = self.layers[0]
        heads = int(first.attention.n_kv_heads)
        if tensor_parallel < 1 or heads % tensor_parallel:
            raise ValueError(f"tensor_parallel={tensor_parallel} must divide the "
                             f"{heads} KV heads")
        shape = (batch, heads // tensor_parallel, max_tokens, self.head_dim)
        kw: dict[str, Any] = {"dtype": dtype or weight.dtype,
                              "device": weight.device if device is None else device}
        n = len(self.layers)
        return KVCache([torch.empty(shape, **kw) for _ in range(n)],
                       [torch.empty(shape, **kw) for _ in range(n)], filled)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None,
                cache: KVCache | None = None, logits_to_keep: int = 0) -> torch.Tensor:
        """Return logits ``(B, T, vocab)``, or the mean next-token loss if ``targets`` given.

        ``cache``: a :class:`KVCache` (``make_kv_cache``); ``idx`` continues the tokens it
        holds, and their keys and values are written into it. ``logits_to_keep``: only the
        last this many positions' logits (0: all), as serving engines compute them.
        """
        t = idx.size(1)
        start = 0 if cache is None else cache.length
        if start + t > self.max_seq_len:
            raise ValueError(f"sequence length {start + t} > max_seq_len {self.max_seq_len}")
        if cache is not None and start + t > cache.max_tokens:
            raise ValueError(f"the cache holds {start} tokens and has room for "
                             f"{cache.max_tokens}: {t} more do not fit")
        x = self.tok_embeddings(idx)
        cos = self.rope_cos[start:start + t].to(x.dtype)
        sin = self.rope_sin[start:start + t].to(x.dtype)
        for i, layer in enumerate(self.layers):
            kv = None if cache is None else (cache.keys[i], cache.values[i])
            x = layer(x, cos, sin, kv, start)
        if cache is not None:
            cache.length = start + t
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        logits = self.output(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


SIZES: dict[str, dict[str, Any]] = {
    "llama-7b": {"vocab_size": 32000, "dim": 4096, "n_layers": 32, "n_heads": 32,
                 "n_kv_heads": 32, "hidden_dim": 11008, "max_seq_len": 4096,
                 "rope_theta": 10000.0, "norm_eps": 1e-5},
    "llama3-8b": {"vocab_size": 128256, "dim": 4096, "n_layers": 32, "n_heads": 32,
                  "n_kv_heads": 8, "hidden_dim": 14336, "max_seq_len": 8192,
                  "rope_theta": 500000.0, "norm_eps": 1e-5},
    "llama-tiny": {"vocab_size": 32000, "dim": 256, "n_layers": 2, "n_heads": 8,
                   "n_kv_heads": 4, "hidden_dim": 688, "max_seq_len": 2048,
                   "rope_theta": 10000.0, "norm_eps": 1e-5},
}


def defaults(size: str) -> dict[str, Any]:
    """Default configuration of a Llama size (a key of :data:`SIZES`)."""
    seq_len = 128 if size == "llama-tiny" else 2048
    batch = 8 if size == "llama-tiny" else 1
    return {"batch_size": batch, "seq_len": seq_len, **SIZES[size]}


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    if cfg["seq_len"] > cfg["max_seq_len"]:
        raise ValueError(f"seq_len={cfg['seq_len']} > max_seq_len={cfg['max_seq_len']}")
    keys = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim",
            "max_seq_len", "rope_theta", "norm_eps")
    model = Llama(*(cfg[k] for k in keys))
    shape = (cfg["batch_size"], cfg["seq_len"])
    idx = torch.randint(0, cfg["vocab_size"], shape)
    targets = torch.randint(0, cfg["vocab_size"], shape)
    return model, (idx,), (idx, targets)
