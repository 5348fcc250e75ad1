"""Tests of the model zoo: published sizes, FLOPs, Hugging Face / torch.nn cross-checks, runs."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import roofline
from roofline.zoo import (
    UnknownModelError,
    ZooModel,
    describe_models,
    get_model,
    list_models,
    resolve_name,
)
from roofline.zoo.transformer import DecoderLayer, EncoderLayer, MultiHeadAttention


@pytest.fixture(autouse=True, scope="module")
def _one_thread():  # tiny workloads: OpenMP threads only add overhead (and contention)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied tensors are counted once


def fwd_flops(zm: ZooModel) -> float:
    with FlopCounterMode(display=False) as fc:
        zm.model(*zm.inputs)
    return fc.get_total_flops()


# --------------------------------------------------------------------------- registry / API


def test_registry_and_aliases() -> None:
    names = list_models()
    for required in ("mlp", "resnet50", "mobilenet", "gpt2", "gpt2-medium", "gpt2-large",
                     "gpt2-xl", "bert-base", "bert-large", "vit-b16", "llama-7b", "llama3-8b",
                     "llama-tiny", "transformer"):
        assert required in names
    assert set(describe_models()) == set(names)
    assert all(isinstance(d, str) and d and "\n" not in d for d in describe_models().values())
    for alias, canon in [("GPT2-small", "gpt2"), ("bert", "bert-base"), ("ViT", "vit-b16"),
                         ("ViT-B/16", "vit-b16"), ("resnet-50", "resnet50"),
                         ("ResNet_50", "resnet50"), ("MobileNetV2", "mobilenet"),
                         ("Llama-2-7B", "llama-7b"), ("gpt2_medium", "gpt2-medium")]:
        assert resolve_name(alias) == canon
    assert get_model("GPT-2 small", device="meta").name == "gpt2"


def test_unknown_name_suggests() -> None:
    with pytest.raises(UnknownModelError) as exc:
        get_model("resnet5")
    assert isinstance(exc.value, KeyError)
    assert "Did you mean: resnet50" in str(exc.value)
    with pytest.raises(KeyError, match="Did you mean: gpt2"):
        get_model("gtp2")


def test_bad_override_and_shape_errors() -> None:
    with pytest.raises(TypeError, match="n_layers"):
        get_model("gpt2", device="meta", n_layers=2)  # GPT-2 calls it n_layer
    with pytest.raises(TypeError, match="seq_len"):
        get_model("resnet50", device="meta", seq_len=128)
    with pytest.raises(ValueError, match="n_positions"):
        get_model("gpt2", device="meta", seq_len=2048)
    zm = get_model("gpt2", device="meta", seq_len=2048, n_positions=2048)
    assert zm.inputs[0].shape == (8, 2048)


def test_config_and_defaults() -> None:
    zm = get_model("gpt2", device="meta")
    assert zm.config["batch_size"] == 8 and zm.config["seq_len"] == 1024
    assert (zm.config["n_layer"], zm.config["n_head"], zm.config["n_embd"]) == (12, 12, 768)
    assert zm.inputs[0].shape == (8, 1024) and zm.inputs[0].dtype == torch.long
    assert get_model("resnet50", device="meta").inputs[0].shape == (32, 3, 224, 224)
    assert get_model("mlp", device="meta").inputs[0].shape == (64, 784)
    assert get_model("bert-base", device="meta").inputs[0].shape == (8, 128)
    llama = get_model("llama-7b")  # meta by default: never allocates 27 GB
    assert llama.inputs[0].shape == (1, 2048)
    assert all(p.is_meta for p in llama.model.parameters()) and llama.inputs[0].is_meta
    assert get_model("gpt2-medium", device="meta", n_layer=2).config["n_layer"] == 2


def test_deterministic_and_rng_untouched() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a, b = get_model("llama-tiny", n_layers=1), get_model("llama-tiny", n_layers=1)
    assert torch.equal(torch.rand(3), expected)  # the caller's RNG stream is not disturbed
    for (ka, va), (kb, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items(),
                                  strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert all(torch.equal(x, y) for x, y in zip(a.train_inputs, b.train_inputs, strict=True))


# --------------------------------------------------------------------------- published sizes

PUBLISHED_PARAMS = {  # torchvision / Hugging Face / Meta model cards
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "mobilenet": 3_504_872,
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "vit-b16": 86_567_656,
    "vit-l16": 304_326_632,
    "llama-7b": 6_738_415_616,
    "llama3-8b": 8_030_261_248,
}


@pytest.mark.parametrize("name", list_models())
def test_builds_on_meta_with_published_param_count(name: str) -> None:
    zm = get_model(name, device="meta")
    assert all(p.is_meta for p in zm.model.parameters())
    assert all(t.is_meta for t in zm.inputs + zm.train_inputs)
    if name in PUBLISHED_PARAMS:
        assert n_params(zm.model) == PUBLISHED_PARAMS[name]


def test_small_model_param_counts() -> None:
    assert n_params(get_model("mlp").model) == 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 10250
    # BERT-base: encoder (embeddings + 12 layers) is HF BertModel without its pooler
    # (109,482,240 - 590,592); the MLM head adds dense + LN + decoder bias.
    bert: Any = get_model("bert-base", device="meta").model
    assert n_params(bert.bert) == 109_482_240 - 768 * 768 - 768
    assert n_params(bert) == 109_482_240 + 768 * 2 + 30522
    # Transformer base: tied 32768x512 embedding + 6 encoder + 6 decoder layers.
    d, f = 512, 2048
    attn, ffn, ln = 4 * (d * d + d), 2 * d * f + f + d, 2 * d
    expected = 32768 * d + 6 * (attn + ffn + 2 * ln) + 6 * (2 * attn + ffn + 3 * ln)
    assert n_params(get_model("transformer", device="meta").model) == expected


def test_published_flops() -> None:
    # ResNet-50: 4.1 GMACs/image; MobileNetV2: 300 MMACs; ViT-B/16: 17.6 GMACs (all at 224).
    for name, gmacs, rel in [("resnet50", 4.09, 0.01), ("mobilenet", 0.30, 0.02),
                             ("vit-b16", 17.56, 0.01)]:
        zm = get_model(name, device="meta", batch_size=1)
        assert fwd_flops(zm) / 2e9 == pytest.approx(gmacs, rel=rel), name
    # GPT forward, per token: 2 * (params - position table) + attention 4 * n_layer * T * d
    # (SDPA is counted as full, non-causal matmuls).
    zm = get_model("gpt2", device="meta", batch_size=1, n_layer=3)
    n, t, d = n_params(zm.model) - 1024 * 768, 1024, 768
    assert fwd_flops(zm) / t == pytest.approx(2 * n + 4 * 3 * t * d, rel=0.01)


# --------------------------------------------------------------------------- runs


# fast CPU shapes: full widths, fewer blocks for the deep sequence models
SMALL: dict[str, dict[str, Any]] = {
    "mlp": {"batch_size": 4},
    "resnet50": {"batch_size": 2, "image_size": 32},
    "mobilenet": {"batch_size": 2, "image_size": 32},
    "gpt2": {"batch_size": 2, "seq_len": 16, "n_layer": 1},
    "bert-base": {"batch_size": 2, "seq_len": 16, "n_layer": 1},
    "vit-b16": {"batch_size": 2, "image_size": 32, "n_layer": 2},
    "llama-tiny": {"batch_size": 2, "seq_len": 16},
    "transformer": {"batch_size": 2, "seq_len": 16, "n_enc_layers": 1, "n_dec_layers": 1},
}
OUT_SHAPES = {
    "mlp": (4, 10), "resnet50": (2, 1000), "mobilenet": (2, 1000), "gpt2": (2, 16, 50257),
    "bert-base": (2, 16, 30522), "vit-b16": (2, 1000), "llama-tiny": (2, 16, 32000),
    "transformer": (2, 16, 32768),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_cpu_forward_and_backward(name: str) -> None:
    zm = get_model(name, **SMALL[name])
    dev = next(zm.model.parameters()).device
    assert dev.type == "cpu" and all(t.device == dev for t in zm.inputs + zm.train_inputs)
    zm.model.eval()
    with torch.no_grad():
        out = zm.model(*zm.inputs)
    assert out.shape == OUT_SHAPES[name] and torch.isfinite(out).all()
    zm.model.train()
    loss = zm.model(*zm.train_inputs)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in zm.model.parameters()]
    assert all(g is not None for g in grads)


# fewer blocks where the depth does not matter, to keep the test fast
META_RUNS: dict[str, dict[str, Any]] = {
    "llama-7b": {},
    "llama3-8b": {"n_layers": 1},
    "gpt2-xl": {"n_layer": 1},
    "bert-large": {"n_layer": 1},
    "vit-l16": {"n_layer": 1},
    "transformer-big": {"n_enc_layers": 1, "n_dec_layers": 1},
    "resnet50": {"layers": (1, 1, 1, 1)},
    "mobilenet": {},
    "mlp": {},
}


@pytest.mark.parametrize("name", list(META_RUNS))
def test_meta_forward_and_backward(name: str) -> None:
    zm = get_model(name, device="meta", batch_size=1, **META_RUNS[name])
    out = zm.model(*zm.inputs)
    assert out.is_meta and out.shape[0] == 1
    loss = zm.model(*zm.train_inputs)
    assert loss.shape == () and loss.is_meta
    loss.backward()


def test_dtype_cast() -> None:
    zm = get_model("vit-b16", batch_size=2, image_size=32, dtype=torch.bfloat16, n_layer=2)
    assert all(p.dtype == torch.bfloat16 for p in zm.model.parameters())
    assert zm.inputs[0].dtype == torch.bfloat16 and zm.train_inputs[1].dtype == torch.long
    assert zm.model(*zm.train_inputs).dtype == torch.bfloat16
    zm = get_model("llama-7b", dtype=torch.bfloat16, n_layers=1)
    llama: Any = zm.model
    assert llama.output.weight.dtype == torch.bfloat16 and zm.inputs[0].dtype == torch.long
    assert zm.model(*zm.inputs).dtype == torch.bfloat16


def test_llama_rope_reinit_after_to_empty() -> None:
    ref: Any = get_model("llama-tiny", n_layers=1).model
    meta: Any = get_model("llama-tiny", n_layers=1, device="meta").model
    meta.to_empty(device="cpu")
    meta.init_rope()
    assert torch.equal(meta.rope_cos, ref.rope_cos) and torch.equal(meta.rope_sin, ref.rope_sin)


# --------------------------------------------------------------------------- cross-checks


def test_hf_full_size_counts_and_shapes() -> None:
    tf = pytest.importorskip("transformers")
    with torch.device("meta"):
        x = torch.randint(0, 100, (2, 16))
        img = torch.randn(2, 3, 224, 224)
        hf = {
            "gpt2": tf.GPT2LMHeadModel(tf.GPT2Config()),
            "bert-base": tf.BertForMaskedLM(tf.BertConfig()),
            "bert-large": tf.BertForMaskedLM(tf.BertConfig(
                hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                intermediate_size=4096)),
            "vit-b16": tf.ViTForImageClassification(tf.ViTConfig(num_labels=1000)),
        }
        bert_model = tf.BertModel(tf.BertConfig())
    assert n_params(bert_model) == 109_482_240  # encoder + pooler
    for name, model in hf.items():
        shape: dict[str, Any] = {} if "vit" in name else {"seq_len": 16}
        zm = get_model(name, device="meta", batch_size=2, **shape)
        assert n_params(zm.model) == n_params(model), name
        if "vit" not in name:  # (ViT: ours fuses q, k, v into one qkv Linear)
            shapes = sorted(tuple(sorted(p.shape)) for p in zm.model.parameters())
            assert shapes == sorted(tuple(sorted(p.shape)) for p in model.parameters()), name
        out = model(img if "vit" in name else x).logits
        assert zm.model(*zm.inputs).shape == out.shape, name


def _load_hf(zoo: nn.Module, hf: nn.Module, rules: list[tuple[str, Any]],
             transpose: str = "^$") -> None:
    """Copy ``hf``'s weights into ``zoo``, renaming keys with the regex ``rules``."""
    renamed: dict[str, torch.Tensor] = {}
    for key, val in hf.state_dict().items():
        for pat, rep in rules:
            key = re.sub(pat, rep, key)
        renamed[key] = val.t() if re.search(transpose, key) else val
    for key in [k for k in renamed if re.search(r"\.q\.(weight|bias)$", k)]:  # fused qkv
        stem, kind = key.rsplit(".q.", 1)
        parts = [renamed.pop(f"{stem}.{c}.{kind}") for c in "qkv"]
        renamed[f"{stem}.qkv.{kind}"] = torch.cat(parts)
    zsd = zoo.state_dict()
    new = {k: v for k, v in renamed.items() if k in zsd}
    loaded = {zsd[k].data_ptr() for k in new}
    missing = [k for k in zsd if k not in new and zsd[k].data_ptr() not in loaded]  # not tied
    assert not missing, missing
    for k, v in new.items():
        assert zsd[k].shape == v.shape, k
    zoo.load_state_dict(new, strict=False)


