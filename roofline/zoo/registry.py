"""Name -> builder registry of the model zoo, and :func:`get_model`."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from roofline._errors import UnknownModelError

from . import bert, gpt2, llama, mlp, mobilenet, resnet, transformer, vit

Builder = Callable[[dict[str, Any]], tuple[nn.Module, tuple, tuple]]


@dataclass
class ZooModel:
    """A ready-to-run model with example inputs.

    Attributes
    ----------
    name : str
        Canonical zoo name.
    model : torch.nn.Module
        The model (in training mode, PyTorch's default).
    inputs : tuple
        Positional arguments for inference: ``model(*inputs)`` returns logits.
    train_inputs : tuple
        Positional arguments for training, targets included:
        ``model(*train_inputs)`` returns a scalar loss.
    description : str
        One-line description.
    config : dict
        ``batch_size``, ``seq_len`` or ``image_size``, and the architecture hyper-parameters.
    """

    name: str
    model: nn.Module
    inputs: tuple
    train_inputs: tuple
    description: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Entry:
    description: str
    build: Builder
    defaults: dict[str, Any]
    aliases: tuple[str, ...] = ()
    default_device: str = "cpu"


_REGISTRY: dict[str, _Entry] = {
    "mlp": _Entry("3-layer MLP 784-1024-1024-10 (ReLU), batch 64", mlp.build, mlp.DEFAULTS,
                  ("mlp3", "mnist-mlp")),
    "resnet50": _Entry("ResNet-50 v1.5, 25.6M params, 4.1 GMACs at 224x224, batch 32",
                       resnet.build, resnet.defaults(50), ("resnet", "resnet-50", "rn50")),
    "resnet101": _Entry("ResNet-101 v1.5, 44.5M params, 7.8 GMACs at 224x224, batch 32",
                        resnet.build, resnet.defaults(101), ("rn101",)),
    "resnet152": _Entry("ResNet-152 v1.5, 60.2M params, 11.5 GMACs at 224x224, batch 32",
                        resnet.build, resnet.defaults(152), ("rn152",)),
    "mobilenet": _Entry("MobileNetV2 1.0, 3.5M params, 0.3 GMACs at 224x224, batch 32",
                        mobilenet.build, mobilenet.DEFAULTS,
                        ("mobilenetv2", "mobilenet-v2")),
    "gpt2": _Entry("GPT-2 small (124M, 12x768), tied lm_head, batch 8 x 1024 tokens",
                   gpt2.build, gpt2.defaults("gpt2"), ("gpt2-small", "gpt-2", "gpt2-124m")),
    "gpt2-medium": _Entry("GPT-2 medium (355M, 24x1024), batch 8 x 1024 tokens", gpt2.build,
                          gpt2.defaults("gpt2-medium"), ("gpt2-355m",)),
    "gpt2-large": _Entry("GPT-2 large (774M, 36x1280), batch 8 x 1024 tokens", gpt2.build,
                         gpt2.defaults("gpt2-large"), ("gpt2-774m",)),
    "gpt2-xl": _Entry("GPT-2 XL (1.56B, 48x1600), batch 8 x 1024 tokens", gpt2.build,
                      gpt2.defaults("gpt2-xl"), ("gpt2-1.5b",)),
    "bert-base": _Entry("BERT-base (110M, 12x768) with MLM head (head='qa': SQuAD's span "
                        "head), batch 8 x 128 tokens",
                        bert.build, bert.defaults("bert-base"),
                        ("bert", "bert-base-uncased", "bert-110m")),
    "bert-large": _Entry("BERT-large (335M, 24x1024) with MLM head (head='qa': SQuAD's span "
                         "head), batch 8 x 128 tokens",
                         bert.build, bert.defaults("bert-large"), ("bert-large-uncased",)),
    "vit-b16": _Entry("ViT-B/16 (86.6M), 224x224 -> 197 tokens, batch 32", vit.build,
                      vit.defaults("vit-b16"), ("vit", "vit-b/16", "vit-base", "vit-base-16")),
    "vit-l16": _Entry("ViT-L/16 (304M), 224x224 -> 197 tokens, batch 32", vit.build,
                      vit.defaults("vit-l16"), ("vit-l/16", "vit-large")),
    "llama-7b": _Entry("Llama-2-7B shape (6.74B), batch 1 x 2048 tokens, meta device",
                       llama.build, llama.defaults("llama-7b"),
                       ("llama", "llama2", "llama2-7b", "llama-2-7b", "llama7b"), "meta"),
    "llama3-8b": _Entry("Llama-3-8B shape (8.03B, GQA 32/8), batch 1 x 2048, meta device",
                        llama.build, llama.defaults("llama3-8b"),
                        ("llama-3-8b", "llama3", "llama-3.1-8b", "llama3.1-8b"), "meta"),
    "llama-tiny": _Entry("2-layer 256-dim Llama (GQA 8/4) for tests, batch 8 x 128 tokens",
                         llama.build, llama.defaults("llama-tiny"), ("tiny-llama",)),
    "transformer": _Entry("Transformer base En-De (6+6 x 512, 61M), batch 32 x 128 tokens",
                          transformer.build, transformer.DEFAULTS,
                          ("transformer-base", "transformer-wmt", "nmt")),
    "transformer-big": _Entry("Transformer big En-De (6+6 x 1024, 210M), batch 32 x 128",
                              transformer.build,
                              {**transformer.DEFAULTS, "d_model": 1024, "n_head": 16,
                               "d_ff": 4096, "dropout": 0.3}, ()),
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower())


_LOOKUP: dict[str, str] = {
    _key(alias): canon for canon, e in _REGISTRY.items() for alias in (canon, *e.aliases)
}


def list_models() -> list[str]:
    """Canonical names of all zoo models."""
    return list(_REGISTRY)


def describe_models() -> dict[str, str]:
    """Map each canonical name to its one-line description."""
    return {name: e.description for name, e in _REGISTRY.items()}


def resolve_name(name: str) -> str:
    """Canonical name for ``name`` (case, ``-``/``_``/``/`` and aliases are forgiven).

    Raises
    ------
    UnknownModelError
        If ``name`` is unknown; the message suggests close names.
    """
    canon = _LOOKUP.get(_key(name))
    if canon is not None:
        return canon
    close = difflib.get_close_matches(_key(name), list(_LOOKUP), n=5, cutoff=0.5)
    suggestions = list(dict.fromkeys(_LOOKUP[c] for c in close))
    hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
    raise UnknownModelError(f"unknown model {name!r}.{hint} Known: {', '.join(_REGISTRY)}")


def get_model(name: str, *, batch_size: int | None = None, seq_len: int | None = None,
              image_size: int | None = None, device: str | torch.device | None = None,
              dtype: torch.dtype | None = None, **overrides: Any) -> ZooModel:
    """Build a zoo model and its example inputs, deterministically (seed 0).

    Parameters
    ----------
    name : str
        Model name or alias, see :func:`list_models`.
    batch_size, seq_len, image_size : int, optional
        Override the default input shape; ``seq_len`` only for sequence models and
        ``image_size`` only for image models.
    device : str or torch.device, optional
        Where to build model and inputs. ``None`` means ``"meta"`` for the multi-billion
        parameter Llama shapes and ``"cpu"`` otherwise.
    dtype : torch.dtype, optional
        Cast floating parameters, buffers and floating inputs to this dtype.
    **overrides
        Architecture hyper-parameters, e.g. ``n_layer=2`` (keys of the returned ``config``).

    Returns
    -------
    ZooModel
        The model, ``inputs``, ``train_inputs``, description and resolved ``config``.

    Raises
    ------
    UnknownModelError
        For an unknown ``name``.
    TypeError
        For an override that is not a hyper-parameter of this model.
    """
    canon = resolve_name(name)
    entry = _REGISTRY[canon]
    cfg = dict(entry.defaults)
    shape = {"batch_size": batch_size, "seq_len": seq_len, "image_size": image_size}
    for key, value in {**shape, **overrides}.items():
        if value is None and key in shape:
            continue
        if key not in cfg:
            valid = ", ".join(k for k in cfg if k != "batch_size")
            raise TypeError(f"{canon!r} has no parameter {key!r}; valid: batch_size, {valid}")
        cfg[key] = value
    dev = torch.device(entry.default_device if device is None else device)
    # Seed 0 without disturbing the caller's random streams.
    rng_devices = list(range(torch.cuda.device_count())) if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices), torch.device(dev):
        if dev.type in ("cpu", "meta"):
            torch.random.default_generator.manual_seed(0)  # leaves CUDA generators alone
        else:
            torch.manual_seed(0)
        model, inputs, train_inputs = entry.build(cfg)
    if dtype is not None:
        model = model.to(dtype=dtype)
        inputs, train_inputs = (
            tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                  for t in ts)
            for ts in (inputs, train_inputs)
        )
    return ZooModel(canon, model, inputs, train_inputs, entry.description, cfg)
