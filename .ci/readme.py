"""Run the README's commands as a new user would, and check what they print.

Every ```bash and ```python block of README.md runs (bash blocks line by line in one shell,
python blocks as a script), in the repository root, with the interpreter and console
scripts of the environment this script runs in. A block that installs the test extras
(its command is the README's test command) is skipped: ``.ci/run`` runs it after this.
A ```text block after a command block (prose between them, no other block) is that
block's output: each of its lines must appear, in order, in what the block printed to
stdout ("..." stands for any lines).

Files the commands write (charts, reports, a calibration) go into a temporary folder
that is removed afterwards.

Usage: ``python .ci/readme.py [README.md]``; exits 1 on the first failure.
``python .ci/readme.py --test-command`` prints the README's test command (for ``.ci/run``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
TESTS = re.compile(r"\bpytest\b")


def blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, code, expected output or None) of every command block."""
    found = [(m.group(1), m.group(2), m.start(), m.end()) for m in BLOCK.finditer(text)]
    out = []
    for i, (lang, code, _, _) in enumerate(found):
        if lang not in ("bash", "python"):
            continue
        expected = None
        if i + 1 < len(found) and found[i + 1][0] == "text":
            expected = found[i + 1][1]
        out.append((lang, code, expected))
    return out


def matches(expected: str, printed: str) -> str | None:
    """None when every expected line appears in order in ``printed``; else the first line
    that does not."""
    lines = printed.splitlines()
    at = 0
    for want in expected.rstrip("\n").splitlines():
        if want.strip() == "...":
            continue
        while at < len(lines) and lines[at].rstrip() != want.rstrip():
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def run(lang: str, code: str, scratch: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # The commands name their output files relative to the working directory; the
    # repository root is where the README says to run them, so run there and move the
    # files they write into the scratch folder.
    before = set(os.listdir(ROOT))
    if lang == "bash":
        argv = ["bash", "-euo", "pipefail", "-c", code]
    else:
        argv = [sys.executable, "-c", code]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    for name in set(os.listdir(ROOT)) - before:
        if (ROOT / name).is_file():  # not the build's folders (roofline.egg-info)
            shutil.move(str(ROOT / name), scratch / name)
    return done


def main() -> int:
    args = sys.argv[1:]
    readme = next((Path(a) for a in args if not a.startswith("-")), ROOT / "README.md")
    if "--test-command" in args:
        tests = [code for lang, code, _ in blocks(readme.read_text(encoding="utf-8"))
                 if lang == "bash" and TESTS.search(code)]
        if len(tests) != 1:
            print(f"README.md has {len(tests)} test commands, not one", file=sys.stderr)
            return 1
        print(tests[0].strip())
        return 0
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    env["MPLBACKEND"] = "Agg"
    with tempfile.TemporaryDirectory() as scratch:
        for lang, code, expected in blocks(readme.read_text(encoding="utf-8")):
            if TESTS.search(code):
                print(f"skipped (the test command, run by .ci/run): {code.strip()}")
                continue
            print(f"$ {code.strip()}", flush=True)
            start = time.perf_counter()
            done = run(lang, code, Path(scratch), env)
            print(done.stdout, end="")
            print(f"[{time.perf_counter() - start:.1f} s, exit {done.returncode}]", flush=True)
            if done.returncode:
                print(done.stderr[-4000:], file=sys.stderr)
                print(f"README command failed: {code.strip()}", file=sys.stderr)
                return 1
            missing = None if expected is None else matches(expected, done.stdout)
            if missing is not None:
                print(f"README says the command prints\n  {missing}\nbut it did not "
                      "(its output is above)", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
