"""The IR verifier: the invariants each stage of the pipeline promises, checked between
passes (`lower(..., verify_each=True)`, `ptodsl compile --verify-each`, and after every pass
of every example in the tests). A violation is a bug in the pass that produced the IR, so
it is an internal error naming that pass, never a spec error.

Every stage:
- every op has an entry in the op registry, and attributes of exactly the class the entry
  names (none when it names none);
- every name is defined before it is used (inputs, params, earlier lets), no let is bound
  twice, every output is stored (again only after a store, updating it in place, as
  `isolate_reductions` does to reduce straight into the output);
- an elementwise op's shape is its operands' broadcast shape, with one dtype;
- a reduction's shape follows from its operand, its axes (within the operand's rank,
  sorted, distinct) and keepdim; a matmul's from its operands and transpose flags.
After `legalize`: every tensor op is a form the target supports (or a layout op).
After `merge_axes`: no kernel-side tensor or value has a rank above the target's.
After `tiling`: every tensor statement is in exactly one phase, phases keep statement
order, a vector tile has its phase's rank and fits the target's tile budget (its last axis
may exceed a short row: reductions round it up to PyPTO's 32-byte alignment).
After `loops`: every loop covers its axis exactly (count x chunk + tail).
"""

from __future__ import annotations

import math

from ptodsl import ir, ops
from ptodsl.target import Target, form

_ELEMENTWISE_KINDS = (
    ops.Kind.ARITHMETIC,
    ops.Kind.ELEMENTWISE,
    ops.Kind.COMPARISON,
    ops.Kind.SELECT,
)


class VerifyError(AssertionError):
    """The IR breaks an invariant its stage promises."""


def _stages_from(stage: str, first: str, order: tuple[str, ...]) -> bool:
    return stage in order and order.index(stage) >= order.index(first)


def verify(kernel: ir.Kernel, stage: str, target: Target, order: tuple[str, ...]) -> None:
    """Checks `kernel` as it stands after `stage` (a pass name, or "check" for the checked
    spec); `order` is the pipeline's pass order. Raises VerifyError."""
    problems = _Verifier(kernel, stage, target, order).problems()
    if problems:
        listed = "\n  ".join(problems)
        raise VerifyError(f"the IR after `{stage}` is invalid:\n  {listed}")


