"""Splits a reduction over several axes into a chain of one-axis reductions: PyPTO reduces
one axis per call. Every reduction comes out with a single axis in `axes`. Outer axes go first (adds
across tiles) and the last axis last: a last-axis row sum over 16384-element tiles feeding
another reduction makes pypto 0.2.0 spill UB and its simulator fail ("[SIMULATION]:
hasCall=0 opSequenceAfterOOO_", BatchNorm and GroupNorm at full size); this order passes and
was the fastest measured (BatchNorm 1205 us against 1369 us with halved tiles).
Axes that could merge were merged already, so a chain is left only for axes that are not
adjacent (e.g. axes 0 and 2 of [A, B, C])."""

from __future__ import annotations

import attrs

from ptodsl import ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import REDUCTIONS


def _chained(node: ir.Expr) -> ir.Expr:
    if not (isinstance(node, ir.Op) and node.op in REDUCTIONS):
        return node
    (value,) = node.operands
    for axis in sorted(node.attrs.axes):
        shape = tuple(1 if i == axis else size for i, size in enumerate(value.type.shape))
        value = ir.Op(
            node.op,
            (value,),
            attrs.evolve(node.type, shape=shape),
            node.span,
            attrs.evolve(node.attrs, axes=(axis,), keepdim=True),
        )
    return value


def chain_reductions(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    return kernel.map_body(_chained)


def chain_axes(node: ir.Expr) -> set[int]:
    """The axes a statement's chain of reductions reduces (empty if it is not one)."""
    axes: set[int] = set()
    while isinstance(node, ir.Op) and node.op in REDUCTIONS:
        axes.update(node.attrs.axes)
        node = node.operands[0]
    return axes
