"""Puts every tensor of the kernel into one frame of iteration axes, in keepdim form.

PyPTO reduces one axis at a time, and a reshape inside a kernel needs tiles of its own rank
(window phases do that, internally), so ptodsl works with one set of iteration axes for the
whole kernel: every tensor has all of them, of full size
or of size 1. An input `b[N]` next to `x[M, N]` becomes `b[1, N]`; `sum(x, axis=1)` becomes
`sum(x, axis=1, keepdim=true)` of shape `[M, 1]`, and a later `s * w[M]` sees `w` as
`[M, 1]`. Axis identity follows broadcasting (aligned axes are one axis) and reductions
(a dropped axis is still the same axis). `forward` reshapes inputs into this frame and
outputs back to their declared shapes, which moves no data.
"""

from __future__ import annotations

import attrs

from ptodsl import ir, ops
from ptodsl.diagnostics import SpecError
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


def matmul_operands(kernel: ir.Kernel) -> set[str]:
    """Inputs read only by matmuls: they keep their declared layout, outside the frame."""
    operands, elsewhere = read_by(kernel)
    assert not operands & elsewhere, "twin_operands gives such inputs a twin for matmuls"
    return operands


class _Aligner:
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.axes = _Axes()
        self.frames: dict[int, Frame] = {}  # id(node) -> frame
        self.named: dict[str, Frame] = {}
        self.keep: list[ir.Expr] = []  # nodes whose ids key `frames` stay alive
        self.opaque = matmul_operands(kernel)

    def frame(self, node: ir.Expr) -> Frame | None:
        if not isinstance(node.type, ir.TensorType):
            return None
        if id(node) in self.frames:
            return self.frames[id(node)]
        if isinstance(node, ir.Ref):
            frame = self.named[node.name]
        elif node.op == "matmul":
            # The cube reads its operands in their own layout: the result starts new axes.
            frame = [self.axes.fresh(size) for size in node.type.shape]
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
            frame = self.frame(stmt.value)
            if isinstance(stmt, ir.Let):
                self.named[stmt.name] = frame or []
            else:
                self.named[stmt.output] = frame
        self.unify_named_dims()

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
        frames = [[self.axes.find(a) for a in f] for f in self.all_frames()]
        for frame, node in zip(frames, self.all_nodes(), strict=True):
            if len(set(frame)) != len(frame):
                raise SpecError(
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
                raise SpecError(
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


def align_axes(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    aligner = _Aligner(kernel)
    aligner.collect()
    order = aligner.order()
    find = aligner.axes.find

    def aligned_shape(shape: tuple[int, ...], frame: Frame) -> tuple[int, ...]:
        sizes = {find(axis): size for axis, size in zip(frame, shape, strict=True)}
        return tuple(sizes.get(axis, 1) for axis in order) or (1,)

    def rebuild(node: ir.Expr) -> ir.Expr:
        """The node with every tensor shape in the frame and reductions in keepdim form."""
        if not isinstance(node.type, ir.TensorType):
            return node
        shape = aligned_shape(node.type.shape, aligner.frame(node))
        rebuilt = attrs.evolve(node, type=attrs.evolve(node.type, shape=shape))
        if not isinstance(node, ir.Op):
            return rebuilt
        if node.op == "matmul":
            return rebuilt  # operands keep their declared layout
        rebuilt = attrs.evolve(rebuilt, operands=tuple(map(rebuild, node.operands)))
        if node.op in REDUCTIONS:
            operand_frame = aligner.frame(node.operands[0])
            reduced = {find(operand_frame[axis]) for axis in node.attrs.axes}
            axes = tuple(position for position, axis in enumerate(order) if axis in reduced)
            rebuilt = attrs.evolve(rebuilt, attrs=attrs.evolve(node.attrs, axes=axes, keepdim=True))
        if node.op in POSITIONAL:
            scanned = find(aligner.frame(node.operands[0])[node.attrs.axis])
            rebuilt = attrs.evolve(
                rebuilt, attrs=attrs.evolve(node.attrs, axis=order.index(scanned))
            )
        if isinstance(node.attrs, ir.Slice | ir.Window):
            at = {
                order.index(find(axis)): position
                for position, axis in enumerate(aligner.frame(node.operands[0]))
            }
            sources = [at.get(position) for position in range(len(order))]
            rebuilt = attrs.evolve(rebuilt, attrs=node.attrs.moved(sources))
        return rebuilt

    body = tuple(attrs.evolve(stmt, value=rebuild(stmt.value)) for stmt in kernel.body)

    def kernel_dims(tensor: ir.Tensor, frame: Frame) -> tuple[tuple[ir.DimFactor, ...], ...]:
        factors = {
            find(axis): ((dim,) if size != 1 else ())
            for axis, dim, size in zip(frame, tensor.dims, tensor.type.shape, strict=True)
        }
        return tuple(factors.get(axis, ()) for axis in order) or ((),)

    inputs = tuple(
        attrs.evolve(t, kernel_dims=t.declared_dims)  # the cube reads the declared layout
        if t.name in aligner.opaque
        else attrs.evolve(t, kernel_dims=kernel_dims(t, aligner.named[t.name]))
        for t in kernel.inputs
    )
    outputs = tuple(
        attrs.evolve(t, kernel_dims=kernel_dims(t, aligner.named[t.name])) for t in kernel.outputs
    )
    return attrs.evolve(kernel, inputs=inputs, outputs=outputs, body=body)
