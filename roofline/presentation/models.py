"""Resolve a CLI ``MODEL`` string: a zoo name, ``transformers:<Config>`` or ``pkg.mod:factory``."""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

import torch

from roofline.zoo import ZooModel, get_model


def load_model(spec: str, *, batch_size: int | None = None, seq_len: int | None = None,
               image_size: int | None = None, device: str | None = None) -> ZooModel:
    """Build the model a CLI user named, with example inputs.

    Parameters
    ----------
    spec : str
        A zoo name, ``transformers:<Config>`` or ``package.module:factory``.
    batch_size, seq_len, image_size : int, optional
        Input shape; ``None`` keeps the model's own.
    device : str, optional
        Where to build model and inputs. ``"meta"`` allocates no weights (a fake trace
        turns meta tensors into fake CPU tensors, so a 7B model costs nothing); a factory
        that cannot run on meta (it reads tensor values) is then built as it builds
        itself. ``None``: the CPU, or the zoo entry's own device (meta for llama-7b).
    """
    if spec.startswith("transformers:"):
        return _transformers(spec.split(":", 1)[1], batch_size or 8, seq_len or 128, device)
    if ":" in spec:
        return _factory(spec, device, batch_size=batch_size, seq_len=seq_len,
                        image_size=image_size)
    return get_model(spec, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                     device=device)


def causal_lm(spec: str, *, device: str | None = "meta") -> tuple[str, torch.nn.Module]:
    """The model a CLI user named, for serving: its name and the module itself.

    ``transformers:<Config>`` builds the causal LM of that config (random init, no
    download), a zoo name its model, ``package.module:factory`` what the factory returns
    (a module, a :class:`ZooModel` or ``(model, inputs)``). On ``"meta"`` by default:
    nothing is allocated.
    """
    if spec.startswith("transformers:"):
        name = spec.split(":", 1)[1]
        try:
            import transformers
        except ImportError as e:
            raise ValueError("transformers: models need `pip install transformers`") from e
        config_cls = getattr(transformers, name, None)
        if config_cls is None or not name.endswith("Config"):
            raise ValueError(f"transformers has no config class {name!r} "
                             "(use e.g. transformers:LlamaConfig)")
        with _on(device):
            try:
                return name, transformers.AutoModelForCausalLM.from_config(config_cls())
            except ValueError as e:
                raise ValueError(f"{name} has no causal language model in transformers "
                                 f"(AutoModelForCausalLM: {e})") from e
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot import {spec!r}: {e}") from e
        with _on(device):
            made = factory()
        made = made[0] if isinstance(made, tuple) else made
        made = made.model if isinstance(made, ZooModel) else made
        if not isinstance(made, torch.nn.Module):
            raise ValueError(f"{spec} must return an nn.Module, a ZooModel or (model, "
                             f"inputs), got {type(made).__name__}")
        return attr, made
    zm = get_model(spec, device=device)
    return zm.name, zm.model


def _on(device: str | None) -> contextlib.AbstractContextManager[Any]:
    """Make ``device`` the default for new tensors (nothing for ``None``)."""
    return torch.device(device) if device is not None else contextlib.nullcontext()


def _transformers(config_name: str, batch_size: int, seq_len: int,
                  device: str | None) -> ZooModel:
    """A Hugging Face model built from its config class (random init, no download)."""
    try:
        import transformers
    except ImportError as e:
        raise ValueError("transformers: models need `pip install transformers`") from e
    config_cls = getattr(transformers, config_name, None)
    if config_cls is None or not config_name.endswith("Config"):
        raise ValueError(f"transformers has no config class {config_name!r} "
                         "(use e.g. transformers:GPT2Config)")
    config = config_cls()
    model = None
    with _on(device):  # LlamaConfig() is the 6.7B model: on meta, no 27 GB of weights
        for auto in ("AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModel"):
            try:
                model = getattr(transformers, auto).from_config(config)
                break
            except ValueError:
                continue
        if model is None:
            raise ValueError(f"no transformers model class accepts {config_name}")
        vocab = getattr(config, "vocab_size", 1000)
        ids = torch.randint(0, vocab, (batch_size, seq_len))

    class _LM(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Any:
            out = self.inner(input_ids=input_ids, labels=labels)
            return out.loss if labels is not None else out[0]

    wrapped = _LM(model)
    return ZooModel(config_name, wrapped, (ids,), (ids, ids),
                    f"transformers {type(model).__name__} from {config_name}",
                    {"batch_size": batch_size, "seq_len": seq_len})


def _factory(spec: str, device: str | None, **kwargs: Any) -> ZooModel:
    """``package.module:factory``: the factory returns a ZooModel or ``(model, inputs)``."""
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot import {spec!r}: {e}") from e
    accepted = {k: v for k, v in kwargs.items() if v is not None}
    try:
        with _on(device):
            made = factory(**accepted)
    except (RuntimeError, NotImplementedError):
        if device != "meta":
            raise
        made = factory(**accepted)  # it reads tensor values, which meta tensors lack
    if isinstance(made, ZooModel):
        return made
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        model, inputs = made
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        return ZooModel(attr, model, inputs, inputs, spec, dict(accepted))
    raise ValueError(f"{spec} must return a roofline.zoo.ZooModel or (model, inputs), "
                     f"got {type(made).__name__}")
