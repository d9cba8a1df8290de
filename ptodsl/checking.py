"""`ptodsl check`: run a kernel in pypto SIM with pass verification on seeded inputs and
compare every output, element by element, with a golden computed independently in float64:
the spec's torch reference, or a KernelBench-format problem's own Model (`--against`).

Each element's bound comes from the computation (`ptodsl.error_bounds`), not from the
output's mean; an output the tolerance alone would let pass (zeros or a constant would) is
a failure, and so is a reduction whose axes the inputs cannot tell apart.
"""

from __future__ import annotations

import functools
import math
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs
import torch

from ptodsl import ir, modules, ops, sim_memory
from ptodsl.api import Compiled
from ptodsl.convolutions import SampleBySample
from ptodsl.diagnostics import Source
from ptodsl.error_bounds import (
    BOUND_RULE,
    TOLERANCES,
    Bounded,
    element_bound,
    evaluate_bounds,
)
from ptodsl.passes.launches import samples_part
from ptodsl.problems import ProblemError, ProblemRun, run_problem
from ptodsl.progress import Progress
from ptodsl.serialise import to_json, with_properties
from ptodsl.simulator import PassResult, SimRun, run_model
from ptodsl.tables import aligned_lines
from ptodsl.target import PYPTO_0_2_0
from ptodsl.workers import DEFAULT_TIMEOUT_S, available_bytes, memory_limit

# Per-pass (tile-level) verification takes ~7 s for a 1M-element tensor; far longer above.
PER_PASS_VERIFY_LIMIT = 1 << 20
PASSING_VERDICTS = {"PASS", "NO_COMPARE"}
# An output is vacuous when its reference is within this many atol of zero everywhere.
VACUOUS_ATOL_FACTOR = 10
WORST_SHOWN = 5
VACUITY_HINT = (
    "choose inputs that make it large and varied: an `in` domain, another --seed, or a larger scale"
)

TORCH_DTYPES = {d: getattr(torch, d.torch_name) for d in ir.DType}


def make_input(tensor: ir.Input, index: int, seed: int, ties: bool = False) -> torch.Tensor:
    """Seeded values in the input's domain. Each input index draws from its own
    distribution (scale and offset differ), so that swapping two operands changes results.
    With `ties` (the input reaches an argmax), values are rounded to quarters so that many
    extrema are tied and the tie rule (the first position wins) is checked."""
    generator = torch.Generator().manual_seed(seed * 1009 + index)
    shape = tensor.declared_shape
    if tensor.type.dtype is ir.DType.BOOL:
        return _signs(shape, generator) > 0
    if tensor.domain == "range":
        assert tensor.extent is not None, "typecheck gives every range its extent"
        values = torch.randint(0, tensor.extent, shape, generator=generator)
        return values.to(TORCH_DTYPES[tensor.type.dtype])
    values = _real_values(tensor, index, shape, generator)
    if ties and tensor.domain in TIE_GRID:
        low, high = TIE_GRID[tensor.domain]
        values = (torch.round(values * 4) / 4).clamp(low, high)
    return values.to(TORCH_DTYPES[tensor.type.dtype])


# Quarters that stay inside each domain when an arg-reduction's inputs are rounded for ties
# (rounding would put 0 into `positive` and `unit`); softmax rows and signs are left alone.
TIE_GRID = {"real": (-math.inf, math.inf), "positive": (0.25, math.inf), "unit": (0.25, 0.75)}


def _real_values(
    tensor: ir.Input, index: int, shape: tuple[int, ...], generator: torch.Generator
) -> torch.Tensor:
    if tensor.domain == "positive":
        values = torch.rand(shape, generator=generator, dtype=torch.float64)
        values = 0.1 + 0.15 * index + (1.5 + 0.5 * index) * values
    elif tensor.domain == "unit":
        values = torch.rand(shape, generator=generator, dtype=torch.float64)
        values = 0.02 + 0.96 * values ** (1.0 + 0.5 * index)
    elif tensor.domain == "softmax":
        logits = torch.randn(shape, generator=generator, dtype=torch.float64)
        values = torch.softmax(logits * (1.0 + 0.5 * index), dim=-1)
    elif tensor.domain == "sign":
        values = _signs(shape, generator)
    else:
        # Close enough that norms of differences stay comparable (triplet margins matter),
        # apart enough that swapping two inputs changes every result.
        values = torch.randn(shape, generator=generator, dtype=torch.float64)
        values = _scale_along_every_axis(values, generator)
        values = values * (1.0 + 0.05 * index) + 0.05 * index * (-1) ** index
    return values


