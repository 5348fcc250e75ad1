"""The test suite's time against an earlier commit's, measured in one run.

Issue 21 asked that its restructuring leave the suite no slower. Tests were renamed into
``test_<module>.py`` files since, so the comparison is by test name (function and
parameters): the earlier commit's suite is run in a temporary worktree, then today's tests
that carry one of its names, then (``--full``) today's whole suite. Per-test durations come
from ``pytest --durations=0``; the executed notebooks are reported apart, since what they
run grows with the library, not with the test code.

Usage: ``python benchmarks/suite_time.py [--ref 3cbbae2] [--full]`` (about 8 minutes, 12
with ``--full``, on 2 shared cores). Compare the ratios of one run: this machine's speed
moves by tens of percent between runs.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The commit issue 21 was filed against.
REF = "3cbbae2"
_DURATION = re.compile(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)")
_SUMMARY = re.compile(r"(\d+) passed.* in ([0-9.]+)s")

PLUGIN = '''
import os
NAMES = set(open(os.environ["ROOFLINE_SUITE_NAMES"]).read().split("\\n"))
def pytest_collection_modifyitems(config, items):
    keep = [i for i in items if i.nodeid.split("::", 1)[1] in NAMES]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep
'''


def pytest(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run pytest in ``cwd`` (its own ``roofline`` first on the path); its output."""
    run_env = {**os.environ, **(env or {})}
    run_env["PYTHONPATH"] = os.pathsep.join([str(cwd), run_env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=cwd, env=run_env, capture_output=True, text=True)
    if done.returncode not in (0, 5):
        sys.exit(f"pytest failed in {cwd}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return done.stdout


def durations(out: str) -> dict[str, float]:
    """Seconds per test name (setup, call and teardown together)."""
    found: dict[str, float] = collections.defaultdict(float)
    for line in out.splitlines():
        if m := _DURATION.match(line):
            found[m.group(2).split("::", 1)[1]] += float(m.group(1))
    return found


def summary(out: str) -> tuple[int, float]:
    """(tests passed, wall seconds) from pytest's last line."""
    m = _SUMMARY.search(out.strip().splitlines()[-1])
    if m is None:
        sys.exit(f"no pytest summary in: {out[-500:]}")
    return int(m.group(1)), float(m.group(2))


def notebooks(times: dict[str, float]) -> float:
    """Seconds of the executed notebooks."""
    return sum(s for n, s in times.items() if n.startswith("test_notebook_executes"))


def row(name: str, out: str, times: dict[str, float]) -> str:
    tests, wall = summary(out)
    rest = sum(times.values()) - notebooks(times)
    return f"{name:<44} {tests:>6} {wall:>8.1f} {notebooks(times):>10.1f} {rest:>12.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default=REF, help=f"the earlier commit (default {REF})")
    parser.add_argument("--full", action="store_true", help="also today's whole suite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old_tree), args.ref],
                       cwd=ROOT, check=True)
        try:
            print(f"running the suite at {args.ref}...", file=sys.stderr, flush=True)
            old_out = pytest(old_tree, "--durations=0")
            ids = pytest(old_tree, "--collect-only")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=ROOT,
                           check=True)
        names = [line.split("::", 1)[1] for line in ids.splitlines() if "::" in line]
        (Path(tmp) / "names.txt").write_text("\n".join(names))
        (Path(tmp) / "suite_names_plugin.py").write_text(PLUGIN)
        print("running today's tests of the same names...", file=sys.stderr, flush=True)
        same_out = pytest(ROOT, "--durations=0", "-p", "suite_names_plugin",
                          env={"ROOFLINE_SUITE_NAMES": str(Path(tmp) / "names.txt"),
                               "PYTHONPATH": tmp})
        full_out = pytest(ROOT, "--durations=0") if args.full else ""
    old, same = durations(old_out), durations(same_out)
    print(f"{'':<44} {'tests':>6} {'wall s':>8} {'notebooks':>10} {'other tests':>12}")
    print(row(f"the suite at {args.ref}", old_out, old))
    print(row("today's tests of the same names", same_out, same))
    if full_out:
        print(row("today's whole suite", full_out, durations(full_out)))
    rest_old = sum(old.values()) - notebooks(old)
    rest_new = sum(same.values()) - notebooks(same)
    print(f"\nthe same tests, notebooks apart: {rest_new / rest_old:.3f}x the time at "
          f"{args.ref} ({rest_new:.1f} s against {rest_old:.1f} s)")
    grown = sorted(((same.get(n, 0.0) - s, n) for n, s in old.items()), reverse=True)[:5]
    print("largest increases: " + "; ".join(f"{n} {d:+.1f} s" for d, n in grown))


if __name__ == "__main__":
    main()
