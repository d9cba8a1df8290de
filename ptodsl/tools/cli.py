"""The `ptodsl` command: compile and check specs, and check KernelBench coverage.

Exit status: 0 success, 1 a spec error or a failed check, 2 a usage error, 3 an internal
error (a bug in ptodsl; `--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import sys
import traceback
from pathlib import Path

import attrs
import shtab

from ptodsl import __version__
from ptodsl.api import Compiled, lower_spec
from ptodsl.emission.codegen import emit_kernelbench
from ptodsl.emission.picture import program_svg
from ptodsl.emission.reference import emit_reference
from ptodsl.frontend.diagnostics import MAX_SPEC_BYTES, EncodingError, Source, SpecError, visible
from ptodsl.frontend.syntax import format_syntax
from ptodsl.ir import sim_memory
from ptodsl.ir.forward import format_forward
from ptodsl.ir.nodes import format_kernel
from ptodsl.ir.plan import format_plan
from ptodsl.pipeline import PASS_NAMES
from ptodsl.runtime import settings
from ptodsl.runtime.executor import REPOSITORY, ClusterError, cluster_address
from ptodsl.runtime.files import (
    OutputRefused,
    UnusableFolder,
    file_kind,
    require_run_folders,
    tuning_dir,
    write_output,
)
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S, SettingError
from ptodsl.tools.progress import Progress
from ptodsl.tools.serialise import to_json
from ptodsl.tools.tables import markdown_table
from ptodsl.tools.tuning_cache import DEFAULT_BUDGET

EXIT_OK, EXIT_SPEC_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a command SIGPIPE stopped
# `coverage --scaled` without FILE: the table beside the specs (coverage.SCALED_FILE)
SCALED_BESIDE_SPECS = Path("scaled.toml")
STAGES = (
    "ast",
    "blocks",
    "ir",
    *PASS_NAMES,
    "forward",
    "plan",
    "pypto",
    "kernelbench",
    "torch",
)


class UserError(Exception):
    """A problem with ptodsl's files or what they hold, reported in one line (exit 1)."""


class UsageError(UserError):
    """A problem with how ptodsl was called, reported in one line (exit 2)."""


MAX_SEED = 2**32 - 1  # what every RNG the check seeds takes


def _seed(text: str) -> int:
    if not (text.isascii() and text.isdigit()):  # int() takes '１６', '1_000' and ' 7 ' too
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer in digits 0-9")
    seed = int(text)
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{seed} is outside 0 .. {MAX_SEED}")
    return seed


def _bench(args: argparse.Namespace) -> int:
    if not (REPOSITORY / "benchmarks" / "__init__.py").is_file():
        raise UserError(
            "the benchmarks are part of ptodsl's repository: install ptodsl from a checkout "
            "(pip install -e .) to run them"
        )
    sys.path.insert(0, str(REPOSITORY))
    sys.argv = [f"ptodsl bench {args.benchmark}", *args.arguments]
    # Its exit status leaves through SystemExit, past the handlers of ptodsl's own errors.
    runpy.run_module(f"benchmarks.{args.benchmark}", run_name="__main__", alter_sys=True)
    return EXIT_OK


