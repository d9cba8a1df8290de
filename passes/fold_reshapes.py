"""Folds the reshapes the front end puts around a matmul with split axes.

A matmul operand declared with a split axis (`weight fc: linear(K, G * CG)`: `fc.weight`
is `[G * CG, K]`, logically `[G, CG, K]`) is read by the cube in its declared layout, and
the product's columns split the same way (`fc(x)` is `[B, G, CG]`, GroupNorm's groups of a
linear layer's output). The checked IR says so with reshapes (what the torch reference
computes); here they fold into the matmul: its operands are typed in their declared
layout, and its result in the split one, which codegen reshapes (the same elements).
"""

from __future__ import annotations

import attrs

from ptodsl import ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _fold(node: ir.Expr) -> ir.Expr:
    if not (isinstance(node, ir.Op) and node.op == "reshape"):
        return node
    (operand,) = node.operands
    if isinstance(operand, ir.Ref):  # a matmul operand, in its declared layout
        return attrs.evolve(operand, type=node.type)
    assert isinstance(operand, ir.Op) and operand.op == "matmul", "reshapes wrap matmuls only"
    return attrs.evolve(operand, type=node.type)


def fold_reshapes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    return kernel.map_body(_fold)
