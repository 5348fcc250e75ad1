"""What ``roofline serve`` prints: the answer first, then the phases, TPOT against context,
the memory, the device swap, and the assumptions once; and its JSON."""

from __future__ import annotations

from typing import Any

from roofline._si import si
from roofline.analysis import Serving, ServingComparison
from roofline.analysis.serving import Capacity
from roofline.presentation.tables import _table, assumptions_text, seconds

_SPLIT = ("compute", "memory", "latency", "overhead", "host", "communication")


def _shares(bounds: dict[str, dict[str, float]]) -> str:
    """``compute 80%, memory 15%, overhead 5%``: the bounds with any time, largest first."""
    ranked = sorted((b for b in _SPLIT if bounds[b]["fraction"] >= 0.005),
                    key=lambda b: -bounds[b]["fraction"])
    return ", ".join(f"{b} {bounds[b]['fraction']:.0%}" for b in ranked)


def workload(s: Serving) -> str:
    """``Llama (bfloat16, KV float8_e4m3fn; batch 8, 1024 prompt + 256 new tokens)``."""
    st = s.trace
    dtypes = st.dtype + (f", KV {st.kv_dtype}" if st.kv_dtype != st.dtype else "") + (
        f", weights {st.weight_dtype}" if st.weight_dtype else "")
    chunks = f", prefilled in chunks of {st.prefill_chunk}" if st.prefill_chunk else ""
    return (f"{st.model} ({dtypes}; batch {st.batch}, {st.prompt_tokens} prompt + "
            f"{st.new_tokens} new tokens{chunks})")


def where(s: Serving) -> str:
    """``H200 SXM``, or ``4 x H200 SXM (tensor parallel)``."""
    return s.gpus_name + (" (tensor parallel)" if s.trace.tensor_parallel > 1 else "")


def _columns(s: Serving) -> tuple[str, ...]:
    """The bounds a table splits time into: latency and communication only where there is
    some."""
    latency = any(b["latency"]["seconds"] > 0 for b in (s.prefill_bounds(), s.decode_bounds()))
    return ("compute", "memory", *(("latency",) if latency else ()), "overhead",
            *(("communication",) if s.trace.tensor_parallel > 1 else ()))


def capacity_words(c: Capacity) -> str:
    """``batch 8 fits (19.3 GB of 141 GB); at most 183 sequences of 1280 tokens``."""
    verdict = "fits" if c.fits else "does NOT fit"
    return (f"batch {c.batch} {verdict} ({si(c.fit.required_bytes, 'B')} of "
            f"{si(c.fit.capacity_bytes, 'B')}); at most {c.max_batch} sequences of "
            f"{c.context_tokens} tokens")


def answer(s: Serving, compared: ServingComparison | None = None) -> str:
    """The answer first, a line each: the workload and device; TTFT and TPOT with their
    bounds; tokens/s; the KV cache and the capacity; the device swap and its reason per
    phase."""
    st = s.trace
    first, last = st.contexts[0], st.contexts[-1]
    tpot = (f"TPOT {seconds(s.tpot_seconds(first))} at {first} -> "
            f"{seconds(s.tpot_seconds(last))} at {last} tokens of context" if last != first
            else f"TPOT {seconds(s.tpot_seconds(first))}")
    kv = (f"KV cache {si(st.kv_bytes_per_token, 'B')}/token, "
          f"{si(st.kv_bytes_per_sequence, 'B')} per sequence{st.per_gpu}")
    lines = [
        f"{workload(s)} on {where(s)}:",
        f"TTFT {seconds(s.ttft_seconds)} ({_shares(s.prefill_bounds())})",
        f"{tpot} ({_shares(s.decode_bounds())})",
        f"{s.tokens_per_s:.4g} tokens/s decoding ({s.tokens_per_s_per_sequence:.4g} per "
        f"sequence), {s.output_tokens_per_s:.4g} with the prefill; the batch takes "
        f"{seconds(s.total_seconds)}",
        kv + (f"; {capacity_words(s.capacity)}" if s.capacity is not None else "")]
    if compared is not None:
        reasons = compared.reasons()
        lines += [f"{where(compared.src)} -> {where(compared.dst)}: "
                  f"{compared.speedup:.2f}x for the whole batch",
                  f"  {reasons['prefill']}", f"  {reasons['decode']}"]
    return "\n".join(lines)


def phases_table(s: Serving) -> str:
    """Prefill and all decode steps: time, split by bound, FLOPs and bytes."""
    st = s.trace
    decode_flops = sum(t.total_flops for t in st.decode.values()) / len(st.decode)
    decode_bytes = sum(t.total_bytes for t in st.decode.values()) / len(st.decode)
    steps = len(st.step_contexts)
    rows = []
    columns = _columns(s)
    for name, total, bounds, flops, nbytes in (
            ("prefill", s.ttft_seconds, s.prefill_bounds(), st.prefill.total_flops,
             st.prefill.total_bytes),
            (f"decode x {steps}", s.decode_seconds, s.decode_bounds(), decode_flops,
             decode_bytes)):
        rows.append([name, seconds(total)] + [f"{bounds[b]['fraction']:.0%}" for b in columns]
                    + [si(flops, "FLOP"), si(nbytes, "B")])
    return _table(["phase", "time", *columns, "FLOPs/step", "bytes/step"], rows, left=1)


