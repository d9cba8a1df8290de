"""`ptodsl check`: run a kernel in pypto SIM with pass verification on seeded inputs and
compare every output with the spec's torch reference, computed independently in float64."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import attrs
import torch

from ptodsl import ir
from ptodsl.api import Compiled, import_file
from ptodsl.simulator import PassResult, SimRun, run_model

# Per output dtype: |kernel - reference| <= atol + rtol * max(|reference|, mean |reference|)
# for EVERY element. Stricter than KernelBench (1e-2 everywhere); no share may be off.
TOLERANCES = {
    ir.DType.F32: (1e-5, 1e-4),
    ir.DType.F16: (1e-3, 4e-3),
    ir.DType.BF16: (8e-3, 1.6e-2),
}
# Per-pass (tile-level) verification takes ~7 s for a 1M-element tensor; far longer above.
PER_PASS_VERIFY_LIMIT = 1 << 20
PASSING_VERDICTS = {"PASS", "NO_COMPARE"}
# pypto judges each verified pass against our golden with its own, fp32-strict tolerance;
# for f16/bf16 one rounding step of the golden exceeds it. A pass pypto calls FAILED is
# still accepted when its max abs diff is within ptodsl's bound for the output's dtype.

TORCH_DTYPES = {d: getattr(torch, d.torch_name) for d in ir.DType}


def make_input(tensor: ir.Input, index: int, seed: int) -> torch.Tensor:
    """Seeded values in the input's domain. Each input index draws from its own
    distribution (scale and offset differ), so that swapping two operands changes results."""
    generator = torch.Generator().manual_seed(seed * 1009 + index)
    shape = tensor.declared_shape
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
        values = torch.randint(0, 2, shape, generator=generator).to(torch.float64) * 2 - 1
    else:
        # Close enough that norms of differences stay comparable (triplet margins matter),
        # apart enough that swapping two inputs changes every result.
        values = torch.randn(shape, generator=generator, dtype=torch.float64)
        values = values * (1.0 + 0.05 * index) + 0.05 * index * (-1) ** index
    return values.to(TORCH_DTYPES[tensor.type.dtype])


@attrs.frozen
class OutputCheck:
    name: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    mismatched: int
    atol: float
    rtol: float
    problem: str | None = None  # why the comparison could not be made

    @property
    def ok(self) -> bool:
        return self.problem is None and self.mismatched == 0


@attrs.frozen
class CheckReport:
    kernel: str
    seed: int
    verify: str
    outputs: tuple[OutputCheck, ...]
    passes: tuple[PassResult, ...]
    pass_bound: float  # the largest max-abs-diff a verified pass may show
    sim_time_us: float
    total_cycles: int

    def pass_ok(self, result: PassResult) -> bool:
        if result.verdict in PASSING_VERDICTS:
            return True
        return result.max_abs_diff is not None and result.max_abs_diff <= self.pass_bound

    @property
    def failed_passes(self) -> tuple[PassResult, ...]:
        return tuple(p for p in self.passes if not self.pass_ok(p))

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) and not self.failed_passes

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel,
            "ok": self.ok,
            "seed": self.seed,
            "verify": self.verify,
            "sim_time_us": self.sim_time_us,
            "total_cycles": self.total_cycles,
            "outputs": [attrs.asdict(o) | {"ok": o.ok} for o in self.outputs],
            "pass_bound": self.pass_bound,
            "passes": [p._asdict() | {"ok": self.pass_ok(p)} for p in self.passes],
        }


def compare(
    name: str, actual: torch.Tensor, expected: torch.Tensor, dtype: ir.DType
) -> OutputCheck:
    atol, rtol = TOLERANCES[dtype]
    shape = tuple(expected.shape)
    if tuple(actual.shape) != shape:
        problem = f"kernel returned shape {list(actual.shape)}, expected {list(shape)}"
        return OutputCheck(name, shape, math.inf, math.inf, expected.numel(), atol, rtol, problem)
    if not torch.isfinite(expected).all():
        problem = "the reference is not finite here: declare an input domain (e.g. `in positive`)"
        return OutputCheck(name, shape, math.nan, math.nan, 0, atol, rtol, problem)
    if expected.numel() and not expected.any():
        problem = "the reference is 0 everywhere for these inputs, so it proves nothing"
        return OutputCheck(name, shape, math.nan, math.nan, 0, atol, rtol, problem)
    actual = actual.to(torch.float64)
    error = (actual - expected).abs()
    error = torch.where(torch.isfinite(actual), error, torch.full_like(error, math.inf))
    relative = error / expected.abs().clamp_min(1e-30)
    # An element near zero that is the sum of many terms (a matmul or reduction output)
    # carries the rounding of those terms: its relative bound uses the output's typical
    # (mean) magnitude. Every element is still checked; none may be off.
    magnitude = expected.abs().clamp_min(float(expected.abs().mean()))
    mismatched = int((error > atol + rtol * magnitude).sum())
    max_abs = float(error.max()) if error.numel() else 0.0
    max_rel = float(relative.max()) if relative.numel() else 0.0
    return OutputCheck(name, shape, max_abs, max_rel, mismatched, atol, rtol)


@attrs.frozen
class Case:
    """What one check runs: every kernel input (weights included, in declaration order), the
    `ModelNew` arguments, `forward`'s scalars, and the expected outputs."""

    inputs: list[torch.Tensor]
    init_kwargs: dict[str, ir.ParamValue]
    forward_scalars: list[float]
    expected: tuple[torch.Tensor, ...]

    def forward_and_state(
        self, checked: ir.Kernel
    ) -> tuple[list[torch.Tensor | float], dict[str, torch.Tensor]]:
        """`ModelNew.forward`'s arguments, and the weights' values to load as module state."""
        pairs = list(zip(checked.inputs, self.inputs, strict=True))
        tensors = [value for tensor, value in pairs if tensor.init is None]
        state = {tensor.name: value for tensor, value in pairs if tensor.init is not None}
        return [*tensors, *self.forward_scalars], state


