"""The ``roofline`` command line (also ``python -m roofline``).

Arguments are checked as they are parsed (argparse exits with 2 and names the flag);
any other error is one line and exit code 1; a prediction that is not a finite number
is an error, never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from roofline.presentation.groups import GROUPS
from roofline.presentation.serve_cli import add_parser as _add_serve
from roofline.tracing.attention import MODES as _ATTENTION
from roofline.tracing.strategies import STRATEGIES

if TYPE_CHECKING:
    from roofline.hardware import DeviceSpec
    from roofline.tracing import Trace
    from roofline.zoo import ZooModel

_DTYPES = {"fp32": None, "float32": None, "tf32": None, "bf16": torch.bfloat16,
           "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number >= ``minimum`` (a batch of 0 has no step)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value
    return parse


def _finite(expected: str, rule: str, positive: bool) -> Callable[[str], float]:
    """An argparse ``type=``: a finite float, > 0 or >= 0 (``float()`` also takes nan, inf)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value
    return parse


_seconds = _finite("seconds", "a finite number of seconds >= 0", positive=False)
#: ``--flops 2`` is twice the FLOP/s
_factor = _finite("a number", "a finite number > 0", positive=True)


def _require_finite(**predicted: float) -> None:
    """Refuse to print a prediction that is not a number (it would read ``nanx``)."""
    for name, value in predicted.items():
        if not math.isfinite(value):
            raise ValueError(
                f"the predicted {name} is {value}, not a finite number; check the what-if "
                "factors, the device file and the model's sizes (--debug shows where)")


def _progress(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text, file=sys.stderr, flush=True)


def _trace(args: argparse.Namespace, device: DeviceSpec) -> Trace:
    from roofline.tracing import FakeModeError, trace

    zm, fake = _model(args)
    inputs = zm.train_inputs if args.train else zm.inputs
    mode = "training step" if args.train else "inference"
    tensors = "fake tensors" if fake else "real tensors"
    if getattr(args, "compile", False):
        tensors += ", torch.compile"
    dtype = args.dtype or "fp32"
    _progress(args, f"tracing {zm.name} ({mode}, {dtype}, {tensors})...")
    start = time.perf_counter()
    amp = _DTYPES[dtype]
    precision = (torch.autocast("cpu", dtype=amp) if amp is not None
                 else contextlib.nullcontext())
    grad = contextlib.nullcontext() if args.train else torch.no_grad()
    try:
        with precision, grad:
            t = trace(zm.model, *inputs, **_trace_options(args, zm.model, fake, device))
    except FakeModeError as e:  # its advice names the API's fake=False
        raise FakeModeError(f"{e} On the command line: --real.") from e
    _progress(args, f"traced {len(t.ops)} ops in {time.perf_counter() - start:.1f} s")
    t.info.model = zm.name
    t.meta.update(dtype=dtype, **{k: v for k, v in zm.config.items()
                                       if isinstance(v, (int, float, str))})
    return t


def _fusion(args: argparse.Namespace, compiled: Trace, device: DeviceSpec) -> Any:
    """With ``--compile``: the eager step traced too, and what compiling it buys on
    ``device`` (``compare(eager, compiled, device)``); None without."""
    if not getattr(args, "compile", False):
        return None
    from roofline.analysis import compare

    eager = _trace(argparse.Namespace(**{**vars(args), "compile": False}), device)
    return compare(eager, compiled, device, **_options(args))


def _model(args: argparse.Namespace) -> tuple[ZooModel, bool]:
    """The model to trace, and whether on fake tensors: a fake trace gives the same counts
    without the memory and a steady-state optimizer step (real tensors with a fresh
    optimizer would include its one-off state set-up), and needs no weights, so the model
    is built on the meta device."""
    from roofline.presentation.models import load_model

    if (args.dtype or "fp32") not in _DTYPES:
        raise ValueError(f"unknown --dtype {args.dtype!r}; choose from {', '.join(_DTYPES)}")
    fake = not args.real
    zm = load_model(args.model, batch_size=args.batch_size, seq_len=args.seq_len,
                    device="meta" if fake else None)
    if not fake and any(p.is_meta for p in zm.model.parameters()):
        raise ValueError(f"{zm.name} is built on the meta device (it has no weights to run "
                         "real tensors through); trace it on fake tensors: drop --real")
    return zm, fake