def _positive(kind: type[int] | type[float]):
    """An argparse type: a number of `kind` above 0 (a bad one is a usage error, exit 2)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:  # also refuses nan
            raise argparse.ArgumentTypeError(f"{text} is not above 0")
        return value

    return parse


def _folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{visible(text)} is not a folder")
    return path


# `coverage` finds the repository's KernelBench specs, and `bench` its benchmarks, from any
# working directory.
REPOSITORY_SPECS = REPOSITORY / "examples" / "kernelbench"
# The runnable modules of the repository's benchmarks/ folder.
BENCHMARKS = (
    "run",
    "full_shapes",
    "fusion",
    "bounds",
    "interpret",
    "schedule",
    "conv_lowering",
    "baselines.verify",
)
SPEC_HELP = "a spec file (.pto)"
# Shell completion offers spec files (and folders on the way to them) for `spec`.
PTO_FILES = {"bash": "_shtab_ptodsl_pto_files", "zsh": "_files -g '*.pto'", "tcsh": "f:*.pto"}
PTO_FILES_BASH = """
_shtab_ptodsl_pto_files() {
  compgen -d -- "$1"
  compgen -f -X '!*.pto' -- "$1"
}
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptodsl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"ptodsl {__version__}")
    shtab.add_argument_to(
        parser,
        "--print-completion",
        help="print a completion script for this shell and exit",
        preamble={"bash": PTO_FILES_BASH},
    )
    debug_help = "show tracebacks of internal errors"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    # --debug after the command too; SUPPRESS keeps the top-level value when it is absent
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    commands = parser.add_subparsers(dest="command", required=True)
    # The simulator jobs of tune, check and coverage side by side (ptodsl.runtime.executor).
    fanout = argparse.ArgumentParser(add_help=False)
    spread = fanout.add_mutually_exclusive_group()
    spread.add_argument(
        "--jobs",
        type=_positive(int),
        default=1,
        metavar="N",
        help="run N simulator jobs at a time on this machine, as many as fit in its memory; "
        "a check with jobs to spare runs its kernel's launches side by side (default: 1)",
    )
    spread.add_argument(
        "--cluster",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the jobs on a Dask cluster: its scheduler's ADDRESS, or without one "
        "DASK_SCHEDULER_ADDRESS (pip install 'ptodsl[cluster]')",
    )

    compile_command = commands.add_parser(
        "compile", parents=[common], help="compile a spec to a PyPTO module"
    )
    compile_command.add_argument("spec", type=Path, help=SPEC_HELP).complete = PTO_FILES
    _add_dim_option(compile_command)
    compile_command.add_argument(
        "-o", "--output", type=Path, help="write here instead of stdout"
    ).complete = shtab.FILE
    compile_command.add_argument(
        "--emit",
        choices=STAGES,
        default="pypto",
        metavar="STAGE",
        help="what to print: " + ", ".join(STAGES) + " (a pass name: the IR after that pass)",
    )
    compile_command.add_argument(
        "--format",
        choices=("text", "svg"),
        default="text",
        help="with --emit plan: JSON text (default) or an SVG picture of the plan",
    )
    # a combination of options found wrong after parsing is a usage error of this command
    compile_command.set_defaults(usage_error=compile_command.error)
    compile_command.add_argument(
        "--untuned", action="store_true", help="ignore a plan stored by `ptodsl tune`"
    )

    tune_command = commands.add_parser(
        "tune",
        parents=[common, fanout],
        help="measure candidate plans in pypto SIM and store the fastest for compile",
    )
    tune_command.add_argument(
        "spec", type=Path, nargs="?", help=SPEC_HELP + " (with --clear: only its plans)"
    ).complete = PTO_FILES
    _add_dim_option(tune_command)
    cache = tune_command.add_mutually_exclusive_group()
    cache.add_argument("--list", action="store_true", help="list the stored plans and exit")
    cache.add_argument(
        "--clear",
        action="store_true",
        help="remove the stored plans (of SPEC at its --dim sizes when given) and exit",
    )
    tune_command.add_argument(
        "--budget",
        type=_positive(int),
        default=DEFAULT_BUDGET,
        metavar="N",
        help="measure at most N plans (default: %(default)s)",
    )
    tune_command.add_argument(
        "--no-check", action="store_true", help="store the fastest plan without `ptodsl check`"
    )
    tune_command.add_argument(
        "--json", action="store_true", help="print the measured plans (or --list) as JSON"
    )

    check_command = commands.add_parser(
        "check",
        parents=[common, fanout],
        help="run the kernel in pypto SIM and compare it with the torch reference",
    )
    check_command.add_argument(
        "spec", type=Path, nargs="+", help=SPEC_HELP + "; several are checked side by side"
    ).complete = PTO_FILES
    _add_dim_option(check_command)
    check_command.add_argument(
        "--kernel", type=Path, help="check this module (e.g. hand-edited) instead of compiling"
    ).complete = shtab.FILE
    check_command.add_argument(
        "--against",
        type=Path,
        metavar="PROBLEM.py",
        help="a KernelBench-format file: its Model on its get_inputs() is the golden",
    ).complete = shtab.FILE
    check_command.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --against: set the problem file's constant NAME (repeatable; what it "
        "computes from NAME follows); the spec's dims are then bound from its shapes",
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
        type=_positive(float),
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
        parents=[common, fanout],
        help="check every KernelBench spec against its problem file and print a table",
    )
    coverage_command.add_argument(
        "problems", type=_folder, help="a folder of KernelBench-format problem files"
    ).complete = shtab.DIRECTORY
    coverage_command.add_argument(
        "--specs",
        type=_folder,
        help="the folder of specs, paired with problems by number (default: this "
        "repository's examples/kernelbench)",
    ).complete = shtab.DIRECTORY
    coverage_command.add_argument(
        "--only", type=int, nargs="+", default=[], metavar="N", help="these problem numbers"
    )
    coverage_command.add_argument(
        "--scaled",
        type=Path,
        nargs="?",
        const=SCALED_BESIDE_SPECS,
        metavar="FILE",
        help="check each spec at the problem constants its entry in this TOML table sets "
        "([19_relu] then batch_size = 2, as check --set sets them; default: scaled.toml in "
        "the specs folder); specs without an entry at full shape",
    ).complete = shtab.FILE
    coverage_command.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set constant NAME in every problem file (repeatable; over --scaled's entry); "
        "a problem that does not assign it fails its row",
    )
    coverage_command.add_argument(
        "--json", action="store_true", help="print the rows and the verdict as JSON"
    )
    coverage_command.add_argument(
        "--timeout",
        type=_positive(float),
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="limit for each problem's code and each simulation (default: %(default)g)",
    )

    bench_command = commands.add_parser(
        "bench",
        parents=[common],
        help="run one of the repository's benchmarks (README: Performance)",
        description="Runs benchmarks/BENCHMARK.py of the repository ptodsl is installed from, "
        "from any working directory; `ptodsl bench BENCHMARK --help` describes its arguments.",
    )
    bench_command.add_argument(
        "benchmark", choices=BENCHMARKS, metavar="BENCHMARK", help=", ".join(BENCHMARKS)
    )
    bench_command.add_argument(
        "arguments", nargs=argparse.REMAINDER, help="the benchmark's own arguments"
    )
    return parser


