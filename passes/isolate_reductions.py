"""Gives every reduction a statement of its own, so that tile phases can change between them.

A reduction nested in a larger expression is bound to a `let` named `_r<n>` first (a matmul
`_m<n>`, a window `_w<n>`, a convolution `_c<n>`); a window's operand, when it is not a
named value, too: a window phase reads one tensor. A store
of the form `out = f(reduction)`, where `f` is elementwise with only scalars besides, becomes
`out = reduction` then `out = f(out)`: the reduction then writes straight into the output,
which is where a loop over the reduced axis must accumulate (a temporary accumulator gives
silently wrong results on pypto 0.2.0), and `f` runs once on the small result.
"""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import REDUCTIONS


def is_window(node: ir.Expr) -> bool:
    return isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.WINDOW


def is_conv(node: ir.Expr) -> bool:
    return isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.CONV


def is_reduction(node: ir.Expr) -> bool:
    """Reductions, matmuls, windows and convolutions: ops that get a statement, and a
    phase, of their own."""
    return isinstance(node, ir.Op) and (
        node.op in REDUCTIONS or node.op == "matmul" or is_window(node) or is_conv(node)
    )


def _outer_reductions(node: ir.Expr) -> list[ir.Op]:
    if is_reduction(node):
        return [node]
    if isinstance(node, ir.Op):
        return [r for operand in node.operands for r in _outer_reductions(operand)]
    return []


def _only_scalars_besides(node: ir.Expr, reduction: ir.Op) -> bool:
    if node is reduction:
        return True
    if isinstance(node, ir.Op) and not ir.is_scalar(node):
        return all(_only_scalars_besides(operand, reduction) for operand in node.operands)
    return ir.is_scalar(node)


def isolate_reductions(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    body: list[ir.Stmt] = []
    outputs = {o.name: o for o in kernel.outputs}

    def bind_nested(value: ir.Expr) -> ir.Expr:
        """`value` with every reduction below its top bound to a `let` of its own."""

        def let(node: ir.Expr, prefix: str) -> ir.Ref:
            taken = sum(1 for s in body if isinstance(s, ir.Let) and s.name.startswith(prefix))
            name = f"{prefix}{taken}"
            body.append(ir.Let(name, node, node.span))
            return ir.Ref(name, node.type, node.span)

        def bind(node: ir.Expr) -> ir.Expr:
            if is_window(node):
                node = named_operand(node)
            if not is_reduction(node):
                return node
            prefix = "_m" if node.op == "matmul" else "_w" if is_window(node) else "_r"
            return let(node, "_c" if is_conv(node) else prefix)

        def named_operand(window: ir.Op) -> ir.Op:
            (operand,) = window.operands
            if isinstance(operand, ir.Ref):
                return window
            return attrs.evolve(window, operands=(let(operand, "_w"),))

        if is_reduction(value):
            operands = tuple(ir.map_expr(operand, bind) for operand in value.operands)
            value = attrs.evolve(value, operands=operands)
            return named_operand(value) if is_window(value) else value
        return ir.map_expr(value, bind)

    for stmt in kernel.body:
        reductions = _outer_reductions(stmt.value)
        if (
            isinstance(stmt, ir.Store)
            and not is_reduction(stmt.value)
            and len(reductions) == 1
            and reductions[0].type == stmt.value.type
            and _only_scalars_besides(stmt.value, reductions[0])
        ):
            (reduction,) = reductions
            body.append(attrs.evolve(stmt, value=bind_nested(reduction)))
            output = ir.Ref(stmt.output, outputs[stmt.output].type, stmt.span)
            output = attrs.evolve(output, type=reduction.type)
            finish = ir.map_expr(stmt.value, lambda n, r=reduction, o=output: o if n is r else n)
            body.append(attrs.evolve(stmt, value=finish))
            continue
        body.append(attrs.evolve(stmt, value=bind_nested(stmt.value)))
    return attrs.evolve(kernel, body=tuple(body))