def arg_reduced_inputs(kernel: ir.Kernel) -> frozenset[str]:
    """The inputs an argmax or argmin reads, directly or through `let` bindings."""
    lets = {stmt.name: stmt.value for stmt in kernel.body if isinstance(stmt, ir.Let)}

    def names(expr: ir.Expr) -> set[str]:
        found = set()
        for node in ir.walk(expr):
            if isinstance(node, ir.Ref):
                found |= names(lets[node.name]) if node.name in lets else {node.name}
        return found

    return frozenset(
        name
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.ARG_REDUCTION
        for name in names(node.operands[0])
    )


def _scale_along_every_axis(values: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Multiplies in a scale per index of every axis (0.75 to 1.25): sums along any axis then
    depend on where they are, not only on the distribution. With plain randn every row of
    4096 has a norm close to 64, and a kernel computing sqrt(sum(x / x)) instead of
    sqrt(sum(x * x)) passes."""
    for axis, extent in enumerate(values.shape):
        scales = 0.75 + 0.5 * torch.rand(extent, generator=generator, dtype=torch.float64)
        values.mul_(scales.reshape([extent if a == axis else 1 for a in range(values.dim())]))
    return values


def _signs(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Coin flips of -1 and +1, with about a quarter of the slices along every axis all -1:
    a max along one axis then varies and differs from a max along another (with plain
    coin flips every max is 1). A min of signs stays -1 everywhere, which the check reports
    as vacuous: no input can have both all -1 rows and all +1 columns."""
    values = torch.randint(0, 2, shape, generator=generator).to(torch.float64) * 2 - 1
    for axis, extent in enumerate(shape):
        forced = torch.rand(extent, generator=generator) < 0.25
        mask = forced.reshape([extent if a == axis else 1 for a in range(len(shape))])
        values = torch.where(mask, -1.0, values)
    return values


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


@with_properties("ok")
@attrs.frozen
class CheckReport:
    kernel: str
    spec: str
    module: str  # the checked module: "generated" or the --kernel path
    golden: str
    plan: str
    seed: int
    scaled: tuple[str, ...]  # problem constants resized to the spec's --dim sizes
    verify: str
    outputs: tuple[OutputCheck, ...]
    problems: tuple[str, ...]  # why the check proves nothing, beyond single outputs
    passes: tuple[PassCheck, ...]
    sim_time_us: float
    total_cycles: int

    @property
    def failed_passes(self) -> tuple[PassCheck, ...]:
        return tuple(p for p in self.passes if not p.ok)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) and not self.problems and not self.failed_passes

    def to_json(self) -> dict:
        """The report as strict JSON values: a number that is not finite becomes null."""
        return to_json(self) | {"bound_rule": BOUND_RULE}


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
        problem=vacuity(expected, scale, dtype),
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

    inputs: list[torch.Tensor]
    init_kwargs: dict[str, ir.ParamValue]
    forward_scalars: list[float]
    expected: tuple[torch.Tensor, ...]
    scales: tuple[torch.Tensor, ...]
    ambiguities: tuple[str, ...] = ()
    scaled: tuple[str, ...] = ()

    def forward_and_state(
        self, checked: ir.Kernel
    ) -> tuple[list[torch.Tensor | float], dict[str, torch.Tensor]]:
        """`ModelNew.forward`'s arguments, and the weights' values to load as module state."""
        pairs = list(zip(checked.inputs, self.inputs, strict=True))
        tensors = [value for tensor, value in pairs if tensor.init is None]
        state = {tensor.state_name: value for tensor, value in pairs if tensor.init is not None}
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
    kernels = compiled.program.kernels
    parts = _sample_parts(checked, kernels[0].launches) if len(kernels) == 1 else None
    if parts is None:
        with SampleBySample():
            bounded, ambiguities = evaluate_bounds(checked, inputs, params)
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
        bounded, noted = evaluate_bounds(part_kernel, part_inputs, params)
        ambiguities += [a for a in noted if a not in ambiguities]
        for output, golden, own, scale in zip(
            checked.outputs, expected, bounded, scales, strict=True
        ):
            agree(output, golden[samples], own, start)
            scale[samples] = own.scale
    return scales, ambiguities


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


