"""`ptodsl check`: run a kernel in pypto SIM with pass verification on seeded inputs and
compare every output, element by element, with a golden computed independently in float64:
the spec's torch reference, or a KernelBench-format problem's own Model (`--against`).

Each element's bound comes from the computation (`ptodsl.checking.error_bounds`), not from the
output's mean; an output the tolerance alone would let pass (zeros or a constant would) is
a failure, and so is a reduction whose axes the inputs cannot tell apart.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import torch

from ptodsl.api import Compiled
from ptodsl.checking.convolutions import SampleBySample
from ptodsl.checking.draws import (
    TORCH_DTYPES,
    Draw,
    Fingerprints,
    Observation,
    draw_inputs,
    draws,
    first_constant,
    module_spreads,
    unreached,
    with_thresholds,
)
from ptodsl.checking.error_bounds import (
    BOUND_RULE,
    TOLERANCES,
    Bounded,
    Observer,
    element_bound,
    evaluate_bounds,
)
from ptodsl.checking.problems import ProblemError, ProblemRun, Resize, run_problem
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import modules, sim_memory
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.passes.launches import samples_part
from ptodsl.runtime import memory
from ptodsl.runtime.scratch import scratch as scratch_folder
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S
from ptodsl.runtime.simulator import PassResult, SimRun, run_model
from ptodsl.tools.progress import Progress
from ptodsl.tools.serialise import to_json, with_properties
from ptodsl.tools.tables import aligned_lines

# Per-pass (tile-level) verification takes ~7 s for a 1M-element tensor; far longer above.
PER_PASS_VERIFY_LIMIT = 1 << 20
PASSING_VERDICTS = {"PASS", "NO_COMPARE"}
# An output is vacuous when its reference is within this many atol of zero everywhere.
VACUOUS_ATOL_FACTOR = 10
WORST_SHOWN = 5
VACUITY_HINT = (
    "choose inputs that make it large and varied: an `in` domain, another --seed, or a larger scale"
)


@attrs.frozen
class Element:
    """One element of an output: where it is, what the kernel gave and what was expected."""

    index: tuple[int, ...]
    got: float
    expected: float
    bound: float


@with_properties("ok")
@attrs.frozen
class OutputCheck:
    name: str
    shape: tuple[int, ...]
    dtype: str
    atol: float
    rtol: float
    max_abs_error: float = math.nan
    worst_ratio: float = math.nan  # max over elements of error / bound: <= 1 passes
    mismatched: int = 0
    bound_range: tuple[float, float] = (math.nan, math.nan)
    worst: tuple[Element, ...] = ()  # the elements furthest over (or nearest to) the bound
    problem: str | None = None  # why the output fails other than by its errors
    # why a trivial kernel would pass on this draw (`vacuity`); a failure only when so on
    # every draw (`CheckReport.outputs`)
    vacuous: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.mismatched == 0


@attrs.frozen
class PassCheck:
    """One of pypto's per-pass verdicts and whether ptodsl accepts it: always when pypto
    passes it; never when it fails an f32 pass; a failed f16/bf16 pass (pypto's tolerance
    is fp32-strict) only when every element of the pass's tensor is within ptodsl's bound."""

    pass_name: str
    verdict: str
    max_abs_diff: float | None
    dtype: str
    ok: bool
    note: str = ""


def judge_pass(
    result: PassResult,
    outputs: tuple[ir.Output, ...],
    expected: tuple[torch.Tensor, ...],
    scales: tuple[torch.Tensor, ...],
) -> PassCheck:
    judged = functools.partial(
        PassCheck, result.pass_name, result.verdict, result.max_abs_diff, result.dtype
    )
    if result.verdict in PASSING_VERDICTS:
        return judged(True)
    if result.values is None:
        return judged(False)
    for output, golden, scale in zip(outputs, expected, scales, strict=True):
        if golden.numel() != result.values.numel():
            continue
        error = (result.values.to(torch.float64) - golden.flatten()).abs()
        if bool((error <= element_bound(scale.flatten(), output.type.dtype)).all()):
            return judged(True, f"every element within its bound of `{output.name}`")
    return judged(False)


@attrs.frozen
class DrawCheck:
    """One draw the kernel ran on: each output's comparison there, and what the draw
    showed (`notes`: an output the same as on the seeded draw)."""

    name: str
    why: str
    outputs: tuple[OutputCheck, ...]
    notes: tuple[str, ...] = ()


def over_draws(checks: list[OutputCheck]) -> OutputCheck:
    """One output over every draw: the worst draw's comparison (the most elements off),
    and a trivial kernel's pass (`vacuous`) a failure only when it would pass on every
    draw."""
    worst = max(checks, key=lambda c: (c.problem is not None, c.mismatched, _ratio(c)))
    vacuous = None if any(c.vacuous is None for c in checks) else checks[0].vacuous
    problem = next((c.problem for c in checks if c.problem is not None), None)
    lows, highs = zip(*(c.bound_range for c in checks), strict=True)
    return attrs.evolve(
        worst,
        max_abs_error=max(c.max_abs_error for c in checks),
        worst_ratio=max(_ratio(c) for c in checks),
        bound_range=(min(lows), max(highs)),
        problem=problem or (None if vacuous is None else f"{vacuous} (on every draw)"),
        vacuous=vacuous,
    )


def _ratio(check: OutputCheck) -> float:
    return -math.inf if math.isnan(check.worst_ratio) else check.worst_ratio


@with_properties("ok")
@attrs.frozen
class CheckReport:
    kernel: str
    spec: str
    module: str  # the checked module: "generated" or the --kernel path
    golden: str
    plan: str
    seed: int
    scaled: tuple[str, ...]  # problem constants resized (--dim by value, --set by name)
    verify: str
    outputs: tuple[OutputCheck, ...]  # each output over every draw (`over_draws`)
    problems: tuple[str, ...]  # why the check proves nothing, beyond single outputs
    passes: tuple[PassCheck, ...]
    sim_time_us: float  # of the seeded draw
    total_cycles: int
    draws: tuple[DrawCheck, ...] = ()  # the draws the kernel ran on, the seeded one first
    not_run: tuple[str, ...] = ()  # draws not run, and why
    unreached: tuple[str, ...] = ()  # branches and terms of the spec no draw reached
    # why every output is the same whatever the inputs and weights: then the kernel is
    # compared with that constant and the verdict is DEGENERATE
    degenerate: tuple[str, ...] = ()
    # the spec's dims as the problem's shapes bound them (`--set`), each with its source
    bound_dims: tuple[str, ...] = ()
    # A spec whose result depends on the module mode is checked in each: this report is
    # training mode's (its outputs include the running statistics forward updates),
    # `eval_mode` eval mode's.
    mode: str | None = None
    eval_mode: CheckReport | None = None

    @property
    def failed_passes(self) -> tuple[PassCheck, ...]:
        return tuple(p for p in self.passes if not p.ok)

    @property
    def ok(self) -> bool:
        own = all(o.ok for o in self.outputs) and not self.problems and not self.failed_passes
        return own and (self.eval_mode is None or self.eval_mode.ok)

    @property
    def verdict(self) -> str:
        if not self.ok:
            return "FAIL"
        degenerate = self.degenerate or (self.eval_mode is not None and self.eval_mode.degenerate)
        return "DEGENERATE" if degenerate else "PASS"

    def to_json(self) -> dict:
        """The report as strict JSON values: a number that is not finite becomes null."""
        own = to_json(self) | {"bound_rule": BOUND_RULE, "verdict": self.verdict}
        return own | {"eval_mode": None if self.eval_mode is None else self.eval_mode.to_json()}


# Outputs are judged in flat chunks of this many elements: the float64 temporaries of a
# comparison then stay small beside a 16384 x 16384 output (2 GB in float64).
COMPARE_CHUNK = 1 << 22


def flat_chunks(*tensors: torch.Tensor) -> Iterator[tuple[int, tuple[torch.Tensor, ...]]]:
    """Aligned flat slices of equally sized tensors, with each slice's first flat index."""
    flat = [t.reshape(-1) for t in tensors]
    total = flat[0].numel()
    for start in range(0, total, COMPARE_CHUNK):
        yield start, tuple(f[start : start + COMPARE_CHUNK] for f in flat)