def _compare(zm: ZooModel, hf: nn.Module, *args: torch.Tensor) -> None:
    zm.model.eval()
    hf.eval()
    with torch.no_grad():
        ref = hf(*args).logits
        out = zm.model(*args)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def test_gpt2_matches_hf_numerically() -> None:
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=101,
                                          n_positions=32, attn_implementation="eager"))
    zm = get_model("gpt2", batch_size=2, seq_len=16, n_layer=2, n_embd=64, n_head=4,
                   vocab_size=101, n_positions=32)
    _load_hf(zm.model, hf, [(r"^transformer\.", "")], transpose=r"(c_attn|c_proj|c_fc)\.weight$")
    _compare(zm, hf, zm.inputs[0])


#: Hugging Face BERT's encoder parameter names -> the zoo's (``_load_hf``'s rules)
BERT_ENCODER_RULES = [
    (r"^bert\.embeddings\.LayerNorm", "bert.ln"), (r"^bert\.embeddings\.", "bert."),
    (r"encoder\.layer\.", "layers."), (r"attention\.self\.", ""),
    (r"attention\.output\.dense", "attn_out"), (r"attention\.output\.LayerNorm", "attn_ln"),
    (r"intermediate\.dense", "ffn_in"), (r"output\.dense", "ffn_out"),
    (r"output\.LayerNorm", "ffn_ln")]


