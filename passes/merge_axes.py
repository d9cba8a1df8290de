"""Merges adjacent iteration axes that every tensor treats alike.

After `align_axes` every tensor spans all iteration axes, at full size or size 1. Adjacent
axes on which every tensor (inputs, outputs, every intermediate) has the same pattern
merge into one: a pure elementwise kernel becomes [rows, cols] (PyPTO pattern A), `x[B, C, H, W] *
w[1, C, 1, 1]` becomes `[B, C, H*W] * [1, C, 1]`, and `sum(x, axis=[2, 3])` reduces one
merged `H*W` axis. Axes of size 1 everywhere drop out. A frame never merges below two
axes (`at_least_two_axes`). `forward` does the reshapes.
"""

from __future__ import annotations

import math

import attrs

from ptodsl.frontend.diagnostics import FrameError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.ir.target import Target
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import (
    POSITIONAL,
    REDUCTIONS,
    convolved_values,
    matmul_operands,
    unread_inputs,
)


def _tensor_shapes(kernel: ir.Kernel, opaque: set[str]) -> list[tuple[int, ...]]:
    """The shapes of every tensor in the frame (matmul and convolution operands keep
    layouts of their own, as convolved values do)."""
    framed = [t for t in (*kernel.inputs, *kernel.outputs) if t.name not in opaque]
    shapes = [t.kernel_shape for t in framed]
    for stmt in kernel.body:
        if isinstance(stmt, ir.Let) and stmt.name in opaque:
            continue
        for node in ir.walk(stmt.value):
            if isinstance(node.type, ir.TensorType) and not (
                (isinstance(node, ir.Ref) and node.name in opaque) or ir.is_cube_matrix(node)
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


def _positional_axes_apart(groups: list[list[int]], positional: frozenset[int]) -> list[list[int]]:
    """A running total along a merged axis would run across rows: every axis a scan or a
    position count runs along is a group of its own (the axes before and after it may still
    merge among themselves)."""
    apart: list[list[int]] = []
    for group in groups:
        run: list[int] = []
        for axis in group:
            if axis in positional:
                apart += [part for part in (run, [axis]) if part]
                run = []
            else:
                run.append(axis)
        if run:
            apart.append(run)
    return apart


def at_least_two_axes(
    groups: list[list[int]], full: tuple[int, ...], target: Target
) -> list[list[int]]:
    """A frame that merged to one axis keeps two: PyPTO 0.2.0's cost model charges a rank-1
    tile's copy as one element whatever its size, so a 1-D plan would win in simulation
    what it would not win on hardware. The merged axis splits before the shortest run of
    trailing axes that fills a contiguous burst (the same bytes, contiguous, as a 2-D tensor
    [rows, cols]), else before its last axis, so that a loop can still split the rows; a
    single axis gets a leading axis of size 1 (an empty group)."""
    if len(groups) != 1:
        return groups
    (group,) = groups
    burst = target.min_contiguous_bytes // 4  # elements of the widest dtype
    for split in range(len(group) - 1, 0, -1):
        if math.prod(full[axis] for axis in group[split:]) >= burst:
            return [group[:split], group[split:]]
    if len(group) > 1:
        return [group[:-1], group[-1:]]
    return [[], group]


def _long(group: list[int], extents: tuple[int, ...]) -> list[int]:
    """The axes of `group` longer than 1 (all of them, unless the group holds batch 1)."""
    return [axis for axis in group if extents[axis] > 1] if len(group) > 1 else group


def _reduced_groups(
    reduced: set[int], result: tuple[int, ...], groups: list[list[int]]
) -> tuple[int, ...]:
    """The merged axes a keepdim reduction over frame axes `reduced` (its result's frame
    shape `result`) reduces: the groups holding a reduced axis, except a group whose kept
    axes are longer than 1. Every group is uniform, so its reduced axes are then 1 long in
    the operand and reducing them is no work: batch 1 merged with a 3-D convolution's
    channels, which BatchNorm3d's statistics reduce over and keep."""
    return tuple(
        i
        for i, group in enumerate(groups)
        if reduced & set(group) and all(result[axis] == 1 for axis in group if axis not in reduced)
    )


def _matmuls(kernel: ir.Kernel) -> list[ir.Op]:
    return [
        node
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and node.op == "matmul"
    ]


def _by_matrix(matmul: ir.Op) -> bool:
    """`[..., M, K] @ [K, N]` with leading axes: one matmul of all of A's rows."""
    a, b = matmul.operands
    return a.type.rank > 2 and b.type.rank == 2


def _cube_groups(matmuls: list[ir.Op], shapes: list[tuple[int, ...]]) -> list[list[int]]:
    """A matmul result keeps its rows and columns apart (the cube needs them) and a batch
    axis apart from both; the leading axes of a tensor-by-matrix product merge into its rows,
    as its first operand's do, so the cube sees one [rows, K] @ [K, N]."""
    rank = len(shapes[0])
    by_matrix = [m for m in matmuls if _by_matrix(m)]
    if not by_matrix:
        return [[axis] for axis in range(rank)]
    rows = list(range(rank - 1))
    full = [max(shape[axis] for shape in shapes) for axis in rows]
    for shape in shapes:
        if len({shape[axis] == 1 for axis in rows if full[axis] != 1}) > 1:
            raise FrameError(
                "the leading axes of a tensor-by-matrix product must merge into its rows, but "
                f"a value of shape {list(shape)} broadcasts along some of them only",
                by_matrix[0].span,
                note="broadcast over all of the product's leading axes, or none",
            )
    if len(by_matrix) != len(matmuls) or any(m.type.rank != rank for m in by_matrix):
        raise FrameError(
            "a tensor-by-matrix product shares its kernel with another matmul or a wider "
            "value; ptodsl cannot lay out both",
            by_matrix[0].span,
            note="compute it in a kernel of its own",
        )
    return [rows, [rank - 1]]


def _conv_groups(
    convs: list[ir.Op], groups: list[list[int]], shapes: list[tuple[int, ...]], kernel: ir.Kernel
) -> list[list[int]]:
    """A 3-D convolution's result has rank 5: its batch and channel axes merge (PyPTO has
    rank 4), which every value of the kernel must allow: none broadcasts along one of them
    only (a reduction over the batch keeping the channels), and nothing scans, counts,
    flips, crops or windows along one of them. Unless one of them is 1 long: at batch 1 the
    merged axis is the channels, and a reduction or a scan along the batch is no work
    (`_reduced_groups`, `merge_axes`)."""
    merging = [c for c in convs if ir.ConvGeometry.of(c).merges_batch]
    if not merging:
        return groups
    full = [max(shape[axis] for shape in shapes) for axis in range(len(shapes[0]))]

    def broadcast(shape: tuple[int, ...], axis: int) -> bool:
        return shape[axis] == 1 < full[axis]

    both = len(full) == 5 and min(full[0], full[1]) > 1  # else the merged axis is one of them
    if len(full) != 5 or (
        both and any(broadcast(shape, 0) != broadcast(shape, 1) for shape in shapes)
    ):
        # located at the first value that does (a reduction over the batch, BatchNorm3d's
        # statistics at batch 2), else at the convolution (an input or output does)
        apart = (
            node
            for stmt in kernel.body
            for node in ir.walk(stmt.value)
            if isinstance(node, ir.Op)
            and isinstance(node.type, ir.TensorType)
            and node.type.rank == len(full) == 5
            and broadcast(node.type.shape, 0) != broadcast(node.type.shape, 1)
        )
        value = next(apart, None)
        raise FrameError(
            "a 3-D convolution's batch and channel axes must merge (PyPTO has rank 4), but "
            f"{'this value' if value else 'an input or output'} is 1 long along one of them "
            f"only (batch {full[0]}, {full[1]} channels)",
            (value or merging[0]).span,
            note="compute the 3-D convolution in a kernel of its own and this in another, or "
            "run it at batch 1",
        )
    if both:
        for node in _positional_ops(kernel):
            if ops.positional_axes([attrs.evolve(node, operands=())]) & {0, 1}:
                raise FrameError(
                    f"a 3-D convolution's batch and channel axes merge (PyPTO has rank 4), but "
                    f"`{node.op}` runs along one of them only",
                    node.span,
                    note="compute the 3-D convolution in a kernel of its own and this in "
                    "another, or run it at batch 1",
                )
    return [[0, 1], [2], [3], [4]]


def _positional_ops(kernel: ir.Kernel) -> list[ir.Op]:
    """The kernel's scans, position counts, flips, concatenations, crops and windows."""
    kinds = (*ops.POSITIONAL, ops.Kind.SLICE, ops.Kind.WINDOW)
    return [
        node
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and ops.lookup(node.op).kind in kinds
    ]


def _conv_layouts(convs: list[ir.Op], kernel: ir.Kernel) -> dict[str, tuple[tuple, ...]]:
    """The layouts a convolution reads its operands in: the input as declared (batch and
    channels as one axis when the input has rank 5), the weight as [C_out * C_in/groups,
    taps]: the kernel reads it as its groups' [C_out/groups, C_in/groups * taps] matrices, or
    a transposed convolution's as [C_in, C_out/groups, taps]."""
    inputs = {t.name: t for t in kernel.inputs}
    layouts: dict[str, tuple[tuple, ...]] = {}
    for conv in convs:
        x, weight = conv.operands
        assert isinstance(x, ir.Ref) and isinstance(weight, ir.Ref), "align_axes: declared"
        if x.name not in inputs:  # a convolved value: stored as its convolution computes it
            layouts.setdefault(weight.name, _weight_layout(inputs[weight.name]))
            continue
        x_dims = inputs[x.name].declared_dims
        if ir.ConvGeometry.of(conv).merges_batch:
            x_dims = ((*x_dims[0], *x_dims[1]), *x_dims[2:])
        w_dims = _weight_layout(inputs[weight.name])
        for name, dims in ((x.name, x_dims), (weight.name, w_dims)):
            if layouts.setdefault(name, dims) != dims:
                raise FrameError(
                    f"`{name}` is read by two convolutions in two layouts",
                    conv.span,
                    note="declare a second input for the other convolution",
                )
    return layouts


def _weight_layout(weight: ir.Tensor) -> tuple[tuple, ...]:
    """[C_out * C_in/groups, taps]: one row per pair of channels, one column per tap."""
    dims = weight.declared_dims
    return ((*dims[0], *dims[1]), tuple(f for axis in dims[2:] for f in axis))


def merge_axes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    target = ctx.target
    opaque = matmul_operands(kernel)
    unread = unread_inputs(kernel)  # in their declared layout, as align_axes left them
    shapes = _tensor_shapes(kernel, opaque | unread)
    matmuls = _matmuls(kernel)
    # The first operands of tensor-by-matrix products: viewed as [rows, K] by `forward`.
    row_merged = {m.operands[0].name for m in matmuls if _by_matrix(m)}
    convs = ir.convolutions(kernel)
    convolved = convolved_values(kernel)
    opaque |= convolved
    if opaque:
        groups = _conv_groups(convs, _cube_groups(matmuls, shapes), shapes, kernel)
    else:
        groups = at_least_two_axes(
            _positional_axes_apart(
                axis_groups(shapes), ops.positional_axes(s.value for s in kernel.body)
            ),
            shapes[0],
            target,
        )
    if len(groups) > target.max_rank:
        raise FrameError(
            f"this kernel still has {len(groups)} axes after merging; PyPTO handles "
            f"{target.max_rank}",
            kernel.outputs[0].span,
            note="axes merge when every tensor is full (or 1) on both; broadcasts and "
            "reductions that alternate between neighbouring axes keep them apart",
        )

    full = tuple(max(shape[axis] for shape in shapes) for axis in range(len(shapes[0])))

    def merged_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(math.prod(shape[axis] for axis in group) for group in groups)

    def merged(node: ir.Expr) -> ir.Expr:
        if isinstance(node, ir.Ref) and node.name in row_merged:
            rows = math.prod(node.type.shape[:-1])
            return attrs.evolve(
                node, type=attrs.evolve(node.type, shape=(rows, node.type.shape[-1]))
            )
        if (
            not isinstance(node.type, ir.TensorType)
            or (isinstance(node, ir.Ref) and node.name in opaque)
            or ir.is_cube_matrix(node)
        ):
            return node
        old = node.type.shape  # the frame's extents of this value (its operands are merged)
        node = attrs.evolve(node, type=attrs.evolve(node.type, shape=merged_shape(old)))
        if isinstance(node, ir.Op) and node.op in REDUCTIONS:
            axes = _reduced_groups(set(node.attrs.axes), old, groups)
            node = attrs.evolve(node, attrs=attrs.evolve(node.attrs, axes=axes, keepdim=True))
        if isinstance(node, ir.Op) and isinstance(node.attrs, ir.Slice | ir.Window):
            # a cut or windowed axis is a group of its own (or the one axis longer than 1 of
            # its group: a 3-D convolution's channels at batch 1); a group of others is neither
            sources = [
                only[0] if len(only := _long(group, full)) == 1 else None for group in groups
            ]
            node = attrs.evolve(node, attrs=node.attrs.moved(sources))
        if isinstance(node, ir.Op) and node.op in POSITIONAL:
            axis = node.attrs.axis
            at = [i for i, group in enumerate(groups) if axis in group]
            if at and old[axis] == 1 and len(groups[at[0]]) > 1:
                at = []  # along batch 1 merged with a 3-D convolution's channels: dropped
            if not at and node.op == "iota":
                # positions along a dropped axis of size 1 are all 0, as along any other
                # axis of this all-ones shape
                return attrs.evolve(node, attrs=attrs.evolve(node.attrs, axis=0))
            if not at:  # an axis of size 1, dropped: its running total or flip is the value
                assert not isinstance(node.attrs, ir.Scan) or not node.attrs.variant, (
                    "legalize leaves only plain scans"
                )
                return node.operands[0]
            node = attrs.evolve(node, attrs=attrs.evolve(node.attrs, axis=at[0]))
        return node

    def merged_dims(tensor: ir.Tensor) -> tuple[tuple[ir.DimFactor, ...], ...]:
        assert tensor.kernel_dims is not None, "align_axes runs first"
        return tuple(
            tuple(factor for axis in group for factor in tensor.kernel_dims[axis])
            for group in groups
        )

    def row_merged_dims(tensor: ir.Tensor) -> tuple[tuple[ir.DimFactor, ...], ...]:
        return (tuple(d for dims in tensor.kernel_dims[:-1] for d in dims), tensor.kernel_dims[-1])

    conv_layouts = _conv_layouts(convs, kernel)
    inputs = tuple(
        attrs.evolve(t, kernel_dims=row_merged_dims(t))
        if t.name in row_merged
        else attrs.evolve(t, kernel_dims=conv_layouts[t.name])
        if t.name in conv_layouts
        else t
        if t.name in opaque or t.name in unread
        else attrs.evolve(t, kernel_dims=merged_dims(t))
        for t in kernel.inputs
    )
    outputs = tuple(attrs.evolve(t, kernel_dims=merged_dims(t)) for t in kernel.outputs)
    body = tuple(
        stmt
        if isinstance(stmt, ir.Let) and stmt.name in convolved  # in its own layout
        else attrs.evolve(stmt, value=ir.map_expr(stmt.value, merged))
        for stmt in kernel.body
    )
    return attrs.evolve(kernel, inputs=inputs, outputs=outputs, body=body, target_ranks=True)