def spec_case(compiled: Compiled, seed: int) -> Case:
    """Seeded inputs and weights in each one's domain, params at their values, and the spec's
    own torch reference evaluated in float64."""
    checked = compiled.lowered.checked
    inputs = [make_input(tensor, index, seed) for index, tensor in enumerate(checked.inputs)]
    missing = [p.name for p in checked.params if p.default is None]
    if missing:
        raise ValueError(f"params without a value cannot be checked: {', '.join(missing)}")
    init_kwargs = {p.name: p.default for p in checked.init_params}
    forward_scalars = [p.default for p in checked.forward_params]
    expected = evaluate_reference(compiled, inputs, init_kwargs, forward_scalars)
    return Case(inputs, init_kwargs, forward_scalars, expected)


def evaluate_reference(
    compiled: Compiled,
    inputs: list[torch.Tensor],
    init_kwargs: dict[str, ir.ParamValue],
    forward_scalars: list[float],
) -> tuple[torch.Tensor, ...]:
    """The spec's torch reference in float64 (fixed params are constants inside it)."""
    fixed = {p.name for p in compiled.lowered.checked.params if p.fixed}
    kwargs = {name: value for name, value in init_kwargs.items() if name not in fixed}
    with torch.no_grad():
        expected = compiled.reference.reference(
            *(t.to(torch.float64) for t in inputs), *forward_scalars, **kwargs
        )
    return expected if isinstance(expected, tuple) else (expected,)


