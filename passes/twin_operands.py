"""Gives an input that is both a matmul (or convolution) operand and read elsewhere a twin
for the cube.

The cube reads a matmul or convolution operand in its declared layout, while every other
use sees the input in the kernel's frame of axes (align_axes), which may merge, stretch or
reorder its axes. A residual connection around a linear layer (`fc(x) + x`, or a
convolution's `conv(x) + x`) reads `x` both ways: the cube then reads a twin, `_operand_x`,
a second kernel input that forward fills from the same tensor (a reshape of the same data,
no copy). The twin comes first among the passes so that launches slice it as the operand
it is.
"""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def read_by(kernel: ir.Kernel) -> tuple[set[str], set[str]]:
    """Names of the inputs matmuls and convolutions read, and of those other ops read."""
    inputs = {tensor.name for tensor in kernel.inputs}
    operands: set[str] = set()
    elsewhere: set[str] = set()
    for stmt in kernel.body:
        for node in ir.walk(stmt.value):
            if isinstance(node, ir.Op):
                names = {o.name for o in node.operands if isinstance(o, ir.Ref)} & inputs
                (operands if ops.reads_declared_layout(node.op) else elsewhere).update(names)
    return operands, elsewhere


def twin_operands(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    operands, elsewhere = read_by(kernel)
    both = {i.name for i in kernel.inputs} & operands & elsewhere
    if not both:
        return kernel
    twins = {name: ir.generated_name("operand", name) for name in both}

    def read_twins(node: ir.Expr) -> ir.Expr:
        if not (isinstance(node, ir.Op) and ops.reads_declared_layout(node.op)):
            return node
        operands = tuple(
            attrs.evolve(o, name=twins[o.name]) if isinstance(o, ir.Ref) and o.name in twins else o
            for o in node.operands
        )
        return attrs.evolve(node, operands=operands)

    inputs = []
    for tensor in kernel.inputs:
        inputs.append(tensor)
        if tensor.name in twins:
            inputs.append(attrs.evolve(tensor, name=twins[tensor.name], twin_of=tensor.name))
    return attrs.evolve(kernel.map_body(read_twins), inputs=tuple(inputs))