def test_bert_matches_hf_numerically() -> None:
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tf.BertForMaskedLM(tf.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=101, max_position_embeddings=32, attn_implementation="eager"))
    zm = get_model("bert-base", batch_size=2, seq_len=16, hidden=64, n_layer=2, n_head=4,
                   ffn=128, vocab_size=101, max_position_embeddings=32)
    rules = [*BERT_ENCODER_RULES,
             (r"^cls\.predictions\.transform\.dense", "head_dense"),
             (r"^cls\.predictions\.transform\.LayerNorm", "head_ln"),
             (r"^cls\.predictions\.bias$", "decoder.bias"), (r"^cls\.predictions\.", "")]
    _load_hf(zm.model, hf, rules)
    _compare(zm, hf, zm.inputs[0])


def test_bert_span_head_matches_hf_numerically() -> None:
    """head="qa" is Hugging Face's BertForQuestionAnswering: the same start and end logits,
    and the same loss (the mean of the two cross-entropies) for the same positions."""
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tf.BertForQuestionAnswering(tf.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=101, max_position_embeddings=32, attn_implementation="eager"))
    zm = get_model("bert-base", head="qa", batch_size=2, seq_len=16, hidden=64, n_layer=2,
                   n_head=4, ffn=128, vocab_size=101, max_position_embeddings=32)
    rules = BERT_ENCODER_RULES
    _load_hf(zm.model, hf, rules)
    idx, targets = zm.train_inputs
    zm.model.eval()
    hf.eval()
    with torch.no_grad():
        ref = hf(idx, start_positions=targets[:, 0], end_positions=targets[:, 1])
        logits, loss = zm.model(idx), zm.model(idx, targets)
    torch.testing.assert_close(logits[..., 0], ref.start_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[..., 1], ref.end_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(loss, ref.loss, atol=1e-4, rtol=1e-4)


def test_bert_padding_mask_matches_hf_and_adds_one_pass_over_the_scores() -> None:
    """``attention_mask`` is Hugging Face's: padded keys take no attention (its logits equal
    Hugging Face's on every token); traced with attention written out, it costs one more
    addition per layer over the (B, heads, T, T) scores: the scores read and written and the
    (B, 1, 1, T) mask read, 4 bytes each in fp32."""
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tf.BertForQuestionAnswering(tf.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=101, max_position_embeddings=32, attn_implementation="eager"))
    cfg = dict(head="qa", batch_size=2, seq_len=16, hidden=64, n_layer=2, n_head=4, ffn=128,
               vocab_size=101, max_position_embeddings=32)
    zm = get_model("bert-base", padding_mask=True, **cfg)
    rules = BERT_ENCODER_RULES
    _load_hf(zm.model, hf, rules)
    idx, _, _, mask = zm.inputs
    assert mask.shape == idx.shape and bool((mask == 1).all())
    mask = mask.clone()
    mask[1, 10:] = 0
    zm.model.eval()
    hf.eval()
    with torch.no_grad():
        ref = hf(idx, attention_mask=mask)
        logits = zm.model(idx, None, None, mask)
        unmasked = zm.model(idx)
    torch.testing.assert_close(logits[..., 0], ref.start_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[..., 1], ref.end_logits, atol=1e-5, rtol=1e-5)
    # the mask took effect, on the padded sequence only (at init attention is near uniform)
    assert (logits[1] - unmasked[1]).abs().max() > 1e-4
    torch.testing.assert_close(logits[0], unmasked[0], atol=1e-6, rtol=1e-6)

    B, T, heads = 2, 16, 4
    scores = B * heads * T * T

    def adds(padding_mask: bool) -> list[tuple[int, int]]:
        m = get_model("bert-base", padding_mask=padding_mask, **cfg)
        t = roofline.trace(m.model, *m.train_inputs, train=True, fake=True, attention="eager")
        return [(op.bytes_read, op.bytes_written) for op in t.ops
                if op.name == "aten.add.Tensor" and op.phase == "forward"
                and op.output_shapes[0] == (B, heads, T, T)]

    assert adds(False) == []
    assert adds(True) == [(4 * scores + 4 * B * T, 4 * scores)] * 2


