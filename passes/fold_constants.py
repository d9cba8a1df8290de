"""Folds arithmetic on literals (`-1.0`, `2.0 * 0.5`) into single constants."""

from __future__ import annotations

import math

from ptodsl import ir
from ptodsl.diagnostics import SpecError

SCALAR_FUNCTIONS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "neg": lambda a: -a,
    "exp": math.exp,
    "log": math.log,
    "sqrt": math.sqrt,
    "rsqrt": lambda a: 1.0 / math.sqrt(a),
    "abs": abs,
    "reciprocal": lambda a: 1.0 / a,
    "sigmoid": lambda a: 1.0 / (1.0 + math.exp(-a)),
    "tanh": math.tanh,
    "relu": lambda a: max(a, 0.0),
    "log1p": math.log1p,
    "expm1": math.expm1,
    "maximum": max,
    "minimum": min,
    "clamp": lambda a, lo, hi: min(max(a, lo), hi),
}


def _fold(node: ir.Expr) -> ir.Expr:
    if not isinstance(node, ir.Op) or not all(isinstance(o, ir.Const) for o in node.operands):
        return node
    function = SCALAR_FUNCTIONS[node.op]
    try:
        value = float(function(*(o.value for o in node.operands)))
    except (ArithmeticError, ValueError, TypeError):  # TypeError: a complex result
        value = math.nan
    if not math.isfinite(value):
        raise SpecError(f"`{ir.format_expr(node)}` has no finite value", node.span)
    return ir.Const(value, node.span)


def fold_constants(kernel: ir.Kernel) -> ir.Kernel:
    return kernel.map_body(_fold)