def _trace_options(args: argparse.Namespace, model: torch.nn.Module, fake: bool,
                   device: DeviceSpec) -> dict[str, Any]:
    """``roofline.trace``'s keywords for the command line's flags: a training step with
    AdamW, attention as the device runs it, and with ``--gpus`` the parallel strategy on
    ``--batch-size`` per GPU (the library makes the global batch)."""
    options: dict[str, Any] = {
        "train": args.train, "fake": fake,
        "attention": args.attention or ("as-run" if device.kind == "cpu" else "fused")}
    if getattr(args, "compile", False):
        if args.attention:
            raise ValueError("--compile puts the GPU's own attention kernel in the compiled "
                             "graph: --attention is for eager traces")
        if not fake:
            raise ValueError("--compile traces on fake tensors: drop --real")
        options.update(compile=True, attention="fused")
        del options["fake"]
    if args.train:
        options.update(optimizer=torch.optim.AdamW(model.parameters(), foreach=True),
                       loss_fn=_scalar_loss)
    gpus = getattr(args, "gpus", 1)
    if gpus > 1:
        options.update(parallel=args.parallel, gpus=gpus, per_gpu_inputs=True)
    return options


def _scalar_loss(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor) and out.numel() == 1:
        return out
    if isinstance(out, torch.Tensor):
        return out.float().sum()  # a surrogate loss for models that return outputs
    raise ValueError(f"cannot make a loss from a {type(out).__name__} output")


def _json(data: dict[str, Any]) -> str:
    from roofline.presentation.tables import finite

    return json.dumps(finite(data), indent=2, default=str)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {"tf32_matmul": args.dtype == "tf32",
                            "fp16_accumulate": args.fp16_accumulate}
    if args.host_seconds:  # finite and >= 0: checked by _seconds
        opts["host_seconds"] = args.host_seconds
    if args.host_samples_per_s is not None:
        opts["host_samples_per_s"] = args.host_samples_per_s
    if args.peaks != "achievable":
        opts["peaks"] = args.peaks
    return opts


def _device(name: str) -> DeviceSpec:
    """A registry name, or a YAML/JSON device file (``roofline calibrate --save`` writes one)."""
    from pathlib import Path

    from roofline.hardware import get_device, load_device

    if Path(name).suffix.lower() in (".json", ".yaml", ".yml"):
        spec = load_device(name)
        if isinstance(spec, list):
            raise ValueError(f"{name} holds {len(spec)} devices; pass a file with one")
        return spec
    return get_device(name)


def _outputs(args: argparse.Namespace, result: Any, chart: Callable[[], Any]) -> None:
    """Write ``--plot`` (``chart()``'s figure) and ``--html`` (the page of ``result``)."""
    if getattr(args, "plot", None):
        import matplotlib

        matplotlib.use("Agg")  # a file, no window: works without a display
        import matplotlib.pyplot as plt

        _progress(args, f"drawing {args.plot}...")
        fig = chart().figure
        fig.savefig(args.plot, dpi=100, bbox_inches="tight")
        plt.close(fig)
        _progress(args, f"wrote {args.plot}")
    if getattr(args, "html", None):
        import matplotlib

        matplotlib.use("Agg")
        from roofline.presentation.html import write_html

        _progress(args, f"writing {args.html} (charts, tables, explanation)...")
        write_html(args.html, result, args.top)
        _progress(args, f"wrote {args.html}")


def _dtype_note(args: argparse.Namespace, device: DeviceSpec) -> str:
    """The first line's note when a GPU step was traced in full precision by default."""
    if args.dtype is not None or device.kind != "gpu":
        return ""
    return ("note: analysed in fp32, the default (matmuls on the CUDA cores, TF32 off, as "
            "PyTorch runs fp32); mixed precision: --dtype bf16 (or tf32, fp16)")


def _csv(args: argparse.Namespace, result: Any) -> None:
    """``--csv FILE``: the grouped ops (``roofline.plot.roofline_data``) as CSV."""
    if not getattr(args, "csv", None):
        return
    from roofline.presentation.plots import roofline_data

    roofline_data(result, group_by=args.group_by).to_csv(args.csv, index=False)
    _progress(args, f"wrote {args.csv}")


