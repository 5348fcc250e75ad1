"""Same traces, same answers: a check that a refactor changed no result.

``--save DIR`` traces a fixed set of steps (single-GPU and parallel, fp32 and bf16, CNNs and
transformers), writes each trace as JSON and every result the public API gives for them
(analyses on several devices and options, comparisons, what-ifs, memory, fits, the largest
batch, parallel costs, explanations, the registry and its what-if variants) to
``DIR/results.json``. ``--check DIR`` loads those traces, recomputes every result, retraces
the steps, and prints each difference; it exits 1 if there is one.

Usage::

    python benchmarks/equivalence.py --save /tmp/before      # on the old code
    python benchmarks/equivalence.py --check /tmp/before     # on the new code

A deliberate change of results (a renamed category, a fixed bug) shows here as a
difference; ``--rename old=new`` maps renamed strings (``--rename memory=copy``) before
comparing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import roofline
from roofline.zoo import get_model

DEVICES = ("a100", "h100", "rtx 4090", "mi300x", "tpu-v5e", "t4", "l4")
OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "datasheet": {"peaks": "datasheet"},
    "max": {"overhead_model": "max"},
    "tf32": {"tf32_matmul": True},
    "graphs": {"graphs": True},
    "host": {"host_fraction": 0.1},
    "efficiency": {"efficiency": {"matrix": 0.8, "memory": 0.9}},
    "no_layout": {"layout_transposes": False, "overhead": False},
}


def _train(name: str, batch: int, amp: bool, sgd: bool = False, **kw: Any) -> roofline.Trace:
    zm = get_model(name, batch_size=batch, **kw)
    params = zm.model.parameters()
    opt = (torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True) if sgd
           else torch.optim.AdamW(params, foreach=True))
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if amp else torch.autocast("cpu",
                                                                                  enabled=False)
    with ctx:
        return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)


def _parallel(name: str, batch: int, kind: str, gpus: int, **kw: Any) -> roofline.Trace:
    zm = get_model(name, batch_size=batch, **kw)
    params = zm.model.parameters()
    # a foreach optimizer over a tensor-parallel model's mixed DTensor/Tensor parameters
    # fails in torch itself (issue 22); SGD's per-parameter loop runs
    opt = (torch.optim.SGD(params, lr=0.1, foreach=False) if kind == "tp"
           else torch.optim.AdamW(params, foreach=True))
    return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                          parallel=kind, gpus=gpus)


def _infer(name: str, batch: int, **kw: Any) -> roofline.Trace:
    zm = get_model(name, batch_size=batch, **kw)
    with torch.no_grad():
        return roofline.trace(zm.model, *zm.inputs, fake=True)


SMALL_GPT: dict[str, Any] = {"seq_len": 64, "n_layer": 2}
STEPS: dict[str, Callable[[], roofline.Trace]] = {
    "mlp_fp32": lambda: _train("mlp", 64, amp=False),
    "gpt2_bf16": lambda: _train("gpt2", 2, amp=True, **SMALL_GPT),
    "resnet_bf16": lambda: _train("resnet50", 2, amp=True, sgd=True, image_size=64),
    "mobilenet_fp32": lambda: _train("mobilenet", 2, amp=False, sgd=True, image_size=64),
    "bert_infer": lambda: _infer("bert-base", 2, seq_len=32, n_layer=2),
    "vit_bf16": lambda: _train("vit-b16", 2, amp=True, n_layer=2),
    "gpt2_ddp4": lambda: _parallel("gpt2", 8, "ddp", 4, **SMALL_GPT),
    "gpt2_fsdp4": lambda: _parallel("gpt2", 8, "fsdp", 4, **SMALL_GPT),
    "mlp_tp2": lambda: _parallel("mlp", 16, "tp", 2),
}


def _num(x: Any) -> Any:
    """JSON-safe numbers (inf and nan as strings), recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, dict):
        return {str(k): _num(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    if hasattr(x, "tolist"):
        return _num(x.tolist())
    return x


def _guard(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``f(*args, **kwargs)``, or the error's type and message (a refused input is a result
    too), with the warnings it gave."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = f(*args, **kwargs)
        return {"value": out, "warnings": sorted({str(w.message) for w in caught})}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _analysis(a: roofline.Analysis) -> dict[str, Any]:
    return {"seconds": a.seconds, "op_seconds": a.op_seconds, "roofs": a.roof_seconds,
            "bound": a.bound, "engine": [str(e) for e in a.engine],
            "flops_per_s": a.flops_per_s, "bytes_per_s": a.bytes_per_s, "fill": a.fill,
            "by_category": a.by_category(), "mfu": a.mfu, "assumptions": a.assumptions,
            "figures": {k: str(v) for k, v in a.figures.items()}}


def _comparison(c: roofline.Comparison) -> dict[str, Any]:
    return {"speedup": c.speedup, "dst_op_seconds": c.dst.op_seconds,
            "limits": c.speedup_limits(), "by_bound": c.by_bound(),
            "explain": roofline.explain(c)}


def _memory(t: roofline.Trace) -> dict[str, Any]:
    r = roofline.memory(t)
    f = roofline.fits(r, "h100")
    return {"peak": r.peak_bytes, "peak_op": r.peak_op, "by_kind": r.bytes_by_kind,
            "at_peak": r.peak_by_kind, "timeline": r.timeline, "held": r.held_bytes,
            "fit": [f.fits, f.required_bytes, f.overheads, f.assumptions]}


def _parallel_costs(t: roofline.Trace, one: roofline.Trace) -> dict[str, Any]:
    out = {}
    for nodes in (1, 2):
        p = roofline.parallel(t, "h100", nodes=nodes, one_gpu=one, one_gpu_batch=2)
        out[str(nodes)] = {"seconds": p.seconds, "exposed": p.exposed_communication_seconds,
                           "collectives": p.collectives(), "assumptions": p.assumptions,
                           "speedup": p.speedup_vs_one_gpu, "explain": roofline.explain(p)}
    return out


def _analyzed(t: roofline.Trace, device: str, options: dict[str, Any]) -> dict[str, Any]:
    return _analysis(roofline.analyze(t, device, **options))


def _what_if(t: roofline.Trace, factors: dict[str, float]) -> dict[str, Any]:
    return _comparison(roofline.what_if(t, "a100", **factors))


def _scaled(spec: roofline.DeviceSpec) -> Any:
    return spec.scaled(2.0, 1.5, clock_factor=1.1, cores_factor=2.0).model_dump(mode="json")


def _overridden(spec: roofline.DeviceSpec) -> Any:
    return spec.with_overrides(bandwidth_bytes_per_s=spec.bandwidth_bytes_per_s * 2,
                               boost_clock_hz=(spec.boost_clock_hz or 1e9) * 1.1,
                               ).model_dump(mode="json")


def _one(t: roofline.Trace) -> dict[str, Any]:
    """Every single-device result of one trace."""
    r: dict[str, Any] = {"flops": t.total_flops, "bytes": t.total_bytes}
    for dev in DEVICES:
        for opt, kw in OPTIONS.items():
            r[f"analyze/{dev}/{opt}"] = _guard(_analyzed, t, dev, kw)
    r["compare"] = _guard(lambda: _comparison(roofline.compare(t, "a100", "h100")))
    r["compare/host"] = _guard(lambda: _comparison(roofline.compare(
        t, "a100", "mi300x", host_fraction=0.2)))
    for factors in ({}, {"bandwidth": 2.0}, {"clock": 1.2}, {"cores": 2.0},
                    {"flops": 3.0, "bandwidth": 1.5}):
        r[f"what_if/{factors}"] = _guard(_what_if, t, factors)
    r["sweep"] = _guard(lambda: roofline.sweep(t, "h100").to_dict("list"))
    r["memory"] = _guard(lambda: _memory(t))
    return r


def results(traces: dict[str, roofline.Trace]) -> dict[str, Any]:
    out: dict[str, Any] = {name: _one(t) for name, t in traces.items()}
    one = traces["gpt2_bf16"]
    for name in ("gpt2_ddp4", "gpt2_fsdp4", "mlp_tp2"):
        out[name]["parallel"] = _guard(_parallel_costs, traces[name], one)
    out["max_batch"] = _guard(_max_batch)
    out["registry"] = _registry()
    return _num(out)


def _max_batch() -> dict[str, Any]:
    zm = get_model("mlp", hidden=4096, n_layers=6)
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)

    def build(b: int) -> roofline.Trace:
        x, y = torch.randn(b, 784), torch.randint(0, 10, (b,))
        return roofline.trace(zm.model, x, y, train=True, optimizer=opt, fake=True)

    m = roofline.max_batch(build, "rtx 4090", limit=1 << 30)
    return {"batch": m.batch, "seconds": m.seconds, "traced": m.traced,
            "per_sample": m.bytes_per_sample, "fixed": m.fixed_bytes}


def _registry() -> dict[str, Any]:
    from roofline.hardware.achievable import figures

    out = {}
    for spec in roofline.list_devices():
        out[spec.name] = {
            "spec": spec.model_dump(mode="json"),
            "figures": [str(f) for f in figures(spec).used()],
            "scaled": _guard(_scaled, spec),
            "overrides": _guard(_overridden, spec)}
    return out


def _trace_all() -> dict[str, roofline.Trace]:
    traces = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, step in STEPS.items():
            print(f"tracing {name}...", file=sys.stderr, flush=True)
            traces[name] = step()
    return traces


def _diff(a: Any, b: Any, path: str, out: list[str], rel: float) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only {'after' if k in b else 'before'}")
            else:
                _diff(a[k], b[k], f"{path}/{k}", out, rel)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items before, {len(b)} after")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out, rel)
    elif (isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool)
          and math.isclose(a, b, rel_tol=rel, abs_tol=1e-300)):
        return
    elif a != b:
        out.append(f"{path}: {str(a)[:300]!r} -> {str(b)[:300]!r}")


