"""`ptodsl tune`: measure the legal plans of a spec with pypto's cost model, keep the fastest.

The candidates are `ir.Tuning` choices (tile budget, last-axis tile cap, loop iterations,
matmul chunks, variance form) relevant to the kernel; each goes through the ordinary
passes, so it obeys every PyPTO limit, and candidates that lower to the same plan are
measured once.
The winner must pass `ptodsl check` before it is stored in the tuning cache, keyed by the
spec's text, its dim sizes, the target and the ptodsl and pypto versions; `ptodsl compile`
and `ptodsl.compile` use a cached plan when one exists.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from ptodsl.api import Compiled, UnknownKernels, lower_spec
from ptodsl.emission.codegen import factory_name
from ptodsl.frontend.diagnostics import Source, SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import sim_memory
from ptodsl.ir.target import PYPTO_0_2_0, Target
from ptodsl.pipeline import KernelStages, Lowered
from ptodsl.runtime.executor import Task, run_tasks
from ptodsl.runtime.scratch import scratch as scratch_folder
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S
from ptodsl.tools.serialise import to_json
from ptodsl.tools.tables import aligned_lines
from ptodsl.tools.tuning_cache import (
    DEFAULT_BUDGET,
    KNOBS,
    forget,
    store_record,
    tuning_record,
)

# A plan replaces the default only if the cost model says it is this much faster. The
# model is deterministic (a plan costs the same every run), so the margin guards against
# no measurement noise: it guards against the model's own error against hardware (#31's
# GELU "won" by 0.1%, far inside what the model cannot tell) and against changing the
# code compile emits, which a reader must then trust over the default, for nothing.
MARGIN = 0.02

TILE_ELEMENTS = KNOBS["tile_elements"]
LAST_AXIS_TILES = KNOBS["last_axis_tile"]
LOOP_COUNTS = KNOBS["loop_count"]
MATMUL_CHUNKS = KNOBS["matmul_chunks"]
VARIANCE_FORMS = KNOBS["variance"]


class TuningFailed(Exception):
    """No candidate plan ran, or none that ran passed `ptodsl check` on this machine."""


@attrs.frozen
class Cost:
    sim_time_us: float
    total_cycles: int


def probe_cost(
    lowered: Lowered,
    module_path: Path | None = None,
    trace_dir: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Cost:
    """Simulated end-to-end time and cycles of the kernel in pypto SIM, without verification
    (so no numbers), pypto's output kept in a scratch folder that is removed afterwards.
    `module_path`: measure that module instead (a `ModelNew` with the spec's interface).
    `trace_dir`: keep the cost model's swim lanes and statistics there (`keep_traces`).
    `timeout` limits the worker."""
    # Imported here: torch and the simulator are heavy, and `compile` never needs them.
    import torch

    from ptodsl.checking.check import TORCH_DTYPES
    from ptodsl.runtime.simulator import prepare_kernel, run_model

    checked = lowered.checked
    (kernel, *others) = lowered.kernels
    with scratch_folder("cost") as scratch:
        if module_path is None:
            compiled = Compiled(lowered)
            module_path = Path(scratch) / f"{compiled.name}.py"
            module_path.write_text(compiled.source, encoding="utf-8")
            if kernel.launches is not None and not others:
                # Every launch is the same kernel on a chunk of the same size, which the cost
                # model times alike: one launch is simulated, its worker one launch's size.
                buffers = [
                    torch.zeros(t.kernel_shape, dtype=TORCH_DTYPES[t.type.dtype])
                    for t in (*kernel.inputs, *kernel.outputs)
                ]
                arguments = [1.0 if p.default is None else p.default for p in kernel.kernel_params]
                run = prepare_kernel(
                    module_path,
                    factory_name(kernel),
                    arguments,
                    buffers,
                    len(kernel.outputs),
                    verify="none",
                    timeout=timeout,
                    trace_dir=trace_dir,
                ).run()
                count = kernel.launches.total
                return Cost(count * run.sim_time_us, count * run.total_cycles)
        tensors = [
            torch.zeros(t.declared_shape, dtype=TORCH_DTYPES[t.type.dtype])
            for t in checked.tensor_arguments
        ]
        scalars = [1.0 if p.default is None else p.default for p in checked.forward_params]
        init_kwargs = {p.name: p.default for p in checked.init_params if p.default is not None}
        run = run_model(
            module_path,
            init_kwargs,
            [*tensors, *scalars],
            verify="none",
            trace_dir=trace_dir,
            timeout=timeout,
        )
    return Cost(run.sim_time_us, run.total_cycles)


def _knobs(phases: list[ir.Phase], reads_var: bool) -> tuple[tuple, ...]:
    """The values worth trying of each plan choice, for a kernel (or kernels) of these
    phases: a knob the phases would ignore keeps its default alone."""
    vector = [p for p in phases if p.cube is None]
    return (
        TILE_ELEMENTS if vector else (None,),
        LAST_AXIS_TILES if any(len(p.shape) > 1 for p in vector) else (None,),
        LOOP_COUNTS if any(p.loop for p in vector) else (None,),
        MATMUL_CHUNKS if any(p.cube is not None and len(p.shape) == 2 for p in phases) else (None,),
        VARIANCE_FORMS if reads_var else (None,),
    )


def _part_knobs(part: KernelStages) -> tuple[tuple, ...]:
    """`_knobs` of one kernel of the program (its phases, and the spec part it computes)."""
    reads_var = any(
        isinstance(node, ir.Op) and node.op == "var"
        for stmt in part.checked.body
        for node in ir.walk(stmt.value)
    )
    return _knobs(list(part.kernel.schedule.phases), reads_var)


def _choices(knobs: tuple[tuple, ...], most_changed: int | None = None) -> list[ir.Tuning]:
    """Every combination of the knobs' values but the defaults (of at most `most_changed`
    changed knobs): single changes first, then pairs, ...; within those, every knob's first
    alternative before any knob's second, so a small budget still tries each knob."""

    def order(choice: tuple) -> tuple[int, int]:
        changed = [values.index(value) for values, value in zip(knobs, choice, strict=True)]
        return sum(index > 0 for index in changed), max(changed)

    choices = sorted(itertools.product(*knobs), key=order)
    return [
        ir.Tuning(*choice)
        for choice in choices
        if 0 < order(choice)[0] <= (most_changed or len(knobs))
    ]