def cmd_parallel(args: argparse.Namespace, device: Any) -> str:
    """``analyze --gpus N --parallel ddp|fsdp|tp [--nodes M]``: one rank of N, costed."""
    import copy

    from roofline.analysis import analyze, parallel
    from roofline.hardware.topology import topology
    from roofline.presentation import tables
    from roofline.presentation.plots import scaling_curve

    args.parallel = args.parallel or "ddp"
    if args.gpus % args.nodes:
        raise ValueError(f"--gpus {args.gpus} does not spread evenly over --nodes {args.nodes}")
    if args.real:
        raise ValueError("a parallel trace runs on fake tensors: drop --real")
    if not args.train:
        raise ValueError("--gpus predicts a parallel training step: add --train")
    if args.compare:
        raise ValueError("--compare is for one GPU against another; with --gpus, run analyze "
                         "once per device")
    if args.html:
        raise ValueError("--html shows one GPU's analysis; with --gpus use --plot (the "
                         "scaling curve) or --json")
    topology(device, args.gpus, args.nodes)  # a device with no links fails here, untraced
    one_args = copy.copy(args)
    one_args.gpus = 1
    one = _trace(one_args, device)
    t1 = analyze(one, device, **_options(args)).seconds
    t = _trace(args, device)
    p = parallel(t, device, nodes=args.nodes, one_gpu=t1,
                 one_gpu_batch=t.info.rank_batch or None, **_options(args))
    _require_finite(seconds=p.seconds)
    _outputs(args, p, lambda: scaling_curve(p))
    return (_json(tables.parallel_dict(p)) if args.json
            else tables.parallel_text(p, args.verbose))


def cmd_analyze(args: argparse.Namespace) -> str:
    from roofline.analysis import analyze, compare
    from roofline.presentation import tables
    from roofline.presentation.plots import roofline_chart

    device = _device(args.device)
    if getattr(args, "gpus", 1) > 1:
        return cmd_parallel(args, device)
    if getattr(args, "parallel", None) or getattr(args, "nodes", 1) > 1:
        raise ValueError("--parallel and --nodes describe several GPUs: pass --gpus N with "
                         "them")
    t = _trace(args, device)
    fusion = _fusion(args, t, device)
    a = analyze(t, device, **_options(args))
    _require_finite(seconds=a.seconds)
    c = compare(t, device, _device(args.compare), **_options(args)) if args.compare else None
    if c is not None:
        _require_finite(seconds=c.dst.seconds, speedup=c.speedup)
    _outputs(args, c or a, lambda: roofline_chart(c or a, group_by=args.group_by))
    _csv(args, c or a)
    if args.json:
        if c is not None:
            return _json(tables.comparison_dict(c))
        if fusion is not None:
            return _json({**tables.analysis_dict(a, args.top),
                          "compile": tables.comparison_dict(fusion)})
        return _json({**tables.analysis_dict(a, args.top),
                      "memory": tables.memory_summary(t, device)})
    parts = [tables.answer(a, compared=c, note=_dtype_note(args, device)),
             *([tables.compile_lines(fusion)] if fusion is not None else []), "",
             tables.analysis_table(a, args.top, args.group_by),
             *([] if fusion is not None else [tables.memory_line(t, device)])]
    if c is not None:
        parts += ["", tables.comparison_table(c)]
    notes = a.assumptions + (c.dst.assumptions if c is not None else [])
    return "\n".join([*parts, "", tables.assumptions_text(notes, args.verbose)]).rstrip()


def cmd_memory(args: argparse.Namespace) -> str:
    import copy

    from roofline.analysis import fits, max_batch, memory
    from roofline.presentation import tables
    from roofline.presentation.plots import batch_curve, memory_timeline

    device = _device(args.device)
    if args.max_batch and args.batch_size:
        raise ValueError("--max-batch searches the batch: drop --batch-size")
    if args.csv:
        raise ValueError("--csv writes the grouped ops of analyze and what-if; memory's "
                         "figures are in --json")
    if args.html:
        raise ValueError("--html writes the page of an analysis (analyze, what-if); for "
                         "memory, --plot draws the memory timeline (the batch curve with "
                         "--max-batch) and --json gives the figures")
    if not args.max_batch:
        t = _trace(args, device)
        r = memory(t)
        f = fits(r, device)
        _outputs(args, r, lambda: memory_timeline(t, device=device))
        return _json(tables.memory_dict(r, f)) if args.json else tables.memory_table(r, f)

    def build(batch: int) -> Any:
        at = copy.copy(args)
        at.batch_size = batch
        return _trace(at, device)

    start = time.perf_counter()
    m = max_batch(build, device, **_options(args))
    _require_finite(seconds=m.seconds)
    searched = time.perf_counter() - start
    _outputs(args, m, lambda: batch_curve(m))
    if args.json:
        return _json({**tables.memory_dict(m.memory, m.fit),
                      "max_batch": tables.max_batch_dict(m, searched)})
    return tables.max_batch_text(m, searched)


