"""Serving a causal language model on a device: time to first token, time per output
token against context, tokens per second, the bound of each phase, and how many sequences
fit.

A :class:`~roofline.tracing.serving.ServingTrace` (device-independent) is costed here:

* the prefill step's time is the time to first token (TTFT) of a static batch, all its
  prompts prefilled together;
* each traced decode step's time is the time per output token (TPOT) at its context. It is
  affine in the context (the weights are read once per step, the cache grows by one token
  per step), so every roof's seconds are interpolated linearly between the traced contexts
  and summed over the ``new_tokens - 1`` decode steps (the first new token comes out of
  the prefill);
* the capacity: the decode step at the full context (weights, the KV cache of every
  sequence, that step's activations) fitted against the device with the allocator's
  overheads (:func:`roofline.fits`), and the largest batch that fits
  (:func:`roofline.max_batch`, on the same step traced at other batches).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofline._checks import whole
from roofline._errors import RooflineWarning, warn
from roofline._si import si
from roofline.analysis.batch import MaxBatch, max_batch
from roofline.analysis.fit import Fit, fits
from roofline.analysis.parallel import step_cost
from roofline.analysis.timing import ROOFS, Analysis, ratio
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing.quantized import NVFP4
from roofline.tracing.serving import CONTEXTS, ServingTrace, trace_serving

#: The bounds a phase's time splits into: the roofs, host time, and the communication
#: a tensor-parallel step waits for (its all-reduces; 0 on one GPU).
BOUNDS = (*ROOFS, "host", "communication")
#: Kernels per transformer layer a serving engine's fused decode step launches, roughly
#: (vLLM and TensorRT-LLM fuse norms, RoPE and the KV append into a few kernels), against
#: the eager PyTorch ops a traced step holds: the overhead the eager step carries extra.
ENGINE_KERNELS_PER_LAYER = 12


@dataclass
class Capacity:
    """How many sequences at the full context fit a device next to the weights.

    Attributes
    ----------
    device : the device's name.
    batch : the batch asked for.
    max_batch : the largest batch whose decode step at the full context fits (0: not
        even one sequence fits).
    context_tokens : the full context (prompt + new tokens).
    kv_bytes_per_sequence : one sequence's KV cache at the full context.
    parameter_bytes : the weights.
    fit : the asked batch's decode step at the full context against the device
        (:func:`roofline.fits`: tensor bytes plus the allocator's overheads).
    search : the search behind ``max_batch`` (:func:`roofline.max_batch`); None when not
        even one sequence fits.
    """

    device: str
    batch: int
    max_batch: int
    context_tokens: int
    kv_bytes_per_sequence: int
    parameter_bytes: int
    fit: Fit
    search: MaxBatch | None = field(default=None, repr=False)

    @property
    def fits(self) -> bool:
        """Whether the asked batch fits."""
        return self.fit.fits

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does NOT fit"
        return (f"Capacity({self.device}: batch {self.batch} {verdict}; at most "
                f"{self.max_batch} sequences of {self.context_tokens} tokens "
                f"(KV {si(self.kv_bytes_per_sequence, 'B')} each, weights "
                f"{si(self.parameter_bytes, 'B')}))")


def _bound_seconds(a: Analysis, communication: float = 0.0) -> np.ndarray:
    """Seconds of ``a`` under each of :data:`BOUNDS`, with ``communication`` the exposed
    seconds of its collectives."""
    rows = {**a.by_bound(), "communication": {"seconds": communication}}
    return np.array([rows.get(b, {}).get("seconds", 0.0) for b in BOUNDS])


def _split(seconds: np.ndarray) -> dict[str, dict[str, float]]:
    total = float(seconds.sum())
    return {b: {"seconds": float(s), "fraction": float(s) / total if total else 0.0}
            for b, s in zip(BOUNDS, seconds, strict=True)}


@dataclass
class Serving:
    """A :class:`~roofline.tracing.serving.ServingTrace` costed on one device.

    Attributes
    ----------
    trace : the serving trace.
    prefill : the prefill step's :class:`Analysis`.
    decode : context -> the decode step's :class:`Analysis` at that context.
    capacity : how many sequences fit (None when not asked for).
    assumptions : the serving model's assumptions, then the analyses', each once.
    options : the :func:`roofline.analyze` options the steps were costed with.
    prefill_communication_seconds : the prefill's exposed all-reduce seconds (tensor
        parallelism; else 0).
    decode_communication_seconds : context -> the decode step's.
    """

    trace: ServingTrace
    prefill: Analysis
    decode: dict[int, Analysis]
    capacity: Capacity | None
    assumptions: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    prefill_communication_seconds: float = 0.0
    decode_communication_seconds: dict[int, float] = field(default_factory=dict)

    @property
    def device(self) -> DeviceSpec:
        return self.prefill.device

    @property
    def gpus_name(self) -> str:
        """``H200 SXM``, or ``2 x H200 SXM`` when the model is split over GPUs."""
        gpus = self.trace.tensor_parallel
        return f"{gpus} x {self.device.name}" if gpus > 1 else self.device.name

    @property
    def ttft_seconds(self) -> float:
        """Time to first token: the batch's prefill."""
        return self.prefill.seconds + self.prefill_communication_seconds

    def _per_context(self) -> tuple[np.ndarray, np.ndarray]:
        contexts = np.array(sorted(self.decode), dtype=float)
        comm = self.decode_communication_seconds
        return contexts, np.array([_bound_seconds(self.decode[int(c)], comm.get(int(c), 0.0))
                                   for c in contexts])

    def tpot_seconds(self, context: float | np.ndarray) -> Any:
        """Time per output token of a decode step at ``context`` cached tokens: linear
        between the traced contexts (held at the nearest one outside them)."""
        contexts, seconds = self._per_context()
        out = np.interp(np.asarray(context, dtype=float), contexts, seconds.sum(axis=1))
        return float(out) if out.ndim == 0 else out

    def _decode_bounds_seconds(self) -> np.ndarray:
        """Seconds per bound summed over the decode steps (at the first traced context
        when there is no decode step: one new token)."""
        contexts, seconds = self._per_context()
        steps = self.trace.step_contexts
        if not len(steps):
            return seconds[0]
        return np.array([np.interp(steps, contexts, seconds[:, j]).sum()
                         for j in range(len(BOUNDS))])

    @property
    def decode_seconds(self) -> float:
        """All decode steps: the ``new_tokens - 1`` tokens after the first."""
        return float(self._decode_bounds_seconds().sum()) if len(self.trace.step_contexts) \
            else 0.0

    @property
    def mean_tpot_seconds(self) -> float:
        """Mean time per output token over the decode steps (the TPOT at the prompt's
        context when only one token is generated)."""
        steps = len(self.trace.step_contexts)
        return self.decode_seconds / steps if steps else self.tpot_seconds(
            self.trace.prompt_tokens)

    @property
    def total_seconds(self) -> float:
        """The static batch from prompt to last token: prefill plus every decode step."""
        return self.ttft_seconds + self.decode_seconds

    @property
    def tokens_per_s_per_sequence(self) -> float:
        """Decode speed one sequence sees: 1 / mean TPOT."""
        return ratio(1.0, self.mean_tpot_seconds)

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput of the batch: batch / mean TPOT."""
        return ratio(self.trace.batch, self.mean_tpot_seconds)

    @property
    def output_tokens_per_s(self) -> float:
        """Generated tokens per second over the whole run, prefill included (batch x new
        tokens / seconds): what static-batch benchmarks report."""
        return ratio(self.trace.batch * self.trace.new_tokens, self.total_seconds)

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens per second of the prefill."""
        return ratio(self.trace.batch * self.trace.prompt_tokens, self.ttft_seconds)

    def prefill_bounds(self) -> dict[str, dict[str, float]]:
        """Seconds and fraction of the prefill per bound (``compute``, ``memory``,
        ``overhead``, ``host``, ``communication``)."""
        return _split(_bound_seconds(self.prefill, self.prefill_communication_seconds))

    def decode_step_bounds(self, context: int) -> dict[str, dict[str, float]]:
        """Seconds and fraction per bound of the decode step traced at ``context``."""
        return _split(_bound_seconds(self.decode[context],
                                     self.decode_communication_seconds.get(context, 0.0)))

    def decode_bounds(self) -> dict[str, dict[str, float]]:
        """Seconds and fraction of all decode steps per bound."""
        return _split(self._decode_bounds_seconds())

    def batch_sweep(self, batches: Sequence[int]) -> Any:
        """The decode step at the full context for each of ``batches`` (traced, as the
        capacity search traces it): a pandas DataFrame with ``batch``, ``seconds`` (one
        step), ``tokens_per_s`` (batch / seconds), ``required_bytes`` and ``fits``
        (:func:`roofline.fits`)."""
        import pandas as pd

        rows = []
        asked = {whole("batch", int(b) if isinstance(b, np.integer) else b) for b in batches}
        for b in sorted(asked):
            t = self.trace.decode_step(b)
            a, communication = step_cost(t, self.device, **self.options)
            seconds = a.seconds + communication
            fit = fits(t, self.device)
            rows.append({"batch": b, "seconds": seconds, "tokens_per_s": ratio(b, seconds),
                         "required_bytes": fit.required_bytes, "fits": fit.fits})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        st = self.trace
        fit = ""
        if self.capacity is not None:
            fit = (f"; batch {st.batch} {'fits' if self.capacity.fits else 'does NOT fit'}, "
                   f"at most {self.capacity.max_batch}")
        return (f"Serving({st.model} on {self.gpus_name}, batch {st.batch}, "
                f"{st.prompt_tokens} + {st.new_tokens} tokens: TTFT "
                f"{si(self.ttft_seconds, 's')} ({_lead(self.prefill_bounds())}), TPOT "
                f"{si(self.mean_tpot_seconds, 's')} ({_lead(self.decode_bounds())}), "
                f"{self.tokens_per_s:.4g} tokens/s ({self.tokens_per_s_per_sequence:.4g} per "
                f"sequence); KV {si(st.kv_bytes_per_token, 'B')}/token"
                f"{st.per_gpu}{fit})")