def _tunings(default: Lowered) -> list[ir.Tuning]:
    """The plan choices to try. One kernel: the knobs' combinations. Several: each kernel's
    own single changes, the others keeping their defaults, taken in turn (every kernel's
    first choice, then every kernel's second, ...), since what is fastest for one kernel (a
    matmul's chunks, a softmax's loop) is not what is fastest for another; `combined` joins
    the winners. (Every kernel's combinations would be hundreds of lowerings, each cutting
    the spec into kernels again.)"""
    if len(default.parts) == 1:
        (part,) = default.parts
        return _choices(_part_knobs(part))
    parts: dict[str, KernelStages] = {}
    for part in default.parts:
        parts.setdefault(part.kernel.name, part)
    per_kernel = [
        [
            ir.Tuning(per_kernel=((name, choice),))
            for choice in _choices(_part_knobs(part), most_changed=1)
        ]
        for name, part in parts.items()
    ]
    return [
        tuning
        for turn in itertools.zip_longest(*per_kernel)
        for tuning in turn
        if tuning is not None
    ]


def candidates(
    source: Source, dims: Mapping[str, int] | None, target: Target, limit: int | None = None
) -> list[Lowered]:
    """Distinct plans the knobs give for this spec, the default plan first; at most `limit`
    of them (lowering every choice of a program of many kernels takes minutes)."""
    default, _ = lower_spec(source, dims, target, tuning=None)
    plans = {_plan_key(default): default}
    for tuning in _tunings(default):
        if limit is not None and len(plans) >= limit:
            break
        try:
            lowered, _ = lower_spec(source, dims, target, tuning=tuning)
        except (SpecError, UnknownKernels):
            continue  # a choice the passes reject, e.g. too many tiles for one loop
        plans.setdefault(_plan_key(lowered), lowered)
    return list(plans.values())