def problem_case(compiled: Compiled, problem_path: Path, seed: int) -> Case:
    """The problem's own inputs and init arguments, checked against the spec's declarations,
    and its own Model's output (in float64) as the golden. The Model's parameters, matched
    to the spec's weights in order, get seeded random values in both models, so that a
    kernel ignoring a weight cannot pass on ones and zeros."""
    checked = compiled.lowered.checked
    try:
        problem = import_file(problem_path, f"ptodsl_problem_{problem_path.stem}_{seed}")
        torch.manual_seed(seed)
        init_values = list(problem.get_init_inputs())
        given = list(problem.get_inputs())
        model = problem.Model(*init_values)
    except Exception as error:  # the problem file is the user's code: report, don't crash
        raise ValueError(f"cannot load {problem_path}: {type(error).__name__}: {error}") from None
    init_kwargs = _init_arguments(checked, init_values)
    tensors = [v for v in given if isinstance(v, torch.Tensor)]
    scalars = [float(v) for v in given if not isinstance(v, torch.Tensor)]
    arguments = checked.tensor_arguments
    if len(tensors) != len(arguments) or len(scalars) != len(checked.forward_params):
        raise ValueError(
            f"the problem's get_inputs() gives {len(tensors)} tensors and {len(scalars)} "
            f"scalars; the spec takes {len(arguments)} tensor inputs and "
            f"{len(checked.forward_params)} forward scalars"
        )
    for tensor, declared in zip(tensors, arguments, strict=True):
        _expect_tensor(f"input `{declared.name}`", tensor, declared, "the problem gives")
    weights = _randomized_weights(checked, model, seed)
    by_name = dict(zip((t.name for t in arguments), tensors, strict=True))
    inputs = [by_name[t.name] if t.init is None else weights[t.name] for t in checked.inputs]
    model = model.double()
    with torch.no_grad():
        expected = model(*(v.double() if isinstance(v, torch.Tensor) else v for v in given))
    expected = expected if isinstance(expected, tuple) else (expected,)
    if len(expected) != len(checked.outputs):
        raise ValueError(
            f"the problem's Model returns {len(expected)} outputs, the spec declares "
            f"{len(checked.outputs)}"
        )
    for output, value in zip(checked.outputs, expected, strict=True):
        if tuple(value.shape) != output.declared_shape:
            raise ValueError(
                f"output `{output.name}`: the problem's Model returns {list(value.shape)}, "
                f"the spec declares {list(output.declared_shape)}"
            )
    return Case(inputs, init_kwargs, scalars, expected)


def _init_arguments(checked: ir.Kernel, init_values: list) -> dict[str, ir.ParamValue]:
    """The spec's init params given the problem's `get_init_inputs()`, in order; a fixed
    param must equal the value its kernel is built for."""
    params = checked.init_params
    if len(init_values) > len(params):
        raise ValueError(
            f"the problem builds Model with {len(init_values)} arguments; the spec declares "
            f"{len(params)} params ({', '.join(p.name for p in params) or 'none'})"
        )
    init_kwargs = {p.name: p.default for p in params}
    for param, value in zip(params, init_values, strict=False):
        if not param.fixed:
            init_kwargs[param.name] = float(value)
            continue
        given = tuple(value) if isinstance(value, list | tuple) else value
        if given != param.default:
            raise ValueError(
                f"param `{param.name}`: the problem builds Model with {given!r}, the spec's "
                f"kernel is built for {param.default!r}"
            )
    return init_kwargs


def _expect_tensor(what: str, tensor: torch.Tensor, declared: ir.Input, source: str) -> None:
    torch_dtype = TORCH_DTYPES[declared.type.dtype]
    if tuple(tensor.shape) != declared.declared_shape or tensor.dtype != torch_dtype:
        raise ValueError(
            f"{what}: {source} {tensor.dtype} {list(tensor.shape)}, the spec declares "
            f"{declared.type.dtype.value} {list(declared.declared_shape)}"
        )


