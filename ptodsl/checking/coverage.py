"""`ptodsl coverage`: every KernelBench spec checked against its problem file.

Specs and problems pair up by their leading problem number (`19_relu.pto` with
`19_ReLU.py`). Each pair runs `ptodsl check --against`; the table shows the verdict, the
largest error against the problem's own Model, and the simulated kernel time.

A problem whose outputs the check cannot judge at its own shape (only vacuous: #50's
products of 256 values are below f32's range, so zeros would pass) is checked again with
every dim halved, step by step, until the check can tell the kernel from a trivial one;
its row names those dims and says why. A problem whose output is the same whatever its
inputs and weights (#66 and #80 of level 2: a softmax or a mean over an axis of one
element) is DEGENERATE, as `check` finds it: the kernel is compared with that constant,
and the row does not fail the run.
`scaled` (`--scaled`, the table `scaled.toml` beside the specs) checks a spec at sizes of
its own: the problem's constants set by name (as `check --set` sets them), the spec's dims
bound from the resized problem's shapes.
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import attrs

from ptodsl.api import compile as compile_spec
from ptodsl.checking.problems import MAX_PROBLEM_BYTES, ProblemError, Resize, parse_setting
from ptodsl.frontend.diagnostics import MAX_SPEC_BYTES, SpecError, visible
from ptodsl.frontend.syntax import DimDecl, Number, ParamDecl
from ptodsl.ir import nodes as ir
from ptodsl.ir import sim_memory
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.runtime import memory
from ptodsl.runtime.executor import Task, launch_jobs, run_tasks
from ptodsl.runtime.files import read_regular
from ptodsl.runtime.scratch import scratch
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S
from ptodsl.tools.serialise import to_json
from ptodsl.tools.tables import markdown_table
from ptodsl.tools.tuning_cache import cached_tuning

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
    note: str = ""

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
            self.note,
        )


HEADER = ("#", "problem", "spec", "verdict", "max abs err", "sim us", "wall s", "note")
NO_SPEC = "NO SPEC"
SETTLED = ("PASS", "DEGENERATE")
Settings = Mapping[str, str]  # a problem file's constant -> its value (a Python literal)
SCALED_FILE = "scaled.toml"  # beside the specs: the settings each is checked at
MAX_SCALED_BYTES = 1 << 20


def settled(row: Row) -> bool:
    """A row that does not fail the run: the spec passed, or the problem's output is the
    same whatever its inputs and weights and the kernel gives it (DEGENERATE)."""
    return row.verdict in SETTLED


def problem_number(path: Path) -> int | None:
    match = _NUMBER.match(path.name)
    return int(match.group(1)) if match else None


def by_number(paths: Iterable[Path]) -> dict[int, list[Path]]:
    """Numbered files grouped by number, each group sorted by name."""
    groups: dict[int, list[Path]] = {}
    for path in sorted(paths):
        number = problem_number(path)
        if number is not None:
            groups.setdefault(number, []).append(path)
    return groups


def check_pair(
    spec: Path,
    problem: Path,
    timeout: float = DEFAULT_TIMEOUT_S,
    settings: Settings | None = None,
) -> Row:
    """One row, whatever happens: a failure of one problem never loses the table."""
    return check_texts(_pair(spec, problem, settings), timeout)


class UnreadableInput(ValueError):
    """A spec or problem file coverage cannot take: not a regular file, too large, not
    UTF-8, unreadable."""


def _pair(spec: Path, problem: Path, settings: Settings | None = None) -> Pair:
    try:
        spec_bytes = read_regular(spec, MAX_SPEC_BYTES)
        problem_bytes = read_regular(problem, MAX_PROBLEM_BYTES)
    except OSError as error:
        raise UnreadableInput(visible(str(error))) from None
    try:
        text = spec_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableInput(f"{visible(str(spec))} is not UTF-8 text") from None
    # the plan compile would use here; a scaled check's dims are known once the problem ran
    tuning = cached_tuning(text, None, PYPTO_0_2_0) if settings is None else None
    settings = None if settings is None else dict(settings)
    return Pair(spec.name, text, tuning, problem.name, problem_bytes, settings)


@attrs.frozen
class Pair:
    """A spec and its problem file, as text: what a coverage job carries to its worker (on a
    cluster, a machine without this one's files)."""

    spec_name: str
    spec_text: str
    tuning: ir.Tuning | None  # the plan: a tuned one where the command ran, or the default
    problem_name: str
    problem_bytes: bytes
    settings: dict[str, str] | None = None  # the problem's constants set so, not full shape


def check_texts(pair: Pair, timeout: float = DEFAULT_TIMEOUT_S, launch_jobs: int = 1) -> Row:
    """`check_pair` of a spec and problem given as text (the problem is written to a scratch
    folder under its own name, which its worker imports); a kernel in launches runs up to
    `launch_jobs` of them at once at full shape (`run_check`)."""
    with scratch("coverage") as folder:
        problem = folder / pair.problem_name
        problem.write_bytes(pair.problem_bytes)
        row = _checked_row(pair, problem, timeout, launch_jobs)
    # Messages name the problem by its file name, not by the scratch copy's path.
    return attrs.evolve(row, verdict=row.verdict.replace(str(problem), pair.problem_name))


def _checked_row(pair: Pair, problem: Path, timeout: float, launch_jobs: int) -> Row:
    # Imported here: checking pulls in torch.
    from ptodsl.checking.check import CheckTooBig, run_check
    from ptodsl.runtime.simulator import SimulationError
    from ptodsl.tools.tuning import probe_cost

    number = problem_number(problem)
    assert number is not None
    started = time.monotonic()

    def row(verdict: str) -> Row:
        return Row(number, problem.name, spec_name, verdict)

    spec_name, text = pair.spec_name, pair.spec_text
    note = ""
    try:
        if pair.settings is not None:
            return _checked_scaled(pair, problem, number, timeout, launch_jobs, started)
        compiled = compile_spec(text, name=spec_name, tuning=pair.tuning)
        try:
            report = run_check(compiled, against=problem, timeout=timeout, launch_jobs=launch_jobs)
            sim_time_us = report.sim_time_us
        except CheckTooBig as too_big:
            dims, report = _within_memory(text, spec_name, problem, compiled, timeout)
            sim_time_us = probe_cost(compiled.lowered, timeout=timeout).sim_time_us
            note = (
                f"checked at {_shown(dims)} (max abs err there; sim us at full shape): at full "
                f"shape the check needs ~{too_big.needed / sim_memory.GIB:.0f} GiB, "
                f"{too_big.available / sim_memory.GIB:.0f} GiB are available"
            )
        if _only_vacuous(report):
            dims, report = _at_a_judgeable_scale(text, spec_name, problem, compiled, timeout)
            note = (
                f"checked at {_shown(dims)} (max abs err there; sim us at full shape): at full "
                "shape the check cannot tell the kernel from a trivial one (outputs below "
                "f32's resolution)"
            )
    except SpecError as error:
        return row(f"SPEC ERROR: {error.message}")
    except ProblemError as error:
        return row(f"PROBLEM ERROR: {_one_line(error)}")
    except ValueError as error:
        return row(f"MISMATCH: {_one_line(error)}")
    except SimulationError as error:
        return row(f"DID NOT RUN: {_one_line(error)}")
    except Exception as error:  # noqa: BLE001 - a bug in ptodsl costs its row, not the table
        return row(f"{INTERNAL_ERROR}: {type(error).__name__}: {_one_line(error)}")
    error = max((o.max_abs_error for o in report.outputs), default=0.0)
    return Row(
        number,
        problem.name,
        spec_name,
        report.verdict,
        error,
        sim_time_us,
        time.monotonic() - started,
        "; ".join(filter(None, [note, *report.degenerate])),
    )


def _checked_scaled(
    pair: Pair, problem: Path, number: int, timeout: float, launch_jobs: int, started: float
) -> Row:
    """The spec against the problem with its constants set as `pair.settings` says (`check
    --set`), at the dims its resized shapes bind; the note lists both."""
    from ptodsl.checking.check import run_check
    from ptodsl.checking.problem_dims import problem_dims
    from ptodsl.frontend.diagnostics import Source

    assert pair.settings is not None
    resize = Resize(constants=pair.settings)
    source = Source(pair.spec_text, pair.spec_name)
    dims, _ = problem_dims(source, problem, resize, seed=0, timeout=timeout)
    compiled = compile_spec(pair.spec_text, name=pair.spec_name, dims=dims, tuning=pair.tuning)
    report = run_check(
        compiled, against=problem, resize=resize, timeout=timeout, launch_jobs=launch_jobs
    )
    error = max((o.max_abs_error for o in report.outputs), default=0.0)
    at = f"set {_shown(pair.settings)} (dims {_shown(dims)})" if pair.settings else "full shape"
    return Row(
        number,
        problem.name,
        pair.spec_name,
        report.verdict,
        error,
        report.sim_time_us,
        time.monotonic() - started,
        "; ".join([f"at {at}", *report.degenerate]),
    )


def _shown(sizes: Mapping[str, object]) -> str:
    return ", ".join(f"{name}={size}" for name, size in sizes.items())


def _only_vacuous(report) -> bool:
    """The check failed only because some outputs cannot be judged here, no element off."""
    vacuous = [o for o in report.outputs if o.problem is not None]
    return (
        not report.ok
        and bool(vacuous)
        and all(o.problem.startswith("vacuous") for o in vacuous)
        and all(o.mismatched == 0 for o in report.outputs)
        and all(problem.startswith("vacuous") for problem in report.problems)
        and not report.failed_passes
    )


def _smaller_shapes(text: str, name: str, compiled) -> Iterator[tuple[dict[str, int], object]]:
    """The spec with every dim halved, again and again, compiled: (dims, compiled). A dim
    computed from others follows them (it cannot be resized itself). A dim of the size of
    an int param's number keeps its size: the problem's constants are resized by value
    (`problem_rescale`), and level 2 #60's kernel_size 3 would shrink with its 3 channels."""
    syntax = compiled.lowered.syntax
    computed = {i.name for i in syntax.items if isinstance(i, DimDecl) and i.computed is not None}
    numbers = {
        item.default.value
        for item in syntax.items
        if isinstance(item, ParamDecl) and isinstance(item.default, Number)
    }
    dims = {
        dim: size
        for dim, size in syntax.declared_dims.items()
        if dim not in computed and size not in numbers
    }
    while not all(size == 1 for size in dims.values()):
        dims = {dim: max(1, size // 2) for dim, size in dims.items()}
        yield dims, compile_spec(text, name=name, dims=dims, tuning=None)


def _check_scaled(problem: Path, compiled, smaller, dims: dict[str, int], timeout: float):
    from ptodsl.checking.check import problem_rescale, run_check

    resize = problem_rescale(compiled.lowered.syntax.declared_dims, dims)
    return run_check(smaller, against=problem, resize=resize, timeout=timeout)


def _at_a_judgeable_scale(text: str, name: str, problem: Path, compiled, timeout: float):
    """The largest halving of every dim where the check is not only vacuous: the dims and
    that report (a pass, or the failure the smaller shape shows)."""
    for dims, smaller in _smaller_shapes(text, name, compiled):
        report = _check_scaled(problem, compiled, smaller, dims, timeout)
        if not _only_vacuous(report):
            return dims, report
    raise ValueError("no shape lets the check judge this problem: vacuous at every size")


def _within_memory(text: str, name: str, problem: Path, compiled, timeout: float):
    """The largest halving of every dim whose check fits in the memory available: the dims
    and that check's report."""
    for dims, smaller in _smaller_shapes(text, name, compiled):
        needed = sim_memory.check_bytes(smaller.lowered.checked, smaller.program)
        if memory.fits(needed):
            return dims, _check_scaled(problem, compiled, smaller, dims, timeout)
    raise ValueError("no shape of this problem fits in the memory available for a check")


INTERNAL_ERROR = "INTERNAL ERROR"


def _one_line(error: Exception) -> str:
    lines = str(error).splitlines()
    return lines[0] if lines else type(error).__name__


def run_coverage(
    problems_dir: Path,
    specs_dir: Path,
    only: Iterable[int] = (),
    progress: Callable[[int, int, Row | None], None] = lambda done, total, row: None,
    timeout: float = DEFAULT_TIMEOUT_S,
    jobs: int = 1,
    cluster: str | None = None,
    scaled: Mapping[str, Settings] | None = None,
    constants: Settings | None = None,
) -> list[Row]:
    """One row per numbered problem file, duplicates of a number included; a problem without
    a spec, or whose number several specs share, says so in its row. `progress(done, total,
    row)` hears of each row as it is made, and `progress(0, total, None)` before the first.
    The checks run `jobs` at a time here, or on the Dask cluster at `cluster`
    (`ptodsl.runtime.executor`); the rows are the same, in the same order, either way. `scaled`:
    per spec stem, the problem constants it is checked at (`read_scaled`); a spec without
    an entry is checked at its full shape. `constants` (`--set`) are set in every problem,
    over what `scaled` sets."""
    problems = by_number(problems_dir.glob("*.py"))
    specs = by_number(specs_dir.glob("*.pto"))
    wanted = set(only)
    chosen = [
        (number, problem, paths)
        for number, paths in sorted(problems.items())
        if not wanted or number in wanted
        for problem in paths
    ]
    progress(0, len(chosen), None)
    rows: list[Row | None] = []
    tasks: list[Task[Row]] = []
    checks = sum(len(specs.get(number, [])) == 1 for number, _, _ in chosen)
    in_flight = launch_jobs(jobs, checks, cluster)
    for number, problem, _ in chosen:
        candidates = specs.get(number, [])
        if len(candidates) == 1:
            rows.append(None)  # its check's row, once the task has run
            spec = candidates[0]
            settings = None if scaled is None else scaled.get(spec.stem)
            if constants:  # set for every problem, over the table's entry
                settings = {**(settings or {}), **constants}
            try:
                tasks.append(_coverage_task(spec, problem, timeout, in_flight, settings))
            except UnreadableInput as unreadable:  # its row says so; the others still run
                rows[-1] = Row(number, problem.name, spec.name, f"UNREADABLE: {unreadable}")
        elif candidates:
            names = ", ".join(p.name for p in candidates)
            rows.append(Row(number, problem.name, "", f"AMBIGUOUS: specs {names} share {number}"))
        else:
            rows.append(Row(number, problem.name, "", NO_SPEC))
    done = 0
    for row in rows:
        if row is not None:
            done += 1
            progress(done, len(chosen), row)

    def checked(index: int, row: Row) -> None:
        nonlocal done
        done += 1
        progress(done, len(chosen), row)

    checks = iter(
        run_tasks(
            tasks,
            failed=_failed_task,
            jobs=jobs,
            cluster=cluster,
            on_done=checked,
            timeout=timeout,
        )
    )
    rows = [next(checks) if row is None else row for row in rows]
    return [
        _shared_number(row, problem, paths)
        for row, (_, problem, paths) in zip(rows, chosen, strict=True)
    ]


def _coverage_task(
    spec: Path, problem: Path, timeout: float, launch_jobs: int, settings: Settings | None
) -> Task[Row]:
    pair = _pair(spec, problem, settings)
    memory = _check_memory(pair.spec_text, spec.name)
    return Task(check_texts, (pair, timeout, launch_jobs), memory, problem.name)


def _check_memory(text: str, name: str) -> float:
    """What the check of the spec will need: its estimate at full shape, or, when that is
    more than this machine has, about all of it (the check then scales the spec down to
    fit). A scaled check's dims are bound in its job: it is admitted at the full shape's
    estimate, an upper bound for every scale below it."""
    try:
        compiled = compile_spec(text, name=name)
    except SpecError:
        return sim_memory.BASE_BYTES  # the row is a spec error, found in no time
    return min(sim_memory.check_bytes(compiled.lowered.checked, compiled.program), memory.budget())


def _failed_task(task: Task[Row], error: BaseException) -> Row:
    """The row of a check that could not complete (on a cluster: its worker kept dying)."""
    pair, _ = task.arguments
    number = problem_number(Path(pair.problem_name))
    assert number is not None
    reason = f"{type(error).__name__}: {_one_line(error)}"
    return Row(number, pair.problem_name, pair.spec_name, f"DID NOT RUN: {reason}")


def _shared_number(row: Row, problem: Path, paths: list[Path]) -> Row:
    if len(paths) == 1:
        return row
    others = ", ".join(p.name for p in paths if p != problem)
    return attrs.evolve(row, problem=f"{problem.name} (number shared with {others})")


def judged(rows: list[Row], only: Iterable[int] = ()) -> list[Row]:
    """The rows that decide the run: all of them when problems were named (`--only`), else
    those with a spec (a problem folder may hold problems ptodsl has no spec for yet)."""
    return rows if only else [row for row in rows if row.verdict != NO_SPEC]


def coverage_json(rows: list[Row], only: Iterable[int] = ()) -> dict:
    """The rows and the count `format_table` prints, as JSON-ready values."""
    counted = judged(rows, only)
    return {
        "rows": to_json(rows),
        "passed": sum(row.verdict == "PASS" for row in counted),
        "degenerate": sum(row.verdict == "DEGENERATE" for row in counted),
        "judged": len(counted),
    }


def format_table(rows: list[Row], only: Iterable[int] = ()) -> str:
    counted = judged(rows, only)
    passed = sum(row.verdict == "PASS" for row in counted)
    degenerate = sum(row.verdict == "DEGENERATE" for row in counted)
    table = markdown_table(HEADER, [row.cells() for row in rows])
    with_spec = " with a spec" if len(counted) < len(rows) else ""
    parts = [f"{passed} of {len(counted)} problems{with_spec} pass"]
    if degenerate:
        parts.append(
            f"{degenerate} degenerate (the output is a constant of the problem; the kernel "
            "gives it)"
        )
    if len(counted) < len(rows):
        parts.append(f"{len(rows) - len(counted)} without a spec")
    summary = "; ".join(parts) + "."
    return table + f"\n{summary}\n"


def read_scaled(path: Path, specs_dir: Path) -> dict[str, dict[str, str]]:
    """`coverage --scaled`: the TOML table `path` (`scaled.toml` beside the specs) of spec
    stems to the problem constants each is checked at: `[19_relu]` then `batch_size = 2`, a
    tuple as an array (`shape = [4, 8]`). Every entry names a spec in `specs_dir`. Raises
    ValueError saying what is wrong where."""
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "does not exist"
        raise ValueError(f"{path} {what}: --scaled reads a TOML table of spec settings")
    with path.open("rb") as stream:
        data = stream.read(MAX_SCALED_BYTES + 1)
    if len(data) > MAX_SCALED_BYTES:
        raise ValueError(f"{path} is larger than {MAX_SCALED_BYTES // 1024} KiB: not a table")
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: {error}") from None
    stems = {spec.stem for spec in specs_dir.glob("*.pto")}
    scaled = {}
    for stem, settings in table.items():
        if not isinstance(settings, dict):
            raise ValueError(
                f"{path}: `{stem}` is not a table: write `[{stem}]` and its constants below it"
            )
        if stem not in stems:
            raise ValueError(f"{path}: [{stem}] names no spec in {specs_dir} ({stem}.pto)")
        try:
            scaled[stem] = dict(
                parse_setting(f"{name}={_literal(value)}") for name, value in settings.items()
            )
        except ValueError as error:
            raise ValueError(f"{path}: [{stem}]: {error}") from None
    return scaled


def _literal(value: object) -> str:
    """A TOML value as the Python literal `--set` takes; an array is a tuple."""
    if isinstance(value, list):
        items = [_literal(item) for item in value]
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
    if isinstance(value, dict) or not isinstance(value, int | float | str | bool):
        raise ValueError(f"{value!r} is not a number, a string or an array of those")
    return repr(value)