def combined(plans: list[Measured]) -> ir.Tuning | None:
    """Each kernel's fastest own choice that beats the default plan, together: kernels run
    one after another, so the times they save add up. None when fewer than two kernels
    have such a choice."""
    default = plans[0]
    best: dict[str, Measured] = {}
    for plan in plans[1:]:
        per_kernel = plan.plan.tuning.per_kernel
        if plan.cost is None or default.cost is None or len(per_kernel) != 1:
            continue
        ((name, _),) = per_kernel
        if _beats(plan, default) and (
            name not in best or plan.cost.sim_time_us < best[name].cost.sim_time_us
        ):
            best[name] = plan
    if len(best) < 2:
        return None
    return ir.Tuning(
        per_kernel=tuple(
            (name, dict(plan.plan.tuning.per_kernel)[name]) for name, plan in sorted(best.items())
        )
    )


def _plan_key(lowered: Lowered) -> str:
    """What makes two plans different: the lowered body and the phases' tiles and loops
    (not the recorded decisions, which name the tuning)."""
    return "\n".join(ir.format_kernel(attrs.evolve(k, decisions=())) for k in lowered.kernels)


@attrs.frozen
class Measured:
    plan: Lowered  # its `tuning` is the plan choices measured
    cost: Cost | None
    problem: str | None = None


@attrs.frozen
class TuneResult:
    measured: tuple[Measured, ...]
    best: Measured
    checked: bool

    @property
    def default(self) -> Measured:
        return self.measured[0]


def tune(
    source: Source,
    dims: Mapping[str, int] | None = None,
    target: Target = PYPTO_0_2_0,
    budget: int = DEFAULT_BUDGET,
    check: bool = True,
    store: bool = True,
    progress: Callable[[int, int, Measured | None], None] = lambda done, total, measured: None,
    jobs: int = 1,
    cluster: str | None = None,
) -> TuneResult:
    """Measures up to `budget` candidate plans (the default first), and for several kernels
    the kernels' winners joined (`combined`), and stores the fastest that passes `ptodsl
    check` in the tuning cache (unless `store` is off). With `check` off the fastest plan is
    recorded beside the cache, never where compile reads. `progress(done, total, measured)`
    hears of each plan measured, and `progress(0, total, None)` before the first. The plans
    are measured `jobs` at a time here, or on the Dask cluster at `cluster`
    (`ptodsl.runtime.executor`): the cost model is deterministic, so the result is the same
    either way."""
    plans = candidates(source, dims, target, limit=max(1, budget))
    total = len(plans)
    progress(0, total, None)
    done = 0

    def measure(lowered: list[Lowered]) -> list[Measured]:
        tasks = [
            Task(
                measure_plan,
                (source, dims, target, plan.tuning),
                max(map(sim_memory.verification_bytes, plan.kernels)),
                plan.tuning.describe(),
            )
            for plan in lowered
        ]

        def measured_one(index: int, outcome: Cost | str) -> None:
            nonlocal done
            done += 1
            progress(done, total, _measured(lowered[index], outcome))

        outcomes = run_tasks(
            tasks, failed=_failed_measure, jobs=jobs, cluster=cluster, on_done=measured_one
        )
        return [_measured(plan, outcome) for plan, outcome in zip(lowered, outcomes, strict=True)]

    measured = measure(plans)
    together = combined(measured)
    if together is not None:
        try:
            plan, _ = lower_spec(source, dims, target, tuning=together)
        except (SpecError, UnknownKernels):
            plan = None  # the kernels' choices, each legal alone, cut the spec otherwise
        if plan is not None and _plan_key(plan) not in {_plan_key(p) for p in plans}:
            total += 1
            measured += measure([plan])
    default = measured[0]
    ranked = sorted((m for m in measured if m.cost), key=lambda m: m.cost.sim_time_us)
    if default.cost is not None:  # the default stays unless a plan beats it by the margin
        ranked = [m for m in ranked if m is default or _beats(m, default)]
    if not ranked:
        raise TuningFailed("no candidate plan ran in pypto SIM")
    best = ranked[0]
    if check and best is not default:
        best = _first_passing(ranked)
    if store:
        if best is default:
            forget(source.text, dims, target)  # compile keeps (or goes back to) the default
        else:
            _store(source, dims, target, best, default, checked=check)
    return TuneResult(tuple(measured), best, check)


