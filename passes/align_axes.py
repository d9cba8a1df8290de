"""Puts every tensor of the kernel into one frame of iteration axes, in keepdim form.

PyPTO reduces one axis at a time, and a reshape inside a kernel needs tiles of its own rank
(window phases do that, internally), so ptodsl works with one set of iteration axes for the
whole kernel: every tensor has all of them, of full size
or of size 1. An input `b[N]` next to `x[M, N]` becomes `b[1, N]`; `sum(x, axis=1)` becomes
`sum(x, axis=1, keepdim=true)` of shape `[M, 1]`, and a later `s * w[M]` sees `w` as
`[M, 1]`. Axis identity follows broadcasting (aligned axes are one axis) and reductions
(a dropped axis is still the same axis). `forward` reshapes inputs into this frame and
outputs back to their declared shapes, which moves no data.

A reshape (`h.reshape(B, G, CG)`) splits or merges axes: the merged axis and its parts
are one axis seen at two granularities, so the whole kernel works at the finer one. Every
value on that axis (what `h` is computed from, what it feeds, the inputs and outputs) gets
the parts as axes of their own, a reduction over the whole axis reduces all the parts, and
the reshape itself disappears. An op that works along the axis position by position (a
crop, a window, a scan) cannot see it split, which is an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from ptodsl.frontend.diagnostics import FrameError, Span
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.twin_operands import read_by

# The reductions PyPTO computes itself (mean, var, ... are legalized into them first).
REDUCTIONS = tuple(op.name for op in ops.of_kind(ops.Kind.REDUCTION) if op.pypto is not None)
# Scans and position counts: the same axes as their operand, working along one of them.
POSITIONAL = tuple(op.name for op in ops.of_kind(*ops.POSITIONAL))
Frame = list[int]  # an axis id per dimension of a tensor


class _Axes:
    """Union-find over axis ids, with the size each axis has where it is not broadcast."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.size: list[int] = []

    def fresh(self, size: int) -> int:
        self.parent.append(len(self.parent))
        self.size.append(size)
        return len(self.parent) - 1

    def find(self, axis: int) -> int:
        while self.parent[axis] != axis:
            self.parent[axis] = self.parent[self.parent[axis]]
            axis = self.parent[axis]
        return axis

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)
            self.size[min(a, b)] = max(self.size[a], self.size[b])
        return min(a, b)


def convolved_values(kernel: ir.Kernel) -> set[str]:
    """`let`s of a convolution that only convolutions read (as their input): a
    depthwise-separable pair. Such a value is stored as the convolution computes it,
    [N, C, *spatial], outside the frame, like a declared input."""
    convolutions = {
        stmt.name
        for stmt in kernel.body
        if isinstance(stmt, ir.Let)
        and isinstance(stmt.value, ir.Op)
        and ops.lookup(stmt.value.op).kind is ops.Kind.CONV
    }
    read_elsewhere = set()
    for stmt in kernel.body:
        for node in ir.walk(stmt.value):
            if not isinstance(node, ir.Op):
                continue
            first = ops.lookup(node.op).kind is ops.Kind.CONV
            for position, operand in enumerate(node.operands):
                if isinstance(operand, ir.Ref) and not (first and position == 0):
                    read_elsewhere.add(operand.name)
    for output in kernel.outputs:  # a store of the value itself reads it too
        read_elsewhere.add(output.name)
    for stmt in kernel.body:
        if isinstance(stmt, ir.Store) and isinstance(stmt.value, ir.Ref):
            read_elsewhere.add(stmt.value.name)
    return convolutions - read_elsewhere


# What a matmul and a transpose read only as a kernel's inputs, and why (a FrameError's
# message, at the op's span: the partition cuts the spec there).
ONLY_INPUTS = {
    "matmul": "a matmul of values the kernel computes, other than a matrix by a declared one",
    "swap": "a transpose moves a value the kernel computes",
}
ONLY_INPUTS_NOTE = "the value is computed in a kernel of its own, which this one reads"


