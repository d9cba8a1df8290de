"""Splits broadcasts that stretch an operand along several axes into one axis per op.

PyPTO 0.2.0 lets each op broadcast an operand along at most one axis ("Only allow to expand
one axis"). After axis merging, `x[B, C, HW] * w[1, C, 1]` stretches `w` along two axes, so
`w` first goes through `expand(w)` to `[B, C, 1]` (`pypto.expand_clone`), and the multiply
stretches the rest. The longest stretched axis is the one left to the op, so that explicit
copies stay small (inside a loop, codegen sizes them to the block).
"""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _expanded(operand: ir.Expr, result: tuple[int, ...]) -> ir.Expr:
    shape = operand.type.shape
    stretched = [axis for axis, (s, r) in enumerate(zip(shape, result, strict=True)) if s != r]
    # The op itself stretches the longest axis; explicit copies take the short ones, so
    # the intermediates stay small.
    stretched.sort(key=lambda axis: result[axis])
    for axis in stretched[:-1]:
        shape = shape[:axis] + (result[axis],) + shape[axis + 1 :]
        operand = ir.op("expand", operand, span=operand.span, attributes=ir.Expand(shape))
    return operand


def _one_axis_broadcasts(node: ir.Expr) -> ir.Expr:
    """Only ops that broadcast: a crop's or a reduction's operand is larger than its result,
    a position count reads only its operand's shape."""
    if not isinstance(node, ir.Op) or ir.is_scalar(node):
        return node
    if ops.lookup(node.op).kind not in ops.BROADCASTING:
        return node
    result = node.type.shape
    operands = tuple(
        _expanded(o, result) if isinstance(o.type, ir.TensorType) else o for o in node.operands
    )
    return attrs.evolve(node, operands=operands) if operands != node.operands else node


def expand_broadcasts(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    return kernel.map_body(_one_axis_broadcasts)
