"""Write the README and documentation charts into docs/_static/ (``python docs/make_charts.py``).

GPT-2 (batch 8 x 1024 tokens, bf16 autocast training step, fake tensors) on an A100, and
the same step A100 -> H100; every chart is regenerated from the library, never by hand.
"""

from __future__ import annotations

import pathlib
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import torch

import roofline
from roofline.zoo import get_model

OUT = pathlib.Path(__file__).parent / "_static"
DPI = 96  # ~100: sharp on a README, each PNG well under MAX_BYTES
MAX_BYTES = 150_000  # a README image stays small


def gpt2_trace() -> roofline.Trace:
    zm = get_model("gpt2", batch_size=8, seq_len=1024, dropout=0, device="meta")
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    t.meta["model"] = "GPT-2 (8 x 1024 tokens, bf16 training step)"
    return t


def save(ax: object, name: str) -> pathlib.Path:
    fig = ax.figure  # type: ignore[attr-defined]
    path = OUT / name
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pil_kwargs={"optimize": True})
    plt.close(fig)
    size = path.stat().st_size
    print(f"wrote {path} ({size / 1e3:.0f} kB)", file=sys.stderr)
    if size > MAX_BYTES:
        raise SystemExit(f"{path} is {size} bytes, over the {MAX_BYTES} budget")
    return path


def main() -> None:
    OUT.mkdir(exist_ok=True)
    t = gpt2_trace()
    a = roofline.analyze(t, "a100")
    save(roofline.plot.roofline_chart(a), "roofline_gpt2_a100.png")
    c = roofline.compare(t, "a100", "h100")
    save(roofline.plot.roofline_chart(c), "roofline_compare_a100_h100.png")
    save(roofline.plot.speedup_curve(t, "a100"), "speedup_gpt2_a100.png")
    save(roofline.plot.time_breakdown(c), "breakdown_gpt2.png")
    save(roofline.plot.compare_devices(t, ["a100", "h100", "mi300x", "l4", "rtx4090"]),
         "compare_devices_gpt2.png")


if __name__ == "__main__":
    main()
