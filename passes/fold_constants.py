"""Folds arithmetic on literals (`-1.0`, `2.0 * 0.5`) into single constants, and checks that
arithmetic on params stays finite at the values the kernel is built for (`exp(-a)` at
`a = -1000` is a located error here, as `exp(1000.0)` is, not an overflow in `check`)."""

from __future__ import annotations

import math

from ptodsl.frontend.diagnostics import SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _value(node: ir.Op, operands: list[float], at: str = "") -> float:
    """The op's value on `operands`; not finite (or beyond f32, the kernel's scalar
    operands' type) is a located error."""
    function = ops.lookup(node.op).fold
    if function is None:
        raise ops.UnknownOp(f"op `{node.op}` has no constant folding, yet has only constants")
    try:
        value = float(function(*operands))
    except (ArithmeticError, ValueError, TypeError):  # TypeError: a complex result
        value = math.nan
    if math.isinf(value) and any(math.isinf(operand) for operand in operands):
        return value  # `-inf`: an infinity the spec writes (a mask's fill), kept as it is
    if not math.isfinite(value):
        fix = "the kernel is built for these param values: give ones it is finite at"
        fix = fix if at else None
        raise SpecError(f"`{ir.format_expr(node)}` has no finite value{at}", node.span, note=fix)
    if not ir.DType.F32.holds(value):
        raise SpecError(
            f"`{ir.format_expr(node)}` is {value:.6g}{at}, beyond f32's range",
            node.span,
            note="a kernel's scalar operands are f32: keep scalar arithmetic within ±3.4e38",
        )
    return value


def _fold(node: ir.Expr) -> ir.Expr:
    if not isinstance(node, ir.Op) or not all(isinstance(o, ir.Const) for o in node.operands):
        return node
    return ir.Const(_value(node, [o.value for o in node.operands]), node.span)


def _scalar_values(node: ir.Expr, params: dict[str, float], at: str) -> float | None:
    """A scalar expression's value at the params' values (None: it reads no known value)."""
    if isinstance(node, ir.Const):
        return node.value
    if isinstance(node, ir.Ref):
        return params.get(node.name)
    operands = [_scalar_values(operand, params, at) for operand in node.operands]
    if not ir.is_scalar(node) or any(value is None for value in operands):
        return None
    return _value(node, operands, at)


def fold_constants(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    folded = kernel.map_body(_fold)
    params = {
        p.name: float(p.default)
        for p in kernel.params
        if isinstance(p.default, int | float) and not isinstance(p.default, bool) and not p.fixed
    }
    if params:
        at = " at " + ", ".join(f"{name} = {value:g}" for name, value in params.items())
        for node in (n for stmt in folded.body for n in ir.walk(stmt.value)):
            if isinstance(node, ir.Op) and ir.is_scalar(node):
                _scalar_values(node, params, at)
    return folded
