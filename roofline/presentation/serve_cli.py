"""``roofline serve MODEL --device D [--compare D2] --prompt P --new N --batch B [--tp N]``:
serving an LLM, traced once on fake tensors and costed on one or two devices."""

from __future__ import annotations

import argparse
import time
from typing import Any

#: ``--dtype`` (the weights' dtype; serving runs 16-bit by default) and ``--kv-dtype``.
DTYPES = ("bf16", "fp16", "fp32")
KV_DTYPES = ("bf16", "fp16", "fp32", "fp8")


def add_parser(sub: Any, int_at_least: Any, model_help: str, func: Any) -> None:
    """The ``serve`` subcommand; ``func(args)`` runs it (the CLI's, which resolves the
    devices and calls :func:`serve_command`)."""
    p = sub.add_parser("serve", help="serving an LLM: time to first token, time per output "
                                     "token, tokens/s, KV cache and how many sequences fit")
    p.add_argument("model", help=model_help + " (a causal LM: llama-7b, llama3-8b, "
                                              "transformers:LlamaConfig...)")
    p.add_argument("--device", required=True,
                   help="device name (h100, h200, a100) or a device file (.json/.yaml)")
    p.add_argument("--compare", help="second device: prefill and decode speedups, and why")
    p.add_argument("--prompt", type=int_at_least(1), default=1024,
                   help="prompt tokens per sequence (default 1024)")
    p.add_argument("--new", type=int_at_least(1), default=256,
                   help="tokens generated per sequence (default 256)")
    p.add_argument("--batch", type=int_at_least(1), default=1,
                   help="concurrent sequences, prefilled then decoded together (default 1)")
    p.add_argument("--dtype", choices=DTYPES, default="bf16",
                   help="the weights' dtype (default bf16, as models are served)")
    p.add_argument("--kv-dtype", choices=KV_DTYPES, default=None,
                   help="the KV cache's dtype (default: the weights')")
    p.add_argument("--tensor-parallel", "--tp", type=int_at_least(1), default=1,
                   metavar="N", help="split the model over N GPUs of the device, as serving "
                   "engines' tensor_parallel_size (default 1)")
    p.add_argument("--weights", choices=("fp8", "nvfp4"), default=None,
                   help="matmuls read fp8 (W8A8) or NVFP4 (W4A4, Blackwell) weights and "
                   "activations at that rate (default: the weights' dtype)")
    p.add_argument("--fp8-weights", action="store_const", const="fp8", dest="weights",
                   help="the same as --weights fp8")
    p.add_argument("--graphs", action="store_true",
                   help="kernels launched from CUDA graphs, as serving engines decode")
    p.add_argument("--peaks", choices=("achievable", "datasheet"), default="achievable",
                   help="rates the device was measured to reach (default) or its datasheet")
    p.add_argument("--prefill-chunk", type=int_at_least(1), default=None, metavar="TOKENS",
                   help="prefill the prompt in chunks of TOKENS, each over the cache of the "
                   "ones before, as llama.cpp's n_ubatch or chunked prefill (default: one pass)")
    p.add_argument("--contexts", type=int_at_least(2), default=3,
                   help="decode contexts traced from the prompt to the full context "
                        "(default 3; TPOT is linear between them)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every assumption")
    p.add_argument("--plot", metavar="FILE.png",
                   help="write tokens/s against batch, with the capacity wall")
    p.add_argument("--plot-roofline", metavar="FILE.png",
                   help="write the roofline of prefill and decode, one point per op group")
    p.set_defaults(func=func)


def _progress(args: argparse.Namespace, text: str) -> None:
    import sys

    if not args.json:
        print(text, file=sys.stderr, flush=True)


def _charts(args: argparse.Namespace, s: Any) -> None:
    if not (args.plot or args.plot_roofline):
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from roofline.presentation.plots import serving_batch_curve, serving_roofline

    for path, chart in ((args.plot, serving_batch_curve), (args.plot_roofline,
                                                          serving_roofline)):
        if path:
            _progress(args, f"drawing {path}...")
            fig: Any = chart(s).figure
            fig.savefig(path, dpi=100, bbox_inches="tight")
            plt.close(fig)
            _progress(args, f"wrote {path}")


def serve_command(args: argparse.Namespace, device: Any, other: Any | None) -> str:
    """Trace, cost on ``device`` (and ``other``), and say it: text or ``--json``."""
    import json

    from roofline.analysis.serving import serve_trace
    from roofline.analysis.serving_compare import ServingComparison
    from roofline.presentation.models import causal_lm
    from roofline.presentation.serving import comparison_dict, serving_dict, serving_text
    from roofline.presentation.tables import finite
    from roofline.tracing.serving import trace_serving

    name, model = causal_lm(args.model)
    _progress(args, f"tracing {name} serving on fake tensors (prefill and {args.contexts} "
                    "decode steps)...")
    start = time.perf_counter()
    st = trace_serving(model, prompt_tokens=args.prompt, new_tokens=args.new,
                       batch=args.batch, dtype=args.dtype, kv_dtype=args.kv_dtype,
                       weight_dtype=args.weights,
                       contexts=args.contexts, tensor_parallel=args.tensor_parallel,
                       prefill_chunk=args.prefill_chunk)
    st.model = name
    _progress(args, f"traced in {time.perf_counter() - start:.1f} s; finding how many "
                    "sequences fit...")
    options: dict[str, Any] = {"graphs": args.graphs}
    if args.peaks != "achievable":
        options["peaks"] = args.peaks
    s = serve_trace(st, device, **options)  # refuses a TTFT or TPOT that is not a number
    c = ServingComparison(s, serve_trace(st, other, **options)) if other is not None else None
    _charts(args, s)
    if args.json:
        data = comparison_dict(c) if c is not None else serving_dict(s)
        return json.dumps(finite(data), indent=2, default=str)
    return serving_text(s, c, args.verbose)