def read_as_input(node: ir.Expr, computed: Callable[[ir.Expr], bool]) -> list[ir.Expr]:
    """The operands of `node` it reads only as a kernel input that `computed` says are not:
    a transpose's (PyPTO's transpose of a value in UB is a tile's, not the tensor's), a
    matmul's unless the first is a 2-D, untransposed value by a declared second (the cube
    reads it as the matrix it is)."""
    if not isinstance(node, ir.Op):
        return []
    if ops.moves_axes(node.op):
        return [o for o in node.operands if computed(o)]
    if node.op != "matmul":
        return []
    a, b = node.operands
    if computed(b) or (computed(a) and (a.type.rank != 2 or node.attrs.a_trans)):
        return [o for o in (a, b) if computed(o)]
    return []


def matmul_operands(kernel: ir.Kernel) -> set[str]:
    """Inputs read only by matmuls: they keep their declared layout, outside the frame."""
    operands, elsewhere = read_by(kernel)
    assert not operands & elsewhere, "twin_operands gives such inputs a twin for matmuls"
    return operands


def unread_inputs(kernel: ir.Kernel) -> set[str]:
    """Inputs (and weights) no statement reads, as a module's unused `nn.Parameter`: they
    keep their declared layout, outside the frame. In it, their axes would be axes of their
    own that every other value has at size 1, and a convolution's result must keep its
    declared rank."""
    read = {
        node.name
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Ref)
    }
    return {tensor.name for tensor in kernel.inputs} - read


