"""The seed question, answered: does 2x FLOP/s give 2x for GPT-2 and ResNet-50 training?

For GPT-2 small (batch 8 x 1024 tokens) and ResNet-50 (batch 256, 224x224), each a
bf16 mixed-precision training step with AdamW / SGD-momentum on fake tensors, prints the
predicted speedup on an A100 SXM 80GB of ``what_if(flops=2)``, ``what_if(bandwidth=2)``,
the limits with infinite FLOP/s or bandwidth, and of the swap A100 -> H100 SXM, with the
step's breakdown by bound and the explanation.

Usage: ``python benchmarks/the_answer.py``
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

import roofline
from roofline.zoo import get_model


def training_trace(name: str, batch_size: int, **kw: Any) -> roofline.Trace:
    zm = get_model(name, batch_size=batch_size, **kw)
    params = zm.model.parameters()
    opt = (torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True) if name == "resnet50"
           else torch.optim.AdamW(params, foreach=True))
    with warnings.catch_warnings(), torch.autocast("cpu", dtype=torch.bfloat16):
        warnings.simplefilter("ignore")
        return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)


def answer(label: str, t: roofline.Trace) -> None:
    a = roofline.analyze(t, "a100")
    flops2 = roofline.what_if(t, "a100", flops=2.0)
    bw2 = roofline.what_if(t, "a100", flops=1.0, bandwidth=2.0)
    swap = roofline.compare(t, "a100", "h100")
    lim = flops2.speedup_limits()
    bounds = ", ".join(f"{k} {v['fraction']:.0%}" for k, v in a.by_bound().items()
                       if v["seconds"])
    print(f"## {label}: {t.total_flops / 1e12:.2f} TFLOP, {t.total_bytes / 1e9:.1f} GB per step")
    print(f"A100 SXM 80GB predicted step {a.seconds * 1e3:.1f} ms ({bounds}), MFU {a.mfu:.0%}")
    print(f"  what_if(flops=2)      {flops2.speedup:.2f}x")
    print(f"  what_if(bandwidth=2)  {bw2.speedup:.2f}x")
    print(f"  infinite FLOP/s       {lim['infinite_flops']:.2f}x, infinite bandwidth "
          f"{lim['infinite_bandwidth']:.2f}x")
    print(f"  A100 -> H100 SXM      {swap.speedup:.2f}x")
    print("  " + roofline.explain(flops2, assumptions=False))
    print("  " + roofline.explain(swap, assumptions=False) + "\n")


def main() -> None:
    answer("GPT-2 small, bf16 AMP training, batch 8 x 1024",
           training_trace("gpt2", 8, seq_len=1024, dropout=0))
    answer("ResNet-50, bf16 AMP training, batch 256", training_trace("resnet50", 256))


if __name__ == "__main__":
    main()
