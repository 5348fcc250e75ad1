"""Capture overhead: roofline vs torch's FlopCounterMode vs fvcore, and the 7B fake step.

Prints, in one run (ratios within one run are what count on a shared, noisy machine):

1. per zoo model, the median time of a real training step untraced, traced by
   ``roofline.trace`` and traced by ``FlopCounterMode``, and fvcore's forward analysis;
   roofline's overhead (traced - untraced) over FlopCounterMode's (target: <= 2x);
2. a 6.7B GPT-2-shaped forward+backward in fake mode under both counters;
3. the 7B Llama-style fake training step (forward, backward, AdamW) traced by roofline, in a
   fresh process: wall time and peak memory (targets: < 10 s, < 1.5 GB).

Usage: ``python benchmarks/capture_overhead.py [--repeat 3] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

import roofline
from roofline.zoo import get_model

# Small inputs: the tracing cost per op does not depend on tensor sizes, so on small
# shapes it is a measurable share of the step rather than lost in its noise.
MODELS: dict[str, dict[str, Any]] = {
    "mlp": {"batch_size": 8},
    "resnet50": {"batch_size": 1, "image_size": 64},
    "mobilenet": {"batch_size": 1, "image_size": 64},
    "gpt2": {"batch_size": 1, "seq_len": 32},
    "bert-base": {"batch_size": 1, "seq_len": 32},
    "vit-b16": {"batch_size": 1, "image_size": 64},
    "llama-tiny": {"batch_size": 1, "seq_len": 32},
}


def _interleaved(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Median CPU seconds of each function, run in turn ``repeat`` times after a warm-up.

    CPU time of this process (all its threads) is less disturbed than wall time by other
    work on a shared machine; running the variants in turn spreads drift over all of them.
    """
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.process_time()
            fn()
            times[i].append(time.process_time() - start)
    return [statistics.median(t) for t in times]


def real_steps(repeat: int, quick: bool) -> None:
    import fvcore.nn

    print(f"Real training steps on the CPU ({torch.get_num_threads()} threads), "
          f"median of {repeat}")
    header = (f"{'model':<11} {'ops':>5} {'untraced':>9} {'roofline':>9} {'FlopCounter':>11} "
              f"{'fvcore fwd':>10} {'us/op':>6} {'overhead ratio':>14}")
    print(header)
    print("-" * len(header))
    names = ["mlp", "gpt2"] if quick else list(MODELS)
    for name in names:
        zm = get_model(name, **MODELS[name])
        model, inputs = zm.model, zm.train_inputs

        def step(model: torch.nn.Module = model, inputs: tuple = inputs) -> None:
            model(*inputs).backward()
            for p in model.parameters():
                p.grad = None

        def counted(model: torch.nn.Module = model, inputs: tuple = inputs) -> None:
            with FlopCounterMode(display=False):
                model(*inputs).backward()
            for p in model.parameters():
                p.grad = None

        def traced(model: torch.nn.Module = model, inputs: tuple = inputs) -> None:
            roofline.trace(model, *inputs, train=True)

        def fvcore_forward(model: torch.nn.Module = model, inputs: tuple = zm.inputs) -> None:
            fvcore.nn.FlopCountAnalysis(model, inputs).unsupported_ops_warnings(
                False).uncalled_modules_warnings(False).total()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            untraced, ours, fcm, fv = _interleaved(
                [step, traced, counted, fvcore_forward], repeat)
        ratio = (ours - untraced) / max(fcm - untraced, 1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n_ops = len(roofline.trace(model, *inputs, train=True))
        print(f"{name:<11} {n_ops:>5} {untraced * 1e3:>7.1f}ms {ours * 1e3:>7.1f}ms "
              f"{fcm * 1e3:>9.1f}ms {fv * 1e3:>8.1f}ms {(ours - untraced) / n_ops * 1e6:>6.0f} "
              f"{ratio:>13.2f}x")
    print("CPU seconds of this process; us/op = roofline's cost per recorded op. overhead "
          "ratio = (roofline - untraced) / (FlopCounterMode - untraced), denominator floored "
          "at 1 ms; FlopCounterMode counts matmul-class FLOPs only, roofline every op's FLOPs "
          "and bytes\n")


def fake_gpt_6_7b() -> None:
    """A GPT-3 6.7B-shaped model (32 layers, d=4096), forward+backward on fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    zm = get_model("gpt2", batch_size=1, seq_len=2048, device="meta", n_layer=32, n_head=32,
                   n_embd=4096, n_positions=2048)
    params = sum(p.numel() for p in zm.model.parameters())
    start = time.perf_counter()
    # the CPU's attention path, which FlopCounterMode below also runs: the same ops
    t = roofline.trace(zm.model, *zm.train_inputs, train=True, fake=True, attention="as-run")
    ours = time.perf_counter() - start

    fake = FakeTensorMode(allow_non_fake_inputs=True)
    zm2 = get_model("gpt2", batch_size=1, seq_len=2048, device="meta", n_layer=32, n_head=32,
                    n_embd=4096, n_positions=2048)
    with fake:
        zm2.model.to_empty(device="cpu")
        ids = torch.randint(0, 50257, (1, 2048))
        start = time.perf_counter()
        counter = FlopCounterMode(display=False)
        with counter:
            zm2.model(ids, ids).backward()
        theirs = time.perf_counter() - start
    print(f"GPT-2-shaped {params / 1e9:.2f}B forward+backward, fake tensors: roofline "
          f"{ours:.2f} s ({len(t)} ops, {t.total_flops / 1e12:.1f} TFLOP, "
          f"{t.total_bytes / 1e9:.0f} GB), FlopCounterMode {theirs:.2f} s "
          f"({counter.get_total_flops() / 1e12:.1f} TFLOP, matmul-class only)\n")


_CHILD = """
def peak_rss_gb():
    # VmHWM: this process's own peak resident set (ru_maxrss can carry the parent's
    # high-water mark across fork)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 1e9
import json, time, warnings, torch, roofline
from roofline.zoo import get_model
warnings.simplefilter("ignore")
zm = get_model("llama-7b", batch_size=1, seq_len=2048)
opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
start = time.perf_counter()
t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "ops": len(t), "tflop": t.total_flops / 1e12,
                  "params": sum(p.numel() for p in zm.model.parameters()),
                  "peak_rss_gb": peak_rss_gb()}))
"""


def fake_llama_7b() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"Llama-style {r['params'] / 1e9:.2f}B training step (forward, backward, AdamW), "
          f"fake tensors, fresh process: traced in {r['seconds']:.2f} s (target < 10 s), "
          f"peak memory {r['peak_rss_gb']:.2f} GB (target < 1.5 GB), {r['ops']} ops, "
          f"{r['tflop']:.1f} TFLOP")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="two models only")
    args = parser.parse_args()
    real_steps(args.repeat, args.quick)
    fake_gpt_6_7b()
    fake_llama_7b()


if __name__ == "__main__":
    main()