class _Aligner:
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.axes = _Axes()
        self.frames: dict[int, Frame] = {}  # id(node) -> frame
        self.named: dict[str, Frame] = {}
        self.keep: list[ir.Expr] = []  # nodes whose ids key `frames` stay alive
        self.opaque = matmul_operands(kernel) | unread_inputs(kernel)
        self.convolved = convolved_values(kernel)
        self.input_names = {tensor.name for tensor in kernel.inputs}
        # (axis, its parts, the reshape's span): a reshape sees `axis` as `parts`
        self.refinements: list[tuple[int, list[int], Span]] = []
        self.parts: dict[int, list[int]] = {}  # root axis -> its parts, once resolved
        self.reshapes: list[tuple[Span, Frame]] = []  # each reshape and its operand's frame

    def frame(self, node: ir.Expr) -> Frame | None:
        if not isinstance(node.type, ir.TensorType):
            return None
        if id(node) in self.frames:
            return self.frames[id(node)]
        if isinstance(node, ir.Ref):
            frame = self.named[node.name]
        elif node.op == "matmul" and self.computed_operand(node):
            self.refuse_computed_operands(node)
            # A computed first operand's rows are the product's rows.
            frame = [self.frame(node.operands[0])[0], self.axes.fresh(node.type.shape[1])]
        elif ops.reads_declared_layout(node.op):
            self.refuse_computed_operands(node)
            # The cube reads its operands in their own layout: the result starts new axes.
            frame = [self.axes.fresh(size) for size in node.type.shape]
        elif node.op == "reshape":
            frame = self.regrouped(node)
        elif node.op in REDUCTIONS:
            operand = self.frame(node.operands[0])
            axes = node.attrs.axes
            frame = (
                operand
                if node.attrs.keepdim
                else [axis for position, axis in enumerate(operand) if position not in axes]
            )
        elif ops.lookup(node.op).kind is ops.Kind.CONCAT:
            frame = self.broadcast(node)  # the same axes, of other sizes along `axis`
        elif node.op in POSITIONAL or ops.lookup(node.op).kind in (ops.Kind.SLICE, ops.Kind.WINDOW):
            # the same axes; a scan or a count runs along one, a crop or a window shortens some
            frame = self.frame(node.operands[0])
        elif ops.lookup(node.op).kind in ops.BROADCASTING:
            frame = self.broadcast(node)
        else:  # a window treated as elementwise would be a wrong kernel, not an error
            raise ops.UnknownOp(f"align_axes cannot lay out op `{node.op}`")
        self.frames[id(node)] = frame
        self.keep.append(node)
        return frame

    def refuse_computed_operands(self, node: ir.Op) -> None:
        """A matmul or a transpose of a value this kernel computes where it reads only its
        inputs: the partition gives that value a kernel of its own."""
        if read_as_input(node, self.computed):
            raise FrameError(ONLY_INPUTS[node.op], node.span, note=ONLY_INPUTS_NOTE)

    def computed(self, operand: ir.Expr) -> bool:
        """Whether `operand` is a value the kernel computes (a `let`), which lives in the
        frame, rather than a declared tensor in its own layout."""
        return not (isinstance(operand, ir.Ref) and operand.name in self.input_names)

    def computed_operand(self, matmul: ir.Op) -> bool:
        """Whether the matmul's first operand is a value the kernel computes."""
        return self.computed(matmul.operands[0])

    def regrouped(self, node: ir.Op) -> Frame:
        """A reshape's axes: kept axes are the operand's; a split axis is refined into new
        axes, and a merged axis is a new axis refined into the operand's."""
        (operand,) = node.operands
        operand_frame = self.frame(operand)
        assert operand_frame is not None, "typecheck reshapes tensors only"
        if not (isinstance(operand, ir.Ref) and operand.name in self.input_names):
            self.reshapes.append((node.span, operand_frame))  # of a value the kernel computes
        frame: Frame = []
        for old, new in ir.regroup(operand.type.shape, node.type.shape):
            new_sizes = [node.type.shape[position] for position in new]
            if len(old) == 1 and len(new) == 1:
                frame.append(operand_frame[old[0]])
            elif len(old) == 1 and new:
                parts = [self.axes.fresh(size) for size in new_sizes]
                self.refinements.append((operand_frame[old[0]], parts, node.span))
                frame += parts
            elif len(new) == 1 and old:
                merged = self.axes.fresh(new_sizes[0])
                parts = [operand_frame[position] for position in old]
                self.refinements.append((merged, parts, node.span))
                frame.append(merged)
            elif not old:  # a new axis of size 1
                frame.append(self.axes.fresh(1))
            else:  # an axis of size 1 dropped; typecheck rejects regroupings
                assert not new, "a reshape splits or merges axes"
        return frame

    def resolve_refinements(self) -> None:
        """Settles each refined axis's parts. Two reshapes of one axis must split it alike
        (their parts are then the same axes); a reshape of a cropped axis is an error."""
        settled = False
        while not settled:
            settled = True
            self.parts = {}
            for axis, parts, span in self.refinements:
                root = self.axes.find(axis)
                sizes = [self.axes.size[self.axes.find(p)] for p in parts]
                if math.prod(sizes) != self.axes.size[root]:
                    raise FrameError(
                        f"this reshape sees {math.prod(sizes)} of an axis of "
                        f"{self.axes.size[root]} elements (a crop or a window of it)",
                        span,
                        note="reshape the whole axis, or crop after the reshape",
                    )
                earlier = self.parts.setdefault(root, parts)
                if earlier is parts:
                    continue
                earlier_sizes = [self.axes.size[self.axes.find(p)] for p in earlier]
                if earlier_sizes != sizes:
                    raise FrameError(
                        f"this reshape splits an axis into {sizes}, another one into "
                        f"{earlier_sizes}",
                        span,
                        note="split one axis the same way wherever it is reshaped",
                    )
                for mine, theirs in zip(parts, earlier, strict=True):
                    if self.axes.find(mine) != self.axes.find(theirs):
                        self.axes.union(mine, theirs)
                        settled = False

    def refuse_reframed(self, node: ir.Op, shape: tuple[int, ...]) -> None:
        """A convolution or a transpose computes its result in its own layout (a
        convolution's [N, C_out, *spatial]). When the frame sees it otherwise (a reshape
        splits one of its axes, as GroupNorm's channel groups or a transposed sequence's
        image rows, or adds an axis of size 1 among them), its lowering cannot produce it."""
        if shape == node.type.shape:
            return
        what = "a transpose" if ops.moves_axes(node.op) else "a convolution"
        mine = {self.axes.find(axis) for axis in self.frame(node)}
        span = next(
            (s for s, operand in self.reshapes if mine & {self.axes.find(a) for a in operand}),
            None,
        )
        if span is None:
            raise FrameError(
                f"the kernel's other values have axes this {what.split()[1]}'s result does "
                f"not; ptodsl computes {what} in its own layout only",
                node.span,
                note=f"compute {what} in a kernel of its own (its result an output), "
                "and the rest in another",
            )
        raise FrameError(
            f"this reshape splits or adds axes of {what}'s result; ptodsl computes {what} "
            "in its own layout only",
            span,
            note=f"compute {what} in a kernel of its own (its result an output), "
            "and the reshape and what follows in another",
        )

    def leaves(self, axis: int) -> list[int]:
        """The axis at the finest granularity any reshape sees it: its parts' leaves."""
        root = self.axes.find(axis)
        parts = self.parts.get(root)
        return [root] if parts is None else [leaf for p in parts for leaf in self.leaves(p)]

    def leaf_sizes(self, frame: Frame, shape: tuple[int, ...], span: Span) -> dict[int, int]:
        """Each leaf axis of a value's frame with its size in the value (1 where the value
        is broadcast along the whole axis)."""
        sizes: dict[int, int] = {}
        for axis, size in zip(frame, shape, strict=True):
            leaves = self.leaves(axis)
            if len(leaves) == 1 or size == 1:
                sizes.update((leaf, size if len(leaves) == 1 else 1) for leaf in leaves)
                continue
            if size != math.prod(self.axes.size[leaf] for leaf in leaves):
                raise FrameError(
                    f"this value has {size} of an axis of "
                    f"{math.prod(self.axes.size[leaf] for leaf in leaves)} that a reshape "
                    "splits; ptodsl splits a whole axis only",
                    span,
                    note="crop or window the axis after the reshape",
                )
            sizes.update((leaf, self.axes.size[leaf]) for leaf in leaves)
        return sizes

    def broadcast(self, node: ir.Op) -> Frame:
        """Right-aligned dimensions of the operands and the result are one axis."""
        operand_frames = [f for f in map(self.frame, node.operands) if f is not None]
        rank = node.type.rank
        frame = []
        for position in range(rank):
            from_end = rank - position
            ids = [f[len(f) - from_end] for f in operand_frames if len(f) >= from_end]
            axis = ids[0]
            for other in ids[1:]:
                axis = self.axes.union(axis, other)
            frame.append(axis)
        return frame

    def collect(self) -> None:
        for tensor in self.kernel.inputs:
            if tensor.name not in self.opaque:
                self.named[tensor.name] = [self.axes.fresh(size) for size in tensor.type.shape]
        for stmt in self.kernel.body:
            if isinstance(stmt, ir.Let) and stmt.name in self.convolved:
                continue  # in its own layout, outside the frame
            frame = self.frame(stmt.value)
            if isinstance(stmt, ir.Let):
                self.named[stmt.name] = frame or []
            else:
                self.named[stmt.output] = frame
        self.unify_named_dims()
        self.resolve_refinements()

    def unify_named_dims(self) -> None:
        """Inputs that share a dim name at the same place from the right share that axis,
        even when no op relates them directly (`sum(a, axis=1) - sum(b, axis=1)`);
        otherwise each would get an iteration axis of its own."""
        first: dict[tuple[str, int], int] = {}
        for tensor in self.framed_inputs():
            frame = self.named[tensor.name]
            for from_end, (dim, axis) in enumerate(
                zip(reversed(tensor.dims), reversed(frame), strict=True)
            ):
                if isinstance(dim, str):
                    key = (dim, from_end)
                    first[key] = self.axes.union(first.get(key, axis), axis)

    def order(self) -> list[int]:
        """Iteration axes in an order every tensor's frame respects (inputs first)."""
        frames = [[leaf for a in f for leaf in self.leaves(a)] for f in self.all_frames()]
        for frame, node in zip(frames, self.all_nodes(), strict=True):
            if len(set(frame)) != len(frame):
                raise FrameError(
                    "broadcasting makes two axes of this value one axis; ptodsl cannot lay out "
                    "such a kernel",
                    node.span,
                )
        before: dict[int, set[int]] = {}
        first_seen: dict[int, int] = {}
        for frame in frames:
            for axis in frame:
                first_seen.setdefault(axis, len(first_seen))
            for earlier, later in zip(frame, frame[1:], strict=False):
                before.setdefault(later, set()).add(earlier)
        order: list[int] = []
        pending = sorted(first_seen, key=first_seen.get)
        while pending:
            ready = next((a for a in pending if before.get(a, set()) <= set(order)), None)
            if ready is None:
                raise FrameError(
                    "the axes of these tensors have no common order", self.kernel.outputs[0].span
                )
            order.append(ready)
            pending.remove(ready)
        return order

    def framed_inputs(self) -> list[ir.Input]:
        return [t for t in self.kernel.inputs if t.name not in self.opaque]

    def all_frames(self) -> list[Frame]:
        return [self.named[t.name] for t in self.framed_inputs()] + [
            self.frames[id(node)] for node in self.keep
        ]

    def all_nodes(self) -> list:
        return self.framed_inputs() + self.keep


