"""RMS norm written out in Python against ``nn.RMSNorm``, which CUDA runs fused.

The zoo's Llama 3 8B (two layers, batch 1 x 2,048 tokens, bf16 weights) is traced for one
training step on fake tensors twice: with its own RMSNorm (Meta's reference code: ``x.float()``,
``pow``, ``mean``, ``rsqrt``, two ``mul``, one kernel each on CUDA too), and with every norm
swapped for ``nn.RMSNorm``, which a fake trace records as CUDA's ``_fused_rms_norm`` and
``_fused_rms_norm_backward`` (:mod:`roofline.tracing.norms`). It prints, per device, the ops,
bytes and predicted time of the norms and the predicted step. Nothing is measured on a GPU.

Usage: ``python benchmarks/rms_norm.py`` (about a minute).
"""

from __future__ import annotations

import torch
from torch import nn

import roofline
from roofline.zoo import get_model, llama

DEVICES = ("A100 SXM 80GB", "H100 SXM")


def _trace(native: bool) -> roofline.Trace:
    zoo = get_model("llama3-8b", batch_size=1, seq_len=2048, n_layers=2, device="meta",
                    dtype=torch.bfloat16)
    if native:
        for parent in list(zoo.model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, llama.RMSNorm):
                    setattr(parent, name, nn.RMSNorm(child.weight.shape[0], eps=child.eps,
                                                     device="meta", dtype=torch.bfloat16))
    return roofline.trace(zoo.model, *zoo.train_inputs, train=True, fake=True)


def main() -> None:
    print(__doc__.split("\n\n")[1].replace("\n", " ") + "\n")
    print(f"{'norms':<12} {'device':<15} {'norm ops':>8} {'norm MB':>8} {'norm ms':>8} "
          f"{'step ms':>8}")
    steps: dict[tuple[bool, str], float] = {}
    for native in (False, True):
        t = _trace(native)
        norms = [i for i, op in enumerate(t.ops) if op.module.rsplit(".", 1)[-1].endswith("norm")]
        for device in DEVICES:
            a = roofline.analyze(t, device)
            steps[native, device] = a.seconds
            print(f"{'nn.RMSNorm' if native else 'Python':<12} {device:<15} {len(norms):>8} "
                  f"{sum(t.ops[i].bytes for i in norms) / 1e6:>8.1f} "
                  f"{a.op_seconds[norms].sum() * 1e3:>8.3f} {a.seconds * 1e3:>8.2f}")
    for native in (False, True):
        print(f"{'nn.RMSNorm' if native else 'Python'}: {DEVICES[0]} -> {DEVICES[1]} "
              f"{steps[native, DEVICES[0]] / steps[native, DEVICES[1]]:.2f}x")


if __name__ == "__main__":
    main()
