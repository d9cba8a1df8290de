"""Rewrites every op form the target lacks into forms it has.

The rules form one table keyed on the op form (see `ptodsl.ir.target.form`). A rule fires only
when the target does not support the form, and its result is legalized again, so rules may
build on one another (`tanh` is written with `sub(t,s)`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from ptodsl.frontend.diagnostics import SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.ir.target import PYPTO_0_2_0, Target, form
from ptodsl.passes import DEFAULT_CONTEXT, PassContext

Rule = Callable[[ir.Op], ir.Expr]


def _const(value: float, node: ir.Op) -> ir.Const:
    return ir.Const(value, node.span)


def _swapped(node: ir.Op) -> ir.Expr:
    """Commutative op with the scalar first: put the tensor first."""
    lhs, rhs = node.operands
    return ir.op(node.op, rhs, lhs, span=node.span)


_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _mirrored_comparison(node: ir.Op) -> ir.Expr:
    """`c < x` is `x > c`."""
    lhs, rhs = node.operands
    return ir.op(_MIRRORED[node.op], rhs, lhs, span=node.span)


def _scalar_minus_tensor(node: ir.Op) -> ir.Expr:
    """`c - x` as `x * -1 + c`."""
    scalar, tensor = node.operands
    negated = ir.op("mul", tensor, _const(-1.0, node), span=node.span)
    return ir.op("add", negated, scalar, span=node.span)


def _scalar_over_tensor(node: ir.Op) -> ir.Expr:
    """`c / x` as `reciprocal(x) * c`."""
    scalar, tensor = node.operands
    reciprocal = ir.op("reciprocal", tensor, span=node.span)
    if isinstance(scalar, ir.Const) and scalar.value == 1.0:
        return reciprocal
    return ir.op("mul", reciprocal, scalar, span=node.span)


def _scalar_affine(node: ir.Expr) -> tuple[ir.Expr, float, float] | None:
    """(t, a, b) when node is t * a + b (or t * a - b, or t * a) with literal a and b."""
    if not isinstance(node, ir.Op):
        return None
    if node.op == "mul" and isinstance(node.operands[1], ir.Const):
        return node.operands[0], node.operands[1].value, 0.0
    if node.op in ("add", "sub") and isinstance(node.operands[1], ir.Const):
        inner = _scalar_affine(node.operands[0])
        if inner is not None and inner[2] == 0.0:
            offset = node.operands[1].value
            return inner[0], inner[1], offset if node.op == "add" else -offset
    return None


def _negation(node: ir.Op) -> ir.Expr:
    """-x = x * -1; the sign folds into a scalar-affine operand, -(t * a - b) = t * -a + b,
    saving the extra multiply (tanh's rewrite ends in `* 2 - 1`)."""
    affine = _scalar_affine(node.operands[0])
    if affine is None:
        return ir.op("mul", node.operands[0], _const(-1.0, node), span=node.span)
    tensor, scale, offset = affine
    scaled = ir.op("mul", tensor, _const(-scale, node), span=node.span)
    if offset == 0.0:
        return scaled
    return ir.op("add", scaled, _const(-offset, node), span=node.span)


def _tanh(node: ir.Op) -> ir.Expr:
    """tanh(x) = 2 * sigmoid(2x) - 1."""
    doubled = ir.op("mul", node.operands[0], _const(2.0, node), span=node.span)
    scaled = ir.op(
        "mul", ir.op("sigmoid", doubled, span=node.span), _const(2.0, node), span=node.span
    )
    return ir.op("sub", scaled, _const(1.0, node), span=node.span)


# Abramowitz and Stegun 7.1.26: erf(x) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1/(1 + p x)
# for x >= 0, odd in x; absolute error below 1.5e-7.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(node: ir.Op) -> ir.Expr:
    """PyPTO has no erf: sign(x) * (1 - poly(t) * exp(-x^2)) with t = 1 / (1 + p |x|)."""
    (x,) = node.operands

    def op(name: str, *operands: ir.Expr) -> ir.Op:
        return ir.op(name, *operands, span=node.span)

    t = op(
        "reciprocal", op("add", op("mul", op("abs", x), _const(_ERF_P, node)), _const(1.0, node))
    )
    polynomial = op("add", op("mul", t, _const(_ERF_A[4], node)), _const(_ERF_A[3], node))
    for coefficient in reversed(_ERF_A[:3]):
        polynomial = op("add", op("mul", polynomial, t), _const(coefficient, node))
    gauss = op("exp", op("mul", op("mul", x, x), _const(-1.0, node)))
    tail = op("mul", op("mul", polynomial, t), gauss)
    return op("mul", op("sign", x), op("sub", _const(1.0, node), tail))


def _clamp(node: ir.Op) -> ir.Expr:
    """PyPTO's clip rejects 1-D tensors; min(max(x, lo), hi) works at every rank."""
    value, low, high = node.operands
    return ir.op("minimum", ir.op("maximum", value, low, span=node.span), high, span=node.span)


def _expm1(node: ir.Op) -> ir.Expr:
    """PyPTO's expm1 rejects 1-D tensors."""
    return ir.op(
        "sub", ir.op("exp", node.operands[0], span=node.span), _const(1.0, node), span=node.span
    )


def _reduce(
    name: str, operand: ir.Expr, axes: tuple[int, ...], keepdim: bool, node: ir.Op
) -> ir.Op:
    return ir.op(name, operand, span=node.span, attributes=ir.Reduce(axes, keepdim))


def _mean(node: ir.Op) -> ir.Expr:
    """PyPTO has no mean: the sum times 1/count of the reduced elements."""
    (operand,) = node.operands
    axes = node.attrs.axes
    count = math.prod(operand.type.shape[axis] for axis in axes)
    total = _reduce("sum", operand, axes, node.attrs.keepdim, node)
    return ir.op("mul", total, _const(1.0 / count, node), span=node.span)


def _var(node: ir.Op) -> ir.Expr:
    """Two-pass variance, mean((x - mean(x))^2) * n / (n - correction): it avoids the
    cancellation of E[x^2] - E[x]^2 when the mean is large against the spread."""
    (operand,) = node.operands
    axes = node.attrs.axes
    count = math.prod(operand.type.shape[axis] for axis in axes)
    centre = _mean(_reduce("mean", operand, axes, True, node))
    deviation = ir.op("sub", operand, centre, span=node.span)
    squared = ir.op("mul", deviation, deviation, span=node.span)
    total = _reduce("sum", squared, axes, node.attrs.keepdim, node)
    scale = 1.0 / (count - node.attrs.correction)
    return ir.op("mul", total, _const(scale, node), span=node.span)


def _var_one_pass(node: ir.Op) -> ir.Expr:
    """(E[x^2] - E[x]^2) * n / (n - correction): both sums read x in one pass, which the
    rule book's norms use; it loses digits when the mean is large against the spread, so
    only a tuned plan that passes `ptodsl check` takes it."""
    (operand,) = node.operands
    axes, keepdim = node.attrs.axes, node.attrs.keepdim
    count = math.prod(operand.type.shape[axis] for axis in axes)
    square = ir.op("mul", operand, operand, span=node.span)
    mean_square = _mean(_reduce("mean", square, axes, keepdim, node))
    centre = _mean(_reduce("mean", operand, axes, keepdim, node))
    spread = ir.op("sub", mean_square, ir.op("mul", centre, centre, span=node.span), span=node.span)
    scale = count / (count - node.attrs.correction)
    return ir.op("mul", spread, _const(scale, node), span=node.span)


VARIANCE_FORMS = {
    "two_pass": (_var, "two-pass, mean((x - mean(x))^2), chosen over E[x^2] - E[x]^2 for accuracy"),
    "one_pass": (_var_one_pass, "one-pass, E[x^2] - E[x]^2 (a plan choice)"),
}


def _batchmean(node: ir.Op) -> ir.Expr:
    """The sum over every axis times 1/(the leading dim)."""
    (operand,) = node.operands
    total = _reduce("sum", operand, node.attrs.axes, False, node)
    return ir.op("mul", total, _const(1.0 / operand.type.shape[0], node), span=node.span)


def _max_shifted(node: ir.Op) -> tuple[ir.Expr, ir.Expr]:
    """x - max(x, axis, keepdim) (keeps exp finite) and that maximum, for the softmax family."""
    (operand,) = node.operands
    peak = _reduce("amax", operand, (node.attrs.axis,), True, node)
    return ir.op("sub", operand, peak, span=node.span), peak


def _sum_exp(shifted: ir.Expr, node: ir.Op, keepdim: bool = True) -> ir.Op:
    exponential = ir.op("exp", shifted, span=node.span)
    return _reduce("sum", exponential, (node.attrs.axis,), keepdim, node)


def _softmax(node: ir.Op) -> ir.Expr:
    """exp(x - max) / sum(exp(x - max)); the shared parts are bound once by CSE later."""
    shifted, _ = _max_shifted(node)
    return ir.op(
        "div", ir.op("exp", shifted, span=node.span), _sum_exp(shifted, node), span=node.span
    )


def _log_softmax(node: ir.Op) -> ir.Expr:
    """(x - max) - log(sum(exp(x - max)))."""
    shifted, _ = _max_shifted(node)
    log_total = ir.op("log", _sum_exp(shifted, node), span=node.span)
    return ir.op("sub", shifted, log_total, span=node.span)


def _logsumexp(node: ir.Op) -> ir.Expr:
    """log(sum(exp(x - max))) + max, with the axis kept or dropped as asked."""
    shifted, _ = _max_shifted(node)
    keepdim = node.attrs.keepdim
    (operand,) = node.operands
    peak = _reduce("amax", operand, (node.attrs.axis,), keepdim, node)
    log_total = ir.op("log", _sum_exp(shifted, node, keepdim), span=node.span)
    return ir.op("add", log_total, peak, span=node.span)


def _scan_variant(node: ir.Op) -> ir.Expr:
    """PyPTO runs the inclusive running total from the start; the others follow from it and
    the axis's total: exclusive = prefix - x, reverse = total - prefix + x,
    reverse exclusive = total - prefix. (Flipping the axis would need a reversed view.)"""
    (operand,) = node.operands
    axis = node.attrs.axis
    prefix = attrs.evolve(node, attrs=ir.Scan(axis))
    if not node.attrs.reverse:
        return ir.op("sub", prefix, operand, span=node.span)
    total = _reduce("sum", operand, (axis,), True, node)
    suffix = ir.op("sub", total, prefix, span=node.span)
    if node.attrs.exclusive:
        return suffix
    return ir.op("add", suffix, operand, span=node.span)


def _positions(operand: ir.Expr, axis: int, node: ir.Op) -> ir.Op:
    """0, 1, ... along `axis` of `operand`, shaped to broadcast against it."""
    return ir.op("iota", operand, span=node.span, attributes=ir.Along(axis))


def _arg_reduction(node: ir.Op) -> ir.Expr:
    """argmax(x) = min(where(x == max(x), position, count)): the extremum's first position
    (torch's tie rule), counted in floats and converted to the result's integer dtype."""
    (operand,) = node.operands
    (axis,), keepdim = node.attrs.axes, node.attrs.keepdim
    extremum = _reduce("amax" if node.op == "argmax" else "amin", operand, (axis,), True, node)
    hit = ir.op("eq", operand, extremum, span=node.span)
    count = _const(float(operand.type.shape[axis]), node)
    candidates = ir.op("where", hit, _positions(operand, axis, node), count, span=node.span)
    first = _reduce("amin", candidates, (axis,), keepdim, node)
    return ir.cast(first, node.type.dtype)


def _signed_magnitude(node: ir.Op, total: Callable[[ir.Expr], ir.Expr]) -> ir.Expr:
    """A product (or running product) as exp(total(log|x|)) times (-1)^total(x < 0): pypto
    0.2.0 has no product that runs in SIM. A zero factor gives log 0 = -inf, exp(-inf) = 0.
    The sign is 1 - 2 * (n mod 2) of the count n of negative factors, n mod 2 as
    n - 2 floor(n / 2) (pypto's fmod has no SIM pipe either); counts are exact floats."""
    (operand,) = node.operands

    def op(name: str, *operands: ir.Expr) -> ir.Op:
        return ir.op(name, *operands, span=node.span)

    magnitude = op("exp", total(op("log", op("abs", operand))))
    zero, one = _const(0.0, node), _const(1.0, node)
    negative = op("where", op("lt", operand, zero), one, zero)
    count = total(negative)
    halves = op("floor", op("mul", count, _const(0.5, node)))
    parity = op("sub", count, op("mul", halves, _const(2.0, node)))
    sign = op("add", op("mul", parity, _const(-2.0, node)), _const(1.0, node))
    return op("mul", magnitude, sign)


def _prod(node: ir.Op) -> ir.Expr:
    axes, keepdim = node.attrs.axes, node.attrs.keepdim
    return _signed_magnitude(node, lambda terms: _reduce("sum", terms, axes, keepdim, node))


def _cumprod(node: ir.Op) -> ir.Expr:
    """Running products from running sums, in every variant the sums have."""
    return _signed_magnitude(
        node, lambda terms: ir.op("cumsum", terms, span=node.span, attributes=node.attrs)
    )


def _triangle(node: ir.Op) -> ir.Expr:
    """triu keeps x[..., i, j] where j - i >= diagonal, tril where j - i <= diagonal, else 0:
    a select on the difference of two position counts (pypto 0.2.0's triu and tril have no
    simulator pipe)."""
    (operand,) = node.operands
    rank, shape = operand.type.rank, operand.type.shape
    if shape[-1] == shape[-2] == 1:  # one element, on the main diagonal: kept or not
        kept = (node.attrs.diagonal <= 0) if node.op == "triu" else (node.attrs.diagonal >= 0)
        return operand if kept else ir.op("mul", operand, _const(0.0, node), span=node.span)

    def positions(axis: int) -> ir.Expr:
        if shape[axis] == 1:
            return _const(0.0, node)  # the only position
        return _positions(operand, axis, node)

    offset = ir.op("sub", positions(rank - 1), positions(rank - 2), span=node.span)
    keep = ir.op(
        "ge" if node.op == "triu" else "le",
        offset,
        _const(node.attrs.diagonal, node),
        span=node.span,
    )
    return ir.op("where", keep, operand, _const(0.0, node), span=node.span)


RULES: dict[str, Rule] = {
    "mean(t)": _mean,
    "var(t)": _var,
    "batchmean(t)": _batchmean,
    "softmax(t)": _softmax,
    "log_softmax(t)": _log_softmax,
    "logsumexp(t)": _logsumexp,
    "add(s,t)": _swapped,
    "mul(s,t)": _swapped,
    "maximum(s,t)": _swapped,
    "minimum(s,t)": _swapped,
    "sub(s,t)": _scalar_minus_tensor,
    "div(s,t)": _scalar_over_tensor,
    "neg(t)": _negation,
    "tanh(t)": _tanh,
    "clamp(t,s,s)": _clamp,
    "expm1(t)": _expm1,
    "erf(t)": _erf,
    "triu(t)": _triangle,
    "tril(t)": _triangle,
    "prod(t)": _prod,
    "cumprod(t)": _cumprod,
    "cumprod[exclusive](t)": _cumprod,
    "cumprod[reverse](t)": _cumprod,
    "cumprod[reverse,exclusive](t)": _cumprod,
    "argmax(t)": _arg_reduction,
    "argmin(t)": _arg_reduction,
    "cumsum[exclusive](t)": _scan_variant,
    "cumsum[reverse](t)": _scan_variant,
    "cumsum[reverse,exclusive](t)": _scan_variant,
    **{f"{name}(s,t)": _mirrored_comparison for name in _MIRRORED},
}


def _unreachable_ops() -> list[str]:
    """Ops the target never runs and no rule rewrites: every spec using one would fail."""
    rewritten = {rule_form.split("(")[0] for rule_form in RULES}
    return [
        op.name
        for op in ops.OPS.values()
        if op.kind is not ops.Kind.LAYOUT and not op.native and op.name not in rewritten
    ]


if _unreachable_ops():  # checked at import, like the registry itself
    raise AssertionError(f"ops neither native nor legalized: {_unreachable_ops()}")


def legalize_expr(
    node: ir.Expr, target: Target = PYPTO_0_2_0, rules: dict[str, Rule] = RULES
) -> ir.Expr:
    def rewrite(expr: ir.Expr) -> ir.Expr:
        if not isinstance(expr, ir.Op) or ir.is_scalar(expr) or target.supports(expr):
            return expr
        rule = rules.get(form(expr))
        if rule is None:
            raise SpecError(f"`{form(expr)}` has no lowering for {target.name}", expr.span)
        return ir.map_expr(rule(expr), rewrite)

    return ir.map_expr(node, rewrite)


def legalize(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    """`tuning` may pick the variance form (see VARIANCE_FORMS); two-pass by default."""
    target, tuning = ctx.target, ctx.tuning
    variance = tuning.variance or "two_pass"
    rule, reason = VARIANCE_FORMS[variance]
    decisions = tuple(
        f"var at {node.span.line}:{node.span.column}: {reason}"
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and node.op == "var"
    )
    rules = {**RULES, "var(t)": rule}
    legal = kernel.map_values(lambda value: legalize_expr(value, target, rules))
    return attrs.evolve(legal, decisions=kernel.decisions + decisions, target_forms=True)