def cmd_what_if(args: argparse.Namespace) -> str:
    from roofline.analysis import what_if
    from roofline.presentation import tables
    from roofline.presentation.plots import speedup_curve

    device = _device(args.device)
    t = _trace(args, device)
    # only the factors given: what_if keeps the others at 1x, and with neither asks
    # the question the tool is named for (2x FLOP/s)
    factors = {k: v for k, v in (("flops", args.flops), ("bandwidth", args.bandwidth),
                                 ("clock", args.clock), ("cores", args.cores))
               if v is not None}
    fusion = _fusion(args, t, device)
    c = what_if(t, device, **factors, **_options(args))
    _require_finite(seconds=c.dst.seconds, speedup=c.speedup)
    eager = (what_if(fusion.src.trace, device, **factors, **_options(args))
             if fusion is not None else None)
    _outputs(args, c, lambda: speedup_curve(t, device, **_options(args)))
    _csv(args, c)
    if args.json:
        out = tables.comparison_dict(c)
        if fusion is not None and eager is not None:
            out.update(compile=tables.comparison_dict(fusion), eager=tables.comparison_dict(eager))
        return _json(out)
    lines = [tables.compile_lines(fusion, eager)] if fusion is not None else []
    return "\n".join([tables.answer(c.src, asked=c, note=_dtype_note(args, device)),
                      *lines, "",
                      tables.comparison_table(c), "",
                      tables.assumptions_text(c.src.assumptions + c.dst.assumptions,
                                              args.verbose)]).rstrip()


def cmd_serve(args: argparse.Namespace) -> str:
    """``serve``: an LLM's prefill and decode on one device, or two with ``--compare``."""
    from roofline.presentation.serve_cli import serve_command

    return serve_command(args, _device(args.device),
                         _device(args.compare) if args.compare else None)


def cmd_devices(args: argparse.Namespace) -> str:
    from roofline.hardware import list_devices
    from roofline.presentation.devices import devices_to_json, format_devices_table

    specs = list_devices(vendor=args.vendor)
    return devices_to_json(specs) if args.json else format_devices_table(specs, args.wide)