def tpot_table(s: Serving) -> str:
    """One row per traced decode context: TPOT, tokens/s and the split."""
    rows = []
    columns = _columns(s)
    for context in sorted(s.decode):
        step = s.tpot_seconds(context)
        bounds = s.decode_step_bounds(context)
        rows.append([str(context), seconds(step), f"{s.trace.batch / step:.4g}"]
                    + [f"{bounds[b]['fraction']:.0%}" for b in columns])
    return _table(["context", "TPOT", "tokens/s", *columns], rows, left=1)


def memory_text(s: Serving) -> str:
    """The weights, the KV cache and the fit."""
    st = s.trace
    lines = [f"memory{st.per_gpu}: weights {si(st.parameter_bytes, 'B')}; KV cache "
             f"{si(st.kv_bytes_per_token, 'B')} per token, {si(st.kv_bytes_per_sequence, 'B')} "
             f"per sequence of {st.total_tokens} tokens"]
    if s.capacity is not None:
        c = s.capacity
        over = ", ".join(f"{k} {si(v, 'B')}" for k, v in c.fit.overheads.items())
        lines.append(f"{c.device}: {capacity_words(c)} (the decode step at the full context, "
                     f"with {over or 'no allocator overheads'})")
    return "\n".join(lines)


def comparison_table(c: ServingComparison) -> str:
    """The two devices side by side, and the speedup of each figure."""
    a, b = c.src, c.dst
    rows = [["TTFT", seconds(a.ttft_seconds), seconds(b.ttft_seconds),
             f"{c.prefill_speedup:.2f}x"],
            ["mean TPOT", seconds(a.mean_tpot_seconds), seconds(b.mean_tpot_seconds),
             f"{c.decode_speedup:.2f}x"],
            ["tokens/s", f"{a.tokens_per_s:.4g}", f"{b.tokens_per_s:.4g}",
             f"{c.decode_speedup:.2f}x"],
            ["whole batch", seconds(a.total_seconds), seconds(b.total_seconds),
             f"{c.speedup:.2f}x"]]
    if a.capacity is not None and b.capacity is not None:
        rows.append(["max batch", str(a.capacity.max_batch), str(b.capacity.max_batch), ""])
    return _table(["", where(a), where(b), "speedup"], rows, left=1)


def serving_text(s: Serving, compared: ServingComparison | None = None,
                 verbose: bool = False) -> str:
    """Everything ``roofline serve`` prints, the answer first."""
    parts = [answer(s, compared), "", phases_table(s), "", tpot_table(s), "",
             memory_text(s)]
    notes = list(s.assumptions)
    if compared is not None:
        parts += ["", comparison_table(compared)]
        notes += compared.dst.assumptions
    return "\n".join([*parts, "", assumptions_text(notes, verbose)]).rstrip()


def serving_dict(s: Serving) -> dict[str, Any]:
    """The figures of a :class:`Serving`, JSON-ready."""
    st = s.trace
    out: dict[str, Any] = {
        "model": st.model, "device": s.device.name, "batch": st.batch,
        "prompt_tokens": st.prompt_tokens, "new_tokens": st.new_tokens, "dtype": st.dtype,
        "kv_dtype": st.kv_dtype, "weight_dtype": st.weight_dtype,
        "tensor_parallel": st.tensor_parallel, "prefill_chunk": st.prefill_chunk,
        "ttft_seconds": s.ttft_seconds, "mean_tpot_seconds": s.mean_tpot_seconds,
        "tpot_seconds": {str(c): s.tpot_seconds(c) for c in st.contexts},
        "decode_seconds": s.decode_seconds, "total_seconds": s.total_seconds,
        "tokens_per_s": s.tokens_per_s,
        "tokens_per_s_per_sequence": s.tokens_per_s_per_sequence,
        "output_tokens_per_s": s.output_tokens_per_s,
        "prefill_tokens_per_s": s.prefill_tokens_per_s,
        "prefill_bounds": s.prefill_bounds(), "decode_bounds": s.decode_bounds(),
        "kv_bytes_per_token": st.kv_bytes_per_token,
        "kv_bytes_per_sequence": st.kv_bytes_per_sequence,
        "parameter_bytes": st.parameter_bytes, "trace_seconds": st.trace_seconds,
        "assumptions": s.assumptions}
    if s.capacity is not None:
        c = s.capacity
        out["capacity"] = {"fits": c.fits, "max_batch": c.max_batch,
                           "context_tokens": c.context_tokens,
                           "required_bytes": c.fit.required_bytes,
                           "capacity_bytes": c.fit.capacity_bytes,
                           "overheads": c.fit.overheads, "assumptions": c.fit.assumptions}
    return out


def comparison_dict(c: ServingComparison) -> dict[str, Any]:
    reasons = c.reasons()
    return {"src": serving_dict(c.src), "dst": serving_dict(c.dst),
            "prefill_speedup": c.prefill_speedup, "decode_speedup": c.decode_speedup,
            "speedup": c.speedup,
            "reasons": {k: {"text": str(r), "shares": r.shares, "roof_ratios": r.roof_ratios,
                            "datasheet_ratios": r.datasheet_ratios}
                        for k, r in reasons.items()}}
