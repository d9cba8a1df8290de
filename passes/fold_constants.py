"""Folds arithmetic on literals (`-1.0`, `2.0 * 0.5`) into single constants."""

from __future__ import annotations

import math

from ptodsl.frontend.diagnostics import SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _fold(node: ir.Expr) -> ir.Expr:
    if not isinstance(node, ir.Op) or not all(isinstance(o, ir.Const) for o in node.operands):
        return node
    function = ops.lookup(node.op).fold
    if function is None:
        raise ops.UnknownOp(f"op `{node.op}` has no constant folding, yet has only constants")
    try:
        value = float(function(*(o.value for o in node.operands)))
    except (ArithmeticError, ValueError, TypeError):  # TypeError: a complex result
        value = math.nan
    if not math.isfinite(value):
        raise SpecError(f"`{ir.format_expr(node)}` has no finite value", node.span)
    return ir.Const(value, node.span)


def fold_constants(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    return kernel.map_body(_fold)
