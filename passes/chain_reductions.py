"""Splits a reduction over several axes into a chain of one-axis reductions: PyPTO reduces
one axis per call. Every reduction comes out with a single axis in `axes`. Outer axes go first (adds
across tiles) and the last axis last: a last-axis row sum over 16384-element tiles feeding
another reduction makes pypto 0.2.0 spill UB and its simulator fail ("[SIMULATION]:
hasCall=0 opSequenceAfterOOO_", BatchNorm and GroupNorm at full size); this order passes and
was the fastest measured (BatchNorm 1205 us against 1369 us with halved tiles).
Rows of at most SHORT_ROW elements are the exception: their sums go first, each tile's rows
summed independently, and the outer adds follow on the partials. An outer-first chain adds
every tile into one partial row, one after another: the global sum of squares over
[262144, 256] took 450 us that way and 259 us rows first (the rule book's baseline: 276 us),
the MSE over [128, 4096] 43.8 us and 23.7 us (baseline 31.0 us).
Axes that could merge were merged already, so a chain is left only for axes that are not
adjacent (e.g. axes 0 and 2 of [A, B, C])."""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import REDUCTIONS

# Rows no longer than this are summed first (measured up to 4096; BatchNorm spilled with 65536).
SHORT_ROW = 4096


def _order(axes: tuple[int, ...], shape: tuple[int, ...]) -> list[int]:
    last = len(shape) - 1
    ordered = sorted(axes)
    if len(ordered) > 1 and ordered[-1] == last and shape[last] <= SHORT_ROW:
        return [last, *ordered[:-1]]
    return ordered


def _chained(node: ir.Expr) -> ir.Expr:
    if not (isinstance(node, ir.Op) and node.op in REDUCTIONS):
        return node
    (value,) = node.operands
    for axis in _order(node.attrs.axes, value.type.shape):
        one_axis = attrs.evolve(node.attrs, axes=(axis,), keepdim=True)
        value = ir.op(node.op, value, span=node.span, attributes=one_axis)
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