def _randomized_weights(checked: ir.Kernel, model: torch.nn.Module, seed: int) -> dict:
    parameters = list(model.parameters())
    weights = checked.weights
    if len(parameters) != len(weights):
        shapes = ", ".join(str(list(p.shape)) for p in parameters) or "none"
        raise ValueError(
            f"the problem's Model has {len(parameters)} parameters ({shapes}); the spec "
            f"declares {len(weights)} weights ({', '.join(w.name for w in weights) or 'none'})"
        )
    values = {}
    for parameter, weight in zip(parameters, weights, strict=True):
        _expect_tensor(f"weight `{weight.name}`", parameter.detach(), weight, "the problem has")
        initial = getattr(torch, weight.init)(parameter.shape, dtype=parameter.dtype)
        if not torch.equal(parameter.detach(), initial):
            raise ValueError(
                f"weight `{weight.name}`: the problem's Model does not start it as "
                f"`{weight.init}`, so ModelNew would start from different values"
            )
        index = checked.inputs.index(weight)
        values[weight.name] = make_input(weight, index, seed)
        with torch.no_grad():
            parameter.copy_(values[weight.name])
    return values


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
) -> CheckReport:
    """Checks `compiled`'s generated module, or the module at `kernel_path`, against the spec's
    torch reference on seeded inputs, or with `against`, against a KernelBench-format problem
    file: its `Model(*get_init_inputs())` on its own `get_inputs()` is the golden."""
    case = problem_case(compiled, against, seed) if against else spec_case(compiled, seed)
    expected = case.expected
    checked = compiled.lowered.checked
    arguments, state = case.forward_and_state(checked)
    lowered = compiled.kernel
    goldens = [
        e.reshape(o.kernel_shape).to(TORCH_DTYPES[o.type.dtype])
        for e, o in zip(expected, lowered.outputs, strict=True)
    ]
    verify = choose_verify(checked, passes)
    with tempfile.TemporaryDirectory(prefix="ptodsl-check-") as scratch:
        if kernel_path is None:
            kernel_path = Path(scratch) / f"{compiled.name}.py"
            kernel_path.write_text(compiled.source, encoding="utf-8")
        run: SimRun = run_model(
            kernel_path,
            case.init_kwargs,
            arguments,
            goldens=goldens,
            kernel_inputs=len(case.inputs),
            verify=verify,
            state=state,
        )
    outputs = tuple(
        compare(o.name, actual, e, o.type.dtype)
        for o, actual, e in zip(checked.outputs, run.outputs, expected, strict=False)
    )
    if len(run.outputs) != len(checked.outputs):
        problem = (
            f"kernel returned {len(run.outputs)} outputs, the spec declares {len(checked.outputs)}"
        )
        outputs += (OutputCheck("(outputs)", (), math.inf, math.inf, 1, 0.0, 0.0, problem),)
    return CheckReport(
        kernel=compiled.name,
        seed=seed,
        verify=verify,
        outputs=outputs,
        passes=run.pass_results,
        pass_bound=max(
            TOLERANCES[o.type.dtype][0] + TOLERANCES[o.type.dtype][1] * float(e.abs().max())
            for o, e in zip(checked.outputs, expected, strict=True)
        ),
        sim_time_us=run.sim_time_us,
        total_cycles=run.total_cycles,
    )


def format_report(report: CheckReport) -> str:
    verify_text = {
        "all": "graph and per-pass (tile-level) verification",
        "graph": "graph-level verification",
        "none": "no verification",
    }[report.verify]
    rows = [("output", "shape", "max abs err", "max rel err", "tolerance", "result")]
    for o in report.outputs:
        result = "ok" if o.ok else (o.problem or f"FAIL: {o.mismatched} elements off")
        rows.append(
            (
                o.name,
                str(list(o.shape)),
                f"{o.max_abs_error:.3g}",
                f"{o.max_rel_error:.3g}",
                f"atol {o.atol:g} rtol {o.rtol:g}",
                result,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"ptodsl check {report.kernel}: pypto SIM, {verify_text}, seed {report.seed}"]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    if report.passes:
        failed = report.failed_passes
        summary = f"{len(report.passes)} pass checks, " + (
            "all passed" if not failed else f"{len(failed)} failed"
        )
        lines.append(f"pypto pass verification: {summary}")
        for p in report.passes:
            diff = "" if p.max_abs_diff is None else f" (max abs diff {p.max_abs_diff:.3g})"
            accepted = ""
            if p.verdict not in PASSING_VERDICTS and report.pass_ok(p):
                accepted = f", within ptodsl's bound {report.pass_bound:.3g}: ok"
            lines.append(f"  {p.pass_name}: {p.verdict}{diff}{accepted}")
    lines.append(
        f"simulated time: {report.sim_time_us:.2f} us (AICore end-to-end), "
        f"{report.total_cycles} cycles"
    )
    lines.append("result: " + ("PASS" if report.ok else "FAIL"))
    return "\n".join(lines) + "\n"
