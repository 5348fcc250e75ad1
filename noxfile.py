"""Sessions: tests (CPU torch pinned by constraints-cpu.txt), quick, lint, types, docs,
notebooks, benchmarks. ``nox`` alone runs tests (every test, the slow ones too), lint and
types; name the others (``nox -s quick`` skips the tests marked slow: notebooks, real
calibrations, the bitwise zoo sweep, real gloo processes)."""

import nox

nox.options.sessions = ["tests", "lint", "types"]
CONSTRAINTS = ("-c", "constraints-cpu.txt")


@nox.session(python=["3.11"])
def tests(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, "-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session(python=["3.11"])
def quick(session: nox.Session) -> None:
    """The tests not marked slow (``-m "not slow"``, see pyproject.toml's markers), on every
    core (pytest-xdist, a file per worker so a module's cached traces are made once)."""
    session.install(*CONSTRAINTS, "-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-m", "not slow", "-n", "auto", "--dist",
                "loadfile", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "roofline", "tests", "benchmarks", "docs", ".ci")


@nox.session(python=["3.11"])
def types(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, "-e", ".[lint]")
    session.run("mypy", "roofline", "benchmarks")


@nox.session(python=["3.11"])
def notebooks(session: nox.Session) -> None:
    """Execute every notebook in notebooks/ in a fresh kernel (also part of ``tests``)."""
    session.install(*CONSTRAINTS, "-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "tests/test_notebooks.py", *session.posargs)


# The quick benchmarks (5-6 minutes together on 2 shared cores; memory about 45 s, scaling
# about 70 s). The long ones are named:
# ``nox -s benchmarks -- thread_scaling`` (about 40 minutes), ``published`` (needs the
# ../shared/validation data; ``"published --trace-cache DIR"`` keeps its 80 traces between
# runs), ``gpu`` and ``gpu_kernels`` (a GPU; ``gpu --device cpu`` and ``gpu_kernels --device cpu
# --quick`` are their dry runs), ``suite_time`` (today's
# tests against an earlier commit's, by name; about 8 minutes).
QUICK_BENCHMARKS = ("the_answer", "capture_overhead --quick", "memory", "scaling",
                    "as_cuda_runs", "lent_h200")


@nox.session(python=["3.11"])
def benchmarks(session: nox.Session) -> None:
    """Run benchmark scripts: ``nox -s benchmarks [-- "name [args]" ...]``."""
    session.install(*CONSTRAINTS, "-e", ".[test]")
    for spec in session.posargs or QUICK_BENCHMARKS:
        name, *args = spec.split()
        session.run("python", f"benchmarks/{name.removesuffix('.py')}.py", *args)


@nox.session(python=["3.11"])
def docs(session: nox.Session) -> None:
    """Build the site into docs/_build/html, warnings as errors."""
    session.install(*CONSTRAINTS, "-e", ".[docs]")
    session.run("python", "docs/gen_devices.py", "--check")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html",
                *session.posargs)
