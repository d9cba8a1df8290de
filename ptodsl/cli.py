"""The `ptodsl` command: compile and check specs, and check KernelBench coverage.

Exit status: 0 success, 1 a spec error or a failed check, 2 a usage error, 3 an internal
error (a bug in ptodsl; `--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import traceback
from pathlib import Path

from ptodsl import __version__
from ptodsl.api import Compiled, lower_spec
from ptodsl.codegen import emit_kernelbench
from ptodsl.diagnostics import EncodingError, Source, SpecError, visible
from ptodsl.files import OutputRefused, write_output
from ptodsl.ir import format_kernel
from ptodsl.pipeline import PASS_NAMES
from ptodsl.plan import format_plan
from ptodsl.reference import emit_reference
from ptodsl.syntax import format_syntax
from ptodsl.tuning_cache import tuning_dir
from ptodsl.workers import DEFAULT_TIMEOUT_S

EXIT_OK, EXIT_SPEC_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
MAX_SPEC_BYTES = 1 << 20  # a spec is a page of text; the largest example is under 2 KiB
STAGES = ("ast", "ir", *PASS_NAMES, "plan", "pypto", "kernelbench", "torch")


class UserError(Exception):
    """A problem with how ptodsl was called or with its files, reported in one line."""


MAX_SEED = 2**32 - 1  # what every RNG the check seeds takes


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{seed} is outside 0 .. {MAX_SEED}")
    return seed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptodsl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"ptodsl {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", required=True)

    compile_command = commands.add_parser("compile", help="compile a spec to a PyPTO module")
    compile_command.add_argument("spec", type=Path)
    _add_dim_option(compile_command)
    compile_command.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    compile_command.add_argument(
        "--emit",
        choices=STAGES,
        default="pypto",
        metavar="STAGE",
        help="what to print: " + ", ".join(STAGES) + " (a pass name: the IR after that pass)",
    )
    compile_command.add_argument(
        "--untuned", action="store_true", help="ignore a plan stored by `ptodsl tune`"
    )
    compile_command.add_argument(
        "--verify-each",
        action="store_true",
        help="check the IR's invariants after every pass (a violation is an internal error)",
    )

    tune_command = commands.add_parser(
        "tune", help="measure candidate plans in pypto SIM and store the fastest for compile"
    )
    tune_command.add_argument("spec", type=Path)
    _add_dim_option(tune_command)
    tune_command.add_argument(
        "--budget", type=int, default=12, help="measure at most N plans (default: %(default)s)"
    )
    tune_command.add_argument(
        "--no-check", action="store_true", help="store the fastest plan without `ptodsl check`"
    )

    check_command = commands.add_parser(
        "check", help="run the kernel in pypto SIM and compare it with the torch reference"
    )
    check_command.add_argument("spec", type=Path)
    _add_dim_option(check_command)
    check_command.add_argument(
        "--kernel", type=Path, help="check this module (e.g. hand-edited) instead of compiling"
    )
    check_command.add_argument(
        "--against",
        type=Path,
        metavar="PROBLEM.py",
        help="a KernelBench-format file: its Model on its get_inputs() is the golden",
    )
    check_command.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="seed of the generated inputs and weights, 0 to 2^32 - 1 (default: 0)",
    )
    check_command.add_argument("--json", action="store_true", help="print the report as JSON")
    check_command.add_argument(
        "--untuned", action="store_true", help="check the default plan, not a tuned one"
    )
    check_command.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="limit for the problem's code and for the simulation, each (default: %(default)g)",
    )
    check_command.add_argument(
        "--passes",
        choices=("auto", "all", "graph"),
        default="auto",
        help="pypto verification: per-pass (all), graph only, or by size (auto)",
    )

    coverage_command = commands.add_parser(
        "coverage",
        help="check every KernelBench spec against its problem file and print a table",
    )
    coverage_command.add_argument(
        "problems", type=Path, help="a folder of KernelBench-format problem files"
    )
    coverage_command.add_argument(
        "--specs",
        type=Path,
        default=Path("examples/kernelbench"),
        help="the folder of specs, paired with problems by number (default: %(default)s)",
    )
    coverage_command.add_argument(
        "--only", type=int, nargs="+", default=[], metavar="N", help="these problem numbers"
    )
    coverage_command.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="limit for each problem's code and each simulation (default: %(default)g)",
    )
    return parser


def _dim_size(text: str) -> tuple[str, int]:
    name, _, size = text.partition("=")
    if not name.isidentifier() or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE, not {text!r}")
    return name, int(size)


def _add_dim_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--dim",
        type=_dim_size,
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="resize a declared dim (repeatable), e.g. a scaled-down copy of a large spec",
    )


def _read_spec(path: Path) -> Source:
    try:
        with path.open("rb") as stream:  # bounded: `/dev/zero` or a huge file is no spec
            data = stream.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise UserError(
                f"{visible(str(path))} is larger than {MAX_SPEC_BYTES // 1024} KiB: not a spec"
            )
        return Source.decode(data, str(path))
    except OSError as error:
        raise UserError(f"cannot read {visible(str(path))}: {error.strerror or error}") from None


def _emit(
    stage: str, source: Source, dim_sizes: dict[str, int], tuned: bool, verify_each: bool
) -> str:
    # Early stages print even when a later pass rejects the spec.
    until = "check" if stage in ("ast", "ir", "torch") else stage if stage in PASS_NAMES else None
    tuning = "cached" if tuned else None
    lowered, origin = lower_spec(
        source, dim_sizes, tuning=tuning, until=until, verify_each=verify_each
    )
    if stage == "ast":
        return format_syntax(lowered.syntax)
    if stage == "ir":
        return format_kernel(lowered.checked)
    if stage in PASS_NAMES:
        return format_kernel(lowered.after(stage))
    if stage == "plan":
        return format_plan(lowered.kernel)
    if stage == "torch":
        return emit_reference(lowered.checked, source.filename)
    if stage == "kernelbench":
        return emit_kernelbench(lowered.kernel, source.filename)
    return Compiled(lowered, origin).source


def _compile(args: argparse.Namespace) -> int:
    source = _read_spec(args.spec)
    text = _emit(
        args.emit, source, dict(args.dim), tuned=not args.untuned, verify_each=args.verify_each
    )
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    if args.output.resolve() == args.spec.resolve():
        raise UserError(f"refusing to overwrite the spec {args.spec} with the output")
    try:
        write_output(args.output, text)
    except OutputRefused as refused:
        raise UserError(f"refusing to write: {refused}") from None
    except OSError as error:
        raise UserError(f"cannot write {args.output}: {error.strerror or error}") from None
    return EXIT_OK


def _tune(args: argparse.Namespace) -> int:
    from ptodsl.tuning import TuningFailed, format_table, tune

    if args.budget < 1:
        raise UserError("--budget must be at least 1")
    folder = tuning_dir()
    try:  # before measuring: a folder tune cannot store into fails now, not after minutes
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"cannot store tuned plans in {visible(str(folder))}: {error.strerror or error} "
            "(PTODSL_TUNING_DIR or PTODSL_CACHE_DIR sets the folder)"
        ) from None

    def progress(done: int, total: int, measured) -> None:
        bar = "#" * (20 * done // total)
        time = f"{measured.cost.sim_time_us:.2f} us" if measured.cost else "failed"
        line = f"\r[{bar:<20}] {done}/{total} {measured.plan.tuning.describe()}: {time}"
        print(line.ljust(100)[:100], end="" if done < total else "\n", file=sys.stderr)

    try:
        result = tune(
            _read_spec(args.spec),
            dict(args.dim),
            budget=args.budget,
            check=not args.no_check,
            progress=progress,
        )
    except TuningFailed as error:
        raise UserError(f"tune: {error}") from None
    sys.stdout.write(format_table(result))
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    # Imported here: checking pulls in torch, which `compile` does not need.
    from ptodsl.api import compile as compile_spec
    from ptodsl.checking import format_report, problem_rescale, run_check
    from ptodsl.simulator import SimulationError

    source = _read_spec(args.spec)
    dims = dict(args.dim)
    compiled = compile_spec(
        source.text, name=str(args.spec), dims=dims, tuning=None if args.untuned else "cached"
    )
    for path in (args.kernel, args.against):
        if path is not None and not path.is_file():
            raise UserError(f"cannot read {path}: no such file")
    if args.timeout <= 0:
        raise UserError("--timeout must be positive")
    try:
        report = run_check(
            compiled,
            kernel_path=args.kernel,
            seed=args.seed,
            passes=args.passes,
            against=args.against,
            rescale=problem_rescale(compiled.lowered.syntax.declared_dims, dims),
            timeout=args.timeout,
        )
    except SimulationError as error:
        print(f"ptodsl check {compiled.name}: the kernel did not run\n{error}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    except ValueError as error:
        raise UserError(str(error)) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2, allow_nan=False))
    else:
        sys.stdout.write(format_report(report))
    return EXIT_OK if report.ok else EXIT_SPEC_ERROR


def _coverage(args: argparse.Namespace) -> int:
    from ptodsl.coverage import INTERNAL_ERROR, format_table, judged, run_coverage

    for folder in (args.problems, args.specs):
        if not folder.is_dir():
            raise UserError(f"{folder} is not a folder")
    if args.timeout <= 0:
        raise UserError("--timeout must be positive")

    def progress(done: int, total: int, row) -> None:
        # one line per problem as it finishes; the table itself is printed once, at the end
        wall = "" if row.wall_s is None else f" in {row.wall_s:.0f} s"
        print(f"[{done}/{total}] #{row.number} {row.problem}: {row.verdict}{wall}", file=sys.stderr)

    only = args.only or ()
    rows = run_coverage(args.problems, args.specs, only, progress, args.timeout)
    if not rows:
        raise UserError(f"no numbered problem files (such as 19_relu.py) in {args.problems}")
    sys.stdout.write(format_table(rows, only))
    if any(row.verdict.startswith(INTERNAL_ERROR) for row in rows):
        print(
            "ptodsl: internal errors in the rows above are bugs in ptodsl; report them with "
            "the spec and problem that caused them",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return EXIT_OK if all(row.verdict == "PASS" for row in judged(rows, only)) else EXIT_SPEC_ERROR


class Terminated(BaseException):
    """SIGTERM or SIGHUP (`timeout`, a closed terminal): unwound as an interrupt is, so
    that workers are killed and temporary folders removed, not orphaned."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stops = (signal.SIGTERM, signal.SIGHUP)
    previous = [signal.signal(stop, _terminate) for stop in stops]
    try:
        return _run(args)
    finally:
        for stop, handler in zip(stops, previous, strict=True):
            signal.signal(stop, handler)


def _run(args: argparse.Namespace) -> int:
    try:
        commands = {
            "compile": _compile,
            "tune": _tune,
            "check": _check,
            "coverage": _coverage,
        }
        return commands[args.command](args)
    except SpecError as error:
        print(error.render(), file=sys.stderr)
        return EXIT_SPEC_ERROR
    except EncodingError as error:  # located already: file:line:col: error: ...
        print(error, file=sys.stderr)
        return EXIT_SPEC_ERROR
    except UserError as error:
        print(f"ptodsl: error: {error}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    except KeyboardInterrupt:
        return 130
    except Terminated as stop:
        return 128 + stop.signum
    except Exception as error:  # noqa: BLE001 - the last line of defence against tracebacks
        if args.debug:
            traceback.print_exc()
        else:
            print(
                f"ptodsl: internal error: {type(error).__name__}: {error}\n"
                "This is a bug in ptodsl. Run again with --debug for the traceback, and report "
                "it with the spec that caused it.",
                file=sys.stderr,
            )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
