"""BERT (Devlin et al. 2019) encoder, post-LN, with its masked-language-model head or SQuAD's
span head (``get_model("bert-base", head="qa")``). ``padding_mask=True`` puts a (batch,
tokens) attention mask in the example inputs, which every layer adds to its scores, as
NVIDIA's and Hugging Face's BERT do."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn


class BertLayer(nn.Module):
    """Post-LN encoder layer: ``LN(x + attn(x))`` then ``LN(x + ffn(x))``; GELU (erf)."""

    tp_plan: ClassVar[dict[str, str]] = {
        "query": "colwise", "key": "colwise", "value": "colwise", "attn_out": "rowwise",
        "ffn_in": "colwise", "ffn_out": "rowwise"}

    def __init__(self, hidden: int, n_head: int, ffn: int, dropout: float, eps: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_ln = nn.LayerNorm(hidden, eps=eps)
        self.ffn_in = nn.Linear(hidden, ffn)
        self.ffn_out = nn.Linear(ffn, hidden)
        self.ffn_ln = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``(B, T, H) -> (B, T, H)``, bidirectional attention; ``mask``: an additive
        ``(B, 1, 1, T)`` padding mask, or None for none."""
        B, T, H = x.shape
        q, k, v = (lin(x).view(B, T, -1, H // self.n_head).transpose(1, 2)
                   for lin in (self.query, self.key, self.value))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        y = y.transpose(1, 2).reshape(B, T, -1)
        x = self.attn_ln(x + self.drop(self.attn_out(y)))
        return self.ffn_ln(x + self.drop(self.ffn_out(F.gelu(self.ffn_in(x)))))


class BertEncoder(nn.Module):
    """Embeddings (word + position + token type, LN, dropout) and the stack of layers.

    Same parameters as Hugging Face ``BertModel(config, add_pooling_layer=False)``.
    """

    def __init__(self, vocab_size: int, max_position_embeddings: int, type_vocab_size: int,
                 hidden: int, n_layer: int, n_head: int, ffn: int, dropout: float,
                 eps: float) -> None:
        super().__init__()
        if hidden % n_head:
            raise ValueError(f"hidden={hidden} is not divisible by n_head={n_head}")
        self.word_embeddings = nn.Embedding(vocab_size, hidden)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden)
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            BertLayer(hidden, n_head, ffn, dropout, eps) for _ in range(n_layer)
        )

    def forward(self, idx: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids ``(B, T)`` -> hidden states ``(B, T, H)``.

        ``attention_mask`` ``(B, T)``: 1 for a token, 0 for padding, added to every layer's
        attention scores as ``(1 - mask) * -10000`` in the model's dtype, as NVIDIA's and
        Hugging Face's BERT do (``BertModel.forward``); None: no mask, no addition.
        """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(idx)
        pos = torch.arange(idx.size(1), device=idx.device)
        x = (self.word_embeddings(idx) + self.position_embeddings(pos)
             + self.token_type_embeddings(token_type_ids))
        x = self.drop(self.ln(x))
        mask = None
        if attention_mask is not None:
            mask = attention_mask[:, None, None, :].to(self.word_embeddings.weight.dtype)
            mask = (1.0 - mask) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x


def init_weights(model: nn.Module) -> None:
    """BERT's initialisation: linear and embedding weights from N(0, 0.02), zero biases."""
    for m in model.modules():
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)


class _Headed(nn.Module):
    """:class:`BertEncoder` under a head, which :meth:`add_head` builds; BERT's initialisation
    over both."""

    def __init__(self, vocab_size: int, max_position_embeddings: int, type_vocab_size: int,
                 hidden: int, n_layer: int, n_head: int, ffn: int, dropout: float = 0.1,
                 layer_norm_eps: float = 1e-12) -> None:
        super().__init__()
        self.bert = BertEncoder(vocab_size, max_position_embeddings, type_vocab_size, hidden,
                                n_layer, n_head, ffn, dropout, layer_norm_eps)
        self.add_head(hidden, vocab_size, layer_norm_eps)
        init_weights(self)

    def add_head(self, hidden: int, vocab_size: int, layer_norm_eps: float) -> None:
        """Build the head's modules (after the encoder, before the initialisation)."""
        raise NotImplementedError


