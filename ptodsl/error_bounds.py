"""How far a correct kernel's output may be from the exact result, element by element.

The checked spec is evaluated in float64 a second time, carrying beside every value its
*error scale*: a first-order bound, in units of the dtype's rounding unit, on how far a
correct low-precision evaluation of that value may drift. Inputs are exact (they are given
in the kernel's dtype); every op adds the rounding of its own result (|value|) to what its
operands' errors become through it (the op's derivative, in magnitudes):

    a + b      s_a + s_b + |a + b|
    a * b      s_a |b| + |a| s_b + |a b|
    exp(a)     exp(a) (s_a + 1)
    sum(a)     sum(s_a) + sum(|a|)        the terms' magnitudes, never the (cancelling) result
    a @ b      s_a @ |b| + |a| @ s_b + |a| @ |b|

A correct kernel then satisfies |kernel - exact| <= atol + rtol * scale for every element;
rtol is a multiple of the rounding unit that absorbs accumulation order and the accuracy of
the hardware's function approximations. Nothing here looks at the tensor's mean: a large
output elsewhere never loosens the bound of a small element.

`axis_ambiguities` reports the reductions whose result the inputs cannot tell from a
reduction over other axes (a kernel reducing the wrong axis would pass).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import attrs
import torch

from ptodsl import ir, ops


@attrs.frozen
class Bounded:
    """A float64 value and its error scale (same shape, >= 0); comparisons carry no scale."""

    value: torch.Tensor
    scale: torch.Tensor


def _exact_scale(value: float) -> float:
    """A constant rounds when the kernel's dtype cannot hold it exactly (0.1, not 0.5)."""
    return 0.0 if float(torch.tensor(value, dtype=torch.float32)) == value else abs(value)


def _scalar(value: float) -> Bounded:
    tensor = torch.tensor(float(value), dtype=torch.float64)
    return Bounded(tensor, torch.tensor(_exact_scale(float(value)), dtype=torch.float64))


def _keep(value: torch.Tensor, axes: Sequence[int], keepdim: bool) -> torch.Tensor:
    return value if keepdim else value.squeeze(tuple(axes)) if axes else value


# Each rule: (operands, the node's attributes) -> Bounded. Rounding of the result is added
# by the caller for elementwise rules (`own` below) so that every rule states only how
# operand errors propagate.
Rule = Callable[[list[Bounded], Mapping[str, object]], Bounded]


def _elementwise(op: ops.OpDef) -> Rule:
    """An elementwise op from the registry: its value (the torch function of its name), how
    operand errors propagate through it (`op.propagate`, in magnitudes), the result's own
    rounding |v| unless it only selects or flips a sign, and `op.hidden`, the magnitude of
    an intermediate the target's formula rounds and then cancels (tanh as 2 sigmoid(2x) - 1
    rounds values near 1 even where tanh is near 0)."""
    function = getattr(torch, op.name)

    def rule(operands: list[Bounded], _attributes: Mapping[str, object]) -> Bounded:
        result = function(*(o.value for o in operands))
        scale = op.propagate(torch, result, *operands)  # type: ignore[misc]
        scale = scale + (result.abs() if op.rounds else 0.0) + op.hidden
        return Bounded(result, scale)

    return rule


