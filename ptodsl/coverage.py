"""`ptodsl coverage`: every KernelBench spec checked against its problem file.

Specs and problems pair up by their leading problem number (`19_relu.pto` with
`19_ReLU.py`). Each pair runs `ptodsl check --against`; the table shows the verdict, the
largest error against the problem's own Model, and the simulated kernel time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from ptodsl.api import compile as compile_spec
from ptodsl.diagnostics import SpecError
from ptodsl.tables import markdown_table

_NUMBER = re.compile(r"^(\d+)_")


@attrs.frozen
class Row:
    number: int
    problem: str
    spec: str
    verdict: str
    max_abs_error: float | None = None
    sim_time_us: float | None = None
    wall_s: float | None = None

    def cells(self) -> tuple[str, ...]:
        def number(value: float | None, form: str) -> str:
            return "" if value is None else format(value, form)

        return (
            str(self.number),
            self.problem,
            self.spec,
            self.verdict,
            number(self.max_abs_error, ".3g"),
            number(self.sim_time_us, ".2f"),
            number(self.wall_s, ".0f"),
        )


HEADER = ("#", "problem", "spec", "verdict", "max abs err", "sim us", "wall s")


def problem_number(path: Path) -> int | None:
    match = _NUMBER.match(path.name)
    return int(match.group(1)) if match else None


def by_number(paths: Iterable[Path]) -> dict[int, Path]:
    return {n: p for p in paths if (n := problem_number(p)) is not None}


def check_pair(spec: Path, problem: Path) -> Row:
    # Imported here: checking pulls in torch.
    from ptodsl.checking import run_check
    from ptodsl.simulator import SimulationError

    number = problem_number(problem)
    assert number is not None
    started = time.monotonic()
    try:
        compiled = compile_spec(spec.read_text(encoding="utf-8"), name=spec.name)
        report = run_check(compiled, against=problem)
    except SpecError as error:
        return Row(number, problem.name, spec.name, f"SPEC ERROR: {error.message}")
    except ValueError as error:
        return Row(number, problem.name, spec.name, f"MISMATCH: {error}")
    except SimulationError as error:
        return Row(number, problem.name, spec.name, "DID NOT RUN: " + str(error).splitlines()[0])
    error = max((o.max_abs_error for o in report.outputs), default=0.0)
    return Row(
        number,
        problem.name,
        spec.name,
        "PASS" if report.ok else "FAIL",
        error,
        report.sim_time_us,
        time.monotonic() - started,
    )


def run_coverage(
    problems_dir: Path,
    specs_dir: Path,
    only: Iterable[int] = (),
    progress: Callable[[Row], None] = lambda row: None,
) -> list[Row]:
    """One row per problem file with a number (those without a spec say so)."""
    problems = by_number(sorted(problems_dir.glob("*.py")))
    specs = by_number(sorted(specs_dir.glob("*.pto")))
    wanted = set(only)
    rows = []
    for number in sorted(problems):
        if wanted and number not in wanted:
            continue
        problem = problems[number]
        if number in specs:
            row = check_pair(specs[number], problem)
        else:
            row = Row(number, problem.name, "", "NO SPEC")
        progress(row)
        rows.append(row)
    return rows


def format_table(rows: list[Row]) -> str:
    passed = sum(row.verdict == "PASS" for row in rows)
    table = markdown_table(HEADER, [row.cells() for row in rows])
    return table + f"\n{passed} of {len(rows)} problems pass.\n"