def cmd_calibrate(args: argparse.Namespace) -> str:
    from roofline.hardware import calibrate
    from roofline.presentation.tables import calibration_text

    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    _progress(args, f"calibrating {args.device} ({', '.join(dtypes)})...")
    spec = calibrate(args.device, dtypes=dtypes, quick=not args.full, threads=args.threads,
                     cache=not args.no_cache)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            f.write(spec.model_dump_json(indent=2))
        _progress(args, f"wrote {args.save} (use it as --device {args.save})")
    if args.json:
        return spec.model_dump_json(indent=2)
    return calibration_text(spec)


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name (gpt2, bert-base, resnet50, vit-b16, mobilenet, "
                                 "mlp, llama-7b), transformers:<Config> or package.module:factory")
    p.add_argument("--device", required=True,
                   help="device name (h100, a100, mi300x) or a device file (.json/.yaml)")
    p.add_argument("--train", action="store_true",
                   help="trace a training step (forward, loss, backward, AdamW) with the "
                        "model in train(); without it, inference: no_grad, with the model in "
                        "eval() (dropout off, batch norm's running statistics), as "
                        "roofline.trace does")
    p.add_argument("--batch-size", type=_int_at_least(1), help="default: the model's own")
    p.add_argument("--seq-len", type=_int_at_least(1),
                   help="tokens per sequence (sequence models); default: the model's own")
    p.add_argument("--dtype", default=None,
                   help="fp32 (the default), tf32, bf16 or fp16 (mixed precision: the step "
                        "traced under torch.autocast)")
    p.add_argument("--fp16-accumulate", action="store_true",
                   help="fp16 matmuls accumulate in fp16 (GeForce: twice the tensor rate)")
    p.add_argument("--attention", choices=_ATTENTION,
                   help="attention with dropout as CUDA's fused kernel (default); every "
                        "attention written out as matmul/softmax/dropout; or as the CPU runs it "
                        "(the default when --device is a CPU)")
    tensors = p.add_mutually_exclusive_group()
    tensors.add_argument("--fake", action="store_true",
                         help="trace on fake tensors, building the model on the meta device: "
                              "nothing is allocated and a training step is a steady-state "
                              "one (the default; the flag is kept for scripts)")
    tensors.add_argument("--real", action="store_true",
                         help="build the model with real weights and trace on real tensors "
                              "(for models whose ops depend on tensor values); with --train "
                              "the fresh optimizer's one-off state set-up is then included "
                              "in the step")
    p.add_argument("--compile", action="store_true",
                   help="trace the step as torch.compile (inductor, default mode) runs it "
                        "on a GPU: one op per fused kernel; the answer also gives the eager "
                        "step's, and what compiling buys on --device")
    p.add_argument("--host-seconds", type=_seconds, default=0.0,
                   help="time per step off the device (data loading), kept fixed")
    p.add_argument("--host-samples-per-s", type=_factor, default=None, metavar="N",
                   help="the input pipeline's ceiling in samples per second: a step takes "
                        "at least batch / N seconds, on any device")
    p.add_argument("--peaks", choices=("achievable", "datasheet"), default="achievable",
                   help="rates the device was measured to reach (default, each with its "
                        "source) or its datasheet peaks")
    p.add_argument("--top", type=_int_at_least(0), default=15,
                   help="groups of ops to list (default 15)")
    p.add_argument("--group-by", choices=GROUPS, default="op",
                   help="the op table's rows (and the chart's points): one per ATen op and "
                        "shapes (default), per module (repeated blocks folded) or per "
                        "category")
    p.add_argument("--csv", metavar="FILE.csv",
                   help="write the grouped ops (roofline_data: FLOPs, bytes, time, bound per "
                        "group) as CSV")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list every assumption (the first three otherwise)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="write a chart: the roofline chart (analyze) or the speedup curve "
                        "(what-if)")
    p.add_argument("--html", metavar="FILE.html",
                   help="write one self-contained page: charts, tables, explanation, "
                        "assumptions")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="roofline", description="Will 2x the FLOP/s make your model 2x faster?")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("analyze", help="per-op roofline of a model on a device")
    _model_args(p)
    p.add_argument("--compare", help="second device: predicted speedup and why")
    p.add_argument("--gpus", type=_int_at_least(1), default=1,
                   help="GPUs: trace rank 0 of a parallel training step (--parallel) and "
                        "predict its time, samples/s and speedup over one GPU; "
                        "--batch-size is per GPU")
    p.add_argument("--nodes", type=_int_at_least(1), default=1,
                   help="nodes the GPUs are spread over (a DGX H100's network between them)")
    p.add_argument("--parallel", choices=tuple(STRATEGIES), default=None,
                   help="how the GPUs share the step (with --gpus; default ddp)")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("what-if", help="speedup if the device had more FLOP/s or bandwidth")
    _model_args(p)
    p.add_argument("--flops", type=_factor,
                   help="FLOP/s factor (1 if another factor is given; 2 if none is)")
    p.add_argument("--bandwidth", type=_factor, help="memory bandwidth factor (default 1)")
    p.add_argument("--clock", type=_factor,
                   help="clock factor: compute peaks scale, DRAM bandwidth does not")
    p.add_argument("--cores", type=_factor,
                   help="compute-unit factor: only ops that fill the chip gain")
    p.set_defaults(func=cmd_what_if)

    p = sub.add_parser("memory", help="memory of a step: by kind, the peak, whether it fits, "
                                      "the largest batch")
    _model_args(p)
    p.add_argument("--max-batch", action="store_true",
                   help="search the largest batch that fits the device (traced on fake "
                        "tensors) and the samples/s at it; not with --batch-size")
    p.set_defaults(func=cmd_memory)

    _add_serve(sub, _int_at_least, "zoo name, transformers:<Config> or package.module:factory",
               cmd_serve)

    p = sub.add_parser("devices", help="the hardware registry")
    p.add_argument("--wide", action="store_true",
                   help="datasheet and achievable figures side by side, with their origin")
    p.add_argument("--vendor")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("calibrate", help="measure achievable peaks, bandwidth and overhead")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    p.add_argument("--dtypes", default="float32", help="comma-separated, e.g. float32,bfloat16")
    p.add_argument("--threads", type=_int_at_least(1),
                   help="CPU threads (default: torch's current)")
    p.add_argument("--full", action="store_true", help="larger sizes (slower)")
    p.add_argument("--no-cache", action="store_true", help="measure again")
    p.add_argument("--save", metavar="FILE.json",
                   help="write the measured spec, for analyze/what-if --device FILE.json")
    p.set_defaults(func=cmd_calibrate)

    for p in sub.choices.values():
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="machine-readable output")
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show tracebacks")
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    """A warning as one line, like an error: the command line has no user's line to
    point at (``--debug`` keeps Python's form)."""
    print(f"roofline: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; errors are one line (``--debug`` shows the traceback)."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():  # restored on return: main() may run in a session
            if not args.debug:
                warnings.showwarning = _show_warning
            print(args.func(args))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader (`| head`) stopped reading: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if args.debug:
            traceback.print_exc()
        # str(KeyError("x")) is "'x'" (its repr); every other message is printed whole
        text = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 else e
        msg = str(text).strip() or type(e).__name__
        print(f"roofline: error: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
