"""Folds the reshapes the front end puts around a matmul with split axes.

A matmul operand declared with a split axis (`weight fc: linear(K, G * CG)`: `fc.weight`
is `[G * CG, K]`, logically `[G, CG, K]`) is read by the cube in its declared layout, and
the product's columns split the same way (`fc(x)` is `[B, G, CG]`, GroupNorm's groups of a
linear layer's output). The checked IR says so with reshapes (what the torch reference
computes); here they fold into the matmul: its operands are typed in their declared
layout, and its result in the split one, which codegen reshapes (the same elements).
Other reshapes (`h.reshape(B, G, CG)` of any value) stay for `align_axes`.
"""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _fold(node: ir.Expr) -> ir.Expr:
    if not (isinstance(node, ir.Op) and node.op in ("reshape", "matmul")):
        return node
    if node.op == "matmul":  # operands in their declared layout
        return attrs.evolve(node, operands=tuple(map(_declared, node.operands)))
    (operand,) = node.operands
    if isinstance(operand, ir.Op) and operand.op == "matmul":
        if ir.splits_into(ir.product_shape(operand), node.type.shape):
            return attrs.evolve(operand, type=node.type)
    return node  # a reshape of any other value: align_axes splits the axes around it


def _declared(operand: ir.Expr) -> ir.Expr:
    if isinstance(operand, ir.Op) and operand.op == "reshape":
        (declared,) = operand.operands
        assert isinstance(declared, ir.Ref), "a matmul operand is a declared tensor"
        return attrs.evolve(declared, type=operand.type)
    return operand


def fold_reshapes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    return kernel.map_body(_fold)
