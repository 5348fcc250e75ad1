"""Model zoo: reference workloads written in plain PyTorch, nanoGPT style.

>>> from roofline.zoo import get_model
>>> zm = get_model("gpt2", batch_size=2, seq_len=64)
>>> loss = zm.model(*zm.train_inputs)
"""

from .registry import (
    UnknownModelError,
    ZooModel,
    describe_models,
    get_model,
    list_models,
    resolve_name,
)

__all__ = [
    "UnknownModelError",
    "ZooModel",
    "describe_models",
    "get_model",
    "list_models",
    "resolve_name",
]