def _dim_size(text: str) -> tuple[str, int]:
    name, _, size = text.partition("=")
    # ASCII digits only: str.isdigit and int() take '１６' (full-width) and '²' too
    if not name.isidentifier() or not (size.isascii() and size.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE (SIZE in digits 0-9), not {text!r}")
    return name, int(size)


def _setting(text: str) -> tuple[str, str]:
    from ptodsl.checking.problems import parse_setting

    try:
        return parse_setting(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


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
    stage: str,
    source: Source,
    dim_sizes: dict[str, int],
    tuned: bool,
    picture: bool,
) -> str:
    # Early stages print even when a later pass rejects the spec.
    early = ("ast", "blocks", "ir", "torch")
    until = "check" if stage in early else stage if stage in PASS_NAMES else None
    tuning = "cached" if tuned else None
    lowered, origin = lower_spec(source, dim_sizes, tuning=tuning, until=until)
    if stage == "ast":
        return format_syntax(lowered.syntax)
    if stage == "blocks":  # the syntax with every block instance inlined
        return format_syntax(lowered.expanded)
    if stage == "ir":
        return format_kernel(lowered.checked)
    if stage in PASS_NAMES:
        # a program of several kernels: each kernel's IR after the pass, in call order
        return "\n".join(format_kernel(dict(part.stages)[stage]) for part in lowered.parts)
    if stage == "forward":
        return format_forward(lowered.forward)
    if stage == "plan":
        return program_svg(lowered.forward) if picture else format_plan(lowered.forward)
    if stage == "torch":
        return emit_reference(lowered.checked, source.filename)
    if stage == "kernelbench":
        return emit_kernelbench(lowered.forward, source.filename)
    return Compiled(lowered, origin).source


def _compile(args: argparse.Namespace) -> int:
    if args.format == "svg" and args.emit != "plan":
        args.usage_error("--format svg draws the plan: use it with --emit plan")
    source = _read_spec(args.spec)
    text = _emit(
        args.emit,
        source,
        dict(args.dim),
        tuned=not args.untuned,
        picture=args.format == "svg",
    )
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    # realpath, not Path.resolve: a link loop is write_output's to refuse, not a RuntimeError
    if os.path.realpath(args.output) == os.path.realpath(args.spec):
        raise UserError(f"refusing to overwrite the spec {args.spec} with the output")
    try:
        write_output(args.output, text)
    except OutputRefused as refused:
        raise UserError(f"refusing to write: {refused}") from None
    except OSError as error:
        raise UserError(f"cannot write {args.output}: {error.strerror or error}") from None
    return EXIT_OK


def _tune(args: argparse.Namespace) -> int:
    from ptodsl.tools.tuning import TuningFailed, format_table, tune, tune_json

    if args.list:
        if args.spec is not None:
            raise UsageError("tune --list lists every stored plan: give no spec")
        sys.stdout.write(_stored_plans(args.json))
        return EXIT_OK
    if args.clear:
        removed = _clear_plans(args.spec, dict(args.dim))
        print(f"removed {len(removed)} stored plan{'s' * (len(removed) != 1)}")
        return EXIT_OK
    if args.spec is None:
        raise UsageError("tune: give a spec (or --list, or --clear)")
    require_run_folders(tuning=True)  # a folder tune cannot store into fails now, not later

    def measured(plan) -> str:
        time = f"{plan.cost.sim_time_us:.2f} us" if plan.cost else "failed"
        return f"{plan.plan.tuning.describe()}: {time}"

    try:
        with _Reporter("plan", "measuring plans in pypto SIM", measured) as progress:
            result = tune(
                _read_spec(args.spec),
                dict(args.dim),
                budget=args.budget,
                check=not args.no_check,
                progress=progress,
                jobs=args.jobs,
                cluster=_cluster_address(args),
            )
    except TuningFailed as error:
        raise UserError(f"tune: {error}") from None
    if args.json:
        print(json.dumps(tune_json(result), indent=2, allow_nan=False))
    else:
        sys.stdout.write(format_table(result))
    return EXIT_OK


def _stored_plans(as_json: bool) -> str:
    from ptodsl.tools.tuning_cache import entries

    if as_json:
        stored = to_json(entries())
        return json.dumps(stored, indent=2, allow_nan=False) + "\n"
    rows = []
    for entry in entries():
        dims = ", ".join(f"{k}={v}" for k, v in sorted((entry.dims or {}).items()))
        times = "?"
        if entry.sim_time_us is not None and entry.default_sim_time_us:
            times = f"{entry.sim_time_us:.2f} (default {entry.default_sim_time_us:.2f})"
        row = (
            entry.spec or "?",
            dims,
            entry.tuning or "unreadable",
            times,
            "yes" if entry.checked else "no (--no-check: compile ignores it)",
            entry.path.name,
        )
        # an entry's text is anyone's: ESC or BEL in it must not reach the terminal
        rows.append(tuple(map(visible, row)))
    header = ("spec", "dims", "plan choices", "sim us", "checked", "file")
    title = f"stored plans in {visible(str(tuning_dir()))}: {len(rows)}\n"
    return title + (markdown_table(header, rows) if rows else "")


def _clear_plans(spec: Path | None, dims: dict[str, int]) -> list[Path]:
    from ptodsl.ir.target import PYPTO_0_2_0
    from ptodsl.tools.tuning_cache import forget, forget_all

    if spec is None:
        return forget_all()
    return forget(_read_spec(spec).text, dims, PYPTO_0_2_0)


def _check(args: argparse.Namespace) -> int:
    # Imported here: checking pulls in torch, which `compile` does not need.
    from ptodsl.api import compile as compile_spec
    from ptodsl.checking.check import check_steps, format_report, problem_rescale, run_check
    from ptodsl.runtime.simulator import SimulationError

    if len(args.spec) > 1 or args.cluster is not None:
        return _check_side_by_side(args)
    (spec,) = args.spec
    source = _read_spec(spec)
    for path in (args.kernel, args.against):
        if path is not None and not path.is_file():
            what = "no such file"
            if path.exists():  # a FIFO would block the worker that reads it
                what = f"{file_kind(path.stat().st_mode)}, not a regular file"
            raise UserError(f"cannot read {visible(str(path))}: {what}")
    dims = dict(args.dim)
    resize, bound = None, []
    if args.set:
        resize, dims, bound = _dims_from_problem(args, source)
    compiled = compile_spec(
        source.text, name=str(spec), dims=dims, tuning=None if args.untuned else "cached"
    )
    if resize is None:
        try:
            resize = problem_rescale(compiled.lowered.syntax.declared_dims, dims)
        except ValueError as error:
            raise UserError(str(error)) from None
    title = f"checking {compiled.name} in pypto SIM"
    try:
        with Progress(check_steps(compiled), "step", title) as progress:
            report = run_check(
                compiled,
                kernel_path=args.kernel,
                seed=args.seed,
                passes=args.passes,
                against=args.against,
                resize=resize,
                timeout=args.timeout,
                progress=progress,
                launch_jobs=args.jobs,
            )
            report = attrs.evolve(report, bound_dims=tuple(bound))
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


def _dims_from_problem(args: argparse.Namespace, source: Source):
    """`--set`: the problem resized by its named constants, and the spec's dims bound from
    the shapes it then gives (`ptodsl.checking.problem_dims`)."""
    from ptodsl.checking.problem_dims import problem_dims
    from ptodsl.checking.problems import ProblemError, Resize

    if args.against is None:
        raise UsageError("--set sets a problem file's constants: give the problem with --against")
    if args.dim:
        raise UsageError(
            "--set binds the spec's dims from the resized problem's shapes: leave out --dim"
        )
    resize = Resize(constants=dict(args.set))
    try:
        dims, bound = problem_dims(source, args.against, resize, args.seed, args.timeout)
    except ProblemError as error:
        raise UserError(str(error)) from None
    return resize, dims, bound


def _check_side_by_side(args: argparse.Namespace) -> int:
    """Several specs (or one on a cluster): a check job each, their reports in the order the
    specs were given; a job whose kernel did not run is a failing entry, not a lost run."""
    from ptodsl.checking.check import CheckJob, check_job, format_report
    from ptodsl.runtime.executor import Task, launch_jobs, run_tasks

    if args.kernel is not None or args.against is not None or args.set:
        raise UsageError(
            "--kernel, --against and --set check one spec: give one, without --cluster"
        )
    dims = dict(args.dim)
    tasks = []
    for spec in args.spec:  # every spec compiles here first: a bad one stops the run now
        source = _read_spec(spec)
        lowered, origin = lower_spec(source, dims, tuning=None if args.untuned else "cached")
        job = CheckJob(
            source,
            dims,
            lowered.tuning,
            origin,
            args.seed,
            args.passes,
            args.timeout,
            launch_jobs(args.jobs, len(args.spec), args.cluster),
        )
        memory = sim_memory.check_bytes(lowered.checked, lowered.forward)
        tasks.append(Task(check_job, (job,), memory, lowered.checked.name))

    def outcome(result) -> str:
        return result if isinstance(result, str) else ("PASS" if result.ok else "FAIL")

    def failed(task, error: BaseException) -> str:
        return f"the check did not complete: {type(error).__name__}: {error}"

    with Progress(len(tasks), "spec", "checking specs in pypto SIM") as progress:
        reports = run_tasks(
            tasks,
            failed=failed,
            jobs=args.jobs,
            cluster=_cluster_address(args),
            on_done=lambda index, result: progress.step(
                f"{tasks[index].label}: {outcome(result).splitlines()[0]}"
            ),
            timeout=args.timeout,
        )
    if args.json:
        entries = [
            {"spec": str(spec), "error": r} if isinstance(r, str) else r.to_json()
            for spec, r in zip(args.spec, reports, strict=True)
        ]
        print(json.dumps(entries, indent=2, allow_nan=False))
    else:
        for spec, report in zip(args.spec, reports, strict=True):
            text = f"ptodsl check {spec}: {report}\n" if isinstance(report, str) else None
            sys.stdout.write(text or format_report(report))
    passed = all(not isinstance(r, str) and r.ok for r in reports)
    return EXIT_OK if passed else EXIT_SPEC_ERROR


def _cluster_address(args: argparse.Namespace) -> str | None:
    try:
        return cluster_address(args.cluster)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _coverage(args: argparse.Namespace) -> int:
    from ptodsl.checking.coverage import (
        INTERNAL_ERROR,
        SCALED_FILE,
        coverage_json,
        format_table,
        judged,
        read_scaled,
        run_coverage,
        settled,
    )

    specs = args.specs
    if specs is None:
        if not REPOSITORY_SPECS.is_dir():  # installed without the repository's examples
            raise UsageError("--specs: give the folder of specs (no examples/kernelbench here)")
        specs = REPOSITORY_SPECS

    def finished(row) -> str:  # the table itself is printed once, at the end
        wall = "" if row.wall_s is None else f" in {row.wall_s:.0f} s"
        return f"#{row.number} {row.problem}: {row.verdict}{wall}"

    only = args.only or ()
    scaled = None
    if args.scaled is not None:
        table = specs / SCALED_FILE if args.scaled is SCALED_BESIDE_SPECS else args.scaled
        try:
            scaled = read_scaled(table, specs)
        except ValueError as error:
            raise UsageError(f"--scaled: {error}") from None
    with _Reporter("problem", "checking problems", finished) as progress:
        rows = run_coverage(
            args.problems,
            specs,
            only,
            progress,
            args.timeout,
            jobs=args.jobs,
            cluster=_cluster_address(args),
            scaled=scaled,
            constants=dict(args.set),
        )
    if not rows:
        raise UserError(f"no numbered problem files (such as 19_relu.py) in {args.problems}")
    if args.json:
        print(json.dumps(coverage_json(rows, only), indent=2, allow_nan=False))
    else:
        sys.stdout.write(format_table(rows, only))
    if any(row.verdict.startswith(INTERNAL_ERROR) for row in rows):
        print(
            "ptodsl: internal errors in the rows above are bugs in ptodsl; report them with "
            "the spec and problem that caused them",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return EXIT_OK if all(map(settled, judged(rows, only))) else EXIT_SPEC_ERROR


class _Reporter:
    """The progress callback of `tune` and `coverage`: `progress(0, total, None)` starts a
    `Progress` of `unit`s titled `title`, each later call is a step `describe(item)`."""

    def __init__(self, unit: str, title: str, describe):
        self.unit, self.title, self.describe = unit, title, describe
        self.progress: Progress | None = None

    def __call__(self, done: int, total: int, item) -> None:
        if self.progress is None:
            self.progress = Progress(total, self.unit, self.title)
        if item is not None:
            self.progress.step(self.describe(item))

    def __enter__(self) -> _Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.close()


class Terminated(BaseException):
    """SIGTERM or SIGHUP (`timeout`, a closed terminal): unwound as an interrupt is, so
    that workers are killed and temporary folders removed, not orphaned."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)  # --print-completion writes here
        stops = (signal.SIGTERM, signal.SIGHUP)
        previous = [signal.signal(stop, _terminate) for stop in stops]
        try:
            return _run(args)
        finally:
            for stop, handler in zip(stops, previous, strict=True):
                signal.signal(stop, handler)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as a command killed by SIGPIPE
        # would, and keep Python's exit flush from failing again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(args: argparse.Namespace) -> int:
    try:
        commands = {
            "compile": _compile,
            "tune": _tune,
            "check": _check,
            "coverage": _coverage,
            "bench": _bench,
        }
        # read once, a variable it cannot use refused before anything runs; the command
        # and its workers run under these
        with settings.active(settings.read()):
            if args.command in ("check", "coverage", "bench"):
                require_run_folders()  # before anything is measured
            return commands[args.command](args)
    except SpecError as error:
        print(error.render(), file=sys.stderr)
        return EXIT_SPEC_ERROR
    except EncodingError as error:  # located already: file:line:col: error: ...
        print(error, file=sys.stderr)
        return EXIT_SPEC_ERROR
    except ClusterError as error:
        print(f"ptodsl: error: {error}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    except UserError as error:
        print(f"ptodsl: error: {error}", file=sys.stderr)
        return EXIT_USAGE if isinstance(error, UsageError) else EXIT_SPEC_ERROR
    except (SettingError, UnusableFolder) as error:  # the user's environment
        print(f"ptodsl: error: {visible(str(error))}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    except BrokenPipeError:
        raise  # not an internal error: main stops quietly
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
