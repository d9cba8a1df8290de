"""Folds the reshapes the front end puts around a matmul with split axes.

A matmul operand declared with a split axis (`weight fc: linear(K, G * CG)`: `fc.weight`
is `[G * CG, K]`, logically `[G, CG, K]`) is read by the cube in its declared layout, and
the product's columns split the same way (`fc(x)` is `[B, G, CG]`, GroupNorm's groups of a
linear layer's output). The checked IR says so with reshapes (what the torch reference
computes); here they fold into the matmul: its operands are typed in their declared
layout, and its result in the split one, which codegen reshapes (the same elements).
An input a transpose reads through a reshape that splits its axes (attention's heads,
`k.view(B, T, NH, HS).transpose(1, 2)`) takes the split axes as its own, as a declared
split does: `forward` hands the kernel the same elements in that shape.
Other reshapes (`h.reshape(B, G, CG)` of any value) stay for `align_axes`.
"""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
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


def transposed_views(kernel: ir.Kernel) -> dict[str, ir.TensorType]:
    """Inputs read only by transposes, each through one reshape that splits its axes: the
    shape they are read in. (A transpose of any other reshape of an input, one merging
    axes, reads a value the kernel computes: the partition cuts after it.)"""
    inputs = {tensor.name: tensor for tensor in kernel.inputs}
    nodes = [node for stmt in kernel.body for node in ir.walk(stmt.value)]
    views = {  # the reshapes transposes read
        id(node.operands[0])
        for node in nodes
        if isinstance(node, ir.Op) and ops.moves_axes(node.op) and _is_reshape(node.operands[0])
    }
    read_as: dict[str, set[ir.TensorType | None]] = {}  # None: read otherwise
    for node in nodes:
        for operand in node.operands if isinstance(node, ir.Op) else ():
            if isinstance(operand, ir.Ref) and operand.name in inputs:
                viewed = node.type if id(node) in views else None
                read_as.setdefault(operand.name, set()).add(viewed)
    found = {}
    for name, types in read_as.items():
        (viewed, *others) = types
        tensor = inputs[name]
        if (
            not others
            and viewed is not None
            and len(tensor.dims) == len(tensor.declared_shape)  # no split axes yet
            and _splits_each(tensor.type.shape, viewed.shape)
        ):
            found[name] = viewed
    return found


def _is_reshape(node: ir.Expr) -> bool:
    return isinstance(node, ir.Op) and node.op == "reshape"


def _splits_each(old: tuple[int, ...], new: tuple[int, ...]) -> bool:
    """Whether `new` splits each axis of `old` into one or more (merges or adds none)."""
    return all(len(before) == 1 and after for before, after in ir.regroup(old, new))


def _view_input(tensor: ir.Tensor, viewed: ir.TensorType) -> ir.Tensor:
    """`tensor` in the split axes of `viewed` (its declared shape unchanged)."""
    runs = ir.regroup(tensor.type.shape, viewed.shape)
    counts = tuple(len(new) for _, new in runs)
    dims = tuple(
        factor if len(new) == 1 else viewed.shape[axis]
        for factor, (_, new) in zip(tensor.dims, runs, strict=True)
        for axis in new
    )
    return attrs.evolve(
        tensor, type=viewed, dims=dims, declared=tensor.declared_shape, splits=counts
    )


def fold_reshapes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    views = transposed_views(kernel)

    def viewed(node: ir.Expr) -> ir.Expr:
        if isinstance(node, ir.Op) and node.op == "reshape":
            (operand,) = node.operands
            if isinstance(operand, ir.Ref) and operand.name in views:
                return attrs.evolve(operand, type=node.type)
        return _fold(node)

    if not views:
        return kernel.map_body(_fold)
    inputs = tuple(
        _view_input(tensor, views[tensor.name]) if tensor.name in views else tensor
        for tensor in kernel.inputs
    )
    return attrs.evolve(kernel.map_body(viewed), inputs=inputs)
