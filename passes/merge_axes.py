"""Merges adjacent iteration axes that every tensor treats alike.

After `align_axes` every tensor spans all iteration axes, at full size or size 1. Adjacent
axes on which every tensor (inputs, outputs, every intermediate) has the same pattern
merge into one: a pure elementwise kernel becomes 1-D (PyPTO pattern A), `x[B, C, H, W] *
w[1, C, 1, 1]` becomes `[B, C, H*W] * [1, C, 1]`, and `sum(x, axis=[2, 3])` reduces one
merged `H*W` axis. Axes of size 1 everywhere drop out. `forward` does the reshapes.
"""

from __future__ import annotations

import math

import attrs

from ptodsl import ir
from ptodsl.diagnostics import SpecError
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import REDUCTIONS, matmul_operands


def _tensor_shapes(kernel: ir.Kernel, opaque: set[str]) -> list[tuple[int, ...]]:
    """The shapes of every tensor in the frame (matmul operands keep layouts of their own)."""
    framed = [t for t in (*kernel.inputs, *kernel.outputs) if t.name not in opaque]
    shapes = [t.kernel_shape for t in framed]
    for stmt in kernel.body:
        for node in ir.walk(stmt.value):
            if isinstance(node.type, ir.TensorType) and not (
                isinstance(node, ir.Ref) and node.name in opaque
            ):
                shapes.append(node.type.shape)
    return shapes


def axis_groups(shapes: list[tuple[int, ...]]) -> list[list[int]]:
    """Groups of adjacent axes over which every shape is uniformly full or 1."""
    rank = len(shapes[0])
    full = [max(shape[axis] for shape in shapes) for axis in range(rank)]
    groups: list[list[int]] = []
    previous = None
    for axis in range(rank):
        if full[axis] == 1:
            continue
        pattern = tuple(shape[axis] == 1 for shape in shapes)
        if groups and pattern == previous:
            groups[-1].append(axis)
        else:
            groups.append([axis])
        previous = pattern
    return groups or [[0]]


def merge_axes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    target = ctx.target
    opaque = matmul_operands(kernel)
    shapes = _tensor_shapes(kernel, opaque)
    if opaque:
        # A matmul result keeps its rows and columns apart: the cube needs them.
        groups = [[axis] for axis in range(len(shapes[0]))]
    else:
        groups = axis_groups(shapes)
    if len(groups) > target.max_rank:
        raise SpecError(
            f"this kernel still has {len(groups)} axes after merging; PyPTO handles "
            f"{target.max_rank}",
            kernel.outputs[0].span,
            note="axes merge when every tensor is full (or 1) on both; broadcasts and "
            "reductions that alternate between neighbouring axes keep them apart",
        )

    def merged_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(math.prod(shape[axis] for axis in group) for group in groups)

    def merged(node: ir.Expr) -> ir.Expr:
        if not isinstance(node.type, ir.TensorType) or (
            isinstance(node, ir.Ref) and node.name in opaque
        ):
            return node
        node = attrs.evolve(node, type=attrs.evolve(node.type, shape=merged_shape(node.type.shape)))
        if isinstance(node, ir.Op) and node.op in REDUCTIONS:
            reduced = set(node.attrs.axes)
            axes = tuple(i for i, group in enumerate(groups) if reduced & set(group))
            node = attrs.evolve(node, attrs=attrs.evolve(node.attrs, axes=axes, keepdim=True))
        return node

    def merged_dims(tensor: ir.Tensor) -> tuple[tuple[ir.DimFactor, ...], ...]:
        assert tensor.kernel_dims is not None, "align_axes runs first"
        return tuple(
            tuple(factor for axis in group for factor in tensor.kernel_dims[axis])
            for group in groups
        )

    inputs = tuple(
        t if t.name in opaque else attrs.evolve(t, kernel_dims=merged_dims(t))
        for t in kernel.inputs
    )
    outputs = tuple(attrs.evolve(t, kernel_dims=merged_dims(t)) for t in kernel.outputs)
    return attrs.evolve(kernel, inputs=inputs, outputs=outputs).map_body(merged)