def _compare(function: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Rule:
    def rule(operands: list[Bounded], _attributes: Mapping[str, object]) -> Bounded:
        lhs, rhs = operands
        result = function(lhs.value, rhs.value)
        return Bounded(result, torch.zeros(result.shape, dtype=torch.float64))

    return rule


def _where(operands: list[Bounded], _attributes: Mapping[str, object]) -> Bounded:
    condition, if_true, if_false = operands
    value = torch.where(condition.value, if_true.value, if_false.value)
    scale = torch.where(condition.value, if_true.scale, if_false.scale)
    return Bounded(value, scale.expand(value.shape))


def _clamp(operands: list[Bounded], _attributes: Mapping[str, object]) -> Bounded:
    a, low, high = operands
    value = torch.clamp(a.value, low.value, high.value)
    scale = torch.maximum(a.scale, torch.maximum(low.scale, high.scale))
    return Bounded(value, scale.expand(value.shape))


def _pow(operands: list[Bounded], _attributes: Mapping[str, object]) -> Bounded:
    base, exponent = operands
    value = torch.pow(base.value, exponent.value)
    derivative = (exponent.value * torch.pow(base.value, exponent.value - 1)).abs()
    scale = derivative * base.scale + value.abs()
    if float(exponent.scale) > 0:  # an exponent that rounds moves the result by v log|b|
        scale = scale + (value * torch.log(base.value.abs())).abs() * exponent.scale
    return Bounded(value, torch.nan_to_num(scale, nan=math.inf))


def _axes(attributes: Mapping[str, object]) -> tuple[int, ...]:
    return tuple(attributes["axes"])  # type: ignore[arg-type]


def _sum(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    (a,) = operands
    axes, keepdim = _axes(attributes), bool(attributes["keepdim"])
    value = torch.sum(a.value, dim=axes, keepdim=keepdim)
    scale = torch.sum(a.scale + a.value.abs(), dim=axes, keepdim=keepdim)
    return Bounded(value, scale)


def _count(a: Bounded, axes: tuple[int, ...]) -> int:
    return math.prod(a.value.shape[axis] for axis in axes)


def _mean(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    total = _sum(operands, attributes)
    count = _count(operands[0], _axes(attributes))
    value = total.value / count
    return Bounded(value, total.scale / count + value.abs())


def _batchmean(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    total = _sum(operands, attributes)
    value = total.value / operands[0].value.shape[0]
    return Bounded(value, total.scale / operands[0].value.shape[0] + value.abs())


def _var(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    """d var / d x_i = 2 (x_i - mean) / (n - correction): the mean's own error cancels, so a
    two-pass variance rounds like the variance, not like E[x^2]."""
    (a,) = operands
    axes, keepdim = _axes(attributes), bool(attributes["keepdim"])
    correction = int(attributes["correction"])  # type: ignore[call-overload]
    divisor = _count(a, axes) - correction
    value = torch.var(a.value, dim=axes, keepdim=keepdim, correction=correction)
    centred = (a.value - a.value.mean(dim=axes, keepdim=True)).abs()
    propagated = torch.sum(2 * centred * a.scale, dim=axes, keepdim=keepdim) / divisor
    return Bounded(value, propagated + value.abs())


def _extreme(function: Callable[..., torch.Tensor]) -> Rule:
    """amax/amin move by at most the largest error along the axes, and do not round."""

    def rule(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
        (a,) = operands
        axes, keepdim = _axes(attributes), bool(attributes["keepdim"])
        value = function(a.value, dim=axes, keepdim=keepdim)
        return Bounded(value, torch.amax(a.scale, dim=axes, keepdim=keepdim))

    return rule


def _softmax_parts(a: Bounded, axis: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Probabilities p, each exponent's error t = s_a + |a - max| + 1 (the shift rounds,
    exp rounds), and the sum's error E = sum_j p_j t_j, relative to the sum."""
    shifted = a.value - a.value.amax(dim=axis, keepdim=True)
    probabilities = torch.softmax(a.value, dim=axis)
    exponent_error = a.scale + shifted.abs() + 1
    sum_error = torch.sum(probabilities * exponent_error, dim=axis, keepdim=True)
    return probabilities, exponent_error, sum_error


def _softmax(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    (a,) = operands
    p, t, total = _softmax_parts(a, int(attributes["axis"]))  # type: ignore[call-overload]
    return Bounded(p, p * (t + total + 1))


def _log_softmax(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    (a,) = operands
    axis = int(attributes["axis"])  # type: ignore[call-overload]
    _, t, total = _softmax_parts(a, axis)
    value = torch.log_softmax(a.value, dim=axis)
    log_sum = torch.logsumexp(a.value - a.value.amax(dim=axis, keepdim=True), dim=axis).abs()
    return Bounded(value, t + total + log_sum.unsqueeze(axis) + value.abs())


def _logsumexp(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    (a,) = operands
    axis = int(attributes["axis"])  # type: ignore[call-overload]
    keepdim = bool(attributes["keepdim"])
    _, _, total = _softmax_parts(a, axis)
    value = torch.logsumexp(a.value, dim=axis, keepdim=True)
    scale = a.scale.amax(dim=axis, keepdim=True) + total + value.abs()
    return Bounded(_keep(value, (axis,), keepdim), _keep(scale, (axis,), keepdim))


def _matmul(operands: list[Bounded], attributes: Mapping[str, object]) -> Bounded:
    a, b = operands

    def oriented(x: torch.Tensor, flag: str) -> torch.Tensor:
        return x.transpose(-1, -2) if attributes.get(flag) else x

    av, bv = oriented(a.value, "a_trans"), oriented(b.value, "b_trans")
    as_, bs = oriented(a.scale, "a_trans"), oriented(b.scale, "b_trans")
    value = torch.matmul(av, bv)
    scale = torch.matmul(as_, bv.abs()) + torch.matmul(av.abs(), bs)
    return Bounded(value, scale + torch.matmul(av.abs(), bv.abs()))


# Ops whose errors do not follow from an elementwise derivative alone.
_SPECIFIC_RULES: dict[str, Rule] = {
    "clamp": _clamp,
    "pow": _pow,
    "where": _where,
    **{op.name: _compare(getattr(torch, op.name)) for op in ops.of_kind(ops.Kind.COMPARISON)},
    "sum": _sum,
    "mean": _mean,
    "var": _var,
    "amax": _extreme(torch.amax),
    "amin": _extreme(torch.amin),
    "batchmean": _batchmean,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "logsumexp": _logsumexp,
    "matmul": _matmul,
}
RULES: dict[str, Rule] = {
    **{op.name: _elementwise(op) for op in ops.OPS.values() if op.propagate is not None},
    **_SPECIFIC_RULES,
}
REDUCTIONS_OVER_AXES = ("sum", "mean", "var", "amax", "amin")


class _Evaluator:
    def __init__(self, kernel: ir.Kernel, inputs: Sequence[torch.Tensor], params: Mapping):
        self.kernel = kernel
        self.env: dict[str, Bounded] = {}
        for tensor, value in zip(kernel.inputs, inputs, strict=True):
            exact = value.to(torch.float64).reshape(tensor.type.shape)
            self.env[tensor.name] = Bounded(exact, torch.zeros_like(exact))
        for param in kernel.params:
            if param.name in params and not param.fixed:
                self.env[param.name] = _scalar(float(params[param.name]))  # type: ignore[arg-type]
        self.ambiguities: list[str] = []

    def evaluate(self, expr: ir.Expr) -> Bounded:
        if isinstance(expr, ir.Const):
            return _scalar(expr.value)
        if isinstance(expr, ir.Ref):
            return self.env[expr.name]
        operands = [self.evaluate(operand) for operand in expr.operands]
        rule = RULES.get(ops.lookup(expr.op).name)
        if rule is None:
            raise ops.UnknownOp(f"op `{expr.op}` has no error-bound rule")
        attributes = dict(ir.attribute_items(expr.attrs))
        result = rule(operands, attributes)
        if expr.op in REDUCTIONS_OVER_AXES:
            self._note_ambiguous_axes(expr, rule, operands, attributes, result)
        return result

    def _note_ambiguous_axes(
        self,
        expr: ir.Op,
        rule: Rule,
        operands: list[Bounded],
        attributes: dict[str, object],
        result: Bounded,
    ) -> None:
        """Another choice of axes with the same result shape whose result the inputs make
        indistinguishable from this one: a kernel reducing those axes would pass."""
        shape = tuple(operands[0].value.shape)
        axes = _axes(attributes)
        for other in itertools.combinations(range(len(shape)), len(axes)):
            if other == axes:
                continue
            alternative = rule(operands, attributes | {"axes": other})
            if alternative.value.shape != result.value.shape:
                continue
            scale = torch.maximum(result.scale, alternative.scale)
            bound = element_bound(scale, expr.type.dtype)  # type: ignore[union-attr]
            if bool(((alternative.value - result.value).abs() <= bound).all()):
                self.ambiguities.append(
                    f"`{expr.op}` over axes {list(axes)} (spec line {expr.span.line}) gives "
                    f"the same result over axes {list(other)} for these inputs"
                )


def evaluate_bounds(
    kernel: ir.Kernel, inputs: Sequence[torch.Tensor], params: Mapping[str, object]
) -> tuple[list[Bounded], list[str]]:
    """Every output of the checked `kernel` (declared shapes) with its error scale, and the
    reductions whose axes the inputs cannot tell apart."""
    evaluator = _Evaluator(kernel, inputs, params)
    results: dict[str, Bounded] = {}
    for stmt in kernel.body:
        value = evaluator.evaluate(stmt.value)
        if isinstance(stmt, ir.Let):
            evaluator.env[stmt.name] = value
        else:
            results[stmt.output] = value
    outputs = []
    for output in kernel.outputs:
        bounded = results[output.name]
        shape = output.declared_shape
        outputs.append(
            Bounded(
                bounded.value.expand(output.type.shape).reshape(shape),
                bounded.scale.expand(output.type.shape).reshape(shape),
            )
        )
    return outputs, evaluator.ambiguities


# Per output dtype: every element within atol + rtol * scale. f32: rtol is about 67
# rounding units (accumulation order, the hardware's function approximations); atol is a
# floor for values that should be exact zeros or flush to zero, far below any value a
# kernel computes (hidden cancellations are in the rules above, not in atol). f16/bf16
# kernels keep their tolerances of before, 8 and 4 units. Calibrated on every example: the
# largest f32 error is 0.06 of its bound (python -m benchmarks.bounds).
TOLERANCES = {
    ir.DType.F32: (1e-8, 4e-6),
    ir.DType.F16: (1e-3, 4e-3),
    ir.DType.BF16: (8e-3, 1.6e-2),
}
BOUND_RULE = (
    "each element within atol + rtol * scale of the golden; scale is the computation's "
    "own error scale there (every op's rounding and condition, sum(|terms|), |A| @ |B|), "
    "never a mean over the tensor; f32 atol 1e-8 rtol 4e-6, f16 1e-3 4e-3, bf16 8e-3 1.6e-2"
)


def element_bound(scale: torch.Tensor, dtype: ir.DType) -> torch.Tensor:
    """How far each element of a correct kernel's output may be from the exact value."""
    atol, rtol = TOLERANCES[dtype]
    return atol + rtol * scale.to(torch.float64)
