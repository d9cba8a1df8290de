"""Turns the schedule into the instructions the kernel runs, one list per phase
(`ir.Program`), so that codegen only prints them.

A phase without a loop sets its tile and computes its statements on whole tensors. A
looped phase runs its statements once on the constant-size tail block (retiled if the tail
is shorter than the tile; first, because pypto 0.2.0 drops what a block after a loop
assembles into a temporary the loop writes too), then on one block of the loop axis at a
time:
- a tensor made outside the phase that spans the loop axis is read through a view of the
  block (`_chunk_x`, `_tail_x`); an explicit expansion spanning the axis covers the block;
- a `let` that a later phase reads and that spans the loop axis is assembled into a
  full-size temporary allocated before the loop; other `let`s stay block-local (a
  loop-invariant one runs before the loop, in a phase of its own: `passes/loops.py`);
- a `let` reducing the loop axis writes one partial result per block into a `_parts`
  tensor, reduced after the loop (accumulating into a temporary computes zeros on pypto
  0.2.0); an output reducing it accumulates: the first block to run writes (the tail, or
  the loop's first iteration), the others combine;
- an output spanning the loop axis is assembled block by block.
A matmul phase sets its cube tiles and runs one matmul, or one per M chunk of A's rows
assembled into the result, or one per K chunk of both operands accumulating into the
output (under a vector tile for the accumulation).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from ptodsl.frontend.diagnostics import Span
from ptodsl.ir import nodes as ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def materialise(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    assert kernel.schedule is not None, "tiling and loops run first"
    variables = _loop_variables(kernel)
    phases: list[ir.PhaseCode] = []
    staging: list[ir.Staging] = []
    for index, phase in enumerate(kernel.schedule.phases):
        if phase.conv is not None:
            conv = _ConvPhase(kernel, phase, f"{kernel.name}_phase{index}", variables)
            phases.append(ir.PhaseCode(index, conv.instructions()))
            staging += conv.staging(index)
        else:
            phases.append(ir.PhaseCode(index, _phase(kernel, index, variables)))
    return attrs.evolve(kernel, program=ir.Program(tuple(phases), tuple(staging)))


def _phase(kernel: ir.Kernel, index: int, variables: _LoopVariables) -> tuple[ir.Instruction, ...]:
    assert kernel.schedule is not None
    phase = kernel.schedule.phases[index]
    loop_name = f"{kernel.name}_phase{index}"
    if phase.cube is not None:
        return _cube_phase(kernel, phase, loop_name, variables)
    if phase.window is not None:
        return _window_phase(kernel, phase, loop_name, variables)
    later_reads = _later_reads(kernel, index)
    code: list[ir.Instruction] = [ir.SetVecTiles(phase.tile)]
    loop = phase.loop
    if loop is None:
        return (*code, *_Block(kernel, phase, later_reads).instructions())
    partials = {partial.statement: partial for partial in phase.partials}
    for i in phase.statements:
        stmt = kernel.body[i]
        if not isinstance(stmt, ir.Let):
            continue
        value_type = stmt.value.type
        if i in partials:
            parts = ir.TensorType(partials[i].shape, value_type.dtype)
            code.append(ir.Allocate(_parts(stmt.name), parts, stmt.span))
        elif stmt.name in later_reads and value_type.shape[loop.axis] != 1:
            code.append(ir.Allocate(stmt.name, value_type, stmt.span))
    chunk, tail = _places(loop, variables)
    body = _Block(kernel, phase, later_reads, chunk, loop.axis)
    tail_code: tuple[ir.Instruction, ...] = ()
    if tail is not None:
        tail_code = _Block(kernel, phase, later_reads, tail, loop.axis).instructions()
        if phase.tail_tile is not None and phase.tail_tile != phase.tile:
            # the tail runs first, retiled; the loop's blocks take the phase's tile again
            tail_code = (ir.SetVecTiles(phase.tail_tile), *tail_code, ir.SetVecTiles(phase.tile))
    code.append(_block_loop(loop_name, loop, variables, body.instructions(), tail_code))
    blocks = loop.count + (1 if loop.tail else 0)
    for partial in phase.partials:
        stmt = kernel.body[partial.statement]
        reduction = stmt.value
        assert isinstance(reduction, ir.Op) and isinstance(reduction.attrs, ir.Reduce)
        parts_type = ir.TensorType(partial.shape, reduction.type.dtype)
        combine = ir.op(
            reduction.op,
            ir.Ref(_parts(stmt.name), parts_type, stmt.span),
            span=stmt.span,
            attributes=attrs.evolve(reduction.attrs, axes=(loop.axis,), keepdim=True),
            type=reduction.type,
        )
        code += [
            ir.Comment(f"{stmt.name}: the partial results of the {blocks} blocks, combined."),
            ir.SetVecTiles(partial.tile),
            ir.Assign(stmt.name, combine, stmt.span),
        ]
    return tuple(code)


def _parts(name: str) -> str:
    return ir.generated_name("parts", name)


def _later_reads(kernel: ir.Kernel, phase_index: int) -> set[str]:
    assert kernel.schedule is not None
    later = [i for p in kernel.schedule.phases[phase_index + 1 :] for i in p.statements]
    return {
        node.name
        for index in later
        for node in ir.walk(kernel.body[index].value)
        if isinstance(node, ir.Ref)
    }


@attrs.frozen
class _LoopVariables:
    """The names of a loop's variables: its block number and the block's first index."""

    index: str
    offset: str


def _loop_variables(kernel: ir.Kernel, index: str = "i", offset: str = "offset") -> _LoopVariables:
    """`i` and `offset`, or `i2`, `offset2`, ... where the spec uses those names."""
    return _LoopVariables(kernel.free_name(index), kernel.free_name(offset))


@attrs.frozen
class _Place:
    """Where one block lies along the loop axis: `rows` indices from `offset`, block number
    `index` (the loop's variables inside the loop, constants for the tail after it);
    `kind` names its block-local values (`_chunk_x`, `_tail_x`)."""

    kind: str
    rows: int
    offset: ir.Index
    index: ir.Index
    loop_has_tail: bool

    def named(self, name: str) -> str:
        """The block's own value of `name`."""
        return ir.generated_name(self.kind, name)

    @property
    def in_loop(self) -> bool:
        return isinstance(self.offset, str)


def _places(loop: ir.Loop, variables: _LoopVariables) -> tuple[_Place, _Place | None]:
    """The loop's blocks: any iteration's, and the tail's if the chunks leave one."""
    chunk = _Place("chunk", loop.chunk, variables.offset, variables.index, bool(loop.tail))
    if not loop.tail:
        return chunk, None
    return chunk, _Place("tail", loop.tail, loop.count * loop.chunk, loop.count, True)


def _block_loop(
    name: str,
    loop: ir.Loop,
    variables: _LoopVariables,
    body: tuple[ir.Instruction, ...],
    tail: tuple[ir.Instruction, ...],
) -> ir.BlockLoop:
    return ir.BlockLoop(
        name,
        loop.axis,
        loop.count,
        loop.chunk,
        body,
        tail_size=loop.tail,
        tail=tail,
        index=variables.index,
        offset=variables.offset,
    )


def _looped(
    name: str,
    loop: ir.Loop,
    variables: _LoopVariables,
    block: Callable[[_Place], list[ir.Instruction]],
) -> ir.BlockLoop:
    """A loop whose body and tail are `block` at their places (a matmul phase's)."""
    chunk, tail = _places(loop, variables)
    tail_code = () if tail is None else tuple(block(tail))
    return _block_loop(name, loop, variables, tuple(block(chunk)), tail_code)


class _Block:
    """The instructions of one vector phase's statements: over whole tensors (no `place`),
    or on the block of the loop axis `axis` at `place`."""

    def __init__(
        self,
        kernel: ir.Kernel,
        phase: ir.Phase,
        later_reads: set[str],
        place: _Place | None = None,
        axis: int = 0,
    ):
        self.kernel = kernel
        self.phase = phase
        self.later_reads = later_reads
        self.place = place
        self.axis = axis
        self.output_rank = {t.name: len(t.kernel_shape) for t in kernel.outputs}
        self.local: dict[str, str] = {}  # let name -> its name inside this block

    def spans_rows(self, shape: tuple[int, ...]) -> bool:
        """Whether a tensor of this shape is split by the loop (spans the loop axis)."""
        return self.place is not None and shape[self.axis] != 1

    def sized(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape with the loop axis cut to this block's extent."""
        assert self.place is not None
        rows = self.place.rows
        return tuple(rows if axis == self.axis else size for axis, size in enumerate(shape))

    def block_name(self, name: str) -> str:
        assert self.place is not None
        return self.place.named(name)

    def offsets(self, rank: int, start: ir.Index) -> tuple[ir.Index, ...]:
        return tuple(start if axis == self.axis else 0 for axis in range(rank))

    def in_block(self, node: ir.Expr) -> ir.Expr:
        """A node as this block computes it: tensors spanning the loop axis cut to the block
        (an explicit expansion covers the block, not the axis), names block-local."""
        spans = isinstance(node.type, ir.TensorType) and self.spans_rows(node.type.shape)
        if spans:
            node = attrs.evolve(
                node, type=attrs.evolve(node.type, shape=self.sized(node.type.shape))
            )
            if isinstance(node, ir.Op) and node.op == "expand":
                node = attrs.evolve(node, attrs=ir.Expand(node.type.shape))
        if isinstance(node, ir.Ref) and node.name in self.local:
            return attrs.evolve(node, name=self.local[node.name])
        if isinstance(node, ir.Ref) and spans:
            return attrs.evolve(node, name=self.block_name(node.name))
        return node

    def views(self, statements: list[ir.Stmt]) -> list[ir.Instruction]:
        """Views of the block this block reads from tensors made outside the phase."""
        made_here = {s.name for s in statements if isinstance(s, ir.Let)}
        seen: dict[str, ir.TensorType] = {}
        for stmt in statements:
            for node in ir.walk(stmt.value):
                if isinstance(node, ir.Ref) and node.name not in made_here:
                    if isinstance(node.type, ir.TensorType) and self.spans_rows(node.type.shape):
                        seen.setdefault(node.name, node.type)
        return [
            ir.View(
                self.block_name(name),
                name,
                attrs.evolve(tensor, shape=self.sized(tensor.shape)),
                self.offsets(tensor.rank, self.place.offset),
            )
            for name, tensor in seen.items()
            if self.place is not None
        ]

    def instructions(self) -> tuple[ir.Instruction, ...]:
        statements = [self.kernel.body[i] for i in self.phase.statements]
        code = self.views(statements)
        partials = {partial.statement for partial in self.phase.partials}
        for index, stmt in zip(self.phase.statements, statements, strict=True):
            value = ir.map_expr(stmt.value, self.in_block)
            if isinstance(stmt, ir.Let):
                code += self.let(stmt, value, index in partials)
            else:
                code += self.store(stmt, value)
        return tuple(code)

    def let(self, stmt: ir.Let, value: ir.Expr, partial: bool) -> list[ir.Instruction]:
        if partial:
            # One partial result per block, reduced once after the loop; accumulating into
            # a temporary instead computes zeros on pypto 0.2.0.
            assert self.place is not None
            local = self.block_name(stmt.name)
            offsets = self.offsets(stmt.value.type.rank, self.place.index)
            return [
                ir.Assign(local, value, stmt.span),
                ir.Assemble(local, _parts(stmt.name), offsets),
            ]
        if not (self.spans_rows(stmt.value.type.shape) and stmt.name in self.later_reads):
            assert self.place is None or stmt.name not in self.later_reads, (
                "a loop-invariant let a later phase reads runs before the loop (loops pass)"
            )
            self.local[stmt.name] = stmt.name
            return [ir.Assign(stmt.name, value, stmt.span)]
        # Read by a later phase: this block's rows go into the full-size temporary.
        assert self.place is not None
        local = self.block_name(stmt.name)
        self.local[stmt.name] = local
        offsets = self.offsets(stmt.value.type.rank, self.place.offset)
        return [ir.Assign(local, value, stmt.span), ir.Assemble(local, stmt.name, offsets)]

    def store(self, stmt: ir.Store, value: ir.Expr) -> list[ir.Instruction]:
        if stmt.clone:
            value = ir.op("clone", value, span=value.span)
        output = stmt.output
        if self.place is None:
            return [ir.StoreOutput(output, value, stmt.span)]
        part = self.block_name(output)
        code: list[ir.Instruction] = [ir.Assign(part, value, stmt.span)]
        if self.spans_rows(stmt.value.type.shape):
            offsets = self.offsets(self.output_rank[output], self.place.offset)
            return [*code, ir.Assemble(part, output, offsets)]
        # A reduction over the rows: each block adds its part to the output.
        assert isinstance(stmt.value, ir.Op), "only a reduction leaves the loop axis"
        return [*code, _accumulate(output, part, stmt.value.op, stmt.span, self.place)]


def _accumulate(output: str, part: str, reduction: str, span: Span, place: _Place) -> ir.Accumulate:
    """The first block to run (the tail, or else the loop's first iteration) writes the
    part, the others combine (accumulating into a temporary instead gives zeros on pypto
    0.2.0)."""
    if not place.in_loop:
        return ir.Accumulate(output, part, reduction, span, overwrites=True)
    first = None if place.loop_has_tail else place.index
    return ir.Accumulate(output, part, reduction, span, first_iteration=first)


def _cube_phase(
    kernel: ir.Kernel, phase: ir.Phase, loop_name: str, variables: _LoopVariables
) -> tuple[ir.Instruction, ...]:
    """A matmul phase: cube tiles, then one matmul, or one per chunk of M rows assembled
    into the result (a tail block after the loop when the chunks do not divide), or one per
    K chunk accumulating into the output."""
    assert phase.cube is not None
    (stmt,) = (kernel.body[i] for i in phase.statements)
    matmul = stmt.value
    assert isinstance(matmul, ir.Op) and isinstance(matmul.attrs, ir.Transposes)
    code: list[ir.Instruction] = [ir.SetCubeTiles(*phase.cube)]
    if ir.is_cube_matrix(matmul.operands[0]):
        code.insert(0, ir.SetVecTiles(phase.tile, purpose="the computed operand's matrix"))
    if phase.k_loop is not None:
        assert isinstance(stmt, ir.Store), "the loops pass splits K only for an output"
        return (*code, *_k_split(stmt, matmul, phase, loop_name, variables))
    loop = phase.loop
    if loop is None:
        if isinstance(stmt, ir.Let):
            return (*code, ir.Assign(stmt.name, matmul, stmt.span))
        return (*code, ir.StoreOutput(stmt.output, matmul, stmt.span))
    result = stmt.name if isinstance(stmt, ir.Let) else stmt.output
    if isinstance(stmt, ir.Let):
        code.append(ir.Allocate(result, matmul.type, stmt.span))
    a, b = matmul.operands
    assert isinstance(a, ir.Ref) and isinstance(a.type, ir.TensorType), "loops: declared A"
    k_size = a.type.shape[0] if matmul.attrs.a_trans else a.type.shape[1]

    def block(place: _Place) -> list[ir.Instruction]:
        # M is axis 0 of A, or axis 1 when A is stored transposed.
        rows = place.rows
        if matmul.attrs.a_trans:
            shape, at = (k_size, rows), (0, place.offset)
        else:
            shape, at = (rows, k_size), (place.offset, 0)
        a_block = ir.Ref(place.named(a.name), attrs.evolve(a.type, shape=shape), a.span)
        part = place.named(result)
        product = attrs.evolve(
            matmul,
            operands=(a_block, b),
            type=attrs.evolve(matmul.type, shape=(rows, matmul.type.shape[1])),
        )
        return [
            ir.View(a_block.name, a.name, a_block.type, at),
            ir.Assign(part, product, stmt.span),
            ir.Assemble(part, result, (place.offset, 0)),
        ]

    return (*code, _looped(loop_name, loop, variables, block))


# What a window's padding holds: a value no element beats (the dtype's largest finite
# value, signed: every window holds an element of the input, torch's padding rule), or 0.
_WINDOW_COMBINE = {
    "window_max": ("maximum", -1.0),
    "window_min": ("minimum", 1.0),
    "window_sum": ("add", 0.0),
    "window_mean": ("add", 0.0),
}


def _window_phase(
    kernel: ir.Kernel, phase: ir.Phase, loop_name: str, variables: _LoopVariables
) -> tuple[ir.Instruction, ...]:
    """A window phase: the steps on the whole operand, or on each block of its loop, the
    result assembled into the destination."""
    assert phase.window is not None
    (stmt,) = (kernel.body[i] for i in phase.statements)
    window = stmt.value
    (source,) = window.operands
    assert isinstance(source, ir.Ref) and isinstance(source.type, ir.TensorType)
    destination = stmt.name if isinstance(stmt, ir.Let) else stmt.output
    loop = phase.loop
    if loop is None:
        code, value = _window_steps(window, source, destination, phase.window, stmt.span)
        if isinstance(stmt, ir.Let):
            return (*code, ir.Assign(destination, value, stmt.span))
        return (*code, ir.StoreOutput(destination, value, stmt.span))

    def block(place: _Place) -> list[ir.Instruction]:
        shape = list(source.type.shape)
        shape[loop.axis] = place.rows
        at = tuple(place.offset if axis == loop.axis else 0 for axis in range(len(shape)))
        view = ir.View(
            place.named(source.name),
            source.name,
            ir.TensorType(tuple(shape), source.type.dtype),
            at,
        )
        part = place.named(destination)
        code, value = _window_steps(
            window, ir.Ref(view.name, view.type, source.span), part, phase.window, stmt.span
        )
        return [view, *code, ir.Assign(part, value, stmt.span), ir.Assemble(part, destination, at)]

    allocate = (
        [ir.Allocate(destination, window.type, stmt.span)] if isinstance(stmt, ir.Let) else []
    )
    return (*allocate, _looped(loop_name, loop, variables, block))


def _window_steps(
    window: ir.Op,
    source: ir.Ref,
    name: str,
    steps: tuple[ir.WindowStep, ...],
    span: Span,
) -> tuple[list[ir.Instruction], ir.Expr]:
    """The instructions of a window's steps on `source` (temporaries named after `name`),
    and the expression of the result."""
    combine, fill_sign = _WINDOW_COMBINE[window.op]
    dtype = window.type.dtype
    code: list[ir.Instruction] = []
    current: ir.Expr = source
    value: ir.Expr = source
    for number, step in enumerate(steps):
        axis, shape = step.working_axis, step.working_shape

        def step_name(kind: str, number: int = number) -> str:
            return ir.generated_name(f"{kind}{number}", name)

        def along(extent: int, shape: tuple[int, ...] = shape, axis: int = axis) -> ir.TensorType:
            return ir.TensorType(shape[:axis] + (extent,) + shape[axis + 1 :], dtype)

        if step.transposed:
            assert step.swap_tile is not None
            last = len(shape) - 1
            swapped = ir.op("swap", current, span=span, attributes=ir.Swap(last - 1, last))
            code += [
                ir.SetVecTiles(step.swap_tile, f"window axis {step.axis}: last two axes exchanged"),
                ir.Assign(step_name("swap"), swapped, span),
            ]
            current = ir.Ref(step_name("swap"), swapped.type, span)
        code.append(ir.SetVecTiles(step.frame_tile, f"window axis {step.axis}: padding"))
        fill = ir.Fill(fill_sign * dtype.largest)
        padded = current
        edges: dict[int, ir.Ref] = {}  # one fill per length: both ends share it when equal
        for extent, at_front in ((step.front, True), (step.back, False)):
            if not extent:
                continue
            if extent not in edges:
                edge_name = step_name("fill" if not edges else "fillb")
                code.append(
                    ir.Assign(
                        edge_name,
                        ir.op("fill", span=span, attributes=fill, type=along(extent)),
                        span,
                    )
                )
                edges[extent] = ir.Ref(edge_name, along(extent), span)
            edge = edges[extent]
            pair = (edge, padded) if at_front else (padded, edge)
            joined = along(padded.type.shape[axis] + extent)
            label = step_name("front" if at_front else "pad")
            concatenated = ir.op("cat", *pair, span=span, attributes=ir.Along(axis))
            code.append(ir.Assign(label, concatenated, span))
            padded = ir.Ref(label, joined, span)
        outer, rows, stride, inner = step.split
        split_type = ir.TensorType(step.split, dtype)
        code += [
            ir.SetVecTiles(step.split_tile, f"window axis {step.axis}: taps"),
            ir.Assign(
                step_name("split"),
                ir.op("reshape", padded, span=span, attributes=ir.Reshape(step.split)),
                span,
            ),
        ]
        split = ir.Ref(step_name("split"), split_type, span)
        taps = [
            ir.op(
                "slice",
                split,
                span=span,
                attributes=ir.Slice(
                    (0, row, column, 0), (None, row + step.extent, column + 1, None)
                ),
            )
            for row, column in step.taps
        ]
        # One tap (a stepped slice: a window of one element) is still copied under the
        # taps' tile: left a view, pypto would cut it with the result's tile and fail.
        combined = taps[0] if len(taps) > 1 else ir.op("clone", taps[0], span=span)
        for tap in taps[1:]:
            combined = ir.op(combine, combined, tap, span=span)
        code += [
            ir.Assign(step_name("taps"), combined, span),
            ir.SetVecTiles(step.result_tile, f"window axis {step.axis}: result"),
        ]
        taps_ref = ir.Ref(step_name("taps"), combined.type, span)
        unsplit = along(step.extent)
        value = ir.op("reshape", taps_ref, span=span, attributes=ir.Reshape(unsplit.shape))
        if step.transposed:
            code.append(ir.Assign(step_name("unswap"), value, span))
            unswap = ir.Ref(step_name("unswap"), value.type, span)
            last = len(shape) - 1
            value = ir.op("swap", unswap, span=span, attributes=ir.Swap(last - 1, last))
        if number < len(steps) - 1:
            between = ir.generated_name(f"axis{step.axis}", name)
            code.append(ir.Assign(between, value, span))
            current = ir.Ref(between, value.type, span)
    if window.op == "window_mean":
        count = math.prod(window.attrs.size)
        value = ir.op("mul", value, ir.Const(1.0 / count, span), span=span)
    return code, value


class _ConvPhase:
    """A convolution phase as `ir.ConvPlan` describes it: the weight's tap matrices once,
    then per batch element the padded input and per block of rows and group the taps'
    matmuls, summed and assembled."""

    def __init__(
        self, kernel: ir.Kernel, phase: ir.Phase, loop_name: str, variables: _LoopVariables
    ):
        assert phase.conv is not None
        self.plan = phase.conv
        (self.stmt,) = (kernel.body[i] for i in phase.statements)
        conv = self.stmt.value
        assert isinstance(conv, ir.Op) and isinstance(conv.attrs, ir.Conv)
        self.conv = conv
        self.geometry = ir.ConvGeometry.of(conv)
        self.x, self.weight = conv.operands
        assert isinstance(self.x, ir.Ref) and isinstance(self.weight, ir.Ref)
        self.weight_shape = next(
            t.kernel_shape for t in kernel.inputs if t.name == self.weight.name
        )
        stmt = self.stmt
        self.destination = stmt.name if isinstance(stmt, ir.Let) else stmt.output
        self.loop_name = loop_name
        self.rows_variables = variables
        # the batch loop's variables: free names beside the rows loop's
        self.batch = _loop_variables(
            kernel, f"{variables.index}_batch", f"{variables.offset}_batch"
        )
        self.lead = () if self.geometry.merges_batch else (1,)
        launches = kernel.launches
        # a row launch's taps view rows of the whole input from the launch's first row
        self.first_row = (
            None if launches is None or launches.rows is None else launches.rows.variable
        )
        self.buffer: ir.Ref | None = None  # the staging launch's padded input
        if self.plan.staged:
            shape = (self.plan.batch, self.geometry.in_channels, *self.padded_extents())
            if self.geometry.merges_batch:
                shape = (shape[0] * shape[1], *shape[2:])
            self.buffer = self.ref(ir.generated_name("padded", self.x.name), shape)

    def typed(self, shape: tuple[int, ...]) -> ir.TensorType:
        return ir.TensorType(shape, self.conv.type.dtype)

    def ref(self, name: str, shape: tuple[int, ...]) -> ir.Ref:
        return ir.Ref(name, self.typed(shape), self.stmt.span)

    def tile(self, shape: tuple[int, ...], purpose: str) -> ir.SetVecTiles:
        return ir.SetVecTiles(self.plan.tile(shape), purpose)

    def channel(self, first: int, per_batch: int) -> tuple[ir.Index, ...]:
        """The leading offsets of channel `first` of the loop's batch element: [batch,
        channel], or one merged axis."""
        if self.geometry.merges_batch:
            return (ir.Affine(self.batch.offset, per_batch, first),)
        return (self.batch.offset, first)

    def instructions(self) -> tuple[ir.Instruction, ...]:
        # the vector cores' depthwise path runs no matmul
        code: list[ir.Instruction] = [] if self.plan.vector else [ir.SetCubeTiles(*self.plan.cube)]
        if isinstance(self.stmt, ir.Let):
            code.append(ir.Allocate(self.destination, self.conv.type, self.stmt.span))
        code += self.tap_columns() if self.plan.vector else self.group_weights()
        source, body = self.padded_input()
        rows = _looped(
            f"{self.loop_name}_rows",
            self.plan.rows,
            self.rows_variables,
            lambda place: self.block(place, source),
        )
        code.append(
            ir.BlockLoop(
                f"{self.loop_name}_batch",
                0,
                self.plan.batch,
                1,
                (*body, rows),
                index=self.batch.index,
                offset=self.batch.offset,
            )
        )
        return tuple(code)

    def group_weights(self) -> list[ir.Instruction]:
        """Each group's [C_out/groups, K] matrix of the weight, its columns in the order the
        taps' views are stacked (input channel major, then the weight's tap): a row block of
        the weight seen as [C_out, K], or a transposed convolution's [C_in/groups, C_out /
        groups, taps] exchanged to [C_out/groups, C_in/groups, taps]."""
        geometry, span = self.geometry, self.stmt.span
        cig, cog = geometry.group_in, geometry.group_out
        taps, stacked = len(geometry.taps), geometry.stacked
        weight = self.ref(self.weight.name, self.weight_shape)
        self.weights: dict[tuple[int, int], ir.Ref] = {}
        code: list[ir.Instruction] = [self.tile(self.weight_shape, "the weight")]
        if not geometry.transposed:
            whole = self.ref(
                ir.generated_name("matrix", self.weight.name), (geometry.out_channels, stacked)
            )
            if whole.type.shape == weight.type.shape:
                # already the matrix (one input channel): pypto 0.2.0's graph verification
                # fails a reshape of a kernel input to its own shape (FB100E)
                whole = weight
            else:
                code.append(ir.Assign(whole.name, ir.op_reshape(weight, whole.type.shape), span))
            for group in range(geometry.attributes.groups):
                self.weights[0, group], cut = self.group_slice(whole, group, cog, "matrix")
                code += cut
            return code
        by_input = self.ref(
            ir.generated_name("channels", self.weight.name), (geometry.in_channels, cog, taps)
        )
        code.append(ir.Assign(by_input.name, ir.op_reshape(weight, by_input.type.shape), span))
        for group in range(geometry.attributes.groups):
            part, cut = self.group_slice(by_input, group, cig, "channels")
            code += cut
            exchanged = self.ref(
                ir.generated_name(f"exchanged{group}", self.weight.name), (cog, cig, taps)
            )
            matrix = self.ref(ir.generated_name(f"matrix{group}", self.weight.name), (cog, stacked))
            code += [
                self.tile(part.type.shape, f"group {group}: the weight, exchanged"),
                ir.Assign(
                    exchanged.name,
                    ir.op("swap", part, span=span, attributes=ir.Swap(0, 1)),
                    span,
                ),
                self.tile(exchanged.type.shape, f"group {group}: the weight's matrix"),
                ir.Assign(matrix.name, ir.op_reshape(exchanged, matrix.type.shape), span),
            ]
            self.weights[0, group] = matrix
        return code

    def group_slice(
        self, whole: ir.Ref, group: int, rows: int, what: str
    ) -> tuple[ir.Ref, list[ir.Instruction]]:
        """Group `group`'s `rows` leading rows of `whole` and the slice that cuts them
        (`whole` itself, and nothing to do, when there is one group)."""
        if self.geometry.attributes.groups == 1:
            return whole, []
        span, rank = self.stmt.span, len(whole.type.shape)
        part = self.ref(
            ir.generated_name(f"{what}g{group}", self.weight.name), (rows, *whole.type.shape[1:])
        )
        cut = ir.Slice(
            (group * rows, *(0,) * (rank - 1)), ((group + 1) * rows, *(None,) * (rank - 1))
        )
        crop = ir.op("slice", whole, span=span, attributes=cut)
        return part, [ir.Assign(part.name, crop, span)]

    def tap_columns(self) -> list[ir.Instruction]:
        """A depthwise convolution's weight [C, taps]: each tap's column [C, 1]."""
        span, channels = self.stmt.span, self.geometry.out_channels
        weight = self.ref(self.weight.name, self.weight_shape)
        code: list[ir.Instruction] = [self.tile(self.weight_shape, "each tap's column")]
        self.weights = {}
        for tap in range(len(self.geometry.taps)):
            column = self.ref(ir.generated_name(f"tap{tap}", self.weight.name), (channels, 1))
            cut = ir.Slice((0, tap), (None, tap + 1))
            code.append(
                ir.Assign(column.name, ir.op("slice", weight, span=span, attributes=cut), span)
            )
            self.weights[tap, 0] = column
        return code

    def padded_extents(self) -> tuple[int, ...]:
        """The spatial extents of the input spaced and padded."""
        geometry, plan = self.geometry, self.plan
        return tuple(
            n * gap + front + back
            for n, gap, front, back in zip(
                geometry.spatial, geometry.inserted, plan.front, plan.back, strict=True
            )
        )

    def padded_input(self) -> tuple[ir.Ref | None, list[ir.Instruction]]:
        """The batch element's input spaced and padded with zeros (the staging launch's, or
        the kernel's own), each strided axis split, [C_in, *padded]; or None when none of
        that applies: the taps then view the input itself."""
        geometry, plan = self.geometry, self.plan
        strided = any(step > 1 for step in geometry.stride)
        if self.buffer is not None:
            current, code = self.element(self.buffer.name, self.padded_extents())
        elif any(plan.front) or any(plan.back) or any(g > 1 for g in geometry.inserted):
            current, code = self.zero_padded()
        elif strided:
            current, code = self.element(self.x.name, geometry.spatial)
        else:
            return None, []
        if strided:
            split = geometry.split_source(current.type.shape[1:])
            value = ir.op_reshape(current, split)
            current = self.ref(ir.generated_name("strides", self.x.name), split)
            code += [
                self.tile(split, "each strided axis as [length / stride, stride]"),
                ir.Assign(current.name, value, self.stmt.span),
            ]
        return current, code

    def staging(self, phase: int) -> list[ir.Staging]:
        """The launch that writes every batch element's padded input into the buffer the
        taps view, when the plan stages it."""
        if self.buffer is None:
            return []
        current, body = self.zero_padded()
        element = (*self.lead, *current.type.shape)
        if self.lead:
            slab = self.ref(ir.generated_name("slab", self.x.name), element)
            body += [
                self.tile(element, "the padded element"),
                ir.Assign(slab.name, ir.op_reshape(current, element), self.stmt.span),
            ]
            current = slab
        at = (*self.channel(0, self.geometry.in_channels), *(0,) * len(self.geometry.spatial))
        body.append(ir.Assemble(current.name, self.buffer.name, at))
        loop = ir.BlockLoop(
            f"{self.loop_name}_staging",
            0,
            self.plan.batch,
            1,
            tuple(body),
            index=self.batch.index,
            offset=self.batch.offset,
        )
        return [ir.Staging(phase, self.buffer.name, self.buffer.type, self.x.name, (loop,))]

    def element(self, source: str, extents: tuple[int, ...]) -> tuple[ir.Ref, list[ir.Instruction]]:
        """The loop's batch element of `source` (the input, or the staged buffer), [C_in,
        *extents]."""
        ci, span = self.geometry.in_channels, self.stmt.span
        view_shape = (*self.lead, ci, *extents)
        element = self.ref(ir.generated_name("element", self.x.name), view_shape)
        code: list[ir.Instruction] = [
            self.tile(view_shape, "the batch element's input"),
            ir.View(
                element.name,
                source,
                element.type,
                (*self.channel(0, ci), *(0,) * len(extents)),
            ),
        ]
        if not self.lead:
            return element, code
        current = self.ref(ir.generated_name("input", self.x.name), (ci, *extents))
        code.append(ir.Assign(current.name, ir.op_reshape(element, current.type.shape), span))
        return current, code

    def zero_padded(self) -> tuple[ir.Ref, list[ir.Instruction]]:
        """The loop's batch element of the input spaced and padded with zeros, [C_in,
        *padded], built from pieces joined on the vector cores."""
        geometry, span, plan = self.geometry, self.stmt.span, self.plan
        ci = geometry.in_channels
        current, code = self.element(self.x.name, geometry.spatial)
        extents = list(geometry.spatial)
        for axis, gap in enumerate(geometry.inserted):
            if gap == 1:
                continue
            before, n, gap, after = geometry.spacing(axis, tuple(extents))
            extents[axis] *= gap
            spaced = self.ref(ir.generated_name(f"spaced{axis}", self.x.name), (ci, *extents))
            purpose = f"spacing spatial axis {axis}"
            if after > 1:  # [before, n, 1, after] beside [before, n, gap - 1, after] zeros
                code.append(self.tile((before, n, gap, after), purpose))
                joined = self.joined_zeros(current, (before, n, 1, after), gap, axis)
                code += joined[:-1]
                code.append(
                    ir.Assign(spaced.name, ir.op_reshape(joined[-1], spaced.type.shape), span)
                )
            else:
                code += self.spaced_last(current, spaced, (before, n, gap), axis, purpose)
            current = spaced
        for axis, (front, back) in enumerate(zip(plan.front, plan.back, strict=True)):
            if not front and not back:
                continue
            padded = (ci, *extents[:axis], extents[axis] + front + back, *extents[axis + 1 :])
            code.append(self.tile(padded, f"padding along spatial axis {axis}"))
            value: ir.Expr = current
            zeros: dict[int, ir.Ref] = {}  # one fill per length: both ends share it when equal
            for edge, at_front in ((front, True), (back, False)):
                if not edge:
                    continue
                if edge not in zeros:
                    fill_shape = (ci, *extents[:axis], edge, *extents[axis + 1 :])
                    fill = ir.op(
                        "fill", span=span, attributes=ir.Fill(0.0), type=self.typed(fill_shape)
                    )
                    name = ir.generated_name(f"zeros{axis}{'' if not zeros else 'b'}", self.x.name)
                    code.append(ir.Assign(name, fill, span))
                    zeros[edge] = self.ref(name, fill_shape)
                joined_shape = list(value.type.shape)
                joined_shape[axis + 1] += edge
                pair = (zeros[edge], value) if at_front else (value, zeros[edge])
                value = ir.op("cat", *pair, span=span, attributes=ir.Along(axis + 1))
            extents[axis] += front + back
            current = self.ref(ir.generated_name(f"pad{axis}", self.x.name), (ci, *extents))
            code.append(ir.Assign(current.name, value, span))
        return current, code

    def joined_zeros(self, value: ir.Expr, column: tuple[int, ...], gap: int, axis: int) -> list:
        """Assignments of `value` seen as `column` (1 along axis 2 of it) and of `gap - 1`
        zeros beside it, then their join along that axis (an expression, last)."""
        span = self.stmt.span
        names = (ir.generated_name(f"{kind}{axis}", self.x.name) for kind in ("column", "gaps"))
        column_ref, zeros_ref = (
            self.ref(name, shape)
            for name, shape in zip(
                names, (column, (*column[:2], gap - 1, *column[3:])), strict=True
            )
        )
        return [
            ir.Assign(column_ref.name, ir.op_reshape(value, column), span),
            ir.Assign(
                zeros_ref.name,
                ir.op("fill", span=span, attributes=ir.Fill(0.0), type=zeros_ref.type),
                span,
            ),
            ir.op("cat", column_ref, zeros_ref, span=span, attributes=ir.Along(2)),
        ]

    def spaced_last(
        self,
        value: ir.Ref,
        spaced: ir.Ref,
        sizes: tuple[int, int, int],
        axis: int,
        purpose: str,
    ) -> list[ir.Instruction]:
        """`value` spaced along its last axis: [before, n] exchanged to [n, before], each row
        followed by `gap - 1` rows of zeros, [n * gap, before] exchanged back."""
        before, n, gap = sizes
        span = self.stmt.span
        rows = self.ref(ir.generated_name(f"exchanged{axis}", self.x.name), (n, before))
        flat = ir.op_reshape(value, (before, n))
        joined = self.joined_zeros(rows, (1, n, 1, before), gap, axis)
        rows_spaced = self.ref(ir.generated_name(f"joined{axis}", self.x.name), (n * gap, before))
        back = ir.op("swap", rows_spaced, span=span, attributes=ir.Swap(0, 1))
        return [
            self.tile((before, n), f"{purpose}: exchanged"),
            ir.Assign(rows.name, ir.op("swap", flat, span=span, attributes=ir.Swap(0, 1)), span),
            self.tile((1, n, gap, before), purpose),
            *joined[:-1],
            ir.Assign(rows_spaced.name, ir.op_reshape(joined[-1], rows_spaced.type.shape), span),
            self.tile((n * gap, before), f"{purpose}: exchanged back"),
            ir.Assign(spaced.name, ir.op_reshape(back, spaced.type.shape), span),
        ]

    def block(self, place: _Place, source: ir.Ref | None) -> list[ir.Instruction]:
        """One block of output rows of the loop's batch element: per group, every tap's
        view of the input stacked into one [K, columns] matrix, times the group's weight
        matrix on the cube, assembled into the result. A depthwise convolution on the
        vector cores takes every channel at once: each tap's view times the tap's column,
        summed."""
        if self.plan.vector:
            return self.vector_block(place, source)
        geometry, span = self.geometry, self.stmt.span
        rows, rest = place.rows, geometry.out[1:]
        columns = rows * math.prod(rest)
        cig, taps = geometry.group_in, len(geometry.taps)
        tap_shape = geometry.tap_view(rows, () if source is not None else self.lead, cig)
        # the views in the weight matrix's column order: a transposed convolution's flipped
        in_weight_order = sorted(geometry.taps, key=geometry.tap_weight)
        code: list[ir.Instruction] = []
        for group in range(geometry.attributes.groups):
            code.append(self.tile(tap_shape, f"group {group}: the taps' views"))
            piece_shape = (cig, 1, columns) if taps > 1 else (cig, columns)
            pieces = []
            for number, tap in enumerate(in_weight_order):
                view = self.tap_view(place, source, tap, number, group, tap_shape)
                piece = self.ref(place.named(f"col{number}g{group}"), piece_shape)
                code += [
                    view,
                    ir.Assign(piece.name, ir.op_reshape(self.viewed(view), piece_shape), span),
                ]
                pieces.append(piece)
            matrix = pieces[0]
            if taps > 1:
                stack = self.ref(place.named(f"stack{group}"), (cig, taps, columns))
                code += [
                    ir.Allocate(stack.name, stack.type, span),
                    self.tile(stack.type.shape, f"group {group}: the taps' views stacked"),
                    *(
                        ir.Assemble(piece.name, stack.name, (0, position, 0))
                        for position, piece in enumerate(pieces)
                    ),
                ]
                matrix = self.ref(place.named(f"matrix{group}"), (geometry.stacked, columns))
                code.append(ir.Assign(matrix.name, ir.op_reshape(stack, matrix.type.shape), span))
            product = self.ref(place.named(f"prod{group}"), (geometry.group_out, columns))
            matmul = ir.op(
                "matmul",
                self.weights[0, group],
                matrix,
                span=span,
                attributes=ir.Transposes(False, False),
                type=product.type,
            )
            code.append(ir.Assign(product.name, matmul, span))
            code += self.assembled(place, product, group, product.type.shape)
        return code

    def vector_block(self, place: _Place, source: ir.Ref | None) -> list[ir.Instruction]:
        """A depthwise block on the vector cores: each tap's view of every channel times the
        tap's column of the weight, summed."""
        geometry, span = self.geometry, self.stmt.span
        rows, rest = place.rows, geometry.out[1:]
        columns = rows * math.prod(rest)
        channels = geometry.out_channels
        tap_shape = geometry.tap_view(rows, () if source is not None else self.lead, channels)
        code: list[ir.Instruction] = [self.tile(tap_shape, "the taps' views")]
        total: ir.Expr | None = None
        for number, tap in enumerate(geometry.taps):
            view = self.tap_view(place, source, tap, number, 0, tap_shape)
            matrix = self.ref(place.named(f"col{number}g0"), (channels, columns))
            code += [
                view,
                ir.Assign(matrix.name, ir.op_reshape(self.viewed(view), matrix.type.shape), span),
            ]
            term = ir.op("mul", matrix, self.weights[geometry.tap_weight(tap), 0], span=span)
            total = term if total is None else ir.op("add", total, term, span=span)
        assert total is not None
        return code + self.assembled(place, total, 0, (channels, columns))

    def tap_view(
        self,
        place: _Place,
        source: ir.Ref | None,
        tap: tuple[int, ...],
        number: int,
        group: int,
        shape: tuple[int, ...],
    ) -> ir.View:
        """The block's view of the (padded, split) input at `tap`, from the group's first
        channel."""
        geometry = self.geometry
        first, *others = geometry.tap_start(tap, self.plan.skip)
        spatial = (_shifted(place.offset, first[0], self.first_row), *first[1:])
        spatial += tuple(start for starts in others for start in starts)
        channel = group * geometry.group_in
        if source is not None:
            name, at = source.name, (channel, *spatial)
        else:
            name, at = self.x.name, (*self.channel(channel, geometry.in_channels), *spatial)
        return ir.View(place.named(f"view{number}g{group}"), name, self.typed(shape), at)

    def viewed(self, view: ir.View) -> ir.Ref:
        return ir.Ref(view.name, view.type, self.stmt.span)

    def assembled(
        self, place: _Place, total: ir.Expr, group: int, summed_shape: tuple[int, int]
    ) -> list[ir.Instruction]:
        """The taps' sum of a group's block, reshaped to the result's layout and assembled
        into its cell."""
        span, rest = self.stmt.span, self.geometry.out[1:]
        channels = summed_shape[0]
        result_shape = (*self.lead, channels, place.rows, *rest)
        part = self.ref(place.named(f"part{group}"), result_shape)
        first = (*self.channel(group * channels, self.geometry.out_channels), place.offset)
        code: list[ir.Instruction] = []
        summed = total
        if not isinstance(total, ir.Ref):  # the vector cores' sum of the taps' products
            summed = self.ref(place.named(f"sum{group}"), summed_shape)
            code += [self.tile(summed_shape, "the taps' sum"), ir.Assign(summed.name, total, span)]
        return [
            *code,
            self.tile(result_shape, f"group {group}: the block"),
            ir.Assign(part.name, ir.op_reshape(summed, result_shape), span),
            ir.Assemble(part.name, self.destination, (*first, *(0,) * len(rest))),
        ]


def _shifted(offset: ir.Index, by: int, first_row: str | None = None) -> ir.Index:
    """A loop offset plus a constant (and a row launch's first row)."""
    if isinstance(offset, int):
        return offset + by if first_row is None else ir.Affine(first_row, 1, offset + by)
    assert isinstance(offset, str), "a block's offset is its loop's variable"
    if first_row is not None:
        return ir.Affine(offset, 1, by, shift=first_row)
    return ir.Affine(offset, 1, by) if by else offset


def _k_split(
    stmt: ir.Store, matmul: ir.Op, phase: ir.Phase, loop_name: str, variables: _LoopVariables
) -> list[ir.Instruction]:
    """K chunks of a long contraction; each partial product accumulates into the output,
    on the vector cores under the loops pass's accumulation tile."""
    a, b = matmul.operands
    assert isinstance(a, ir.Ref) and isinstance(b, ir.Ref)
    loop = phase.k_loop
    assert loop is not None and phase.accumulate_tile is not None
    m, n = matmul.type.shape

    def k_slice(operand: ir.Ref, rows: int, k_first: bool, place: _Place) -> ir.View:
        """A K-slice of an operand stored as [rows, K], or as [K, rows] when `k_first`."""
        assert isinstance(operand.type, ir.TensorType)
        if k_first:
            shape, at = (place.rows, rows), (place.offset, 0)
        else:
            shape, at = (rows, place.rows), (0, place.offset)
        name = place.named(operand.name)
        return ir.View(name, operand.name, attrs.evolve(operand.type, shape=shape), at)

    def block(place: _Place) -> list[ir.Instruction]:
        a_view = k_slice(a, m, matmul.attrs.a_trans, place)
        b_view = k_slice(b, n, not matmul.attrs.b_trans, place)
        operands = (
            ir.Ref(a_view.name, a_view.type, a.span),
            ir.Ref(b_view.name, b_view.type, b.span),
        )
        part = place.named(stmt.output)
        return [
            a_view,
            b_view,
            ir.Assign(part, attrs.evolve(matmul, operands=operands), stmt.span),
            _accumulate(stmt.output, part, "sum", stmt.span, place),
        ]

    return [
        ir.SetVecTiles(phase.accumulate_tile, purpose="for the accumulation"),
        _looped(loop_name, loop, variables, block),
    ]