def _lead(bounds: dict[str, dict[str, float]]) -> str:
    name = max(bounds, key=lambda b: bounds[b]["fraction"])
    return f"{name} {bounds[name]['fraction']:.0%}"


def find_capacity(st: ServingTrace, spec: DeviceSpec, **options: Any) -> Capacity:
    """How many sequences at the full context fit ``spec``: the asked batch's fit, and the
    largest batch (searched by tracing the decode step at other batches)."""
    context = st.total_tokens
    fit = fits(st.decode_step(st.batch), spec)
    one = fit if st.batch == 1 else fits(st.decode_step(1), spec)
    search = None
    if one.fits:
        # the fit from the asked batch and twice it, where the allocator's rounding of the
        # per-token tensors weighs least; the search traces its way to the answer anyway
        # and keeps the fit's error (search.fit_error), so its warning is not repeated
        start = st.batch if fit.fits else 1
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*the step's memory is not affine",
                                    RooflineWarning)
            search = max_batch(st.decode_step, spec, fit_batches=(start, 2 * start),
                               **options)
    return Capacity(spec.name, st.batch, search.batch if search else 0, context,
                    st.kv_bytes_per_sequence, st.parameter_bytes, fit, search)


def _notes(st: ServingTrace, decode: Analysis, options: dict[str, Any]) -> list[str]:
    """What the serving prediction assumes, in order of how much it shapes the answer."""
    notes = [f"static batch: the {st.batch} prompts are prefilled together (TTFT is that "
             "prefill), then decoded together, one token per sequence per step; no "
             "in-flight batching, chunked prefill or speculative decoding",
             f"time per output token is linear in the context between the decode steps "
             f"traced at {', '.join(map(str, st.contexts))} cached tokens"]
    if st.tensor_parallel > 1:
        reduces = sum(1 for op in decode.trace.ops if op.collective is not None
                      and op.collective.kind != "wait")
        notes.append(f"tensor parallel over {st.tensor_parallel} GPUs: rank 0's steps (its "
                     f"share of the heads and MLP columns, {reduces} collectives per decode "
                     "step), each collective costed on the interconnect and waited for; "
                     "tokens/s are the group's, weights, KV cache and capacity one GPU's")
    layers = max(1, sum(1 for op in decode.trace.ops if op.category == "attention"))
    kernels = int(sum(op.kernels for op in decode.trace.ops))
    if not options.get("graphs"):
        notes.append(
            f"eager PyTorch: {kernels} kernel launches per decode step ({kernels // layers} "
            f"per layer), each paying the launch overhead; a serving engine fuses them into "
            f"about {ENGINE_KERNELS_PER_LAYER} per layer under CUDA graphs (graphs=True costs "
            "graph launches)")
    if st.kv_dtype != st.dtype:
        notes.append(f"KV cache in {st.kv_dtype}: the decode steps' cache reads and writes "
                     f"are rescaled from {st.dtype} (the prefill writes its cache at {st.dtype})")
    if st.weight_dtype:
        notes.append(f"matmuls in {st.weight_dtype} (W8A8): their operands' bytes rescaled "
                     "and their FLOPs at the fp8 matrix rate; embeddings and norms unchanged")
    return notes