def test_bert_span_head_counts() -> None:
    """BERT-base with the span head: the encoder without its pooler (109,482,240 - 768 x 768
    - 768 parameters with it, as Hugging Face's BertModel) and a 768 x 2 linear; the head
    adds 2 x 768 x 2 FLOPs per token forward, where the MLM head added a 768 x 768 dense and
    a 768 x 30,522 decoder."""
    base = 109_482_240 - 768 * 768 - 768
    qa = get_model("bert-base", head="qa", device="meta", batch_size=2, seq_len=16)
    mlm = get_model("bert-base", device="meta", batch_size=2, seq_len=16)
    assert n_params(qa.model) == base + 768 * 2 + 2
    with pytest.raises(ValueError, match="heads are mlm, qa"):
        get_model("bert-base", head="nsp", device="meta")

    def matmul_flops(zm: ZooModel) -> int:
        t = roofline.trace(zm.model, *zm.inputs, fake=True)
        return sum(op.flops for op in t.ops if op.category == "matmul")

    tokens = 2 * 16
    assert matmul_flops(mlm) - matmul_flops(qa) == tokens * 2 * 768 * (768 + 30522 - 2)


def test_llama_matches_hf_numerically() -> None:
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, attn_implementation="eager"))
    zm = get_model("llama-tiny", batch_size=2, seq_len=16, vocab_size=101, dim=64,
                   hidden_dim=96, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=64)
    rules = [(r"^model\.embed_tokens", "tok_embeddings"), (r"^model\.norm", "norm"),
             (r"^model\.", ""), (r"^lm_head", "output"), (r"self_attn\.(.)_proj", r"attention.w\1"),
             (r"mlp\.gate_proj", "feed_forward.w1"), (r"mlp\.up_proj", "feed_forward.w3"),
             (r"mlp\.down_proj", "feed_forward.w2"), (r"input_layernorm", "attention_norm"),
             (r"post_attention_layernorm", "ffn_norm")]
    _load_hf(zm.model, hf, rules)
    _compare(zm, hf, zm.inputs[0])