class BertForMaskedLM(_Headed):
    """BERT encoder + MLM head (dense, GELU, LN, decoder tied to the word embeddings).

    Parameters
    ----------
    vocab_size, max_position_embeddings, type_vocab_size : int
        Embedding table sizes (30522, 512, 2).
    hidden, n_layer, n_head, ffn : int
        Encoder sizes (BERT-base: 768, 12, 12, 3072).
    dropout : float
        Hidden and attention-probability dropout (0.1).
    layer_norm_eps : float
        LayerNorm epsilon (1e-12).
    """

    def add_head(self, hidden: int, vocab_size: int, layer_norm_eps: float) -> None:
        self.head_dense = nn.Linear(hidden, hidden)
        self.head_ln = nn.LayerNorm(hidden, eps=layer_norm_eps)
        self.decoder = nn.Linear(hidden, vocab_size)
        self.decoder.weight = self.bert.word_embeddings.weight  # weight tying

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Return MLM logits ``(B, T, vocab)``, or the loss over all tokens if ``targets``;
        ``attention_mask`` as :meth:`BertEncoder.forward`."""
        x = self.bert(idx, token_type_ids, attention_mask)
        logits = self.decoder(self.head_ln(F.gelu(self.head_dense(x))))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class BertForQuestionAnswering(_Headed):
    """BERT encoder + span head: a start and an end logit per token, as SQuAD fine-tuning
    trains it (Hugging Face's and NVIDIA's ``BertForQuestionAnswering``; no MLM head, and
    the pooler, whose output the loss never reads, left out). Parameters as
    :class:`BertForMaskedLM`.
    """

    def add_head(self, hidden: int, vocab_size: int, layer_norm_eps: float) -> None:
        self.qa_outputs = nn.Linear(hidden, 2)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Return the start and end logits ``(B, T, 2)``, or, with ``targets`` ``(B, 2)``
        (each sequence's start and end positions), the mean of the two cross-entropies
        over the sequence's positions; ``attention_mask`` as :meth:`BertEncoder.forward`."""
        logits = self.qa_outputs(self.bert(idx, token_type_ids, attention_mask))
        if targets is None:
            return logits
        start, end = logits.unbind(-1)
        return (F.cross_entropy(start, targets[:, 0]) + F.cross_entropy(end, targets[:, 1])) / 2


#: The heads ``build`` takes (``head=``): masked-LM pre-training, or SQuAD's span head.
HEADS = ("mlm", "qa")

SIZES: dict[str, dict[str, int]] = {
    "bert-base": {"hidden": 768, "n_layer": 12, "n_head": 12, "ffn": 3072},
    "bert-large": {"hidden": 1024, "n_layer": 24, "n_head": 16, "ffn": 4096},
}


def defaults(size: str) -> dict[str, Any]:
    """Default configuration of a BERT size (a key of :data:`SIZES`)."""
    return {
        "batch_size": 8,
        "seq_len": 128,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        **SIZES[size],
        "dropout": 0.1,
        "layer_norm_eps": 1e-12,
        "head": "mlm",
        # a (B, T) padding mask of ones in the example inputs: the scores' extra addition
        # in every layer (NVIDIA's BERT adds one even when none is passed)
        "padding_mask": False,
    }


def build(cfg: dict[str, Any]) -> tuple[nn.Module, tuple, tuple]:
    """Build the model and example ``(inputs, train_inputs)`` on the current default device."""
    if cfg["seq_len"] > cfg["max_position_embeddings"]:
        raise ValueError(f"seq_len={cfg['seq_len']} > max_position_embeddings="
                         f"{cfg['max_position_embeddings']}")
    if cfg["head"] not in HEADS:
        raise ValueError(f"head={cfg['head']!r}: BERT's heads are {', '.join(HEADS)}")
    qa = cfg["head"] == "qa"
    model = (BertForQuestionAnswering if qa else BertForMaskedLM)(
        cfg["vocab_size"], cfg["max_position_embeddings"], cfg["type_vocab_size"],
        cfg["hidden"], cfg["n_layer"], cfg["n_head"], cfg["ffn"], cfg["dropout"],
        cfg["layer_norm_eps"])
    shape = (cfg["batch_size"], cfg["seq_len"])
    idx = torch.randint(0, cfg["vocab_size"], shape)
    targets = (torch.randint(0, cfg["seq_len"], (cfg["batch_size"], 2)) if qa
               else torch.randint(0, cfg["vocab_size"], shape))
    if not cfg["padding_mask"]:
        return model, (idx,), (idx, targets)
    mask = torch.ones(shape, dtype=torch.long)
    return model, (idx, None, None, mask), (idx, targets, None, mask)