def _renamed(x: Any, renames: list[tuple[str, str]]) -> Any:
    text = json.dumps(x)
    for old, new in renames:
        text = text.replace(f'"{old}"', f'"{new}"')
    return json.loads(text)


def _category_renamed(x: Any, old: str, new: str, inside: bool = False) -> Any:
    """``x`` with the op category ``old`` called ``new``: the keys of every ``by_category``
    table (a bound of the same name elsewhere keeps its name)."""
    if isinstance(x, dict):
        return {(new if inside and k == old else k): _category_renamed(
            v, old, new, k == "by_category") for k, v in x.items()}
    if isinstance(x, list):
        return [_category_renamed(v, old, new) for v in x]
    return x


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--check", type=Path)
    parser.add_argument("--rename", action="append", default=[],
                        help="old=new: a string renamed on purpose (JSON values)")
    parser.add_argument("--rename-category", action="append", default=[],
                        help="old=new: an op category renamed on purpose (by_category keys)")
    parser.add_argument("--show", type=int, default=200, help="differences printed")
    parser.add_argument("--rel", type=float, default=0.0,
                        help="relative tolerance for floats (default 0: bitwise)")
    args = parser.parse_args()
    renames = [tuple(r.split("=", 1)) for r in args.rename]
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        traces = _trace_all()
        for name, t in traces.items():
            (args.save / f"{name}.json").write_text(t.to_json())
        (args.save / "results.json").write_text(json.dumps(results(traces)))
        print(f"saved {len(traces)} traces and their results in {args.save}")
        return 0
    saved = {name: roofline.Trace.from_json((args.check / f"{name}.json").read_text())
             for name in STEPS}
    before = _renamed(json.loads((args.check / "results.json").read_text()), renames)
    for rename in args.rename_category:
        old_name, new_name = rename.split("=", 1)
        before = _category_renamed(before, old_name, new_name)
    problems: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _diff(before, json.loads(json.dumps(results(saved))), "saved traces", problems,
              args.rel)
    fresh = _trace_all()
    for name, t in fresh.items():
        # read back with today's reader, so a document format that changed on purpose
        # (its reader converts the old one) compares by content
        old = roofline.Trace.from_json((args.check / f"{name}.json").read_text())
        _diff(_renamed(json.loads(old.to_json()), renames), json.loads(t.to_json()),
              f"retraced {name}", problems, args.rel)
    for line in problems[:args.show]:
        print(line)
    shown = f" (first {args.show} shown)" if len(problems) > args.show else ""
    print(f"{len(problems)} differences{shown}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