def test_llama_with_a_kv_cache_matches_one_full_forward() -> None:
    """A prompt, a chunk after it and single tokens through the cache give the logits of
    one forward over the whole sequence (GQA: the decode path stacks the query heads)."""
    torch.manual_seed(0)
    zm = get_model("llama-tiny", batch_size=2, seq_len=12, vocab_size=101, dim=64,
                   n_heads=8, n_kv_heads=2, hidden_dim=96)
    model: Any = zm.model.eval()
    idx = zm.inputs[0]
    with torch.no_grad():
        full = model(idx)
        cache = model.make_kv_cache(2, 12)
        parts = [model(idx[:, :5], cache=cache), model(idx[:, 5:9], cache=cache)]
        parts += [model(idx[:, i:i + 1], cache=cache) for i in range(9, 12)]
        last = model(idx, logits_to_keep=1)
    assert cache.length == 12
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="the cache holds 12 tokens and has room for 12"):
        model(idx[:, :1], cache=cache)


def test_vit_matches_hf_numerically() -> None:
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tf.ViTForImageClassification(tf.ViTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        image_size=32, patch_size=16, num_labels=10, layer_norm_eps=1e-6,
        attn_implementation="eager"))
    zm = get_model("vit-b16", batch_size=2, image_size=32, dim=64, n_layer=2, n_head=4,
                   mlp_dim=128, num_classes=10)
    rules = [  # both the transformers 4.x and 5.x layouts
        (r"^vit\.embeddings\.cls_token", "cls_token"),
        (r"^vit\.embeddings\.position_embeddings", "pos_embed"),
        (r"^vit\.embeddings\.patch_embeddings\.projection", "patch_embed"),
        (r"^vit\.layernorm", "norm"), (r"^classifier", "head"),
        (r"^vit\.(encoder\.layer|layers)\.", "blocks."),
        (r"layernorm_before", "ln_1"), (r"layernorm_after", "ln_2"),
        (r"attention\.attention\.(query|key|value)", lambda m: f"attn.{m[1][0]}"),
        (r"attention\.(q|k|v)_proj", r"attn.\1"),
        (r"attention\.(output\.dense|o_proj)", "attn.proj"),
        (r"(intermediate\.dense|mlp\.fc1)", "mlp.0"), (r"(output\.dense|mlp\.fc2)", "mlp.3")]
    _load_hf(zm.model, hf, rules)
    _compare(zm, hf, zm.inputs[0])