def spec_case(compiled: Compiled, seed: int) -> Case:
    """Seeded inputs and weights in each one's domain, params at their values, and the spec's
    own torch reference evaluated in float64."""
    checked = compiled.lowered.checked
    tied = arg_reduced_inputs(checked)
    inputs = [
        make_input(tensor, index, seed, ties=tensor.name in tied)
        for index, tensor in enumerate(checked.inputs)
    ]
    missing = [p.name for p in checked.params if p.default is None]
    if missing:
        raise ValueError(f"params without a value cannot be checked: {', '.join(missing)}")
    init_kwargs = {p.name: p.default for p in checked.init_params}
    forward_scalars = [p.default for p in checked.forward_params]
    expected = evaluate_reference(compiled, inputs, init_kwargs, forward_scalars)

    def agree(output: ir.Output, reference: torch.Tensor, own: Bounded, _: int) -> None:
        # Two evaluations of the same spec, by different code: they must agree to rounding.
        gap = (reference - own.value).abs() - 1e-9 * (1.0 + own.scale)
        if reference.shape != own.value.shape or bool((gap > 0).any()):
            raise RuntimeError(
                f"the reference and the error-bound evaluation of {output.name} differ"
            )

    scales, ambiguities = _scales(compiled, inputs, init_kwargs, forward_scalars, expected, agree)
    return Case(inputs, init_kwargs, forward_scalars, expected, scales, tuple(ambiguities))


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