def serve(model: Any, device: str | DeviceSpec, *, prompt_tokens: int | None = None,
          new_tokens: int | None = None, batch: int | None = None, dtype: Any = None,
          kv_dtype: Any = None, weight_dtype: Any = None, contexts: int = CONTEXTS,
          tensor_parallel: int | None = None, capacity: bool = True,
          **options: Any) -> Serving:
    """Serve ``model`` on ``device``: TTFT, TPOT against context, tokens/s, bounds, fit.

    Parameters
    ----------
    model : a model :func:`roofline.trace_serving` takes, or its
        :class:`~roofline.tracing.serving.ServingTrace` (traced once, costed on any
        device; then the trace's own tokens, batch and dtypes are used).
    device : a registry name or a DeviceSpec.
    prompt_tokens, new_tokens, batch, dtype, kv_dtype, weight_dtype, contexts : as
        :func:`roofline.trace_serving` (``batch`` defaults to 1).
    tensor_parallel : as :func:`roofline.trace_serving` (default 1). ``device`` is then
        each GPU's, and the collectives are costed on its interconnect.
    capacity : also find how many sequences fit (traces the decode step at a few more
        batches; ``Serving.capacity``; None on a device with no memory size). A batch
        that does not fit is still costed, as if it did, with a :class:`RooflineWarning`.
    options : those of :func:`roofline.analyze` (``graphs=True`` for CUDA-graph launches).

    Raises
    ------
    ValueError
        Trace arguments given with a ServingTrace (they were fixed when it was traced).

    Examples
    --------
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
    ...                      num_hidden_layers=4, num_attention_heads=16,
    ...                      num_key_value_heads=4)
    >>> with torch.device("meta"):
    ...     model = LlamaForCausalLM(config).to(torch.bfloat16)
    >>> s = roofline.serve(model, "h100", prompt_tokens=512, new_tokens=128, batch=8)
    >>> s.ttft_seconds < s.total_seconds, s.tokens_per_s > s.tokens_per_s_per_sequence
    (True, True)
    >>> max(s.decode_bounds(), key=lambda b: s.decode_bounds()[b]["fraction"])
    'overhead'
    >>> s.capacity.max_batch > 1000, s.trace.kv_bytes_per_token  # 2 x 4 x 4 x 64 x 2 B
    (True, 4096)
    """
    st = _serving_trace(model, prompt_tokens=prompt_tokens, new_tokens=new_tokens,
                        batch=batch, dtype=dtype, kv_dtype=kv_dtype,
                        weight_dtype=weight_dtype, contexts=contexts,
                        tensor_parallel=tensor_parallel)
    return serve_trace(st, get_device(device), capacity=capacity, **options)