def test_transformer_layers_match_torch_nn() -> None:
    torch.manual_seed(0)
    d, h, f, x, mem = 32, 4, 64, torch.randn(2, 7, 32), torch.randn(2, 5, 32)
    ours_enc, ours_dec = EncoderLayer(d, h, f, 0.0).eval(), DecoderLayer(d, h, f, 0.0).eval()
    ref_enc = nn.TransformerEncoderLayer(d, h, f, 0.0, batch_first=True).eval()
    ref_dec = nn.TransformerDecoderLayer(d, h, f, 0.0, batch_first=True).eval()

    def copy_attn(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight,
                                            ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias,
                                          ours.v_proj.bias]))
        ref.out_proj.load_state_dict(ours.out_proj.state_dict())

    with torch.no_grad():
        for ours, ref in ((ours_enc, ref_enc), (ours_dec, ref_dec)):
            copy_attn(ours.self_attn, ref.self_attn)
            ref.linear1.load_state_dict(ours.ffn[0].state_dict())
            ref.linear2.load_state_dict(ours.ffn[2].state_dict())
            ref.norm1.load_state_dict(ours.ln_1.state_dict())
            ref.norm2.load_state_dict(ours.ln_2.state_dict())
        copy_attn(ours_dec.cross_attn, ref_dec.multihead_attn)
        ref_dec.norm3.load_state_dict(ours_dec.ln_3.state_dict())
        torch.testing.assert_close(ours_enc(x), ref_enc(x))
        mask = nn.Transformer.generate_square_subsequent_mask(7)
        torch.testing.assert_close(ours_dec(x, mem),
                                   ref_dec(x, mem, tgt_mask=mask, tgt_is_causal=True))