def compare(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    scale: torch.Tensor,
    dtype: ir.DType,
) -> OutputCheck:
    """Every element of `actual` within its bound (`element_bound` of its error `scale`:
    atol + rtol * scale) of `expected` (float64), with the declared dtype and shape exactly,
    and an expected output no trivial kernel matches."""
    atol, rtol = TOLERANCES[dtype]
    shape = tuple(expected.shape)
    failed = functools.partial(OutputCheck, name, shape, dtype.value, atol, rtol)
    if actual.dtype != TORCH_DTYPES[dtype]:
        return failed(problem=f"kernel returned {actual.dtype}, the spec declares {dtype.value}")
    if tuple(actual.shape) != shape:
        return failed(problem=f"kernel returned shape {list(actual.shape)}, expected {list(shape)}")
    if not all(bool(torch.isfinite(e).all()) for _, (e,) in flat_chunks(expected)):
        return failed(
            problem="the reference is not finite here: declare an input domain (e.g. `in positive`)"
        )
    max_error = worst_ratio = 0.0
    mismatched = 0
    bound_low, bound_high = math.inf, -math.inf
    candidates: list[tuple[float, int]] = []  # (ratio, flat position): the worst of each chunk
    for start, (got, want, scale_part) in flat_chunks(actual, expected, scale):
        bound = element_bound(scale_part, dtype)
        error = (got.to(torch.float64) - want).abs()
        error = torch.where(torch.isfinite(got), error, math.inf)
        ratio = torch.where(error == 0, 0.0, error / bound)  # exact elements of a 0 bound
        max_error = max(max_error, float(error.max()))
        worst_ratio = max(worst_ratio, float(ratio.max()))
        mismatched += int((error > bound).sum())
        bound_low = min(bound_low, float(bound.min()))
        bound_high = max(bound_high, float(bound.max()))
        top = torch.topk(ratio, min(WORST_SHOWN, ratio.numel()))
        positions = [start + i for i in top.indices.tolist()]
        candidates += zip(top.values.tolist(), positions, strict=True)
    # The worst first; among equals, the first position (deterministic, unlike a sort's ties).
    candidates.sort(key=lambda c: (-c[0], c[1]))
    flat_actual, flat_expected, flat_scale = (t.reshape(-1) for t in (actual, expected, scale))
    worst = tuple(
        Element(
            _index(position, shape),
            float(flat_actual[position]),
            float(flat_expected[position]),
            float(element_bound(flat_scale[position : position + 1], dtype)),
        )
        for _, position in candidates[:WORST_SHOWN]
    )
    if not expected.numel():
        bound_low = bound_high = 0.0
    return OutputCheck(
        name,
        shape,
        dtype.value,
        atol,
        rtol,
        max_abs_error=max_error,
        worst_ratio=worst_ratio,
        mismatched=mismatched,
        bound_range=(bound_low, bound_high),
        worst=worst,
        vacuous=vacuity(expected, scale, dtype),
    )


def _index(flat_position: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_position), shape))


def vacuity(expected: torch.Tensor, scale: torch.Tensor, dtype: ir.DType) -> str | None:
    """Why the tolerance, rather than the kernel, would make this output pass, if it would."""
    if not expected.numel():
        return None
    atol = TOLERANCES[dtype][0]
    largest, zeros_pass = 0.0, True
    highest_low, lowest_high = -math.inf, math.inf
    for _, (want, scale_part) in flat_chunks(expected, scale):
        bound = element_bound(scale_part, dtype)
        largest = max(largest, float(want.abs().max()))
        zeros_pass = zeros_pass and bool((want.abs() <= bound).all())
        highest_low = max(highest_low, float((want - bound).max()))
        lowest_high = min(lowest_high, float((want + bound).min()))
    if largest <= VACUOUS_ATOL_FACTOR * atol:
        return (
            f"vacuous: the reference is at most {largest:.3g}, within {VACUOUS_ATOL_FACTOR} "
            f"atol of zero, so the tolerance decides; {VACUITY_HINT}"
        )
    if zeros_pass:
        return f"vacuous: a kernel returning zeros would pass; {VACUITY_HINT}"
    if expected.numel() > 1 and highest_low <= lowest_high:
        return f"vacuous: a kernel returning one constant everywhere would pass; {VACUITY_HINT}"
    return None


@attrs.frozen
class Case:
    """What one check runs: every kernel input (weights included, in declaration order), the
    `ModelNew` arguments, `forward`'s scalars, the expected outputs and their error scales."""

    draw: Draw
    inputs: list[torch.Tensor]
    init_kwargs: dict[str, ir.ParamValue]
    forward_scalars: list[float]
    expected: tuple[torch.Tensor, ...]
    scales: tuple[torch.Tensor, ...]
    observation: Observation
    ambiguities: tuple[str, ...] = ()
    scaled: tuple[str, ...] = ()
    # the problem's Model's result as it returned it: "a tensor" or "a tuple of 2 tensors",
    # and each output's torch dtype (None: the spec's reference, which is the spec)
    returns: str | None = None
    dtypes: tuple[str, ...] | None = None
    # the Model's step counters (`num_batches_tracked`) after forward (None: not known)
    counters: dict[str, int] | None = None

    def forward_and_state(
        self, checked: ir.Kernel
    ) -> tuple[list[torch.Tensor | float], dict[str, torch.Tensor]]:
        """`ModelNew.forward`'s arguments, and the weights' values to load as module state."""
        pairs = list(zip(checked.inputs, self.inputs, strict=True))
        tensors = [value for tensor, value in pairs if tensor.init is None]
        state = {tensor.state_name: value for tensor, value in pairs if tensor.is_held}
        return [*tensors, *self.forward_scalars], state


# Whether the spec's own float64 value of an output part agrees with the golden's: raises
# if not. Its arguments: the output, the golden's part, the spec's part, and the part's first
# index along axis 0.
Agreement = Callable[[ir.Output, torch.Tensor, Bounded, int], None]


def _scales(
    compiled: Compiled,
    inputs: list[torch.Tensor],
    init_kwargs: Mapping[str, ir.ParamValue],
    forward_scalars: list[float],
    expected: tuple[torch.Tensor, ...],
    agree: Agreement,
    observer: Observer | None = None,
) -> tuple[tuple[torch.Tensor, ...], list[str]]:
    """Each output's error scale, from the spec's own float64 evaluation, which `agree`
    holds to the golden `expected`; and the reductions the inputs cannot tell apart. A kernel
    launched by samples is evaluated a launch's samples at a time (they are independent:
    the launches pass proved it), each part compared and let go: evaluated whole, a
    convolution's value and scale hold several output-sized float64 tensors at once (#68's
    peaked at 20.7 GB)."""
    checked = compiled.lowered.checked
    params = dict(init_kwargs)
    params.update(zip((p.name for p in checked.forward_params), forward_scalars, strict=True))
    program = compiled.program
    one = program.single_call  # (a time loop's step launches by samples of a step)
    parts = _sample_parts(checked, program.kernels[0].launches) if one else None
    if parts is None:
        with SampleBySample():
            bounded, ambiguities = evaluate_bounds(checked, inputs, params, observer)
        for output, golden, own in zip(checked.outputs, expected, bounded, strict=True):
            agree(output, golden, own, 0)
        return tuple(b.scale for b in bounded), ambiguities
    part_kernel, sliced, chunk = parts
    scales = tuple(torch.empty(o.declared_shape, dtype=torch.float64) for o in checked.outputs)
    ambiguities: list[str] = []
    for start in range(0, scales[0].shape[0], chunk):
        samples = slice(start, start + chunk)
        part_inputs = [
            value[samples] if tensor.name in sliced else value
            for tensor, value in zip(checked.inputs, inputs, strict=True)
        ]
        bounded, noted = evaluate_bounds(part_kernel, part_inputs, params, observer)
        ambiguities += [a for a in noted if a not in ambiguities]
        for output, golden, own, scale in zip(
            checked.outputs, expected, bounded, scales, strict=True
        ):
            agree(output, golden[samples], own, start)
            scale[samples] = own.scale
    return scales, ambiguities