def _serving_trace(model: Any, **asked: Any) -> ServingTrace:
    if not isinstance(model, ServingTrace):
        for name in ("batch", "tensor_parallel"):
            asked[name] = 1 if asked[name] is None else asked[name]
        if asked["prompt_tokens"] is None or asked["new_tokens"] is None:
            raise ValueError("serve(model, device) needs prompt_tokens= and new_tokens= "
                             "(tokens per sequence in the prompt, and generated)")
        return trace_serving(model, **asked)
    given = [k for k, v in asked.items() if v is not None and k != "contexts"]
    if given or asked["contexts"] != CONTEXTS:
        raise ValueError(f"serve() of a ServingTrace takes its tokens, batch and dtypes "
                         f"from the trace; drop {', '.join(given) or 'contexts'} (or trace "
                         "again with roofline.trace_serving)")
    return model


def serve_trace(st: ServingTrace, spec: DeviceSpec, *, capacity: bool = True,
                **options: Any) -> Serving:
    """:func:`serve` of a traced workload on a resolved device."""
    if st.weight_dtype == NVFP4 and spec.peak_flops_per_s("fp4", "matrix") is None:
        # PyTorch would not fall back to the vector units either: W4A4 GEMMs are
        # Blackwell's block-scaled fp4 MMA instructions
        raise ValueError(f"{spec.name} has no fp4 matrix units, which NVFP4 (W4A4) serving "
                         "runs its matmuls on; trace the model with weight_dtype='fp8' or "
                         "None (--weights fp8, or no --weights) to serve it there")
    prefill, prefill_comm = step_cost(st.prefill, spec, **options)
    steps = {c: step_cost(t, spec, **options) for c, t in st.decode.items()}
    decode = {c: a for c, (a, _) in steps.items()}
    # a device with no memory size in the registry (a CPU) has no capacity to search
    cap = find_capacity(st, spec, **options) if capacity and spec.memory_bytes else None
    last = decode[max(decode)]
    notes = _notes(st, last, options)
    if cap is not None:
        notes.append(
            f"capacity: the decode step at the full context ({cap.context_tokens} tokens): "
            "weights, every sequence's KV cache and the step's activations, with the "
            "allocator's overheads; the prefill's activations are not counted (engines "
            "bound them by prefilling in chunks)")
        if not cap.fits:
            warn(f"batch {st.batch} does not fit {spec.name}: the decode step at "
                 f"{cap.context_tokens} tokens needs {si(cap.fit.required_bytes, 'B')} of "
                 f"{si(cap.fit.capacity_bytes, 'B')}; at most {cap.max_batch} sequences fit. "
                 "The times are those it would take with the memory.", RooflineWarning)
    analyses = [prefill, *decode.values()]
    notes += [n for a in analyses for n in a.assumptions]
    result = Serving(st, prefill, decode, cap, list(dict.fromkeys(notes)), dict(options),
                     prefill_comm, {c: comm for c, (_, comm) in steps.items()})
    for name in ("ttft_seconds", "mean_tpot_seconds"):
        if not math.isfinite(getattr(result, name)) or getattr(result, name) <= 0:
            raise ValueError(f"the predicted {name} on {spec.name} is "
                             f"{getattr(result, name)}, not a positive number; check the "
                             "device's figures")
    return result