def problem_case(
    compiled: Compiled,
    problem_path: Path,
    seed: int,
    rescale: Mapping[int, int] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Case:
    """The problem's own inputs and init arguments, checked against the spec's declarations,
    and its own Model's output (in float64) as the golden, computed in a worker process.
    ModelNew, built under the seed as a harness builds it, must start with the Model's own
    initial parameters (the same draws). For the numeric check both then get seeded random
    values, matched in `parameters()` order, so that a kernel ignoring a weight cannot pass
    on ones and zeros, each at the spread of its parameter's own initial values (so that
    they meet the layer at the problem's scale: `_problem_worker._spread`)."""
    checked = compiled.lowered.checked
    weight_values = {
        tensor.name: make_input(tensor, index, seed)
        for index, tensor in enumerate(checked.inputs)
        if tensor.init is not None
    }
    in_torch_order = [weight_values[w.name] for w in checked.weights_in_torch_order]
    # ModelNew is built beside the Model only when it has weights to compare (importing it
    # costs the worker pypto's import, about 2 s)
    model_new = compiled.source if checked.weights else None
    run = run_problem(problem_path, seed, in_torch_order, rescale, timeout, model_new=model_new)
    where = f"problem {problem_path}"
    init_kwargs = _init_arguments(checked, run.init_values, where)
    tensors, scalars = _forward_arguments(checked, run, where)
    _check_parameters(checked, run, where)
    assert run.expected is not None, "the weights fit, so the problem ran forward"
    assert run.weight_scales is not None
    # The problem ran with each weight at its parameter's own spread; so does ModelNew.
    for weight, scale in zip(checked.weights_in_torch_order, run.weight_scales, strict=True):
        weight_values[weight.name] = weight_values[weight.name] * scale
    by_name = dict(zip((t.name for t in checked.tensor_arguments), tensors, strict=True))
    inputs = [by_name.get(t.name, weight_values.get(t.name)) for t in checked.inputs]
    expected = tuple(run.expected)
    if len(expected) != len(checked.outputs):
        raise ProblemError(
            f"{where}: its Model returns {len(expected)} outputs, the spec declares "
            f"{len(checked.outputs)}"
        )
    for output, value in zip(checked.outputs, expected, strict=True):
        if tuple(value.shape) != output.declared_shape:
            raise ProblemError(
                f"{where}: output `{output.name}`: the problem's Model returns "
                f"{list(value.shape)}, the spec declares {list(output.declared_shape)}"
            )
    agree = functools.partial(_expect_same_meaning, where=where)
    scales, ambiguities = _scales(compiled, inputs, init_kwargs, scalars, expected, agree)
    return Case(
        inputs, init_kwargs, scalars, expected, scales, tuple(ambiguities), tuple(run.scaled)
    )


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


def _check_parameters(checked: ir.Kernel, run: ProblemRun, where: str) -> None:
    """The spec's weights are the Model's parameters (in torch's order), and ModelNew built
    under the seed starts them at the Model's values: a drop-in for a harness that seeds,
    builds both and never copies weights."""
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
        assert not weights, "problem_case gives the worker ModelNew when it has weights"
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


def _how_it_starts(weight: ir.Input, checked: ir.Kernel) -> str:
    if isinstance(weight.init, ir.ModuleParameter):
        module = next(m for m in checked.modules if m.name == weight.init.module)
        return f"as torch's {modules.MODULES[module.kind].torch} does"
    return weight.init.how_it_starts


def problem_rescale(declared: Mapping[str, int], dims: Mapping[str, int]) -> dict[int, int]:
    """What `--dim` means for a problem file: its size constants equal to a resized dim's
    declared size take the new size. Two dims of one size resized differently cannot be
    told apart there."""
    rescale: dict[int, int] = {}
    for name, size in dims.items():
        old = declared[name]
        if rescale.get(old, size) != size:
            raise ValueError(
                f"--dim resizes two dims of size {old} differently; the problem's size "
                "constants could not tell which is which"
            )
        if old != size:
            rescale[old] = size
    return rescale


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
    rescale: Mapping[int, int] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    launch_jobs: int = 1,
) -> CheckReport:
    """Checks `compiled`'s generated module, or the module at `kernel_path`, against the spec's
    torch reference on seeded inputs, or with `against`, against a KernelBench-format problem
    file: its `Model(*get_init_inputs())` on its own `get_inputs()` is the golden (its
    module-level size constants resized by `rescale`). `timeout` limits each worker.
    Raises `CheckTooBig`, before allocating anything, when the check would not fit in the
    memory this machine has available. `progress` gets `check_steps(compiled)` steps: the
    golden, then each launch simulated. `launch_jobs`: a kernel whose launches run in
    workers of their own runs up to that many at once, as many as fit in the memory
    available (`launches_in_flight`)."""
    needed = sim_memory.check_bytes(compiled.lowered.checked, compiled.program)
    available = available_bytes()
    if needed > available:
        raise CheckTooBig(needed, available)
    if against is not None:
        case = problem_case(compiled, against, seed, rescale, timeout)
        golden = f"problem {against} (its Model in float64)"
    else:
        case = spec_case(compiled, seed)
        golden = "the spec's torch reference in float64"
    if progress is not None:
        progress.step(f"golden: {golden}")
    checked = compiled.lowered.checked
    verify = choose_verify(checked, passes)
    arguments, state = case.forward_and_state(checked)
    module = "generated by ptodsl" if kernel_path is None else str(kernel_path)
    with tempfile.TemporaryDirectory(prefix="ptodsl-check-") as scratch:
        if kernel_path is None:
            kernel_path = Path(scratch) / f"{compiled.name}.py"
            kernel_path.write_text(compiled.source, encoding="utf-8")
        # While the simulator runs, the expected outputs and their error scales (float64:
        # four times an f32 output's bytes together) wait on disk, and come back mapped.
        spilled = Path(scratch) / "expected.pt"
        torch.save({"expected": case.expected, "scales": case.scales}, spilled)
        # pypto's own golden comparison is per pass: at graph level it would only repeat,
        # less strictly, the element-wise comparison below, and cost the worker a copy.
        # (of a one-kernel program: pypto's goldens are one kernel's outputs)
        single = len(compiled.program.calls) == 1
        goldens = _goldens(case, compiled) if verify == "all" and single else None
        case = attrs.evolve(case, expected=(), scales=())
        per_launch = verify == "graph" and single and sim_memory.worker_per_launch(compiled.kernel)
        launches = compiled.kernel.launch_count if per_launch else 1
        in_flight = launches_in_flight(compiled.kernel, launch_jobs) if per_launch else 1
        run: SimRun = run_model(
            kernel_path,
            case.init_kwargs,
            arguments,
            goldens=goldens,
            kernel_inputs=len(case.inputs),
            verify=verify,
            state=state,
            timeout=timeout,
            launches=launches,
            launches_in_flight=in_flight,
            on_launch=None if progress is None else _launch_steps(progress, compiled),
        )
        del goldens, arguments, state
        judged = torch.load(spilled, mmap=True, weights_only=True)
    expected, scales = judged["expected"], judged["scales"]
    outputs = tuple(
        compare(o.name, actual, e, scale, o.type.dtype)
        for o, actual, e, scale in zip(checked.outputs, run.outputs, expected, scales, strict=False)
    )
    problems = tuple(f"vacuous: {a}; {VACUITY_HINT}" for a in case.ambiguities)
    if len(run.outputs) != len(checked.outputs):
        problems += (
            f"the kernel returned {len(run.outputs)} outputs, the spec declares "
            f"{len(checked.outputs)}",
        )
    return CheckReport(
        kernel=compiled.name,
        spec=compiled.filename,
        module=module,
        golden=golden,
        plan=compiled.plan_origin,
        seed=seed,
        scaled=case.scaled,
        verify=verify,
        outputs=outputs,
        problems=problems,
        passes=tuple(judge_pass(p, checked.outputs, expected, scales) for p in run.pass_results),
        sim_time_us=run.sim_time_us,
        total_cycles=run.total_cycles,
    )