def refuse_two_convolutions_with_running_statistics(kernel: ir.Kernel) -> None:
    """pypto 0.2.0's simulator crashes ("Invalid slot index 16", then SIGSEGV) on a kernel
    that computes two convolutions and updates the running statistics of two BatchNorms
    (ResNet's basic block: `bn2(conv2(h)) + downsample(x)`). Measured on [2, 16, 8, 8]: one
    convolution with two BatchNorms runs, and so do two convolutions with one, with batch
    statistics and no running ones, or with the same statistics written as outputs of the
    spec's; so the spec is cut between the two."""
    updated = {o.updates.rpartition(".")[0] for o in kernel.outputs if o.updates is not None}
    convolutions = [
        node
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.CONV
    ]
    if len(updated) >= 2 and len(convolutions) >= 2:
        raise FrameError(
            "pypto 0.2.0 crashes on a kernel that computes two convolutions and updates "
            "the running statistics of two norms",
            convolutions[1].span,
            note="ptodsl computes them in kernels of their own",
        )


def align_axes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    refuse_two_convolutions_with_running_statistics(kernel)
    aligner = _Aligner(kernel)
    aligner.collect()
    order = aligner.order()

    def aligned_shape(node: ir.Expr, frame: Frame) -> tuple[int, ...]:
        sizes = aligner.leaf_sizes(frame, node.type.shape, node.span)
        return tuple(sizes.get(axis, 1) for axis in order) or (1,)

    def positions(operand: ir.Expr, along: frozenset[int], node: ir.Op) -> list[int | None]:
        """For each frame axis, the operand axis it comes from; `along` (the axes a crop or
        a window works on) must not be split."""
        at: dict[int, int] = {}
        for position, axis in enumerate(aligner.frame(operand)):
            leaves = aligner.leaves(axis)
            if len(leaves) > 1 and position in along:
                raise FrameError(
                    f"`{node.op}` works along an axis that a reshape splits",
                    node.span,
                    note="reshape after it, or split the axis only where it is not cropped, "
                    "windowed or scanned",
                )
            at.update((order.index(leaf), position) for leaf in leaves)
        return [at.get(position) for position in range(len(order))]

    def rebuild(node: ir.Expr) -> ir.Expr:
        """The node with every tensor shape in the frame and reductions in keepdim form."""
        if not isinstance(node.type, ir.TensorType):
            return node
        shape = aligned_shape(node, aligner.frame(node))
        rebuilt = attrs.evolve(node, type=attrs.evolve(node.type, shape=shape))
        if not isinstance(node, ir.Op):
            return rebuilt
        if node.op == "matmul" and aligner.computed_operand(node):
            # the cube reads the computed operand as the [M, K] matrix it is
            a, b = node.operands
            matrix = ir.op("reshape", rebuild(a), span=a.span, attributes=ir.Reshape(a.type.shape))
            return attrs.evolve(rebuilt, operands=(matrix, b))
        if node.op == "matmul":
            return rebuilt  # operands keep their declared layout
        if ops.moves_axes(node.op):  # its operand is an input in its declared layout
            aligner.refuse_reframed(node, shape)
            return rebuilt
        if ops.reads_declared_layout(node.op):  # a convolution
            for position, operand in enumerate(node.operands):
                declared = aligner.input_names | (aligner.convolved if position == 0 else set())
                if not (isinstance(operand, ir.Ref) and operand.name in declared):
                    raise FrameError(
                        "a convolution of a value the kernel computes is not supported yet",
                        operand.span,
                        note="convolve a declared input, or another convolution's result, by a "
                        "declared weight; compute after it",
                    )
            aligner.refuse_reframed(node, shape)
            return rebuilt
        if node.op == "reshape":  # the operand already has the finer axes
            operand = rebuild(node.operands[0])
            assert operand.type.shape == shape, "a reshape's two sides share their leaf axes"
            return operand
        rebuilt = attrs.evolve(rebuilt, operands=tuple(map(rebuild, node.operands)))
        if node.op in REDUCTIONS:
            operand_frame = aligner.frame(node.operands[0])
            reduced = {leaf for a in node.attrs.axes for leaf in aligner.leaves(operand_frame[a])}
            axes = tuple(position for position, axis in enumerate(order) if axis in reduced)
            rebuilt = attrs.evolve(rebuilt, attrs=attrs.evolve(node.attrs, axes=axes, keepdim=True))
        if node.op in POSITIONAL:
            along = frozenset({node.attrs.axis})
            sources = positions(node.operands[0], along, node)
            rebuilt = attrs.evolve(
                rebuilt, attrs=attrs.evolve(node.attrs, axis=sources.index(node.attrs.axis))
            )
        if isinstance(node.attrs, ir.Slice | ir.Window):
            along = (
                node.attrs.cut() if isinstance(node.attrs, ir.Slice) else frozenset(node.attrs.axes)
            )
            sources = positions(node.operands[0], along, node)
            rebuilt = attrs.evolve(rebuilt, attrs=node.attrs.moved(sources))
        return rebuilt

    body = tuple(
        stmt
        if isinstance(stmt, ir.Let) and stmt.name in aligner.convolved
        else attrs.evolve(stmt, value=rebuild(stmt.value))
        for stmt in kernel.body
    )

    def kernel_dims(tensor: ir.Tensor, frame: Frame) -> tuple[tuple[ir.DimFactor, ...], ...]:
        """Each frame axis's factors: the tensor's dim, or the size of a part where a
        reshape splits the axis (nothing where the tensor has size 1)."""
        factors: dict[int, tuple[ir.DimFactor, ...]] = {}
        for axis, dim, size in zip(frame, tensor.dims, tensor.type.shape, strict=True):
            leaves = aligner.leaves(axis)
            if size != 1:
                split = len(leaves) > 1
                factors.update(
                    (leaf, (aligner.axes.size[leaf] if split else dim,)) for leaf in leaves
                )
        return tuple(factors.get(axis, ()) for axis in order) or ((),)

    transposed = {
        node.operands[0].name
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and ops.moves_axes(node.op)
    }
    inputs = tuple(
        attrs.evolve(t, kernel_dims=tuple((dim,) for dim in t.dims))  # each axis it moves
        if t.name in transposed
        else attrs.evolve(t, kernel_dims=t.declared_dims)  # the cube reads the declared layout
        if t.name in aligner.opaque
        else attrs.evolve(t, kernel_dims=kernel_dims(t, aligner.named[t.name]))
        for t in kernel.inputs
    )
    outputs = tuple(
        attrs.evolve(t, kernel_dims=kernel_dims(t, aligner.named[t.name])) for t in kernel.outputs
    )
    return attrs.evolve(kernel, inputs=inputs, outputs=outputs, body=body)