class _Verifier:
    def __init__(self, kernel: ir.Kernel, stage: str, target: Target, order: tuple[str, ...]):
        self.kernel = kernel
        self.target = target
        self.legalized = _stages_from(stage, "legalize", order)
        self.merged = _stages_from(stage, "merge_axes", order)
        self.tiled = _stages_from(stage, "tiling", order)
        self.looped = _stages_from(stage, "loops", order)
        self.found: list[str] = []

    def problems(self) -> list[str]:
        self.names()
        for index, stmt in enumerate(self.kernel.body):
            for node in ir.walk(stmt.value):
                if isinstance(node, ir.Op):
                    self.op(node, f"statement {index}")
        if self.merged:
            self.ranks()
        if self.tiled:
            self.schedule()
        return self.found

    def fail(self, message: str) -> None:
        self.found.append(message)

    def names(self) -> None:
        defined = {t.name for t in self.kernel.inputs} | {p.name for p in self.kernel.params}
        outputs = {t.name for t in self.kernel.outputs}
        stored: list[str] = []
        for index, stmt in enumerate(self.kernel.body):
            for node in ir.walk(stmt.value):
                if isinstance(node, ir.Ref) and node.name not in defined:
                    self.fail(f"statement {index} reads `{node.name}` before it is defined")
            if isinstance(stmt, ir.Let):
                if stmt.name in defined or stmt.name in outputs:
                    self.fail(f"statement {index} binds `{stmt.name}` again")
                defined.add(stmt.name)
            else:
                if stmt.output not in outputs:
                    self.fail(f"statement {index} stores to `{stmt.output}`, not an output")
                stored.append(stmt.output)
                defined.add(stmt.output)  # later stores may update it in place
        for name in sorted(outputs):
            if name not in stored:
                self.fail(f"output `{name}` is never stored")

    def op(self, node: ir.Op, where: str) -> None:
        try:
            definition = ops.lookup(node.op)
        except ops.UnknownOp as error:
            self.fail(f"{where}: {error}")
            return
        if type(node.attrs) is not (definition.attributes or type(None)):
            expected = definition.attributes.__name__ if definition.attributes else "none"
            self.fail(f"{where}: `{node.op}` has attributes {node.attrs!r}, not {expected}")
            return
        tensors = [o.type for o in node.operands if isinstance(o.type, ir.TensorType)]
        if not isinstance(node.type, ir.TensorType):
            if tensors:
                self.fail(f"{where}: `{node.op}` of a tensor has a scalar type")
            return
        if self.legalized and definition.kind is not ops.Kind.LAYOUT:
            if not self.target.supports(node):
                self.fail(f"{where}: `{form(node)}` is not a {self.target.name} form")
        kind = definition.kind
        if kind in _ELEMENTWISE_KINDS:
            self.elementwise(node, tensors, where)
        elif kind is ops.Kind.REDUCTION:
            self.reduction(node, where)
        elif kind is ops.Kind.MATMUL:
            self.matmul(node, where)

    def elementwise(self, node: ir.Op, tensors: list[ir.TensorType], where: str) -> None:
        shape: tuple[int, ...] | None = ()
        for tensor in tensors:
            shape = None if shape is None else ir.broadcast_shapes(shape, tensor.shape)
        if shape != node.type.shape:
            shapes = ", ".join(str(t) for t in tensors)
            self.fail(f"{where}: `{node.op}` of {shapes} has shape {list(node.type.shape)}")
        # where's condition is boolean; its branches, like every other op's operands, agree.
        dtypes = {t.dtype for t in tensors[1 if node.op == "where" else 0 :]}
        if len(dtypes) > 1:
            self.fail(f"{where}: `{node.op}` mixes dtypes")

    def reduction(self, node: ir.Op, where: str) -> None:
        (operand,) = node.operands
        if not isinstance(operand.type, ir.TensorType):
            self.fail(f"{where}: `{node.op}` reduces a scalar")
            return
        shape = operand.type.shape
        axes = node.attrs.axes
        if sorted(set(axes)) != list(axes) or not all(0 <= a < len(shape) for a in axes):
            self.fail(f"{where}: `{node.op}` over axes {list(axes)} of a rank-{len(shape)} value")
            return
        if node.attrs.keepdim:
            expected = tuple(1 if a in axes else size for a, size in enumerate(shape))
        else:
            expected = tuple(size for a, size in enumerate(shape) if a not in axes)
        if node.type.shape != expected:
            self.fail(
                f"{where}: `{node.op}` over axes {list(axes)} of {list(shape)} has shape "
                f"{list(node.type.shape)}, not {list(expected)}"
            )

    def matmul(self, node: ir.Op, where: str) -> None:
        a, b = (o.type for o in node.operands)
        if not (isinstance(a, ir.TensorType) and isinstance(b, ir.TensorType)):
            self.fail(f"{where}: `matmul` of a scalar")
            return
        a_shape = a.shape[:-2] + a.shape[-2:][:: -1 if node.attrs.a_trans else 1]
        b_shape = b.shape[:-2] + b.shape[-2:][:: -1 if node.attrs.b_trans else 1]
        if a_shape[-1] != b_shape[-2] or node.type.shape[-2:] != (a_shape[-2], b_shape[-1]):
            self.fail(f"{where}: `matmul` of {a} and {b} has shape {list(node.type.shape)}")

    def ranks(self) -> None:
        limit = self.target.max_rank
        for tensor in (*self.kernel.inputs, *self.kernel.outputs):
            if len(tensor.kernel_shape) > limit:
                self.fail(f"`{tensor.name}` has kernel rank {len(tensor.kernel_shape)} > {limit}")
        for index, stmt in enumerate(self.kernel.body):
            for node in ir.walk(stmt.value):
                if isinstance(node.type, ir.TensorType) and node.type.rank > limit:
                    self.fail(f"statement {index} has a rank-{node.type.rank} value")
                    break

    def schedule(self) -> None:
        schedule = self.kernel.schedule
        if schedule is None:
            self.fail("no schedule after tiling")
            return
        tensor_statements = [
            index for index, stmt in enumerate(self.kernel.body) if not ir.is_scalar(stmt.value)
        ]
        placed = [index for phase in schedule.phases for index in phase.statements]
        if placed != tensor_statements:
            self.fail(
                f"phases hold statements {placed}, the tensor statements are {tensor_statements}"
            )
        for number, phase in enumerate(schedule.phases):
            self.phase(number, phase)

    def phase(self, number: int, phase: ir.Phase) -> None:
        if phase.cube is None:
            if len(phase.tile) != len(phase.shape):
                self.fail(f"phase {number}: tile {list(phase.tile)} for shape {list(phase.shape)}")
            elif any(t < 1 for t in phase.tile):
                self.fail(f"phase {number}: empty tile {list(phase.tile)}")
            if math.prod(phase.tile) > self.target.max_tile_elements:
                self.fail(f"phase {number}: tile {list(phase.tile)} exceeds the tile budget")
        if self.looped:
            for loop in (phase.loop, phase.k_loop):
                if loop is None:
                    continue
                if loop.chunk < 1 or loop.count < 1:
                    self.fail(f"phase {number}: empty loop {loop}")
        loop = phase.loop
        if self.looped and loop is not None and phase.cube is None:
            covered = loop.count * loop.chunk + loop.tail
            if covered != phase.shape[loop.axis]:
                self.fail(
                    f"phase {number}: loop covers {covered} of axis {loop.axis} "
                    f"({phase.shape[loop.axis]})"
                )