@attrs.frozen
class CheckJob:
    """One spec's check as a fan-out job carries it (`ptodsl.fanout`): the text and the plan
    chosen where the command ran (a cluster worker has no tuning cache of ours)."""

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
    from ptodsl.simulator import SimulationError

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


def launches_in_flight(kernel: ir.Kernel, jobs: int) -> int:
    """How many of `kernel`'s launches run at once, each in a worker of its own: at most
    `jobs`, as many as the memory available now holds at one launch's estimate each."""
    limit = memory_limit()
    fit = jobs if limit is None else int(limit // sim_memory.verification_bytes(kernel))
    return max(1, min(jobs, fit, kernel.launch_count))


def check_steps(compiled: Compiled) -> int:
    """The steps `run_check` reports: the golden, and each launch of the kernel."""
    return 1 + compiled.program.launch_count


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
    lines = [
        f"ptodsl check {report.kernel}: {'PASS' if report.ok else 'FAIL'}",
        f"  spec:    {report.spec}",
        f"  kernel:  {report.module}",
        f"  golden:  {report.golden}",
        f"  plan:    {report.plan}",
        f"  inputs:  seed {report.seed}"
        + (f"; ran scaled: {', '.join(report.scaled)}" if report.scaled else ""),
        f"  run:     pypto SIM, {_VERIFY_TEXT[report.verify]}",
    ]
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
    for o in report.outputs:
        if o.mismatched:
            lines.append(f"worst elements of {o.name} (of {o.mismatched} off):")
            lines += [
                f"  {o.name}{list(e.index)}: got {e.got:.8g}, expected {e.expected:.8g}, "
                f"error {abs(e.got - e.expected):.3g} > bound {e.bound:.3g}"
                for e in o.worst
                if not abs(e.got - e.expected) <= e.bound
            ]
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
    lines.append("result: " + ("PASS" if report.ok else "FAIL"))
    return "\n".join(lines) + "\n"
