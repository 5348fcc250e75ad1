"""What a trace knows about its own capture: :class:`CaptureInfo`, typed.

The capture layer fills it (``roofline.tracing.run.captured_info``, called by the
single-GPU and the parallel trace alike); the analysis and presentation layers read its
fields. ``Trace.meta`` stays free for the user's own tags.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class CaptureInfo:
    """Facts about how a step was captured.

    Attributes
    ----------
    model : the traced callable's name (its module's class); relabel a trace by setting it.
    train : a training step (forward, loss, backward, optimizer); None for a plain
        :func:`roofline.capture` block.
    fake : traced on fake tensors; None for a plain capture block.
    torch : the PyTorch version that ran the capture.
    attention : how ``F.scaled_dot_product_attention`` was rerouted (``"fused"`` or
        ``"eager"``), None when no call was.
    attention_calls : calls rerouted.
    attention_unfused : calls with dropout left on the CPU's unfused fp32 path.
    fused_dropout_calls : ``F.dropout`` calls recorded as CUDA's fused ``native_dropout``.
    fused_rms_norm_calls : ``F.rms_norm`` calls recorded as CUDA's ``_fused_rms_norm``
        (and its fused backward).
    fused_softmax_calls : softmax and log-softmax calls with an fp32 ``dtype`` over fp16
        tensors recorded as CUDA's one kernel (:mod:`roofline.tracing.softmax`).
    cuda_autocast_calls : op calls under autocast that CUDA's cast policy ran otherwise than
        the CPU's would have (:mod:`roofline.tracing.autocast`).
    parallel : the parallel strategy of a parallel trace (``"ddp"``, ``"fsdp"``, ``"tp"``;
        see :data:`roofline.tracing.strategies.STRATEGIES`); None for one GPU.
    world_size : ranks of a parallel trace.
    batch : the batch: the first dimension of the first tensor input (of a parallel
        trace, the global batch over all ranks); None when no input has one.
    rank_batch : the batch rank 0 ran.
    buckets : bytes of each DDP gradient bucket, in order.
    loss : where a training step's loss came from: ``"output"`` (a scalar), ``"loss_fn"``
        or ``"output.loss"`` (the ``loss`` the output carries, e.g. a Hugging Face
        ``ModelOutput`` given labels); ``""`` for inference.
    optimizer_foreach : the optimizer left ``foreach`` to PyTorch and a fake trace ran its
        foreach kernels, as PyTorch's default does on CUDA (on the CPU it loops).
    compiled : the ``torch.compile`` mode of a compiled trace (``trace(..., compile=True)``:
        ``"default"``...); None for an eager one.
    compiled_graphs : graphs dynamo compiled (one per graph, however often it ran).
    graph_breaks : why dynamo broke the step into more than one graph, one reason each
        (the code between graphs ran eagerly and is recorded op by op).
    recompute_flops : FLOPs of forward ops that inductor's min-cut partitioner recomputes
        in backward instead of saving.
    """

    model: str = ""
    train: bool | None = None
    fake: bool | None = None
    torch: str = ""
    attention: str | None = None
    attention_calls: int = 0
    attention_unfused: int = 0
    fused_dropout_calls: int = 0
    fused_rms_norm_calls: int = 0
    fused_softmax_calls: int = 0
    cuda_autocast_calls: int = 0
    parallel: str | None = None
    world_size: int | None = None
    batch: int | None = None
    rank_batch: int | None = None
    buckets: list[int] = field(default_factory=list)
    loss: str = ""
    optimizer_foreach: bool = False
    compiled: str | None = None
    compiled_graphs: int = 0
    graph_breaks: list[str] = field(default_factory=list)
    recompute_flops: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CaptureInfo:
        """Read the ``info`` object of a trace document, checking each field."""
        if not isinstance(data, dict):
            raise ValueError(f"trace JSON: 'info' must be an object, got {data!r}")
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(data) - known):
            raise ValueError(f"trace JSON: unknown info field(s) {unknown} (known: "
                             f"{', '.join(sorted(known))})")
        kw: dict[str, Any] = {}
        for name, value in data.items():
            try:
                kw[name] = _CHECKS[name](value)
            except TypeError as e:
                raise ValueError(f"trace JSON: info field {name!r}: {e}") from None
        return cls(**kw)

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> tuple[CaptureInfo, dict[str, Any]]:
        """Split a version-1 trace's ``meta`` (where these facts were free-form keys) into
        the info and the user's remaining tags."""
        known = {f.name for f in fields(cls)}
        facts = {k: v for k, v in meta.items() if k in known}
        rest = {k: v for k, v in meta.items() if k not in known}
        if "model" in facts and not isinstance(facts["model"], str):
            rest["model"] = facts.pop("model")  # a user's tag that is not a name
        return cls.from_dict(facts), rest


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _optional_flag(value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"expected true, false or null, got {value!r}")
    return value


def _count(value: Any) -> int:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"expected a non-negative integer, got {value!r}")
    return value


def _optional_count(value: Any) -> int | None:
    return None if value is None else _count(value)


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of strings, got {value!r}")
    return [_text(v) for v in value]


def _counts(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of integers, got {value!r}")
    return [_count(v) for v in value]


_CHECKS = {
    "model": _text, "train": _optional_flag, "fake": _optional_flag, "torch": _text,
    "attention": _optional_text, "attention_calls": _count, "attention_unfused": _count,
    "fused_dropout_calls": _count, "fused_rms_norm_calls": _count,
    "fused_softmax_calls": _count, "cuda_autocast_calls": _count, "parallel": _optional_text,
    "world_size": _optional_count, "batch": _optional_count, "rank_batch": _optional_count,
    "buckets": _counts, "loss": _text, "optimizer_foreach": _flag,
    "compiled": _optional_text, "compiled_graphs": _count, "graph_breaks": _texts,
    "recompute_flops": _count,
}
