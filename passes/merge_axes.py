"""Flattens the kernel's iteration space: adjacent axes that every tensor treats alike merge.

For a pure elementwise kernel every tensor spans every axis, so everything merges into one
axis (PyPTO pattern A: flatten to 1-D). An input broadcast along some axes keeps those axes
apart: `x[B, C, H, W] * w[1, C, 1, 1]` becomes `[B, C, H*W] * [1, C, 1]`. Axes of size 1
drop out. `forward` reshapes tensors to these kernel shapes and back.
"""

from __future__ import annotations

import math

import attrs

from ptodsl import ir
from ptodsl.diagnostics import SpecError


def _padded(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + shape


def axis_groups(iteration: tuple[int, ...], shapes: list[tuple[int, ...]]) -> list[list[int]]:
    """Groups of adjacent iteration axes over which every shape is uniformly full or 1."""
    rank = len(iteration)
    padded = [_padded(shape, rank) for shape in shapes]
    groups: list[list[int]] = []
    previous_pattern = None
    for axis in range(rank):
        if iteration[axis] == 1:
            continue
        pattern = tuple(shape[axis] == 1 for shape in padded)
        if groups and pattern == previous_pattern:
            groups[-1].append(axis)
        else:
            groups.append([axis])
        previous_pattern = pattern
    return groups or [[rank - 1]] if rank else [[]]


def _merged(shape: tuple[int, ...], rank: int, groups: list[list[int]]) -> tuple[int, ...]:
    padded = _padded(shape, rank)
    return tuple(math.prod(padded[axis] for axis in group) for group in groups)


def _merged_dims(tensor: ir.Tensor, rank: int, groups: list[list[int]]) -> tuple:
    """Each kernel axis as the declared dims it multiplies (none: an axis of size 1)."""
    offset = rank - tensor.type.rank
    return tuple(
        tuple(
            tensor.dims[axis - offset]
            for axis in group
            if axis >= offset and tensor.type.shape[axis - offset] != 1
        )
        for group in groups
    )


def merge_axes(kernel: ir.Kernel) -> ir.Kernel:
    first = kernel.outputs[0]
    iteration = first.type.shape
    for output in kernel.outputs[1:]:
        if output.type.shape != iteration:
            raise SpecError(
                f"output `{output.name}` is {output.type}, but `{first.name}` is {first.type}",
                output.span,
                note="the outputs of one elementwise kernel share one shape",
            )
    for stmt in kernel.body:
        for node in ir.walk(stmt.value):
            shape = node.type.shape if isinstance(node.type, ir.TensorType) else None
            if shape is not None and ir.broadcast_shapes(shape, iteration) != iteration:
                raise SpecError(
                    f"this value is {node.type}, which does not fit the outputs' shape "
                    f"{list(iteration)}",
                    node.span,
                )
    rank = len(iteration)
    groups = axis_groups(iteration, [i.type.shape for i in kernel.inputs])

    def retyped(node: ir.Expr) -> ir.Expr:
        if isinstance(node.type, ir.TensorType):
            shape = _merged(node.type.shape, rank, groups)
            return attrs.evolve(node, type=attrs.evolve(node.type, shape=shape))
        return node

    inputs = tuple(
        attrs.evolve(i, kernel_dims=_merged_dims(i, rank, groups)) for i in kernel.inputs
    )
    outputs = tuple(
        attrs.evolve(o, kernel_dims=_merged_dims(o, rank, groups)) for o in kernel.outputs
    )
    return attrs.evolve(kernel, inputs=inputs, outputs=outputs).map_body(retyped)
