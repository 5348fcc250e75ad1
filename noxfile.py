"""Sessions: tests (CPU torch pinned by constraints-cpu.txt), lint, types, docs."""

import nox

nox.options.sessions = ["tests", "lint", "types"]
CONSTRAINTS = ("-c", "constraints-cpu.txt")


@nox.session(python=["3.11"])
def tests(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, "-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "roofline", "tests", "benchmarks", "docs")


@nox.session(python=["3.11"])
def types(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, "-e", ".[lint]")
    session.run("mypy", "roofline", "benchmarks")


@nox.session(python=["3.11"])
def benchmarks(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, "-e", ".[test]")
    session.run("python", "benchmarks/capture_overhead.py")


@nox.session
def docs(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, "-e", ".[docs]")
    session.run("python", "docs/gen_devices.py", "--check")
    session.run("mkdocs", "build", "--strict")
