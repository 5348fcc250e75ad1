"""The prepared on-device check: calibrate a GPU, measure the zoo's steps, compare predictions.

Run once when a GPU is at hand (a few minutes):

1. ``roofline.calibrate(device)`` for fp32, tf32, bf16 and fp16: achievable matmul FLOP/s,
   bandwidth, per-op overhead and the curves, with efficiencies against the datasheet
   entry that ``torch.cuda.get_device_name()`` resolves to;
2. ``roofline.measure`` of each zoo step on the device (bf16 autocast, real tensors);
3. each step's time predicted from the datasheet spec and from the calibrated spec, set
   against the measured median step.

Prints a markdown table and writes it, with the device, date and torch version, to
``--out`` (default ``$OUT`` or ``.``) as ``gpu_validation.md`` plus the raw results as JSON,
and each step's trace with its measured op times as ``gpu_steps.json.gz``.
A step that fails is reported in its row and the run goes on. ``--device cpu`` runs the
same script on the CPU in fp32 (the datasheet column is then empty): a dry run.

Usage: ``python benchmarks/gpu.py [--device cuda] [--quick-models] [--out DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import json
import os
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

import roofline
from roofline.hardware import DeviceSpec
from roofline.zoo import get_model

# (zoo name, train, get_model keywords): steps large enough to fill a GPU
STEPS: list[tuple[str, bool, dict[str, Any]]] = [
    ("gpt2", True, {"batch_size": 8, "seq_len": 1024, "dropout": 0}),
    ("gpt2", False, {"batch_size": 8, "seq_len": 1024, "dropout": 0}),
    ("bert-base", True, {"batch_size": 32, "seq_len": 384}),
    ("resnet50", True, {"batch_size": 128}),
    ("resnet50", False, {"batch_size": 256}),
    ("vit-b16", True, {"batch_size": 64}),
    ("llama-tiny", True, {"batch_size": 16, "seq_len": 512}),
    ("mlp", True, {"batch_size": 4096}),
    ("mlp", False, {"batch_size": 64}),  # a launch-bound step
]
QUICK: list[tuple[str, bool, dict[str, Any]]] = [
    ("mlp", True, {"batch_size": 64}), ("mlp", False, {"batch_size": 64}),
    ("llama-tiny", False, {"batch_size": 1, "seq_len": 32}),
]


def datasheet(device: str) -> DeviceSpec | None:
    if not device.startswith("cuda"):
        return None
    with contextlib.suppress(LookupError):
        return roofline.get_device(torch.cuda.get_device_name(torch.device(device)))
    return None


def measure_step(name: str, train: bool, kw: dict[str, Any], device: str,
                 ) -> roofline.Measurement:
    zm = get_model(name, device=device, **kw)
    if not train:
        zm.model.eval()
    optimizer = (torch.optim.AdamW(zm.model.parameters(), fused=device.startswith("cuda"))
                 if train else None)
    cuda = device.startswith("cuda")  # the CPU dry run stays in fp32, as calibrated
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda)
    with warnings.catch_warnings(), amp, torch.set_grad_enabled(train):
        warnings.simplefilter("ignore")
        inputs = zm.train_inputs if train else zm.inputs
        return roofline.measure(zm.model, *inputs, train=train, optimizer=optimizer,
                                device=device, repeat=10, min_seconds=1.0)


def row(name: str, train: bool, m: roofline.Measurement, base: DeviceSpec | None,
        calibrated: DeviceSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"step": f"{name} {'train' if train else 'inference'}",
                           "ops": len(m.trace.ops), "measured_ms": m.step_seconds * 1e3,
                           "spread": m.spread, "coverage": m.coverage}
    for label, spec in (("datasheet", base), ("calibrated", calibrated)):
        if spec is None:
            continue
        a = roofline.analyze(m.trace, spec)
        out[f"{label}_ms"] = a.seconds * 1e3
        out[f"{label}_error"] = a.seconds / m.step_seconds - 1
        out[f"{label}_bounds"] = {k: round(v["fraction"], 3) for k, v in a.by_bound().items()}
        out[f"{label}_op_p50"] = roofline.validate(a, m).op_error_stats()["median"]
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| step | ops | measured | datasheet prediction | error | calibrated prediction "
             "| error | spread |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['step']} | | failed: {r['failed']} | | | | | |")
            continue
        ds = (f"{r['datasheet_ms']:.2f} ms | {r['datasheet_error']:+.0%}"
              if "datasheet_ms" in r else "- | -")
        lines.append(f"| {r['step']} | {r['ops']} | {r['measured_ms']:.2f} ms | {ds} | "
                     f"{r['calibrated_ms']:.2f} ms | {r['calibrated_error']:+.0%} | "
                     f"{r['spread']:.0%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick-models", action="store_true", help="small steps only")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    base = datasheet(args.device)
    dtypes = ("fp32", "tf32", "bf16", "fp16") if args.device.startswith("cuda") else ("fp32",)
    spec = roofline.calibrate(args.device, dtypes=dtypes, quick=True, cache=False, base=base)
    print(f"calibrated {spec.name} in {time.perf_counter() - start:.0f} s")
    for line in spec.notes:
        print("  " + line)
    cuda = args.device.startswith("cuda")
    hardware = torch.cuda.get_device_name(torch.device(args.device)) if cuda else args.device
    title = (f"# Measured against predicted on {base.name if base else spec.name}\n\n"
             f"{datetime.date.today().isoformat()}, torch {torch.__version__}, device "
             f"{hardware}"
             f"; {'bf16 autocast' if cuda else 'fp32'}, real "
             "tensors, median step after "
             "warm-up.\n\n")
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    steps: dict[str, Any] = {}  # each step's trace and measured op times, to analyse again
    for name, train, kw in QUICK if args.quick_models else STEPS:
        try:
            m = measure_step(name, train, kw, args.device)
            rows.append(row(name, train, m, base, spec))
            steps[rows[-1]["step"]] = {
                "trace": json.loads(m.trace.to_json()), "step_seconds": m.step_seconds,
                "op_seconds": [None if not np.isfinite(v) else float(v) for v in m.op_seconds]}
            with gzip.open(args.out / "gpu_steps.json.gz", "wt", encoding="utf-8") as f:
                json.dump(steps, f)
        except Exception as exc:  # report and go on: the device time is short
            traceback.print_exc()
            rows.append({"step": f"{name} {'train' if train else 'inference'}",
                         "failed": f"{type(exc).__name__}: {str(exc)[:120]}"})
        print(table(rows[-1:]).splitlines()[-1], flush=True)
        # written after every step: a run cut off by its time limit keeps what it measured
        (args.out / "gpu_validation.md").write_text(title + table(rows) + "\n",
                                                    encoding="utf-8")
        (args.out / "gpu_validation.json").write_text(json.dumps(
            {"rows": rows, "calibrated": json.loads(spec.model_dump_json()),
             "datasheet": base.name if base else None}, indent=1, default=str),
            encoding="utf-8")
    print("\n" + title + table(rows))
    print(f"done in {time.perf_counter() - start:.0f} s; wrote {args.out / 'gpu_validation.md'}")


if __name__ == "__main__":
    main()
