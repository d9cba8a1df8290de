"""Moves arithmetic on params out of the kernel body.

Params are closure constants of the kernel factory, so `alpha * 2.0` is plain Python
arithmetic: the factory computes it once, and the kernel body sees one scalar name.
Arithmetic on literals alone was folded already.
"""

from __future__ import annotations

import itertools

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def hoist_scalars(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    scalar_lets: list[ir.Let] = []
    count = itertools.count()

    def fresh_name() -> str:
        return ir.generated_name(f"scalar{next(count)}")

    def hoist(node: ir.Expr) -> ir.Expr:
        if not isinstance(node, ir.Op) or ir.is_scalar(node):
            return node
        operands = []
        for operand in node.operands:
            if isinstance(operand, ir.Op) and ir.is_scalar(operand):
                name = fresh_name()
                scalar_lets.append(ir.Let(name, operand, operand.span))
                operand = ir.Ref(name, ir.SCALAR, operand.span)
            operands.append(operand)
        return attrs.evolve(node, operands=tuple(operands))

    body: list[ir.Stmt] = []
    for stmt in kernel.body:
        if ir.is_scalar(stmt.value):
            body.append(stmt)  # a user's scalar `let` is plain Python in the factory already
            continue
        value = ir.map_expr(stmt.value, hoist)
        body.extend(scalar_lets)
        scalar_lets.clear()
        body.append(attrs.evolve(stmt, value=value))
    return attrs.evolve(kernel, body=tuple(body))
