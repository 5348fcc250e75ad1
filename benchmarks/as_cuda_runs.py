"""Steps traced as CUDA runs them, against the CPU's way, where the two differ.

1. RMS norm. The zoo's Llama 3 8B (two layers, batch 1 x 2,048 tokens, bf16 weights) is
   traced for one training step on fake tensors with its own RMSNorm (Meta's reference code:
   ``x.float()``, ``pow``, ``mean``, ``rsqrt``, two ``mul``: one kernel each on CUDA too), and
   with every norm swapped for ``nn.RMSNorm``, which CUDA runs as ``_fused_rms_norm`` and
   ``_fused_rms_norm_backward`` (:mod:`roofline.tracing.norms`).
2. Autocast. Hugging Face's GPT-2 small (12 layers, batch 8 x 1,024, bf16 autocast, SDPA) is
   traced for one training step on fake tensors with CUDA autocast's cast policy (the
   default, :mod:`roofline.tracing.autocast`) and with the CPU's (CUDA's registering
   nothing: ``attention="as-run"`` would also take the CPU's unfused attention).

Each prints the bytes and the predicted step on an A100 SXM 80GB and an H100 SXM. Nothing is
measured on a GPU. Usage: ``python benchmarks/as_cuda_runs.py`` (about 20 s).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from unittest import mock

import torch
from torch import nn

import roofline
from roofline.tracing import autocast
from roofline.zoo import get_model, llama

DEVICES = ("A100 SXM 80GB", "H100 SXM")


def _llama(native: bool) -> roofline.Trace:
    zoo = get_model("llama3-8b", batch_size=1, seq_len=2048, n_layers=2, device="meta",
                    dtype=torch.bfloat16)
    if native:
        for parent in list(zoo.model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, llama.RMSNorm):
                    setattr(parent, name, nn.RMSNorm(child.weight.shape[0], eps=child.eps,
                                                     device="meta", dtype=torch.bfloat16))
    return roofline.trace(zoo.model, *zoo.train_inputs, train=True, fake=True)


@contextlib.contextmanager
def _cpu_policy() -> Iterator[None]:
    """CPU autocast's own policy in a fake trace: CUDA's registers nothing."""
    with mock.patch.object(autocast, "policies", dict), \
            mock.patch.object(autocast, "cpu_only", dict):
        yield


def _gpt2(cuda_policy: bool) -> roofline.Trace:
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        config = GPT2Config(n_layer=12)
        config._attn_implementation = "sdpa"
        model = GPT2LMHeadModel(config)
    ids = torch.zeros(8, 1024, dtype=torch.long)
    policy = contextlib.nullcontext() if cuda_policy else _cpu_policy()
    with warnings.catch_warnings(), policy, torch.autocast("cpu", dtype=torch.bfloat16):
        warnings.simplefilter("ignore")
        return roofline.trace(model, ids, labels=ids, train=True, fake=True)


def _row(label: str, t: roofline.Trace, part: list[int], note: str) -> str:
    cells = [f"{label:<26} {len(part):>5} {sum(t.ops[i].bytes for i in part) / 1e9:>8.2f}"]
    steps = []
    for device in DEVICES:
        a = roofline.analyze(t, device)
        steps.append(a.seconds)
        cells.append(f"{a.op_seconds[part].sum() * 1e3:>8.2f} {a.seconds * 1e3:>8.2f}")
    return " ".join(cells) + f" {steps[0] / steps[1]:>6.2f}x  {note}"


def main() -> None:
    head = (f"{'':<26} {'ops':>5} {'GB':>8} " + " ".join(
        f"{'ms':>8} {'step ms':>8}" for _ in DEVICES) + f" {'ratio':>7}")
    print("ops, GB and ms: of the part named; step ms on " + " and ".join(DEVICES)
          + "; ratio: A100 / H100 step\n")
    print("Llama 3 8B, 2 layers, 1 x 2,048, bf16 training: the norms\n" + head)
    for native in (False, True):
        t = _llama(native)
        part = [i for i, op in enumerate(t.ops)
                if op.module.rsplit(".", 1)[-1].endswith("norm")]
        print(_row("nn.RMSNorm" if native else "Python RMSNorm", t, part,
                   f"{t.info.fused_rms_norm_calls} fused calls"))
    print("\nHF GPT-2 small, 8 x 1,024, bf16 autocast training: the whole step\n" + head)
    for cuda_policy in (False, True):
        t = _gpt2(cuda_policy)
        print(_row("CUDA autocast's policy" if cuda_policy else "CPU autocast's policy", t,
                   list(range(len(t.ops))), f"{t.info.cuda_autocast_calls} calls changed"))


if __name__ == "__main__":
    main()
