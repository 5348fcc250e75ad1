"""The steps of serving a causal language model, traced once for any device.

:func:`trace_serving` records the prefill of a batch of prompts and one decode step (one
new token per sequence) at a few context lengths, on fake tensors: a 70B model costs
seconds and no memory. :class:`ServingTrace` holds them; ``roofline.serve`` costs them on
a device, ``roofline.compare`` on two.

A decode step at context ``C`` reads the cache of ``C + 1`` tokens (the ``C`` cached and
the new one), so its time is affine in ``C``: tracing the first and last decode contexts
(and one between, by default) pins it over the whole generation.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from roofline._checks import whole
from roofline._errors import ContextLengthError, RooflineWarning, warn
from roofline._si import si
from roofline.tracing.attention import AttentionMode
from roofline.tracing.kv import CacheModel, cache_model
from roofline.tracing.quantized import (
    dtype_name,
    kv_bytes,
    parse_dtype,
    parse_weight_dtype,
    requantize,
)
from roofline.tracing.records import Trace
from roofline.tracing.step import trace
from roofline.tracing.strategies import Parallel

#: Decode contexts traced by default: the prompt, half-way and the full context.
CONTEXTS = 3


@dataclass
class ServingTrace:
    """Prefill and decode steps of one serving workload, device-independent.

    Attributes
    ----------
    model : what was traced (the model's class).
    batch : concurrent sequences.
    prompt_tokens, new_tokens : tokens per sequence in the prompt and generated.
    dtype, kv_dtype : the model's and the KV cache's dtype (``"bfloat16"``...).
    weight_dtype : the matmul weights' dtype when narrower than the model's (fp8, nvfp4),
        else None.
    prefill : the prefill step: ``batch x prompt_tokens`` tokens, logits of the last only
        (chunked: every chunk's ops in order, with their storage table left empty).
    decode : context -> one decode step with that many tokens already cached. The first
        is ``prompt_tokens``, the last ``prompt_tokens + new_tokens - 1``.
    kv_bytes_per_token : the KV cache of one token of one sequence, all layers, in
        ``kv_dtype`` (measured on the decode step's cache), on one GPU: its share of the KV
        heads under tensor parallelism.
    parameter_bytes : the weights (in the dtypes they are served in) on one GPU.
    max_positions : the longest context the model takes (None: no limit it states).
    trace_seconds : how long tracing took.
    tensor_parallel : GPUs the model is split over (Megatron-style, as serving engines'
        ``tensor_parallel_size``); the steps are rank 0's, with its all-reduces.
    prefill_chunk : the prompt was prefilled in chunks of this many tokens, each over the
        cache of the ones before (``prefill`` holds them in order); None: in one pass.
    """

    model: str
    batch: int
    prompt_tokens: int
    new_tokens: int
    dtype: str
    kv_dtype: str
    weight_dtype: str | None
    prefill: Trace
    decode: dict[int, Trace]
    kv_bytes_per_token: int
    parameter_bytes: int
    max_positions: int | None
    trace_seconds: float
    tensor_parallel: int = 1
    prefill_chunk: int | None = None
    build: Callable[[int], Trace] | None = field(default=None, repr=False, compare=False)

    @property
    def contexts(self) -> list[int]:
        """The traced decode contexts, ascending."""
        return sorted(self.decode)

    @property
    def total_tokens(self) -> int:
        """Prompt plus new tokens: the context a sequence ends at."""
        return self.prompt_tokens + self.new_tokens

    @property
    def kv_bytes_per_sequence(self) -> int:
        """The KV cache of one sequence at its full context (prompt + new tokens)."""
        return self.kv_bytes_per_token * self.total_tokens

    @property
    def step_contexts(self) -> np.ndarray:
        """The context of each decode step: the first new token comes out of the prefill,
        each of the other ``new_tokens - 1`` out of one decode step."""
        return np.arange(self.prompt_tokens, self.total_tokens - 1)

    def decode_step(self, batch: int) -> Trace:
        """The decode step at the full context for ``batch`` sequences (traced on first
        use, then kept): what the memory search sizes."""
        if batch == self.batch:
            return self.decode[self.contexts[-1]]
        if self.build is None:
            raise ValueError("this ServingTrace keeps no model to trace another batch with "
                             "(it was not made by trace_serving); trace it again")
        return self.build(batch)

    @property
    def per_gpu(self) -> str:
        """``" per GPU"`` under tensor parallelism (the sizes are one GPU's), else ``""``."""
        return " per GPU" if self.tensor_parallel > 1 else ""

    def __repr__(self) -> str:
        weights = f", weights {self.weight_dtype}" if self.weight_dtype else ""
        if self.tensor_parallel > 1:
            weights += f", tensor parallel over {self.tensor_parallel} GPUs"
        if self.prefill_chunk is not None:
            weights += f", prefill in chunks of {self.prefill_chunk}"
        contexts = ", ".join(map(str, self.contexts))
        return (f"ServingTrace({self.model}, batch {self.batch}, {self.prompt_tokens} prompt "
                f"+ {self.new_tokens} new tokens, {self.dtype}, KV {self.kv_dtype}{weights}: "
                f"prefill {len(self.prefill.ops)} ops, {si(self.prefill.total_flops, 'FLOP')}; "
                f"decode at {contexts}; KV {si(self.kv_bytes_per_token, 'B')}/token"
                f"{self.per_gpu})")


def _fake_step(step_of: Callable[..., tuple[Callable[..., Any], torch.Tensor]],
               batch: int, tokens: int, name: str, phase: str,
               split: tuple[int, Any] | None = None,
               attention: AttentionMode = "fused") -> Trace:
    """One step on fake tensors: the cache and the ids are made inside the fake mode.
    ``split``: (GPUs, plan) of tensor parallelism; rank 0's step is traced."""
    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
        if split is None:
            fn, ids = step_of(batch, tokens)
            t = trace(fn, ids, fake=True, attention=attention)
        else:
            gpus, plan = split
            fn, ids = step_of(batch, tokens, gpus)
            if not isinstance(fn, functools.partial):  # parallel= wraps the module itself
                raise TypeError(f"tensor-parallel serving needs the step as "
                                f"functools.partial(model, cache=...), got {fn!r}")
            t = trace(fn.func, ids, parallel=Parallel("tp", plan=plan), gpus=gpus,
                      attention=attention, **fn.keywords)
    t.info.model = name
    t.meta.update(serving=phase, batch=batch, tokens=tokens)
    return t


def _chained(parts: list[Trace]) -> Trace:
    """The chunks of a prefill as one step: their ops in order, each chunk's storage ids
    moved past the ones before so that none is shared; the storage table is left empty
    (a chunk's own table would miscount the weights every chunk reads)."""
    ops, offset = [], 0
    for part in parts:
        for op in part.ops:
            ops.append(dataclasses.replace(
                op, input_ids=tuple(i + offset for i in op.input_ids),
                output_ids=tuple(i + offset for i in op.output_ids)))
        offset += 1 + max((i for op in part.ops for i in (*op.input_ids, *op.output_ids)),
                          default=-1)
    first = parts[0]
    meta = {**first.meta, "tokens": sum(p.meta.get("tokens", 0) for p in parts),
            "chunks": [p.meta.get("tokens") for p in parts]}
    return Trace(ops=ops, meta=meta, info=copy.copy(first.info))


def _contexts(prompt_tokens: int, new_tokens: int, count: int) -> list[int]:
    last = prompt_tokens + new_tokens - 1
    return sorted({round(c) for c in np.linspace(prompt_tokens, last, count)})


def _served(model: Any, dtype: torch.dtype | str | None) -> CacheModel:
    """The model's serving steps, in ``dtype``: a model on the meta device is copied and
    cast (nothing to allocate); one with weights must be cast by its owner."""
    served = cache_model(model)
    if dtype is None or parse_dtype("dtype", dtype) == served.dtype:
        return served
    wanted = parse_dtype("dtype", dtype)
    if not all(p.is_meta for p in model.parameters()):
        raise ValueError(f"dtype={dtype_name(wanted)}: the model holds {dtype_name(served.dtype)} "
                         "weights, and roofline does not change your model; cast it "
                         "(model.to(dtype)) or build it on the meta device (with "
                         "torch.device('meta'): ...), which is copied and cast for free")
    return cache_model(copy.deepcopy(model).to(wanted))


def _check_context(served: CacheModel, prompt_tokens: int, new_tokens: int) -> None:
    limit = served.max_positions
    if limit is not None and prompt_tokens + new_tokens > limit:
        raise ContextLengthError(
            f"prompt_tokens {prompt_tokens} + new_tokens {new_tokens} = "
            f"{prompt_tokens + new_tokens} tokens exceed the {limit} positions {served.name} "
            f"takes (its max_position_embeddings / max_seq_len); ask for at most {limit} "
            "tokens in all, or use a model configured for longer contexts")


def trace_serving(model: Any, *, prompt_tokens: int, new_tokens: int, batch: int = 1,
                  dtype: torch.dtype | str | None = None,
                  kv_dtype: torch.dtype | str | None = None,
                  weight_dtype: torch.dtype | str | None = None,
                  contexts: int = CONTEXTS, tensor_parallel: int = 1,
                  prefill_chunk: int | None = None,
                  attention: AttentionMode = "fused") -> ServingTrace:
    """Trace the prefill and decode steps of serving ``model``, once for any device.

    Parameters
    ----------
    model : a transformers causal LM (its forward takes ``cache=`` or
        ``past_key_values=``), or a model with ``make_kv_cache`` and ``forward(ids,
        cache=)`` (the zoo's Llama). Build a large one on the meta device: nothing is
        allocated.
    prompt_tokens, new_tokens : tokens per sequence in the prompt, and generated.
    batch : concurrent sequences (a static batch: all prefilled, then decoded together).
    dtype : serve the weights in this dtype (a meta-device model is cast on a copy);
        None: the model's own.
    kv_dtype : the KV cache's dtype (``"fp8"``...); None: the model's. Costed by rewriting
        the decode steps' cache traffic (:mod:`roofline.tracing.quantized`).
    weight_dtype : ``"fp8"``: the matmuls read fp8 weights and activations and run at the
        fp8 rate (W8A8), as FP8 serving runs them; ``"nvfp4"``: NVFP4 weights, activations
        quantized to NVFP4 before each matmul, the fp4 rate (W4A4, Blackwell); None: the
        model's dtype.
    contexts : decode contexts to trace, from the prompt to the full context (>= 2; the
        time of a decode step is affine in its context).
    tensor_parallel : split the model over this many GPUs, as serving engines'
        ``tensor_parallel_size`` does: attention heads and MLP columns split, two
        all-reduces per layer, and (a transformers model, by its own ``_tp_plan``) the
        embedding's all-reduce and the head's all-gather. Rank 0's steps are traced on a
        fake process group; every rank runs the same.
    prefill_chunk : prefill the prompt in chunks of this many tokens, each attending over
        the cache of the ones before, the last token's logits only, as llama.cpp's
        micro-batches (``n_ubatch``) and chunked prefill in vLLM or TensorRT-LLM run a long
        prompt; None (or a chunk as long as the prompt): one pass.
    attention : how the steps' attention is recorded, as :func:`roofline.trace` takes it:
        ``"fused"`` (one kernel, as FlashAttention runs it) or ``"eager"`` (written out:
        scores, softmax, weighted sum, as an engine without flash attention runs it).

    Raises
    ------
    NoKVCacheError
        The model takes no KV cache; the message says how to give it one.
    ContextLengthError
        ``prompt_tokens + new_tokens`` exceed the positions the model takes.
    ValueError
        A count below 1, a dtype that is not a floating-point one, or a tensor-parallel
        size that does not divide the KV heads.

    Examples
    --------
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688,
    ...                      num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4)
    >>> with torch.device("meta"):
    ...     model = LlamaForCausalLM(config)
    >>> st = roofline.trace_serving(model, prompt_tokens=128, new_tokens=64, batch=4)
    >>> st.contexts
    [128, 160, 191]
    >>> st.kv_bytes_per_token  # 2 (K and V) x 2 layers x 4 KV heads x 32 dims x 4 bytes
    2048
    """
    prompt_tokens = whole("prompt_tokens", prompt_tokens)
    new_tokens = whole("new_tokens", new_tokens)
    batch = whole("batch", batch)
    contexts = whole("contexts", contexts, at_least=2)
    gpus = whole("tensor_parallel", tensor_parallel)
    chunk = None if prefill_chunk is None else whole("prefill_chunk", prefill_chunk)
    if chunk is not None and chunk >= prompt_tokens:
        chunk = None
    served = _served(model, dtype)
    split = (gpus, served.tp_plan(gpus)) if gpus > 1 else None
    kv = parse_dtype("kv_dtype", kv_dtype) if kv_dtype is not None else served.dtype
    weights = parse_weight_dtype(weight_dtype) if weight_dtype is not None else None
    _check_context(served, prompt_tokens, new_tokens)
    start = time.perf_counter()

    def decode(b: int, context: int) -> Trace:
        step = _fake_step(served.decode, b, context, served.name, "decode", split, attention)
        return requantize(step, kv_dtype=kv, weight_dtype=weights)

    def prefill_part(filled: int, tokens: int) -> Trace:
        step = _fake_step(functools.partial(served.prefill, filled=filled), batch, tokens,
                          served.name, "prefill", split, attention)
        return requantize(step, weight_dtype=weights)

    prefill = (prefill_part(0, prompt_tokens) if chunk is None else _chained(
        [prefill_part(f, min(chunk, prompt_tokens - f)) for f in range(0, prompt_tokens, chunk)]))
    steps = {c: decode(batch, c) for c in _contexts(prompt_tokens, new_tokens, contexts)}
    first = min(steps)
    per_token = kv_bytes(steps[first]) / (batch * (first + 1))
    if not per_token:
        warn(f"the decode step of {served.name} read no cache tensor that existed before it: "
             "its KV-cache bytes are 0 (does make_kv_cache return the tensors forward "
             "attends over?)", RooflineWarning)
    final = prompt_tokens + new_tokens - 1
    memo: dict[int, Trace] = {batch: steps[final]}

    def build(b: int) -> Trace:
        if b not in memo:
            memo[b] = decode(b, final)
        return memo[b]

    params = sum(s.bytes for s in steps[final].storages.values() if s.kind == "parameter")
    return ServingTrace(served.name, batch, prompt_tokens, new_tokens,
                        dtype_name(served.dtype), dtype_name(kv),
                        dtype_name(weights) if weights is not None else None, prefill, steps,
                        math.floor(per_token + 0.5), params, served.max_positions,
                        time.perf_counter() - start, gpus, prefill_chunk=chunk, build=build)

