"""Write the README and documentation charts into docs/_static/ (``python docs/make_charts.py``,
or ``python docs/make_charts.py memory_gpt2.png`` for the charts named).

GPT-2 (batch 8 x 1024 tokens, bf16 autocast training step, fake tensors) on an A100, and
the same step A100 -> H100; every chart is regenerated from the library, never by hand.
"""

from __future__ import annotations

import functools
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
MAX_BYTES = 180_000  # a README image stays small


def gpt2_trace() -> roofline.Trace:
    zm = get_model("gpt2", batch_size=8, seq_len=1024, dropout=0, device="meta")
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    t.info.model = "GPT-2"
    return t


def resnet50_trace() -> roofline.Trace:
    """ResNet-50's bf16 training step at batch 32 (the README's --html example)."""
    zm = get_model("resnet50", batch_size=32, device="meta")
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    t.info.model = "ResNet-50"
    return t


@functools.cache
def gpt2_compiled() -> roofline.Comparison:
    """GPT-2's bf16 training step, eager and compiled (torch.compile), on an H100."""
    zm = get_model("gpt2", batch_size=8, seq_len=1024, dropout=0, device="meta")
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    traces = []
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for compile in (False, True):
            t = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                               fake=True, compile=compile)
            t.info.model = "GPT-2"
            traces.append(t)
    return roofline.compare(traces[0], traces[1], "h100")


def gpt2_build(batch: int) -> roofline.Trace:
    """The step of docs/howto/memory.md at ``batch`` sequences: fused attention."""
    zm = get_model("gpt2", batch_size=batch, seq_len=1024, dropout=0, device="meta")
    opt = torch.optim.AdamW(zm.model.parameters(), foreach=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt,
                              fake=True, attention="fused")


def gpt2_parallel() -> roofline.ParallelAnalysis:
    """The example of docs/howto/two-gpus.md: 8 RTX 4090s, DDP, 4 sequences a GPU."""
    zm = get_model("gpt2", batch_size=4, device="meta")
    opt = torch.optim.AdamW(zm.model.parameters())
    inputs = [torch.cat([x] * 8) for x in zm.train_inputs]
    t = roofline.trace(zm.model, *inputs, train=True, optimizer=opt, parallel="ddp", gpus=8)
    one = roofline.trace(zm.model, *zm.train_inputs, train=True, optimizer=opt, fake=True)
    return roofline.parallel(t, "rtx 4090", one_gpu=one)


def report_screenshot(c: roofline.Comparison, name: str) -> None:
    """The HTML report of ``c`` in headless Chromium, a point's tooltip showing (as
    tests/test_report_browser.py drives it): needs Debian's chromium and chromium-driver
    and selenium (the test extra)."""
    import tempfile

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from roofline.presentation.html import write_html

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1000"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            page = pathlib.Path(tmp) / "report.html"
            write_html(str(page), c)
            driver.get(page.as_uri())
            biggest = max(driver.find_elements(By.CSS_SELECTOR, "#points .point"),
                          key=lambda p: p.rect["width"])
            ActionChains(driver).move_to_element(biggest).perform()
            (OUT / name).write_bytes(driver.get_screenshot_as_png())
    finally:
        driver.quit()
    print(f"wrote {OUT / name}", file=sys.stderr)


#: Charts drawn at a lower resolution to stay under MAX_BYTES (three panels in one figure).
SMALLER = {"compile_gpt2_h100.png": 72}


def save(ax: object, name: str) -> pathlib.Path:
    fig = ax.figure  # type: ignore[attr-defined]
    path = OUT / name
    fig.savefig(path, dpi=SMALLER.get(name, DPI), bbox_inches="tight",
                pil_kwargs={"optimize": True})
    plt.close(fig)
    size = path.stat().st_size
    print(f"wrote {path} ({size / 1e3:.0f} kB)", file=sys.stderr)
    if size > MAX_BYTES:
        raise SystemExit(f"{path} is {size} bytes, over the {MAX_BYTES} budget")
    return path


def main(only: list[str]) -> None:
    """Write every chart, or only the files named in ``only`` (e.g. ``memory_gpt2.png``)."""
    OUT.mkdir(exist_ok=True)
    t = gpt2_trace()
    a = roofline.analyze(t, "a100")
    c = roofline.compare(t, "a100", "h100")
    charts = {
        "roofline_gpt2_a100.png": lambda: roofline.plot.roofline_chart(a),
        "roofline_compare_a100_h100.png": lambda: roofline.plot.roofline_chart(c),
        "speedup_gpt2_a100.png": lambda: roofline.plot.speedup_curve(t, "a100"),
        "breakdown_gpt2.png": lambda: roofline.plot.time_breakdown(c),
        "compare_devices_gpt2.png": lambda: roofline.plot.compare_devices(
            t, ["a100", "h100", "mi300x", "l4", "rtx4090"]),
        "memory_gpt2.png": lambda: roofline.plot.memory_timeline(t, device="rtx4090"),
        "batch_gpt2_rtx4090.png": lambda: roofline.plot.batch_curve(
            roofline.max_batch(gpt2_build, "rtx4090")),
        "scaling_gpt2_rtx4090.png": lambda: roofline.plot.scaling_curve(gpt2_parallel()),
        "timeline_gpt2_rtx4090.png": lambda: roofline.plot.stream_timeline(gpt2_parallel()),
        "compile_gpt2_h100.png": lambda: roofline.plot.compile_chart(gpt2_compiled()),
        "roofline_compiled_gpt2_h100.png": lambda: roofline.plot.roofline_chart(
            gpt2_compiled().dst),
    }
    unknown = sorted(set(only) - set(charts) - {"report.png"})
    if unknown:
        raise SystemExit(f"no such chart {unknown}; choose from {sorted(charts)} "
                         "(or name none for all)")
    for name in [n for n in only if n in charts] if only else charts:
        save(charts[name](), name)
    if not only or "report.png" in only:
        report_screenshot(roofline.compare(resnet50_trace(), "h100", "a100"), "report.png")


if __name__ == "__main__":
    main(sys.argv[1:])