def _unless_overflowing(agree: Agreement, observation: Observation) -> Agreement:
    """`agree`, but not on a draw whose exact values left their dtype's range (it is not
    run, and infinities on both sides do not compare)."""

    def agreeing(output: ir.Output, golden: torch.Tensor, own: Bounded, first: int) -> None:
        if not observation.overflows:
            agree(output, golden, own, first)

    return agreeing


def _sample_parts(
    checked: ir.Kernel, launches: ir.Launches | None
) -> tuple[ir.Kernel, frozenset[str], int] | None:
    """The checked kernel on one launch's samples, the inputs it slices and the samples per
    part, when the kernel launches by samples (and the checked kernel splits the same way)."""
    if launches is None:
        return None
    sliced = tuple(t.name for t in checked.inputs if t.name in launches.sliced)
    part = samples_part(checked, sliced, launches.chunk)
    return None if part is None else (part, frozenset(sliced), launches.chunk)


def spec_case(compiled: Compiled, draw: Draw) -> Case:
    """The draw's inputs and weights (each in its domain), params at their values, and the
    spec's own torch reference evaluated in float64."""
    checked = compiled.lowered.checked
    missing = [p.name for p in checked.params if p.default is None]
    if missing:
        raise ValueError(f"params without a value cannot be checked: {', '.join(missing)}")
    init_kwargs = {p.name: p.default for p in checked.init_params}
    inputs = draw_inputs(checked, draw)
    if checked.weights:  # each at its module's own spread, as --against draws them
        spreads = module_spreads(checked, _reference_model(compiled, init_kwargs, draw.weight_seed))
        inputs = [
            value * spreads[tensor.name] if tensor.is_weight else value
            for tensor, value in zip(checked.inputs, inputs, strict=True)
        ]
    forward_scalars = [p.default for p in checked.forward_params]
    expected = evaluate_reference(compiled, inputs, init_kwargs, forward_scalars)

    def agree(output: ir.Output, reference: torch.Tensor, own: Bounded, _: int) -> None:
        # Two evaluations of the same spec, by different code: they must agree to rounding.
        gap = (reference - own.value).abs() - 1e-9 * (1.0 + own.scale)
        if reference.shape != own.value.shape or bool((gap > 0).any()):
            raise RuntimeError(
                f"the reference and the error-bound evaluation of {output.name} differ"
            )

    return _evaluated_case(compiled, draw, inputs, init_kwargs, forward_scalars, expected, agree)


def _evaluated_case(
    compiled: Compiled,
    draw: Draw,
    inputs: list[torch.Tensor],
    init_kwargs: dict[str, ir.ParamValue],
    forward_scalars: list[float],
    expected: tuple[torch.Tensor, ...],
    agree: Agreement,
    scaled: tuple[str, ...] = (),
    returns: str | None = None,
    dtypes: tuple[str, ...] | None = None,
) -> Case:
    """The draw's case: the expected outputs' error scales and what the draw reached,
    from the spec's own float64 evaluation, which `agree` holds to the golden (unless the
    draw overflows: it is not run)."""
    observation = Observation(compiled.lowered.source.text)
    scales, ambiguities = _scales(
        compiled,
        inputs,
        init_kwargs,
        forward_scalars,
        expected,
        _unless_overflowing(agree, observation),
        observation,
    )
    return Case(
        draw,
        inputs,
        init_kwargs,
        forward_scalars,
        expected,
        scales,
        observation,
        tuple(ambiguities),
        scaled,
        returns,
        dtypes,
    )


def _reference_model(
    compiled: Compiled, init_kwargs: Mapping[str, ir.ParamValue], seed: int
) -> torch.nn.Module:
    """The spec's torch module as its constructor builds it under `seed`."""
    fixed = {p.name for p in compiled.lowered.checked.params if p.fixed}
    with torch.random.fork_rng():  # the caller's random state is left as it was
        torch.manual_seed(seed)
        return compiled.reference.Model(
            **{name: value for name, value in init_kwargs.items() if name not in fixed}
        )


def evaluate_reference(
    compiled: Compiled,
    inputs: list[torch.Tensor],
    init_kwargs: dict[str, ir.ParamValue],
    forward_scalars: list[float],
) -> tuple[torch.Tensor, ...]:
    """The spec's torch reference in float64 (fixed params are constants inside it)."""
    fixed = {p.name for p in compiled.lowered.checked.params if p.fixed}
    kwargs = {name: value for name, value in init_kwargs.items() if name not in fixed}
    with torch.no_grad(), SampleBySample():
        expected = compiled.reference.reference(
            *(t.to(torch.float64) for t in inputs), *forward_scalars, **kwargs
        )
    return expected if isinstance(expected, tuple) else (expected,)


# Draws whose goldens together stay below this go through the problem's Model in one
# worker (a worker's start and the problem's import cost 1 to 3 s); larger ones one each,
# so that one golden at a time is held (#66's is 7.2 GB at full shape).
BATCHED_GOLDEN_BYTES = 1 << 30