def measure_plan(
    source: Source, dims: Mapping[str, int] | None, target: Target, tuning: ir.Tuning
) -> Cost | str:
    """The cost of the plan `tuning` gives the spec, or why it did not run in pypto SIM: a
    tuning job, which lowers the spec again where it runs (on a cluster worker: from the
    text, the same plan)."""
    from ptodsl.runtime.simulator import SimulationError

    lowered, _ = lower_spec(source, dims, target, tuning=tuning)
    try:
        return probe_cost(lowered)
    except SimulationError as error:
        return str(error).splitlines()[0]


def _failed_measure(task: Task, error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".splitlines()[0]


def _measured(plan: Lowered, outcome: Cost | str) -> Measured:
    if isinstance(outcome, Cost):
        return Measured(plan, outcome)
    return Measured(plan, None, outcome)


def _beats(plan: Measured, default: Measured) -> bool:
    assert plan.cost is not None and default.cost is not None
    return plan.cost.sim_time_us < default.cost.sim_time_us * (1 - MARGIN)


def _first_passing(ranked: list[Measured]) -> Measured:
    """The fastest plan that `ptodsl check` proves. A plan whose check cannot run here (pass
    verification of a long loop outgrows the machine's memory) is passed over."""
    from ptodsl.checking.check import CheckTooBig, run_check
    from ptodsl.runtime.simulator import SimulationError

    for candidate in ranked:
        try:
            if run_check(Compiled(candidate.plan)).ok:
                return candidate
        except (CheckTooBig, SimulationError):
            continue
    raise TuningFailed("no measured plan passed ptodsl check (or fit in memory to check)")


def _store(
    source: Source,
    dims: Mapping[str, int] | None,
    target: Target,
    best: Measured,
    default: Measured,
    checked: bool,
) -> None:
    assert best.cost is not None
    record = {
        "tuning": tuning_record(best.plan.tuning),
        "sim_time_us": best.cost.sim_time_us,
        "default_sim_time_us": default.cost.sim_time_us if default.cost else None,
        # what `ptodsl tune --list` shows: the key is a hash of the spec's text
        "spec": source.filename,
        "kernel": best.plan.checked.name,
        "dims": dict(dims or {}),
    }
    store_record(source.text, dims, target, record, checked)


def tune_json(result: TuneResult) -> dict:
    """The measured plans and the outcome `format_table` prints, as JSON-ready values."""
    return {
        "plans": [
            {
                "tuning": to_json(m.plan.tuning),
                "plan_choices": m.plan.tuning.describe(),
                "sim_time_us": m.cost.sim_time_us if m.cost else None,
                "problem": m.problem,
                "chosen": m is result.best,
            }
            for m in result.measured
        ],
        "default_kept": result.best is result.default,
        "checked": result.checked,
        "margin": MARGIN,
    }


def format_table(result: TuneResult) -> str:
    rows = [("#", "plan choices", "sim us", "vs default", "")]
    baseline = result.default.cost.sim_time_us if result.default.cost else None
    for index, m in enumerate(result.measured):
        time = f"{m.cost.sim_time_us:.2f}" if m.cost else "failed"
        ratio = f"{m.cost.sim_time_us / baseline:.2f}x" if m.cost and baseline else ""
        mark = "<- chosen" if m is result.best else (m.problem or "")
        rows.append((str(index), m.plan.tuning.describe(), time, ratio, mark))
    lines = aligned_lines(rows)
    chosen = result.best.plan.tuning.describe()
    if result.best is result.default:
        lines.append(
            f"default plan kept: no plan is {MARGIN:.0%} faster in the cost model; compile "
            "emits the default plan"
        )
    elif result.checked:
        lines.append(f"chosen plan: {chosen}, passes ptodsl check; stored for compile")
    else:
        lines.append(
            f"fastest plan: {chosen}, not checked (--no-check): recorded, but compile keeps "
            "the plan it had"
        )
    return "\n".join(lines) + "\n"
