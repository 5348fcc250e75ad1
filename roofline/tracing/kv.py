"""How a causal language model keeps its KV cache: the steps a serving trace records.

Two kinds of model are served, told apart by their ``forward`` signature (read, not
assumed from one library version):

* a Hugging Face causal LM (``transformers``), whose forward takes ``cache=`` (transformers
  5) or ``past_key_values=``. A decode step at context ``C`` (``C`` tokens already cached,
  one new token per sequence) runs on a ``StaticCache`` of ``C + 1`` slots that says it
  holds ``C`` tokens (``cumulative_length``; ``cache_position=`` where the forward takes
  it), so attention reads exactly the ``C + 1`` keys and values a paged engine reads. The
  prefill runs on a ``DynamicCache``: under fake tensors a static-cache prefill makes
  transformers build the full ``P x P`` mask and count twice the causal attention.
* a model with its own cache: ``model.make_kv_cache(batch, max_tokens, *, filled, dtype,
  device)`` returns a cache its ``forward(ids, cache=...)`` continues (the zoo's Llama).

Every cache is made inside the caller's ``FakeTensorMode``, on the CPU device, so its
tensors are fakes of the mode :func:`roofline.trace` then uses: nothing is allocated.

Under tensor parallelism over ``N`` GPUs each rank's cache holds ``1/N`` of the KV heads
(the heads its column-split K and V projections make). A transformers model is split by
its own plan (``model._tp_plan``, the one ``from_pretrained(tp_plan="auto")`` applies); a
model with its own cache by roofline's Megatron-style plan, and its ``make_kv_cache`` takes
``tensor_parallel=N``.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from roofline._errors import NoKVCacheError

Step = tuple[Callable[..., Any], torch.Tensor]

_HOW = ("Pass a transformers causal LM (AutoModelForCausalLM.from_config(config), built "
        "on the meta device for a large one: nothing is allocated), or give your model a "
        "cache: a forward(ids, cache=...) that continues the tokens the cache holds, and a "
        "make_kv_cache(batch, max_tokens, *, filled=0, dtype=None, device=None) method that "
        "returns an empty cache saying it holds `filled` tokens (roofline.zoo.llama.Llama "
        "is an example).")


def _parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def _dtype(model: nn.Module) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()


class HFModel:
    """A transformers causal LM: its config says the cache's shape, its forward how to
    pass it."""

    def __init__(self, model: nn.Module, params: dict[str, inspect.Parameter]) -> None:
        self.model = model
        config: Any = model.config
        self.config = config.get_text_config(decoder=True)
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.positions = "cache_position" in params
        self.logits_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep")
                               if k in params), None)
        self.dtype = _dtype(model)
        self.name = type(model).__name__
        self.max_positions: int | None = getattr(self.config, "max_position_embeddings",
                                                 None)

    @property
    def head_dim(self) -> int:
        cfg = self.config
        return int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)

    @property
    def kv_heads(self) -> int:
        cfg = self.config
        return int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)

    def _call(self, cache: Any, first: int, tokens: int, last_only: bool,
              ) -> Callable[..., Any]:
        kwargs: dict[str, Any] = {self.cache_kw: cache, "use_cache": True}
        if self.positions:  # transformers 4.x: the write positions are an argument
            kwargs["cache_position"] = torch.arange(first, first + tokens)
        if last_only and self.logits_kw:
            kwargs[self.logits_kw] = 1
        return functools.partial(self.model, **kwargs)

    def prefill(self, batch: int, prompt_tokens: int, shards: int = 1, filled: int = 0,
                ) -> Step:
        if filled:  # a later chunk of a chunked prefill: over the chunks before it
            return self._cached(batch, prompt_tokens, filled, shards, True)
        from transformers import DynamicCache

        params = _parameters(DynamicCache.__init__)
        cache = DynamicCache(config=self.config) if "config" in params else DynamicCache()
        ids = torch.zeros(batch, prompt_tokens, dtype=torch.long)
        return self._call(cache, 0, prompt_tokens, True), ids

    def tp_plan(self, shards: int) -> dict[str, Any]:
        """The model's own tensor-parallel plan as torch's styles, for ``shards`` GPUs."""
        from transformers import StaticCache

        if "max_batch_size" in _parameters(StaticCache.__init__):
            raise ValueError("tensor-parallel serving needs transformers 5 (its StaticCache "
                             "takes the rank's share of the KV heads)")
        return hf_tp_plan(self.model, shards, self.kv_heads)

    def decode(self, batch: int, context: int, shards: int = 1) -> Step:
        return self._cached(batch, 1, context, shards, False)

    def _cached(self, batch: int, tokens: int, filled: int, shards: int, last_only: bool,
                ) -> Step:
        """``tokens`` new tokens of each sequence after ``filled`` cached ones."""
        from transformers import StaticCache

        slots = filled + tokens
        params = _parameters(StaticCache.__init__)
        if "max_batch_size" in params:  # transformers 4.x allocates up front
            cache = StaticCache(config=self.config, max_batch_size=batch, max_cache_len=slots,
                                device="cpu", dtype=self.dtype)
        else:
            cache = StaticCache(config=self.config, max_cache_len=slots)
            cache.early_initialization(batch_size=batch, num_heads=self.kv_heads // shards,
                                       head_dim=self.head_dim, dtype=self.dtype,
                                       device=torch.device("cpu"))
        for layer in getattr(cache, "layers", ()):  # "context tokens already seen"
            if hasattr(layer, "cumulative_length"):
                layer.cumulative_length.fill_(filled)
        ids = torch.zeros(batch, tokens, dtype=torch.long)
        return self._call(cache, filled, tokens, last_only), ids


class OwnCacheModel:
    """A model with ``make_kv_cache`` and a ``forward(ids, cache=...)``."""

    def __init__(self, model: nn.Module, params: dict[str, inspect.Parameter]) -> None:
        self.model = model
        self.logits = "logits_to_keep" in params
        self.dtype = _dtype(model)
        self.name = type(model).__name__
        limit = getattr(model, "max_seq_len", None)
        self.max_positions: int | None = int(limit) if isinstance(limit, int) else None

    def tp_plan(self, shards: int) -> dict[str, Any] | None:
        """None (roofline's Megatron-style plan), once ``make_kv_cache`` can size a rank's
        cache."""
        make: Any = self.model.make_kv_cache
        if "tensor_parallel" not in _parameters(make):
            raise ValueError(
                f"tensor_parallel={shards}: {self.name}.make_kv_cache takes no "
                "tensor_parallel= argument, so a rank's cache (1/N of the KV heads) cannot "
                "be made; add one (roofline.zoo.llama.Llama.make_kv_cache is an example)")
        return None

    def _step(self, batch: int, tokens: int, filled: int, shards: int) -> Step:
        make: Any = self.model.make_kv_cache
        extra = {"tensor_parallel": shards} if shards > 1 else {}
        cache = make(batch, filled + tokens, filled=filled, device="cpu", **extra)
        kwargs: dict[str, Any] = {"cache": cache}
        if self.logits and tokens > 1:
            kwargs["logits_to_keep"] = 1
        return functools.partial(self.model, **kwargs), torch.zeros(batch, tokens,
                                                                     dtype=torch.long)

    def prefill(self, batch: int, prompt_tokens: int, shards: int = 1, filled: int = 0,
                ) -> Step:
        return self._step(batch, prompt_tokens, filled, shards)

    def decode(self, batch: int, context: int, shards: int = 1) -> Step:
        return self._step(batch, 1, context, shards)


CacheModel = HFModel | OwnCacheModel


def _styles() -> dict[str, Callable[[], Any]]:
    """transformers' plan entries as torch's styles, with the layouts transformers registers
    for them (``transformers/distributed/tensor_parallel.py``, ``ALL_PARALLEL_STYLES``)."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    def whole_in_out(style: Any) -> Callable[[], Any]:
        return lambda: style(input_layouts=Replicate(), output_layouts=Replicate())

    return {"colwise": ColwiseParallel, "rowwise": RowwiseParallel,
            "colwise_gather_output": whole_in_out(ColwiseParallel),
            "colwise_rep": whole_in_out(ColwiseParallel),
            "rowwise_split_input": whole_in_out(RowwiseParallel),
            "rowwise_rep": whole_in_out(RowwiseParallel),
            # EmbeddingParallel(shard_dim=0): the table split by vocabulary rows, the
            # partial lookups all-reduced, as torch's RowwiseParallel does for nn.Embedding
            "embedding_rowwise": lambda: RowwiseParallel(input_layouts=Replicate())}


def hf_tp_plan(model: nn.Module, shards: int, kv_heads: int) -> dict[str, Any]:
    """A transformers model's ``_tp_plan`` (``*`` for any layer index) as a
    ``parallelize_module`` plan over ``shards`` GPUs.

    Raises
    ------
    ValueError
        The model states no plan, uses a style roofline does not map, or has KV heads that
        ``shards`` does not divide (engines then replicate heads; not modelled).
    """
    declared: dict[str, str] = dict(getattr(model, "_tp_plan", None) or {})
    if not declared:
        raise ValueError(f"tensor_parallel={shards}: {type(model).__name__} states no tensor-"
                         "parallel plan (transformers' _tp_plan / config.base_model_tp_plan)")
    if kv_heads % shards:
        raise ValueError(f"tensor_parallel={shards}: {type(model).__name__} has {kv_heads} KV "
                         f"heads, not divisible by {shards} (engines replicate KV heads then; "
                         "not modelled): use a tensor-parallel size that divides it")
    styles = _styles()
    unknown = sorted({s for s in declared.values() if s not in styles})
    if unknown:
        raise ValueError(f"tensor_parallel={shards}: {type(model).__name__}'s plan uses "
                         f"{', '.join(unknown)}; roofline maps {', '.join(styles)}")
    plan: dict[str, Any] = {}
    for name, _ in model.named_modules():
        for pattern, style in declared.items():
            if name and fnmatch.fnmatchcase(name, pattern):
                plan[name] = styles[style]()
    return plan


def cache_model(model: Any) -> CacheModel:
    """The model's serving steps, or :class:`NoKVCacheError` saying how to give it a cache.

    Raises
    ------
    NoKVCacheError
        When ``model`` is not an ``nn.Module``, or its forward takes no cache.
    """
    if not isinstance(model, nn.Module):
        inner = getattr(model, "model", None)
        hint = (f" (it holds one in .model: pass {type(model).__name__}.model)"
                if isinstance(inner, nn.Module) else "")
        raise NoKVCacheError(f"serving traces an nn.Module, got {type(model).__name__}"
                             f"{hint}. {_HOW}")
    params = _parameters(model.forward)
    config = getattr(model, "config", None)
    if hasattr(config, "get_text_config") and {"cache", "past_key_values"} & set(params):
        return HFModel(model, params)
    if callable(getattr(model, "make_kv_cache", None)) and "cache" in params:
        return OwnCacheModel(model, params)
    signature = ", ".join(params)
    raise NoKVCacheError(
        f"{type(model).__name__}.forward({signature}) takes no KV cache (no cache= or "
        "past_key_values= argument with a cache roofline can make), so a decode step cannot "
        "be traced: each generated token would recompute attention over the whole prefix. "
        + _HOW)
