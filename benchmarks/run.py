"""Speed of ptodsl's kernels against hand-written PyPTO baselines, in pypto's cost model.

    ptodsl bench run [EXAMPLE ...] [--budget N] [--chart PATH]

One row per example (all of examples/ and examples/kernelbench/ by default), at full shape:
- compile: median wall time of `ptodsl.compile` (parse to source, warm, default plan);
- baseline / default / tuned: simulated AICore end-to-end time of the hand-written module in
  benchmarks/baselines/<kernel>.py, of ptodsl's default plan, and of the plan `ptodsl tune`
  picks within the budget (the winner passes `ptodsl check`; the user's tuning cache is left
  alone);
- official: the fastest of the modules in benchmarks/baselines/official/ written after pypto's
  own example kernels (r0.2.0 examples/: their tiles and loops at this example's shapes), and
  default/official; blank for examples no official kernel corresponds to. An official
  pattern that cannot run at the row's dims is compared, with the default plan, at its
  reduced dims (official.REDUCED_DIMS, else the CI dims), and the note says so;
- rooflines of the tuned plan (benchmarks/roofline.py), each the fraction of the platform's
  best the simulated time reaches, for the bytes the kernel must move (inputs, weights and
  outputs once):
  - DDR: the physical DDR bandwidth of the simulated chip, from pypto's platform file
    (ddr_rate x AI cores x clock, about 1.42 TB/s), which the cost model never consults;
  - copy model: the copy rate pypto's cost model charges, all vector cores copying through
    UB-sized tiles (with matmuls, the cube cores' share of the copies too: `copy_model_seconds`);
  - cube: for matmuls, 2·M·N·K FLOP against the cube peak of the platform file.
  A fraction above 100% gets a note saying why.
Prints a Markdown table and the formulas; `--chart PATH` also writes an SVG bar chart of
baseline / tuned per example there (the tuned/baseline column turned around: a bar right of 1.0
is ptodsl faster). A full run takes about an hour on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import ptodsl
from benchmarks import CI_DIMS, EXAMPLES
from benchmarks.baselines import official
from benchmarks.roofline import Platform, platform
from ptodsl.emission.picture import ratio_chart_svg
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import nodes as ir
from ptodsl.ir import sim_memory
from ptodsl.pipeline import Lowered, lower
from ptodsl.runtime.executor import Task, cluster_address, in_repository, run_tasks
from ptodsl.runtime.files import write_output
from ptodsl.runtime.simulator import SimulationError
from ptodsl.tools.tables import markdown_table
from ptodsl.tools.tuning import Cost, probe_cost, tune

BASELINES = Path(__file__).resolve().parent / "baselines"
COMPILE_REPEATS = 21


def compile_latency_ms(text: str, name: str) -> float:
    ptodsl.compile(text, name=name, tuning=None)  # warm: grammar, imports
    times = []
    for _ in range(COMPILE_REPEATS):
        started = time.perf_counter()
        ptodsl.compile(text, name=name, tuning=None)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def module_cost(lowered: Lowered, path: Path) -> Cost | str:
    """A hand-written module for this kernel, driven like ptodsl's own `ModelNew`, or why it
    has no time."""
    try:
        return probe_cost(lowered, module_path=path)
    except SimulationError as error:
        reason = str(error).splitlines()[0].removeprefix(f"simulating {path.name} failed: ")
        return reason if len(reason) <= 60 else reason[:57] + "..."


def baseline_cost(lowered: Lowered) -> Cost | str:
    path = BASELINES / f"{lowered.checked.name}.py"
    if not path.exists():
        return "no baseline"
    cost = module_cost(lowered, path)
    return cost if isinstance(cost, Cost) else "baseline failed: " + cost


def official_cost(lowered: Lowered) -> tuple[Cost | None, str]:
    """The fastest official-pattern module for this kernel and a note naming it (and the
    other variants' times), or (None, why none ran)."""
    costs = {
        path.stem: module_cost(lowered, path) for path in official.variants(lowered.checked.name)
    }
    ran = {name: cost for name, cost in costs.items() if isinstance(cost, Cost)}
    if not ran:
        return None, "; ".join(f"official {name} failed: {why}" for name, why in costs.items())
    best = min(ran, key=lambda name: ran[name].sim_time_us)
    if len(costs) == 1:
        return ran[best], ""
    times = ", ".join(
        f"{name.partition('__')[2] or name} "
        + (f"{cost.sim_time_us:.2f}" if isinstance(cost, Cost) else f"failed ({cost})")
        for name, cost in costs.items()
    )
    return ran[best], f"official: {times} us"


def moved_bytes(lowered: Lowered) -> tuple[int, int]:
    """Bytes read (inputs and weights) and written (outputs), each once."""
    checked = lowered.checked

    def size(tensors) -> int:
        return sum(math.prod(t.declared_shape) * t.type.dtype.itemsize for t in tensors)

    return size(checked.inputs), size(checked.outputs)


def matmul_flops(lowered: Lowered) -> int:
    """2·M·N·K (times the batch) of every matmul in the spec."""
    flops = 0
    for node in _matmuls(lowered):
        a = node.operands[0].type.shape
        k = a[-2] if node.attrs.a_trans else a[-1]
        flops += 2 * math.prod(node.type.shape) * k
    return flops


def _matmuls(lowered: Lowered) -> list[ir.Op]:
    return [
        node
        for stmt in lowered.checked.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and node.op == "matmul"
    ]


def copy_model_seconds(lowered: Lowered, chip: Platform) -> float:
    """The least time pypto's copy charges allow (Platform.model_copy_seconds): on the
    vector cores for a kernel without matmuls; with matmuls, the longer of the cube cores'
    share (operands in, products out, each once) and, when vector work follows, the vector
    cores' (the products and the other inputs in, the outputs out)."""
    read, written = moved_bytes(lowered)
    matmuls = _matmuls(lowered)
    if not matmuls:
        return chip.model_copy_seconds(read, written, chip.vector_cores)

    def nbytes(expr: ir.Expr) -> int:
        return math.prod(expr.type.shape) * expr.type.dtype.itemsize

    operands = sum(nbytes(o) for m in matmuls for o in m.operands)
    products = sum(nbytes(m) for m in matmuls)
    cube = chip.model_copy_seconds(operands, products, chip.cube_cores)
    vector_work = any(
        isinstance(node, ir.Op) and node.op not in ("matmul", "transpose")
        for stmt in lowered.checked.body
        for node in ir.walk(stmt.value)
    )
    if not vector_work:
        return cube
    vector = chip.model_copy_seconds(read - operands + products, written, chip.vector_cores)
    return max(cube, vector)


def has_rank_1(lowered: Lowered) -> bool:
    """Whether the plan tiles or moves a rank-1 tensor, whose copies pypto charges as one
    element."""
    kernel = lowered.kernel
    tensors = (*kernel.inputs, *kernel.outputs)
    return any(len(p.tile) == 1 for p in kernel.schedule.phases) or any(
        len(t.kernel_shape) == 1 for t in tensors
    )


def rooflines(lowered: Lowered, seconds: float, chip: Platform) -> tuple[str, str, str, str]:
    """DDR, copy-model and cube fractions of `lowered` taking `seconds`, and a note for any
    above 100%."""
    read, written = moved_bytes(lowered)
    flops = matmul_flops(lowered)
    ddr = (read + written) / seconds / chip.ddr_bytes_per_s()
    model = copy_model_seconds(lowered, chip) / seconds
    cube = flops / seconds / chip.cube_flops_per_s() if flops else None
    notes = []
    if ddr > 1:
        notes.append(
            "DDR > 100%: the cost model has no shared DDR limit, each core's copies cost alone"
        )
    if model > 1:
        why = (
            "rank-1 tiles, whose copies pypto charges as one element"
            if has_rank_1(lowered)
            else "copies charged below UB-sized 2-D tiles' rate (unexpected: see roofline.py)"
        )
        notes.append(f"copy model > 100%: {why}")
    if cube is not None and cube > 1:
        notes.append("cube > 100%: pypto charges a cube op by its smallest operand, not by m·n·k")
    return (
        f"{ddr:.0%}",
        f"{model:.0%}",
        "" if cube is None else f"{cube:.0%}",
        "; ".join(notes),
    )


def measure(path: Path, budget: int, chip: Platform) -> tuple[str, ...]:
    """One row. A baseline that fails at full shape (the rule book's norm tiles hit pypto
    0.2.0's UB-spill bug in SIM) is compared at the scaled-down CI dims instead; so is an
    official pattern that fails at the row's dims, at its own reduced dims."""
    text = path.read_text(encoding="utf-8")
    latency = compile_latency_ms(text, path.name)
    dims = None
    source = Source(text, path.name)
    default = lower(source)
    baseline = baseline_cost(default)
    notes = []
    if isinstance(baseline, str) and path.stem in CI_DIMS:
        dims = CI_DIMS[path.stem]
        notes.append(f"at {dims_text(dims)} ({baseline} at full shape)")
        default = lower(source, dims)
        baseline = baseline_cost(default)
    if isinstance(baseline, str):
        notes.append(baseline)
        baseline = None
    default_cost = probe_cost(default)
    kernel = default.checked.name
    official_us = versus = ""
    if official.variants(kernel):
        best, why = official_cost(default)
        against = default_cost
        reduced = official.REDUCED_DIMS.get(kernel) or CI_DIMS.get(path.stem)
        if best is None and dims is None and reduced:
            at_reduced = lower(source, reduced)
            best, why_reduced = official_cost(at_reduced)
            if best is not None:
                against = probe_cost(at_reduced)
                why = f"official and default/official at {dims_text(reduced)} ({why})" + (
                    f"; {why_reduced}" if why_reduced else ""
                )
        if best is not None:
            official_us = f"{best.sim_time_us:.2f}"
            versus = f"{against.sim_time_us / best.sim_time_us:.2f}"
        if why:
            notes.append(why)
    tuned = tune(source, dims, budget=budget, store=False).best  # the user's cache stays
    assert tuned.cost is not None
    tuned_us = tuned.cost.sim_time_us
    ddr, model, cube, roofline_note = rooflines(tuned.plan, tuned_us * 1e-6, chip)
    if roofline_note:
        notes.append(roofline_note)

    def ratio(value: float) -> str:
        return f"{value / baseline.sim_time_us:.2f}" if baseline else ""

    return (
        path.stem,
        f"{latency:.1f}",
        f"{baseline.sim_time_us:.2f}" if baseline else "",
        f"{default_cost.sim_time_us:.2f}",
        f"{tuned_us:.2f}",
        ratio(default_cost.sim_time_us),
        ratio(tuned_us),
        official_us,
        versus,
        ddr,
        model,
        cube,
        tuned.plan.tuning.describe(),
        "; ".join(notes),
    )


def dims_text(dims: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items())


HEADER = (
    "example",
    "compile ms",
    "baseline us",
    "default us",
    "tuned us",
    "default/baseline",
    "tuned/baseline",
    "official us",
    "default/official",
    "DDR roofline (tuned)",
    "copy-model roofline (tuned)",
    "cube peak (tuned)",
    "tuned plan",
    "note",
)


def measure_example(name: str, budget: int) -> tuple[str, ...]:
    """`measure` of the example named `name` on this machine's platform."""
    (path,) = (p for p in EXAMPLES if p.stem == name)
    return measure(path, budget, platform())


def memory_needed(path: Path) -> float:
    """An example's row at its peak: the check of its tuned plan, at most."""
    lowered = lower(Source(path.read_text(encoding="utf-8"), path.name))
    return sim_memory.check_bytes(lowered.checked, lowered.kernel)


def failed_row(task: Task, error: BaseException) -> tuple[str, ...]:
    note = f"did not run: {type(error).__name__}: {error}".splitlines()[0]
    return (task.label, *[""] * (len(HEADER) - 2), note)


def speedups(rows: list[tuple[str, ...]]) -> list[tuple[str, float]]:
    """Baseline time / tuned time of each row with a baseline, from the times (the ratio
    column is rounded); a tuned time rounded to 0 is an infinite ratio, which the chart
    leaves without a bar."""
    baseline, tuned = HEADER.index("baseline us"), HEADER.index("tuned us")
    return [
        (row[0], float(row[baseline]) / float(row[tuned]) if float(row[tuned]) else math.inf)
        for row in rows
        if row[baseline]
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ptodsl bench run", description=__doc__)
    parser.add_argument("examples", nargs="*", help="example names (file stems); default all")
    parser.add_argument("--budget", type=int, default=6, help="plans tuned per example")
    spread = parser.add_mutually_exclusive_group()
    spread.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="measure N examples at a time, as many as fit in memory (the compile column is "
        "then timed on a busy machine)",
    )
    spread.add_argument(
        "--cluster",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="measure on a Dask cluster (ADDRESS, else DASK_SCHEDULER_ADDRESS) whose workers "
        "have ptodsl installed from a checkout of this repository",
    )
    parser.add_argument(
        "--chart",
        type=Path,
        metavar="PATH",
        help="also write an SVG bar chart of baseline / tuned time per example here",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")
    try:
        cluster = cluster_address(args.cluster)
    except ValueError as error:
        parser.error(str(error))
    if args.chart is not None and not args.chart.parent.is_dir():  # found now, not in an hour
        parser.error(f"--chart: no folder {args.chart.parent}")
    by_stem = {p.stem: p for p in EXAMPLES}
    unknown = [name for name in args.examples if name not in by_stem]
    if unknown:
        parser.error(f"unknown examples: {', '.join(unknown)}")
    chip = platform()
    names = args.examples or sorted(by_stem)
    # A job names its example: a cluster worker measures it in its own checkout.
    tasks = [
        Task(in_repository, ("run", "measure_example", name, args.budget), memory, name)
        for name, memory in ((name, memory_needed(by_stem[name])) for name in names)
    ]
    rows = [
        HEADER,
        *run_tasks(
            tasks,
            failed=failed_row,
            jobs=args.jobs,
            cluster=cluster,
            on_done=lambda index, row: print(" | ".join(row), file=sys.stderr, flush=True),
        ),
    ]
    print(markdown_table(HEADER, rows[1:]), end="")
    formulas = chip.describe()
    print(f"\nDDR roofline: {formulas['physical']}.")
    print(f"Copy-model roofline: {formulas['model']}.")
    print(f"Cube peak: {formulas['cube']}.")
    if args.chart is not None:
        title = "ptodsl's tuned plans against hand-written PyPTO baselines (pypto cost model)"
        write_output(args.chart, ratio_chart_svg(speedups(rows[1:]), title))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