def problem_cases(
    compiled: Compiled,
    problem_path: Path,
    draws_: Sequence[Draw],
    resize: Resize | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[Case]:
    """A case per draw (all with the same weights): the problem's own inputs (the seeded
    draw) or the draw's, shaped as the spec declares them (and as the problem's
    get_inputs() gives them: the seeded draw checks it), with the problem's init arguments
    and forward's scalars, and its own Model's output (in float64) as the golden, computed
    in a worker process. ModelNew, built under the seed as a harness builds it, must start
    with the Model's own initial parameters (the same draws). For the numeric check both
    then get seeded random values, matched in `parameters()` order, so that a kernel
    ignoring a weight cannot pass on ones and zeros, each at the spread of its parameter's
    own initial values (so that they meet the layer at the problem's scale:
    `draws.spread`)."""
    checked = compiled.lowered.checked
    golden_bytes = 8 * sum(o.type.size for o in checked.outputs) * len(draws_)
    if len(draws_) > 1 and golden_bytes > BATCHED_GOLDEN_BYTES:
        return [
            case
            for draw in draws_
            for case in problem_cases(compiled, problem_path, [draw], resize, timeout)
        ]
    (weight_seed,) = {draw.weight_seed for draw in draws_}
    drawn = [
        dict(zip((t.name for t in checked.inputs), draw_inputs(checked, draw), strict=True))
        for draw in draws_
    ]
    weight_values = {t.name: drawn[0][t.name] for t in checked.weights}
    in_torch_order = [weight_values[w.name] for w in checked.weights_in_torch_order]
    # each draw's running statistics, loaded into the Model before its forward
    buffers = [{t.state_name: values[t.name] for t in checked.buffer_inputs} for values in drawn]
    given = [
        None if draw.problem_inputs else [values[t.name] for t in checked.tensor_arguments]
        for draw, values in zip(draws_, drawn, strict=True)
    ]
    # ModelNew is built beside the Model only when it has weights to compare (importing it
    # costs the worker pypto's import, about 2 s), with a draw of the problem's own inputs
    own_inputs = any(draw.problem_inputs for draw in draws_)
    model_new = compiled.source if checked.weights and own_inputs else None
    run = run_problem(
        problem_path,
        weight_seed,
        in_torch_order,
        resize,
        timeout,
        model_new=model_new,
        inputs=given,
        mode=checked.mode,
        buffers=buffers,
        forward_seeds=[draw.data_seed for draw in draws_],
        updated=checked.updated_buffers,
    )
    where = f"problem {problem_path}"
    init_kwargs = _init_arguments(checked, run.init_values, where)
    _check_state(checked, run, where)
    _check_parameters(checked, run, where, expect_drop_in=own_inputs)
    _check_moved(checked, run, where)
    assert run.expected is not None, "the weights fit, so the problem ran forward"
    assert run.weight_scales is not None
    # The problem ran with each weight at its parameter's own spread; so does ModelNew.
    for weight, scale in zip(checked.weights_in_torch_order, run.weight_scales, strict=True):
        weight_values[weight.name] = weight_values[weight.name] * scale
    cases = []
    for draw, values, expected in zip(draws_, drawn, run.expected, strict=True):
        if draw.problem_inputs:
            tensors, scalars = _forward_arguments(checked, run, where)
        else:
            tensors = [values[t.name] for t in checked.tensor_arguments]
            scalars = [float(v) for v in run.inputs if not isinstance(v, torch.Tensor)]
        cases.append(
            _problem_case(
                compiled,
                draw,
                run,
                where,
                init_kwargs,
                tensors,
                scalars,
                {**values, **weight_values},
                tuple(expected),
            )
        )
    return cases


def _problem_case(
    compiled: Compiled,
    draw: Draw,
    run: ProblemRun,
    where: str,
    init_kwargs: dict[str, ir.ParamValue],
    tensors: list[torch.Tensor],
    scalars: list[float],
    drawn: Mapping[str, torch.Tensor],
    expected: tuple[torch.Tensor, ...],
) -> Case:
    """One draw's case from the problem's run (`drawn`: the draw's weights, buffers and
    masks, by input name): its outputs checked against the spec's declarations and its own
    float64 evaluation (`_expect_same_meaning`)."""
    checked = compiled.lowered.checked
    by_name = dict(zip((t.name for t in checked.tensor_arguments), tensors, strict=True))
    inputs = [by_name.get(t.name, drawn.get(t.name)) for t in checked.inputs]
    # the worker gives the Model's outputs, then the buffers training mode updates
    updated = len(checked.outputs) - len(checked.returned_outputs)
    if len(expected) != len(checked.outputs):
        raise ProblemError(
            f"{where}: its Model returns {len(expected) - updated} outputs, the spec "
            f"declares {len(checked.returned_outputs)}"
        )
    for output, value in zip(checked.outputs, expected, strict=True):
        if tuple(value.shape) != output.declared_shape:
            raise ProblemError(
                f"{where}: output `{output.name}`: the problem's Model returns "
                f"{list(value.shape)}, the spec declares {list(output.declared_shape)}"
            )
    agree = functools.partial(_expect_same_meaning, where=f"{where}, draw {draw.name}")
    scaled, dtypes = tuple(run.scaled), tuple(run.dtypes)
    case = _evaluated_case(
        compiled, draw, inputs, init_kwargs, scalars, expected, agree, scaled, run.returns, dtypes
    )
    return attrs.evolve(case, counters=dict(run.counters))


def problem_case(
    compiled: Compiled,
    problem_path: Path,
    draw: Draw,
    resize: Resize | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Case:
    """`problem_cases` of one draw."""
    (case,) = problem_cases(compiled, problem_path, [draw], resize, timeout)
    return case


def _expect_same_meaning(
    output: ir.Output, golden: torch.Tensor, own: Bounded, first: int, where: str
) -> None:
    """The spec's own float64 value must be within the kernel's bound of the problem's
    (`golden`, from sample `first` on): otherwise no kernel of this spec could pass, and
    the spec is what to fix."""
    dtype = output.type.dtype
    for start, (theirs, ours, scale) in flat_chunks(golden, own.value, own.scale):
        bound = element_bound(scale, dtype)
        error = (theirs.to(torch.float64) - ours).abs()
        if bool((error <= bound).all()):
            continue
        worst = int(torch.argmax(error / bound))
        index = list(_index(start + worst, tuple(golden.shape)))
        if first:  # a part of the samples (a scalar output is never one)
            index[0] += first
        raise ProblemError(
            f"{where}: output `{output.name}`: the spec computes something else than the "
            f"problem's Model: at {index} the spec gives {float(ours[worst]):.6g}, the Model "
            f"{float(theirs[worst]):.6g} (bound {float(bound[worst]):.3g})"
        )


def _forward_arguments(
    checked: ir.Kernel, run: ProblemRun, where: str
) -> tuple[list[torch.Tensor], list[float]]:
    """The problem's forward arguments must come in ModelNew.forward's order: the spec's
    tensor inputs first, then its forward scalars."""
    kinds = ["tensor" if isinstance(v, torch.Tensor) else "scalar" for v in run.inputs]
    tensors = [v for v in run.inputs if isinstance(v, torch.Tensor)]
    scalars = [float(v) for v in run.inputs if not isinstance(v, torch.Tensor)]
    arguments = checked.tensor_arguments
    if len(tensors) != len(arguments) or len(scalars) != len(checked.forward_params):
        raise ProblemError(
            f"{where}: its get_inputs() gives {len(tensors)} tensors and {len(scalars)} "
            f"scalars; the spec takes {len(arguments)} tensor inputs and "
            f"{len(checked.forward_params)} forward scalars"
        )
    wanted = ["tensor"] * len(tensors) + ["scalar"] * len(scalars)
    if kinds != wanted:
        raise ProblemError(
            f"{where}: its forward takes ({', '.join(kinds)}), ModelNew.forward takes "
            f"({', '.join(wanted)}): tensors first, then scalars, so it is not a drop-in"
        )
    for tensor, declared in zip(tensors, arguments, strict=True):
        _expect_tensor(f"{where}: input `{declared.name}`", tensor, declared, "the problem gives")
    return tensors, scalars


def _init_arguments(checked: ir.Kernel, init_values: list, where: str) -> dict[str, ir.ParamValue]:
    """The spec's init params given the problem's `get_init_inputs()`, in order; a fixed
    param must equal the value its kernel is built for."""
    params = checked.init_params
    if len(init_values) > len(params):
        raise ProblemError(
            f"{where}: it builds Model with {len(init_values)} arguments; the spec declares "
            f"{len(params)} params ({', '.join(p.name for p in params) or 'none'})"
        )
    init_kwargs = {p.name: p.default for p in params}
    for param, value in zip(params, init_values, strict=False):
        if not param.fixed:
            if isinstance(value, tuple):
                raise ProblemError(
                    f"{where}: param `{param.name}`: the problem builds Model with {value!r}, "
                    "the spec declares a number"
                )
            init_kwargs[param.name] = float(value)
            continue
        if value != param.default:
            raise ProblemError(
                f"{where}: param `{param.name}`: the problem builds Model with {value!r}, the "
                f"spec's kernel is built for {param.default!r}"
            )
    return init_kwargs


def _expect_tensor(what: str, tensor: torch.Tensor, declared: ir.Input, source: str) -> None:
    torch_dtype = TORCH_DTYPES[declared.type.dtype]
    if tuple(tensor.shape) != declared.declared_shape or tensor.dtype != torch_dtype:
        raise ProblemError(
            f"{what}: {source} {tensor.dtype} {list(tensor.shape)}, the spec declares "
            f"{declared.type.dtype.value} {list(declared.declared_shape)}"
        )


def _check_parameters(
    checked: ir.Kernel, run: ProblemRun, where: str, expect_drop_in: bool = True
) -> None:
    """The spec's weights are the Model's parameters (in torch's order), and ModelNew built
    under the seed starts them at the Model's values: a drop-in for a harness that seeds,
    builds both and never copies weights (checked when `expect_drop_in`)."""
    weights = checked.weights_in_torch_order
    parameters = run.parameters
    spec_listing = ", ".join(f"`{w.state_name}` {list(w.declared_shape)}" for w in weights)
    problem_listing = ", ".join(f"`{p.name}` {list(p.shape)}" for p in parameters)
    order_note = (
        f"torch lists a module's own parameters first, then its submodules' in the order "
        f"they are assigned: the problem's Model has {problem_listing or 'none'}; the spec's "
        f"weights in that order are {spec_listing or 'none'}"
    )
    if len(parameters) != len(weights):
        raise ProblemError(
            f"{where}: its Model has {len(parameters)} parameters, the spec declares "
            f"{len(weights)} weights; {order_note}"
        )
    fits = [
        tuple(p.shape) == w.declared_shape and p.dtype == str(TORCH_DTYPES[w.type.dtype])
        for p, w in zip(parameters, weights, strict=True)
    ]
    if not all(fits):
        index = fits.index(False)
        parameter, weight = parameters[index], weights[index]
        raise ProblemError(
            f"{where}: weight `{weight.state_name}` is {weight.type.dtype.value} "
            f"{list(weight.declared_shape)}, the Model's parameter in its place is "
            f"`{parameter.name}`, {parameter.dtype} {list(parameter.shape)}; {order_note}"
        )
    drop_in = run.drop_in
    if drop_in is None:
        assert not (weights and expect_drop_in), "the worker built ModelNew: it has weights"
        return
    if drop_in.error is not None:
        raise ProblemError(f"{where}: ModelNew(*get_init_inputs()) failed: {drop_in.error}")
    for parameter, built, weight in zip(parameters, drop_in.parameters, weights, strict=True):
        if torch.equal(parameter.initial, built.initial):
            continue
        gap = (parameter.initial.double() - built.initial.double()).abs().max().item()
        raise ProblemError(
            f"{where}: weight `{weight.state_name}`: built under the same seed, ModelNew "
            f"starts it {_how_it_starts(weight, checked)} and the Model starts "
            f"`{parameter.name}` at other "
            f"values (largest difference {gap:.3g}), so a harness that seeds and builds "
            "both gets different weights. Declare weights in the order the Model's "
            "__init__ creates them, each as it creates it (`= randn`, `= rand * 0.02`, "
            "`= 2.0`, `linear(in, out)`)"
        )


def _check_state(checked: ir.Kernel, run: ProblemRun, where: str) -> None:
    """ModelNew's state_dict has exactly the Model's entries (names, shapes, dtypes), so
    each loads the other's strictly; when the worker built ModelNew, it tried both."""
    spec = {e.name: e for e in modules.state_entries(checked)}
    model = {e.name: e for e in run.state}

    def listed(entries: Iterable[modules.StateEntry]) -> str:
        return ", ".join(f"`{e.name}` {e.dtype} {list(e.shape)}" for e in entries)

    faults = []
    if missing := [e for name, e in model.items() if name not in spec]:
        faults.append(f"the Model has {listed(missing)}, ModelNew does not")
    if extra := [e for name, e in spec.items() if name not in model]:
        faults.append(f"ModelNew has {listed(extra)}, the Model does not")
    for name, entry in spec.items():
        theirs = model.get(name)
        if theirs is not None and (theirs.shape, theirs.dtype) != (entry.shape, entry.dtype):
            faults.append(f"ModelNew has {listed([entry])}, the Model {listed([theirs])}")
    if faults:
        raise ProblemError(
            f"{where}: ModelNew's state_dict differs from the Model's, so neither loads the "
            f"other's strictly: {'; '.join(faults)}. Name each weight as the Model names its "
            "parameter (a param and a weight may share a name: `weight constant: f32 = "
            "constant`), and declare each torch module of the Model as a module of the "
            "same name and kind (`weight bn: batch_norm2d(C)` holds `bn.weight`, `bn.bias` "
            "and its running statistics)"
        )
    if run.drop_in is not None and run.drop_in.loads:
        raise ProblemError(f"{where}: {'; '.join(run.drop_in.loads)}")


def _check_moved(checked: ir.Kernel, run: ProblemRun, where: str) -> None:
    """The Model's forward changes a buffer ModelNew's leaves as it was (BatchNorm's running
    statistics, written out by hand as batch statistics): a drop-in that drifts from the
    Model in eval mode."""
    updated = set(checked.updated_buffers)
    counted = {name.rpartition(".")[0] + ".num_batches_tracked" for name in updated}
    unmodelled = [name for name in run.moved if name not in updated | counted]
    if unmodelled:
        names = ", ".join(f"`{name}`" for name in unmodelled)
        raise ProblemError(
            f"{where}: its Model's forward updates {names}, which ModelNew's leaves as it "
            "was; apply the module (`bn(x)` for `weight bn: batch_norm2d(C)`): ModelNew then "
            "updates its running statistics in training mode and uses them in eval mode"
        )


def _how_it_starts(weight: ir.Input, checked: ir.Kernel) -> str:
    if isinstance(weight.init, ir.ModuleParameter):
        module = next(m for m in checked.modules if m.name == weight.init.module)
        return f"as torch's {modules.MODULES[module.kind].torch} does"
    return weight.init.how_it_starts


def problem_rescale(declared: Mapping[str, int], dims: Mapping[str, int]) -> Resize:
    """What `--dim` means for a problem file: its size constants equal to a resized dim's
    declared size take the new size. Two dims of one size resized differently cannot be
    told apart there (`--set` names the constants instead)."""
    sizes: dict[int, int] = {}
    for name, size in dims.items():
        old = declared[name]
        if sizes.get(old, size) != size:
            raise ValueError(
                f"--dim resizes two dims of size {old} differently; the problem's size "
                "constants could not tell which is which: name them with --set NAME=VALUE"
            )
        if old != size:
            sizes[old] = size
    return Resize(sizes=sizes)


class CheckTooBig(ValueError):
    """The check's estimated memory is more than this machine has available."""

    def __init__(self, needed: float, available: float):
        self.needed, self.available = needed, available
        super().__init__(
            f"checking this kernel needs about {needed / sim_memory.GIB:.1f} GiB "
            f"(the float64 golden, or pypto's verification of one launch), and "
            f"{available / sim_memory.GIB:.1f} GiB are available: check a scaled copy "
            "(--dim NAME=SIZE) or free memory"
        )


def _goldens(case: Case, compiled: Compiled) -> list[torch.Tensor]:
    """The expected outputs of the first kernel launch as the kernel writes them, for
    pypto's per-pass comparison."""
    kernel = compiled.kernel

    def first_launch(o: ir.Output) -> tuple[slice, ...]:
        cuts = {cut.axis: slice(0, cut.chunk) for cut in kernel.launch_cuts(o)}
        return tuple(cuts.get(axis, slice(None)) for axis in range(max(cuts, default=-1) + 1))

    expected = tuple(e[first_launch(o)] for e, o in zip(case.expected, kernel.outputs, strict=True))
    return [
        e.reshape(o.kernel_shape).to(TORCH_DTYPES[o.type.dtype])
        for e, o in zip(expected, kernel.outputs, strict=True)
    ]


def choose_verify(kernel: ir.Kernel, passes: str) -> str:
    if passes != "auto":
        return passes
    largest = max(t.type.size for t in (*kernel.inputs, *kernel.outputs))
    return "all" if largest <= PER_PASS_VERIFY_LIMIT else "graph"


def run_check(
    compiled: Compiled,
    *,
    kernel_path: Path | None = None,
    seed: int = 0,
    passes: str = "auto",
    against: Path | None = None,
    resize: Resize | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    launch_jobs: int = 1,
) -> CheckReport:
    """Checks `compiled`'s generated module, or the module at `kernel_path`, against the spec's
    torch reference, or with `against`, against a KernelBench-format problem file: its
    `Model(*get_init_inputs())` is the golden (its module-level size constants resized by
    `resize`), on its own `get_inputs()` and on the check's other draws (`ptodsl.checking.draws`).
    `timeout` limits each worker. Raises `CheckTooBig`, before allocating anything, when
    the check would not fit in the memory this machine has available. `progress` gets
    `check_steps(compiled)` steps: the golden, then each launch simulated of the seeded
    draw, then each other draw. `launch_jobs`: a kernel whose launches run in workers of
    their own runs up to that many at once, as many as fit in the memory available
    (`launches_in_flight`). A spec whose result depends on the module mode (BatchNorm's
    running statistics, dropout) is checked in training mode, its updated running
    statistics compared as outputs, then in eval mode (`CheckReport.eval_mode`), each draw
    from the same drawn running statistics."""
    arguments = dict(
        kernel_path=kernel_path,
        seed=seed,
        passes=passes,
        against=against,
        resize=resize,
        timeout=timeout,
        progress=progress,
        launch_jobs=launch_jobs,
    )
    report = _run_check_in_mode(compiled, **arguments)
    if compiled.lowered.eval is None:
        return report
    eval_report = _run_check_in_mode(compiled.in_eval_mode(), **arguments)
    return attrs.evolve(report, eval_mode=eval_report)


def _run_check_in_mode(
    compiled: Compiled,
    *,
    kernel_path: Path | None,
    seed: int,
    passes: str,
    against: Path | None,
    resize: Resize | None,
    timeout: float,
    progress: Progress | None,
    launch_jobs: int,
) -> CheckReport:
    """`run_check` of the mode `compiled` is lowered for."""
    needed = sim_memory.check_bytes(compiled.lowered.checked, compiled.program)
    if not memory.fits(needed):
        raise CheckTooBig(needed, memory.budget())
    checked = compiled.lowered.checked
    candidates = draws(seed)
    golden = (
        "the spec's torch reference in float64"
        if against is None
        else f"problem {against} (its Model in float64)"
    )
    verify = choose_verify(checked, passes)
    module = "generated by ptodsl" if kernel_path is None else str(kernel_path)
    with scratch_folder("check") as scratch:
        if kernel_path is None:
            kernel_path = Path(scratch) / f"{compiled.name}.py"
            kernel_path.write_text(compiled.source, encoding="utf-8")
        runner = _DrawRunner(compiled, kernel_path, Path(scratch), timeout, launch_jobs)
        always = [d for d in candidates if d.always]
        seeded, *always = map(runner.spilled, _cases(compiled, always, against, resize, timeout))
        if progress is not None:
            progress.step(f"golden: {golden}")
        first = runner.run(seeded, verify, progress)
        candidates = with_thresholds(candidates, seeded.observation.thresholds)
        later = _Draws(compiled, against, resize, timeout, seeded, runner)
        later.run_cases(always, progress)
        later.run_to_reach(candidates[1:], progress)
        later.run_until_judged(candidates[1:], progress)
        degenerate = later.degenerate()
    judged = runner.judged
    outputs = tuple(
        over_draws([draw.outputs[index] for draw in judged])
        for index in range(len(checked.outputs))
    )
    if degenerate:  # the kernel is compared with the constant; no trivial kernel is wrong
        outputs = tuple(attrs.evolve(o, problem=None) if o.vacuous else o for o in outputs)
    else:
        outputs = tuple(
            attrs.evolve(o, problem=later.insensitive.get(o.name)) if o.problem is None else o
            for o in outputs
        )
    problems = tuple(
        f"vacuous: {a}; {VACUITY_HINT}"
        for a in seeded.ambiguities
        if all(a in case.ambiguities for case in later.cases)
    )
    problems += runner.contract_faults(seeded)
    return CheckReport(
        kernel=compiled.name,
        spec=compiled.filename,
        module=module,
        golden=golden,
        plan=compiled.plan_origin,
        seed=seed,
        scaled=seeded.scaled,
        verify=verify,
        outputs=outputs,
        problems=problems,
        passes=first.passes,
        sim_time_us=first.run.sim_time_us,
        total_cycles=first.run.total_cycles,
        draws=tuple(judged),
        not_run=tuple(later.not_run),
        unreached=tuple(r.describe() for r in unreached([c.observation for c in later.cases])),
        degenerate=degenerate,
        mode=None if checked.mode is None else checked.mode.value,
    )


def _cases(
    compiled: Compiled,
    draws_: Sequence[Draw],
    against: Path | None,
    resize: Resize | None,
    timeout: float,
) -> list[Case]:
    """A case per draw: the spec's reference, or the problem's Model (in one worker run
    when the goldens are small: `problem_cases`)."""
    if against is None:
        return [spec_case(compiled, draw) for draw in draws_]
    return problem_cases(compiled, against, draws_, resize, timeout)


@attrs.frozen
class _Ran:
    """A draw's simulation: what it returned and pypto's per-pass verdicts on it."""

    run: SimRun
    passes: tuple[PassCheck, ...]


class _DrawRunner:
    """Runs the kernel module on draws, one simulation each, and compares its outputs."""

    def __init__(
        self,
        compiled: Compiled,
        kernel_path: Path,
        scratch: Path,
        timeout: float,
        launch_jobs: int,
    ):
        self.compiled, self.kernel_path, self.scratch = compiled, kernel_path, scratch
        self.timeout, self.launch_jobs = timeout, launch_jobs
        self.judged: list[DrawCheck] = []
        self.runs: list[SimRun] = []

    def spilled(self, case: Case) -> Case:
        """The case with its expected outputs and their error scales (float64: four times
        an f32 output's bytes together) on disk and mapped back: they wait there while the
        simulator runs, as pages the kernel may evict."""
        path = self.scratch / f"expected-{case.draw.name.replace(' ', '-')}.pt"
        torch.save({"expected": case.expected, "scales": case.scales}, path)
        mapped = torch.load(path, mmap=True, weights_only=True)
        return attrs.evolve(case, expected=mapped["expected"], scales=mapped["scales"])

    def run(self, case: Case, verify: str, progress: Progress | None = None) -> _Ran:
        """Simulates the draw (`verify` as `run_model` takes it) and judges its outputs."""
        compiled, checked = self.compiled, self.compiled.lowered.checked
        arguments, state = case.forward_and_state(checked)
        # pypto's own golden comparison is per pass: at graph level it would only repeat,
        # less strictly, the element-wise comparison below, and cost the worker a copy.
        # (of a one-kernel program: pypto's goldens are one kernel's outputs)
        program = compiled.program
        goldens = _goldens(case, compiled) if verify == "all" and program.single_call else None
        per_launch = verify == "graph" and sim_memory.worker_per_launch(program)
        launches = program.launch_count if per_launch else 1
        # launches in flight are admitted by their estimates in the model's worker
        in_flight = min(self.launch_jobs, program.launch_count) if per_launch else 1
        launch_memory = max(map(sim_memory.verification_bytes, program.kernels))
        on_launch = None
        if progress is not None and not self.judged:
            on_launch = _launch_steps(progress, compiled)
        run: SimRun = run_model(
            self.kernel_path,
            case.init_kwargs,
            arguments,
            goldens=goldens,
            kernel_inputs=len(case.inputs),
            verify=verify,
            state=state,
            timeout=self.timeout,
            launches=launches,
            launches_in_flight=in_flight,
            launch_memory=launch_memory,
            on_launch=on_launch,
            mode=checked.mode,
            forward_seed=case.draw.data_seed,
            updated=checked.updated_buffers,
        )
        del goldens, arguments, state
        expected, scales = case.expected, case.scales
        outputs = tuple(
            compare(o.name, actual, e, scale, o.type.dtype)
            for o, actual, e, scale in zip(
                checked.outputs, run.outputs, expected, scales, strict=False
            )
        )
        outputs += tuple(
            OutputCheck(o.name, o.declared_shape, o.type.dtype.value, 0, 0, problem="not returned")
            for o in checked.outputs[len(run.outputs) :]
        )
        passes = tuple(judge_pass(p, checked.outputs, expected, scales) for p in run.pass_results)
        self.judged.append(DrawCheck(case.draw.name, case.draw.why, outputs))
        self.runs.append(attrs.evolve(run, outputs=[]))
        return _Ran(run, passes)

    def contract_faults(self, seeded: Case) -> tuple[str, ...]:
        """Where ModelNew is not a drop-in for the problem (or for the spec's forward): it
        wrote to an input, returned another container or count, or another dtype."""
        checked = self.compiled.lowered.checked
        faults = []
        names = [t.name for t in checked.inputs if t.init is None]
        written: dict[str, list[str]] = {}
        for draw, run in zip(self.judged, self.runs, strict=True):
            for index in run.changed_inputs:
                what = names[index] if index < len(names) else f"argument {index}"
                written.setdefault(what, []).append(draw.name)
        faults += [
            f"ModelNew.forward wrote to its input `{what}` (draws {', '.join(on)}): a drop-in "
            "leaves its inputs as they were"
            for what, on in written.items()
        ]
        for run in self.runs[:1]:  # every draw's forward starts from the same counters
            faults += [
                f"ModelNew's `{name}` is {run.counters.get(name)} after forward; the problem's "
                f"Model's is {steps}"
                for name, steps in (seeded.counters or {}).items()
                if run.counters.get(name) != steps
            ]
        count = len(checked.returned_outputs)
        wanted = seeded.returns or ("a tensor" if count == 1 else f"a tuple of {count} tensors")
        returned = {run.returns for run in self.runs if run.returns}
        for returns in sorted(returned - {wanted}):
            source = "the problem's Model returns" if seeded.returns else "the spec declares"
            faults.append(f"ModelNew.forward returned {returns}; {source} {wanted}")
        for output, dtype in zip(checked.outputs, seeded.dtypes or (), strict=False):
            declared = str(TORCH_DTYPES[output.type.dtype])
            if dtype != declared:
                faults.append(
                    f"output `{output.name}`: the problem's Model returns {dtype}, the spec "
                    f"declares {output.type.dtype.value} ({declared}): a drop-in returns "
                    "the dtype the problem returns"
                )
        return tuple(faults)


class _Draws:
    """The draws after the seeded one: which run, and what running them showed."""

    def __init__(
        self,
        compiled: Compiled,
        against: Path | None,
        resize: Resize | None,
        timeout: float,
        seeded: Case,
        runner: _DrawRunner,
    ):
        self.compiled, self.against, self.resize, self.timeout = (
            compiled,
            against,
            resize,
            timeout,
        )
        self.seeded, self.runner = seeded, runner
        self.cases: list[Case] = [seeded]
        self.not_run: list[str] = []
        self.ran: set[str] = {seeded.draw.name}
        self.made: dict[str, Case | None] = {}  # the cases made, None where they overflow
        self.insensitive: dict[str, str] = {}
        # each output's golden on the seeded draw, to tell which draws change it
        self.first = [(e, s) for e, s in zip(seeded.expected, seeded.scales, strict=True)]

    def run_cases(self, cases: list[Case], progress: Progress | None) -> None:
        """The draws that always run, their cases made with the seeded one's."""
        for case in cases:
            self.made[case.draw.name] = case
            if self._failed():
                self.not_run.append(f"{case.draw.name}: the check failed on an earlier draw")
            elif case.observation.overflows:
                self.not_run.append(f"{case.draw.name}: {case.observation.overflows[0]}")
            else:
                self._run(case, progress)

    def run_to_reach(self, candidates: tuple[Draw, ...], progress: Progress | None) -> None:
        """The draws that reach a branch or term of the spec that no draw run yet did."""
        for draw in candidates:
            left = set(unreached([c.observation for c in self.cases]))
            if not left:
                return
            if draw.name in self.ran:
                continue
            if self._failed():
                return
            case = self._made_case(draw)
            if case is not None and case.observation.reached & left:
                self._run(case, progress)

    def run_until_judged(self, candidates: tuple[Draw, ...], progress: Progress | None) -> None:
        """Further draws while some output is the same on every draw of the inputs, or one
        a trivial kernel would pass on every draw run: another may tell."""
        for draw in candidates:
            if not self._unjudged() or self._failed():
                return
            if draw.name not in self.ran:
                self._try(draw, progress)

    def _unjudged(self) -> list[str]:
        names = [o.name for o in self.compiled.lowered.checked.outputs]
        judged = self.runner.judged
        return [
            name
            for index, name in enumerate(names)
            if all(d.outputs[index].vacuous for d in judged) or self._same_on_inputs(index)
        ]

    def _same_on_inputs(self, index: int) -> bool:
        """Whether output `index` has been the same on every draw of the inputs run (with
        the seeded draw's weights), at least one besides the seeded draw."""
        others = [c for c in self.cases[1:] if c.draw.weight_seed == self.seeded.draw.weight_seed]
        return bool(others) and all(self._same(c, index) for c in others)

    def _same(self, case: Case, index: int) -> bool:
        expected, scale = self.first[index]
        theirs, their_scale = case.expected[index], case.scales[index]
        dtype = self.compiled.lowered.checked.outputs[index].type.dtype
        bound = element_bound(torch.maximum(scale, their_scale), dtype)
        return bool(((theirs - expected).abs() <= bound).all())

    def _failed(self) -> bool:
        """Whether a draw run so far failed: the check's verdict is decided, and the draws
        after it are not run (a wrong kernel costs one or two simulations, not all)."""
        return any(not o.ok for draw in self.runner.judged for o in draw.outputs)

    def _try(self, draw: Draw, progress: Progress | None) -> None:
        if self._failed():
            self.not_run.append(f"{draw.name}: the check failed on an earlier draw")
            return
        case = self._made_case(draw)
        if case is not None:
            self._run(case, progress)

    def _made_case(self, draw: Draw) -> Case | None:
        """The draw's case (made once), or None (noted) when its exact values overflow a
        dtype."""
        if draw.name not in self.made:
            (case,) = _cases(self.compiled, [draw], self.against, self.resize, self.timeout)
            case = self.runner.spilled(case)
            if case.observation.overflows:
                self.not_run.append(f"{draw.name}: {case.observation.overflows[0]}")
            self.made[draw.name] = None if case.observation.overflows else case
        return self.made[draw.name]

    def _run(self, case: Case, progress: Progress | None) -> None:
        self.ran.add(case.draw.name)
        self.runner.run(case, "graph")
        self.cases.append(case)
        names = [o.name for o in self.compiled.lowered.checked.outputs]
        same = [
            name
            for index, name in enumerate(names)
            if case.draw.weight_seed == self.seeded.draw.weight_seed and self._same(case, index)
        ]
        if same:
            drawn = self.runner.judged[-1]
            note = f"{', '.join(same)}: the same as on {self.seeded.draw.name}"
            self.runner.judged[-1] = attrs.evolve(drawn, notes=(*drawn.notes, note))
        if progress is not None:
            progress.step(f"draw {case.draw.name} simulated")
        self._note_insensitive(names)

    def _note_insensitive(self, names: list[str]) -> None:
        on_inputs = [
            c.draw.name for c in self.cases if c.draw.weight_seed == self.seeded.draw.weight_seed
        ]
        self.insensitive = {
            name: (
                f"the output is the same on every draw of the inputs ({', '.join(on_inputs)}): "
                "a kernel that ignores its inputs would pass; choose inputs that change it"
            )
            for index, name in enumerate(names)
            if self._same_on_inputs(index)
        }

    def degenerate(self) -> tuple[str, ...]:
        """Why every output is the same on every draw of inputs and weights, when it is
        (every draw run, the reseeded one among them): the problem is degenerate."""
        weights = {c.draw.weight_seed for c in self.cases}
        checked = self.compiled.lowered.checked
        if checked.weights and len(weights) < 2:
            return ()
        # the same to float64's rounding: a constant the spec computes, not values alike
        # because all are tiny (products of 256 values below 1e-40 are vacuous instead)
        for index in range(len(checked.outputs)):
            first = self.seeded.expected[index]
            if len(self.cases) < 2 or not all(
                torch.allclose(c.expected[index], first, rtol=1e-12, atol=0.0)
                for c in self.cases[1:]
            ):
                return ()
        return explain_constant(self.compiled, self.cases)


def explain_constant(compiled: Compiled, cases: list[Case]) -> tuple[str, ...]:
    """Why the outputs are the same on every draw in `cases`: the spec's first op whose
    values do not follow its operands', as the spec's own evaluation on each draw shows."""
    prints = []
    for case in cases:
        fingerprints = Fingerprints()
        _scales(
            compiled,
            case.inputs,
            case.init_kwargs,
            case.forward_scalars,
            case.expected,
            lambda *_: None,
            fingerprints,
        )
        prints.append(fingerprints)
    checked = compiled.lowered.checked
    names = ", ".join(c.draw.name for c in cases)
    found = first_constant(checked, prints, compiled.lowered.source.text)
    reason = f": {found}" if found else ""
    return (
        f"every output is the same on every draw of the inputs and weights ({names}){reason}; "
        "the kernel is compared with that constant",
    )


@attrs.frozen
class CheckJob:
    """One spec's check as an executor's task carries it (`ptodsl.runtime.executor`): the
    text and the plan chosen where the command ran (a cluster worker has no tuning cache of
    ours)."""

    source: Source
    dims: Mapping[str, int]
    tuning: ir.Tuning
    plan_origin: str
    seed: int
    passes: str
    timeout: float
    launch_jobs: int = 1


def check_job(job: CheckJob) -> CheckReport | str:
    """The job's report, or why its kernel did not run."""
    from ptodsl.api import lower_spec
    from ptodsl.runtime.simulator import SimulationError

    lowered, _ = lower_spec(job.source, job.dims, PYPTO_0_2_0, job.tuning)
    compiled = Compiled(lowered, job.plan_origin)
    seed, passes, timeout = job.seed, job.passes, job.timeout
    try:
        return run_check(
            compiled, seed=seed, passes=passes, timeout=timeout, launch_jobs=job.launch_jobs
        )
    except SimulationError as error:
        return f"the kernel did not run\n{error}"
    except ValueError as error:  # CheckTooBig among them
        return str(error)


def check_steps(compiled: Compiled) -> int:
    """The steps `run_check` reports at least: the golden, each launch of the kernel on the
    seeded draw, and the draws that always run after it."""
    launches = compiled.program.launch_count
    launches += 0 if compiled.program.eval is None else compiled.program.eval.launch_count
    modes = 1 if compiled.program.eval is None else 2
    return modes * (1 + sum(d.always for d in draws(0)[1:])) + launches


def _launch_steps(progress: Progress, compiled: Compiled) -> Callable[[int], None]:
    total = compiled.program.launch_count
    reported = 0

    def on_launch(finished: int) -> None:
        nonlocal reported
        for number in range(reported + 1, finished + 1):
            progress.step(f"launch {number} of {total} simulated")
        reported = max(reported, finished)
        progress.tick()

    return on_launch


_VERIFY_TEXT = {
    "all": "graph and per-pass (tile-level) verification",
    "graph": "graph-level verification",
    "none": "no verification",
}


def format_report(report: CheckReport) -> str:
    """The report as `ptodsl check` prints it; a mode-dependent spec's training mode, then
    its eval mode, then the verdict over both."""
    if report.eval_mode is None:
        return _format_mode(report, report.verdict)
    verdict = f"result: {report.verdict} (training mode and eval mode)\n"
    own = attrs.evolve(report, eval_mode=None)
    return _format_mode(own, None) + _format_mode(report.eval_mode, None) + verdict


def _format_mode(report: CheckReport, verdict: str | None) -> str:
    """One mode's report; the verdict line closes it unless `verdict` is None."""
    mode = "" if report.mode is None else f" in {report.mode} mode"
    lines = [
        f"ptodsl check {report.kernel}{mode}: {report.verdict}",
        f"  spec:    {report.spec}",
        f"  kernel:  {report.module}",
        f"  golden:  {report.golden}",
        f"  plan:    {report.plan}",
        f"  inputs:  seed {report.seed} and {len(report.draws) - 1} other draws"
        + (f"; ran scaled: {', '.join(report.scaled)}" if report.scaled else ""),
        f"  run:     pypto SIM, {_VERIFY_TEXT[report.verify]}",
    ]
    if report.bound_dims:
        lines += textwrap.wrap(
            "; ".join(report.bound_dims),
            92,
            initial_indent="  dims:    ",
            subsequent_indent=" " * 11,
        )
    lines += textwrap.wrap(BOUND_RULE, 92, initial_indent="  bound:   ", subsequent_indent=" " * 11)
    rows = [("output", "shape", "dtype", "max abs err", "err/bound", "bounds", "result")]
    for o in report.outputs:
        result = "ok" if o.ok else (o.problem or f"FAIL: {o.mismatched} elements off")
        low, high = o.bound_range
        rows.append(
            (
                o.name,
                str(list(o.shape)),
                o.dtype,
                f"{o.max_abs_error:.3g}",
                f"{o.worst_ratio:.3g}",
                f"{low:.3g} .. {high:.3g}",
                result,
            )
        )
    lines += aligned_lines(rows)
    lines.append("draws (every output judged on each):")
    draw_rows = [("  draw", "what", "err/bound", "result")]
    for draw in report.draws:
        worst = max((_ratio(o) for o in draw.outputs), default=0.0)
        failed = [o for o in draw.outputs if not o.ok]
        result = (
            "ok"
            if not failed
            else "FAIL: "
            + ", ".join(f"{o.name} {o.problem or f'{o.mismatched} off'}" for o in failed)
        )
        vacuous = [o.name for o in draw.outputs if o.vacuous]
        notes = [*draw.notes] + (
            [f"{', '.join(vacuous)}: a trivial kernel would pass"] if vacuous else []
        )
        draw_rows.append((f"  {draw.name}", draw.why, f"{worst:.3g}", "; ".join([result, *notes])))
    lines += aligned_lines(draw_rows)
    lines += [f"  not run: {why}" for why in report.not_run]
    lines += [f"  no draw reached {what}" for what in report.unreached]
    for draw in report.draws:
        for o in draw.outputs:
            if o.mismatched:
                lines.append(
                    f"worst elements of {o.name} on draw {draw.name} (of {o.mismatched} off):"
                )
                lines += [
                    f"  {o.name}{list(e.index)}: got {e.got:.8g}, expected {e.expected:.8g}, "
                    f"error {abs(e.got - e.expected):.3g} > bound {e.bound:.3g}"
                    for e in o.worst
                    if not abs(e.got - e.expected) <= e.bound
                ]
    lines += [f"degenerate: {why}" for why in report.degenerate]
    lines += [f"problem: {problem}" for problem in report.problems]
    if report.passes:
        failed = report.failed_passes
        summary = f"{len(report.passes)} pass checks, " + (
            "all passed" if not failed else f"{len(failed)} failed"
        )
        lines.append(f"pypto pass verification: {summary}")
        for p in report.passes:
            diff = "" if p.max_abs_diff is None else f" (max abs diff {p.max_abs_diff:.3g})"
            accepted = f", accepted for {p.dtype}: {p.note}" if p.note else ""
            lines.append(f"  {p.pass_name}: {p.verdict}{diff}{accepted}")
    lines.append(
        f"simulated time: {report.sim_time_us:.2f} us (AICore end-to-end), "
        f"{report.total_cycles} cycles"
    )
    if verdict is not None:
        lines.append(f"result: {verdict}")
    return "\n".join(lines) + "\n"
