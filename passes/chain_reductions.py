"""Splits a reduction over several axes into a chain of one-axis reductions, innermost axis
first: PyPTO reduces one axis per call. Every reduction comes out with a single `axis`.
Axes that could merge were merged already, so a chain is left only for axes that are not
adjacent (e.g. axes 0 and 2 of [A, B, C])."""

from __future__ import annotations

import attrs

from ptodsl import ir
from ptodsl.passes.align_axes import REDUCTIONS


def _chained(node: ir.Expr) -> ir.Expr:
    if not (isinstance(node, ir.Op) and node.op in REDUCTIONS):
        return node
    (value,) = node.operands
    for axis in sorted(node.attr("axes"), reverse=True):
        shape = tuple(1 if i == axis else size for i, size in enumerate(value.type.shape))
        value = ir.Op(
            node.op,
            (value,),
            attrs.evolve(node.type, shape=shape),
            node.span,
            (("axis", axis), ("keepdim", True)),
        )
    return value


def chain_reductions(kernel: ir.Kernel) -> ir.Kernel:
    return kernel.map_body(_chained)
