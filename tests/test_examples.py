"""Every public function's docstring has an Examples section, and its examples run and
print what they show (issue 24, item 6). They run as doctests in a fresh interpreter:
``register_device`` and ``register_formula`` change the process's registries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = r"""
import doctest, inspect, math, sys
import matplotlib
matplotlib.use("Agg")
import torch
from torch import nn
import roofline

public = [getattr(roofline, n) for n in roofline.__all__]
public += [getattr(roofline.plot, n) for n in roofline.plot.__all__]
funcs = [f for f in public if inspect.isfunction(f)]
missing = [f.__name__ for f in funcs if "Examples\n" not in (f.__doc__ or "")]
if missing:
    sys.exit(f"no Examples section: {missing}")
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
for f in funcs:
    globs = {"roofline": roofline, "torch": torch, "nn": nn, "math": math}
    for test in doctest.DocTestFinder(recurse=False).find(f, f.__name__, globs=globs):
        runner.run(test)
failed, attempted = runner.summarize(verbose=False)
print(f"{len(funcs)} functions, {attempted} examples, {failed} failed")
sys.exit(1 if failed else 0)
"""


def test_every_public_function_has_examples_that_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " 0 failed" in done.stdout
