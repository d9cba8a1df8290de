"""The IR verifier: the invariants the IR carries, checked after the front end and after
every pass of every compilation (`pipeline.lower`, always). A violation is a bug in the
pass that produced the IR, so it is an internal error naming that pass, never a spec error.
What is checked follows from the IR itself, not from where the pass stands in the pipeline:
what the kernel claims (`target_forms`, `target_ranks`), whether it has a schedule, loops,
partial results, a program; the stage's name only names the IR in the message.

Every IR:
- every op has an entry in the op registry, and attributes of exactly the class the entry
  names (none when it names none);
- every name is defined before it is used (inputs, params, earlier lets), no let is bound
  twice, every output is stored (again only after a store, updating it in place, as
  `isolate_reductions` does to reduce straight into the output);
- an elementwise op's shape is its operands' broadcast shape, with one dtype;
- a reduction's shape follows from its operand, its axes (within the operand's rank,
  sorted, distinct) and keepdim; a matmul's from its operands and transpose flags; a scan
  has its operand's type and runs along one of its axes, and so does a triangle mask; a
  position count has its operand's extent along its axis and 1 along the others.
Where the kernel claims `target_forms` (legalize's): every tensor op is a form the target
supports (or a layout op).
Throughout: a crop's bounds lie inside its operand, a concatenation's operands agree off its
axis, a cast has its attributes' dtype, and no elementwise op computes on integers; a
window's shape follows from its operand and attributes (torch's pooling rule), one value per
windowed axis (sorted, distinct, within the rank); a reshape keeps the element count.
Where it claims `target_ranks` (merge_axes'): no kernel-side tensor or value has a rank
above the target's.
Where it has a schedule (tiling's): every tensor statement is in exactly one phase, phases
keep statement order, a vector tile has its phase's rank, at least 2 (the cost model
undercharges rank-1 copies), and fits the target's tile budget (its last axis may exceed a
short row: reductions round it up to PyPTO's 32-byte alignment), and a scan along the last
axis keeps that axis's tile within the target's scan limit. A window phase holds one
window statement and a step per windowed axis, in order, each step's block the previous
step's result (the first the operand, or its loop block), its pad making the axis `rows *
stride` long, its split that padded block at rank 4, its taps views within the split, and
its tiles of the right ranks within the tile budget and the auto-tile limit.
Where a phase has a loop (loops'): it covers its axis exactly (count x chunk + tail), a
matmul's M loop its rows and a K loop the contraction; no loop splits an axis a scan runs
along; every `let` of a looped vector phase whose reduction runs over the loop axis keeps
one partial result per block (pypto 0.2.0 computes an accumulation into a temporary as
zeros), in a tensor of its shape with one entry per block on that axis, under a tile of its
rank within the budget, and no other statement has partial results.
Where it has a program (materialise's; never without a schedule): every phase of the
schedule has its instructions, in order, and
- every name an instruction reads is defined earlier in its scope (the kernel's tensors and
  scalars, earlier instructions of its block or of an enclosing one, the loop's `i` and
  `offset` inside the loop body); names bound in a loop's body or tail are local to it;
  no instruction binds the name of a kernel input, output or param;
- a name reads as the type it was defined with, and every expression is well typed as in
  every stage (so block-local values have the block's shape);
- nothing reads an output or a temporary before it is written whole;
- every view's size plus offset, at every iteration of its loop, is within its source's
  shape (same rank and dtype), and so is every assembled block within its destination;
- the blocks one loop assembles into a tensor cover it exactly once (every index, no
  overlap); every allocated temporary is covered so, and every output is written: stored
  whole, assembled whole, or accumulated into;
- an accumulation adds a part of its output's shape with a reduction that has a combine
  rule, and writes first: in a loop body, iteration 0 of that loop's index writes; anywhere
  else the output was written before;
- a loop is its phase's planned loop (axis, count, chunk, tail), its tail block is there
  exactly when the tail is not empty, and its variables shadow no name;
- a matmul runs after cube tiles were set in its phase, any other computation after vector
  tiles were, and every vector tile fits the tile budget;
- a staging launch belongs to a convolution phase whose plan stages its input, reads only
  that kernel input, and writes its buffer (a new name) whole, as its phase's batch loop.
Between a pass and the IR before it: the pass drops none of its claims, nor its schedule
or program; and, once the kernel is in its frame (align_axes), every reduction, scan,
position count, flip, window and crop of a statement the pass kept still works along the
same axes, whatever axes it merged, split or dropped: a reduction's reduced axes are never
merged with axes it keeps, a scan's axis with another axis, and a merged axis is reduced
(scanned, windowed, cut) exactly when the axes it holds were (axes 1 long aside).
"""

from __future__ import annotations

import itertools
import math
import operator

import attrs

from ptodsl.ir import forward, ops
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import Target, form, ub_use

_ELEMENTWISE_KINDS = (
    ops.Kind.ARITHMETIC,
    ops.Kind.ELEMENTWISE,
    ops.Kind.COMPARISON,
    ops.Kind.SELECT,
)


class VerifyError(AssertionError):
    """The IR breaks an invariant it carries."""


def verify(kernel: ir.Kernel, stage: str, target: Target, before: ir.Kernel | None = None) -> None:
    """Checks the invariants `kernel` carries (what it claims: target forms and ranks, a
    schedule, loops, a program) and, given the IR `before` the pass that made it (verified
    already), that the pass kept what `before` established. `stage` (a pass name, or
    "check" for the checked spec) only names the IR in the message. Raises VerifyError."""
    problems = _Verifier(kernel, target, before).problems()
    if before is not None:
        problems += _transition(before, kernel)
    if problems:
        listed = "\n  ".join(problems)
        raise VerifyError(f"the IR after `{stage}` is invalid:\n  {listed}")


def verify_forward(program: forward.Forward) -> None:
    """Checks the forward program's invariants (`forward.forward_faults`): a violation is a
    bug in the partition or in the kernels' lowering, never a module emitted from it."""
    problems = forward.forward_faults(program)
    if problems:
        listed = "\n  ".join(problems)
        raise VerifyError(f"the forward program is invalid:\n  {listed}")


class _Verifier:
    def __init__(self, kernel: ir.Kernel, target: Target, before: ir.Kernel | None = None):
        self.kernel = kernel
        self.target = target
        self.found: list[str] = []
        # every statement's nodes, operands first (one walk, read by every check)
        self.nodes = [list(ir.walk(stmt.value)) for stmt in kernel.body]
        # statements whose value a pass left as it was (the same object: the IR is
        # immutable), under the same claims: their ops were verified with `before`
        self.kept: set[int] = set()
        if before is not None and (before.target_forms, before.target_ranks) == (
            kernel.target_forms,
            kernel.target_ranks,
        ):
            old = _statements_by_key(before)
            self.kept = {
                index
                for key, (index, stmt) in _statements_by_key(kernel).items()
                if key in old and old[key][1].value is stmt.value
            }

    def problems(self) -> list[str]:
        self.names()
        self.launches()
        for index, nodes in enumerate(self.nodes):
            if index in self.kept:
                continue
            for node in nodes:
                if isinstance(node, ir.Op):
                    self.op(node, f"statement {index}")
        if self.kernel.target_ranks:
            self.ranks()
        if self.kernel.schedule is not None:
            self.schedule()
        if self.kernel.program is not None:
            if self.kernel.schedule is None:
                self.fail("a program without a schedule")
            else:
                _ProgramVerifier(self).program()
        return self.found

    def fail(self, message: str) -> None:
        self.found.append(message)

    def names(self) -> None:
        defined = {t.name for t in self.kernel.inputs} | {p.name for p in self.kernel.params}
        outputs = {t.name for t in self.kernel.outputs}
        stored: list[str] = []
        for index, stmt in enumerate(self.kernel.body):
            for node in self.nodes[index]:
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

    def launches(self) -> None:
        """Every output, and every input named sliced, holds one launch's chunk on each axis
        the launches cut; output channels are cut only one sample at a time."""
        launches = self.kernel.launches
        if launches is None:
            return
        splits = [(launches.count, launches.chunk)]
        named = list(launches.sliced)
        if launches.channels is not None:
            splits.append((launches.channels.count, launches.channels.chunk))
            named += [cut.name for cut in launches.channels.inputs]
            if launches.chunk != 1:
                self.fail(f"output channels are cut in launches of {launches.chunk} samples")
        rows = launches.rows
        launched_rows = {
            node.attrs.rows
            for stmt in self.kernel.body
            for node in ir.walk(stmt.value)
            if isinstance(node, ir.Op) and isinstance(node.attrs, ir.Conv)
        } - {0}
        if rows is not None:
            splits.append((rows.count, rows.chunk))
            if launches.chunk != 1 or launches.channels is not None:
                self.fail("output rows are cut only in launches of one sample's every channel")
            if launched_rows != {rows.chunk} or len(self.kernel.body) != 1:
                self.fail(f"row launches of {rows.chunk} rows, but convolutions of {launched_rows}")
            else:
                whole = ir.ConvGeometry.of(self.kernel.body[0].value).whole_rows
                if rows.extent != whole:
                    self.fail(f"row launches cover {rows.extent} of the output's {whole} rows")
            if rows.variable in self.kernel.spec_names:
                self.fail(f"row launches' variable `{rows.variable}` is a name of the spec")
        elif launched_rows:
            self.fail(f"convolutions of {launched_rows} rows each, without row launches")
        for count, chunk in splits:
            if count < 2 or chunk < 1:
                self.fail(f"launches {count} x {chunk}: not a split")
        inputs = {t.name for t in self.kernel.inputs}
        for name in named:
            if name not in inputs:
                self.fail(f"launches slice `{name}`, not an input")
        for tensor in (*self.kernel.inputs, *self.kernel.outputs):
            shape = tensor.type.shape
            for cut in self.kernel.launch_cuts(tensor):
                if cut.axis >= len(shape) or shape[cut.axis] != cut.chunk:
                    self.fail(
                        f"`{tensor.name}` is cut into launches of {cut.chunk} along axis "
                        f"{cut.axis}, but its shape is {list(shape)}"
                    )

    def op(self, node: ir.Op, where: str) -> None:
        """The op's registry entry exists and its type rule gives it the type it has (the
        rule `ir.op` built it with); a lowered kernel's op is a form its target runs."""
        try:
            definition = ops.lookup(node.op)
        except ops.UnknownOp as error:
            self.fail(f"{where}: {error}")
            return
        _, fault = ops.type_fault(node.op, node.operands, node.attrs, node.type)
        if fault is not None:
            self.fail(f"{where}: {fault}")
            return
        if self.kernel.target_forms and definition.kind is not ops.Kind.LAYOUT:
            if isinstance(node.type, ir.TensorType) and not self.target.supports(node):
                self.fail(f"{where}: `{form(node)}` is not a {self.target.name} form")

    def ranks(self) -> None:
        limit = self.target.max_rank
        for tensor in (*self.kernel.inputs, *self.kernel.outputs):
            if len(tensor.kernel_shape) > limit:
                self.fail(f"`{tensor.name}` has kernel rank {len(tensor.kernel_shape)} > {limit}")
        inputs = {tensor.name for tensor in self.kernel.inputs}
        for index, nodes in enumerate(self.nodes):
            if index in self.kept:
                continue
            for node in nodes:
                if isinstance(node, ir.Ref) and node.name in inputs:
                    continue  # seen by the kernel in its kernel shape, checked above
                if isinstance(node.type, ir.TensorType) and node.type.rank > limit:
                    self.fail(f"statement {index} has a rank-{node.type.rank} value")
                    break

    def schedule(self) -> None:
        schedule = self.kernel.schedule
        tensor_statements = [
            index for index, stmt in enumerate(self.kernel.body) if not ir.is_scalar(stmt.value)
        ]
        placed = [index for phase in schedule.phases for index in phase.statements]
        if sorted(placed) != tensor_statements:
            self.fail(
                f"phases hold statements {placed}, the tensor statements are {tensor_statements}"
            )
        # Phases may run statements out of the body's order (a value the same in every block
        # of a loop runs before it), never before a let they read.
        phase_lets = {
            stmt.name
            for index, stmt in enumerate(self.kernel.body)
            if isinstance(stmt, ir.Let) and index in tensor_statements
        }
        ran: set[str] = set()
        for index in placed:
            stmt = self.kernel.body[index]
            for node in ir.walk(stmt.value):
                if isinstance(node, ir.Ref) and node.name in phase_lets and node.name not in ran:
                    self.fail(f"statement {index} runs before the let `{node.name}` it reads")
            if isinstance(stmt, ir.Let):
                ran.add(stmt.name)
        for number, phase in enumerate(schedule.phases):
            self.phase(number, phase)

    def phase(self, number: int, phase: ir.Phase) -> None:
        if phase.window is not None:
            self.window_phase(number, phase)
        elif phase.conv is not None:
            self.conv_phase(number, phase)
        elif phase.cube is None:
            if len(phase.tile) != len(phase.shape):
                self.fail(f"phase {number}: tile {list(phase.tile)} for shape {list(phase.shape)}")
            elif any(t < 1 for t in phase.tile):
                self.fail(f"phase {number}: empty tile {list(phase.tile)}")
            elif len(phase.tile) < 2:
                # pypto 0.2.0 charges a rank-1 copy as one element: such a plan's simulated
                # time would not hold on hardware.
                self.fail(f"phase {number}: rank-1 tile {list(phase.tile)}")
            if math.prod(phase.tile) > self.target.max_tile_elements:
                self.fail(f"phase {number}: tile {list(phase.tile)} exceeds the tile budget")
            # every op's operands and result share UB, as PyPTO counts them (Target)
            use = ub_use(self.kernel, phase.statements, phase.shape, self.target)
            itemsize = ir.compute_itemsize(self.kernel.body[phase.statements[0]].value)
            held = use.held(phase.tile, itemsize, self.target)
            if held > self.target.ub_bytes:
                self.fail(
                    f"phase {number}: tile {list(phase.tile)} holds {held} bytes of UB, "
                    f"more than {self.target.ub_bytes}"
                )
            # pypto copies a join's operands under the vector tile, whose last axis it
            # wants in whole 32-byte blocks ("Last dim bytes: 4" otherwise)
            values = [self.kernel.body[i].value for i in phase.statements]
            joins = any(
                isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.CONCAT
                for value in values
                for node in ir.walk(value)
            )
            if joins and phase.tile[-1] * itemsize % self.target.reduce_align_bytes:
                self.fail(
                    f"phase {number}: a join under a last-axis tile of "
                    f"{phase.tile[-1] * itemsize} bytes, not a multiple of "
                    f"{self.target.reduce_align_bytes}"
                )
            scanned = ops.positional_axes(self.kernel.body[i].value for i in phase.statements)
            cap = self.target.max_scan_last_axis_tile
            if len(phase.tile) - 1 in scanned and phase.tile[-1] > cap:
                self.fail(f"phase {number}: a scan along a last-axis tile above {cap}")
            if phase.loop is not None and phase.loop.axis in scanned:
                self.fail(f"phase {number}: the loop splits axis {phase.loop.axis}, a scan's")
        for loop in (phase.loop, phase.k_loop):
            if loop is not None and (loop.chunk < 1 or loop.count < 1 or loop.tail < 0):
                self.fail(f"phase {number}: empty loop {loop}")
        self.partials(number, phase)
        for loop, extent in _loop_extents(self.kernel, phase):
            covered = loop.count * loop.chunk + loop.tail
            if covered != extent:
                self.fail(f"phase {number}: loop covers {covered} of axis {loop.axis} ({extent})")

    def partials(self, number: int, phase: ir.Phase) -> None:
        """A looped phase's `let` reductions over its loop axis each keep one partial result
        per block (a loop never accumulates into a temporary: pypto 0.2.0 computes that as
        zeros), in a tensor of the statement's shape with one entry per block on that axis,
        under a tile of its rank within the tile budget; no other statement has one."""
        where = f"phase {number}"
        loop = phase.loop
        if loop is None or phase.cube is not None or phase.conv or phase.window:
            if phase.partials:
                self.fail(f"{where}: partial results without a vector loop to split them")
            return
        blocks = loop.count + (1 if loop.tail else 0)
        partials = {partial.statement: partial for partial in phase.partials}
        if len(partials) != len(phase.partials):
            self.fail(f"{where}: a statement with two partial results")
        for index in sorted(set(partials) | set(phase.statements)):
            stmt = self.kernel.body[index] if 0 <= index < len(self.kernel.body) else None
            reduces = isinstance(stmt, ir.Let) and loop.axis in _chain_axes(stmt.value)
            partial = partials.get(index)
            if partial is None:
                if reduces:
                    self.fail(
                        f"{where}: `{stmt.name}` reduces over the loop's axis {loop.axis} "
                        "without partial results"
                    )
                continue
            if not reduces or index not in phase.statements:
                self.fail(
                    f"{where}: partial results of statement {index}, not a `let` of "
                    f"this phase reducing over axis {loop.axis}"
                )
                continue
            shape = list(stmt.value.type.shape)
            shape[loop.axis] = blocks
            tile = partial.tile
            if list(partial.shape) != shape:
                self.fail(
                    f"{where}: partial results of `{stmt.name}` in "
                    f"{list(partial.shape)}, not {shape}"
                )
            elif len(tile) != len(shape) or min(tile, default=0) < 1:
                self.fail(f"{where}: tile {list(tile)} for the partials {shape}")
            elif math.prod(tile) > self.target.max_tile_elements:
                self.fail(f"{where}: partials' tile {list(tile)} exceeds the tile budget")

    def conv_phase(self, number: int, phase: ir.Phase) -> None:
        """A convolution phase: one convolution statement; loops over every batch element
        and every output row; padding that gives each tap a whole view; every tile within
        the target's budget and auto-tile count; cube tiles within L0."""
        where = f"phase {number}"
        plan = phase.conv
        if len(phase.statements) != 1:
            self.fail(f"{where}: a convolution phase holds {len(phase.statements)} statements")
            return
        conv = self.kernel.body[phase.statements[0]].value
        if not (isinstance(conv, ir.Op) and isinstance(conv.attrs, ir.Conv)):
            self.fail(f"{where}: a convolution phase without a convolution statement")
            return
        geometry = ir.ConvGeometry.of(conv)
        rows = plan.rows
        if plan.vector and not geometry.depthwise:
            self.fail(
                f"{where}: a convolution of {geometry.group_in} channels per group on the "
                "vector cores"
            )
        if plan.batch != geometry.batch or rows.count * rows.chunk + rows.tail != geometry.out[0]:
            self.fail(f"{where}: loops {plan.batch} x {rows} for {geometry}")
        if min(rows.count, rows.chunk) < 1 or rows.tail < 0:
            self.fail(f"{where}: empty rows loop {rows}")
        if min((*plan.front, *plan.back, *plan.skip), default=0) < 0:
            self.fail(f"{where}: negative padding {plan}")
        for shape, tile in plan.tiles:
            if len(tile) != len(shape) or min(tile) < 1:
                self.fail(f"{where}: tile {list(tile)} for {list(shape)}")
            elif math.prod(tile) > self.target.max_tile_elements:
                self.fail(f"{where}: tile {list(tile)} exceeds the tile budget")
            elif len(shape) > self.target.max_rank:
                self.fail(f"{where}: a shape of rank {len(shape)}: {list(shape)}")
            elif math.prod(-(-n // t) for n, t in zip(shape, tile, strict=True)) > (
                self.target.max_auto_tiles
            ):
                self.fail(f"{where}: {list(shape)} takes more than the auto-tile limit")
        (m, _), (k, _), (n, _) = plan.cube
        itemsize = conv.type.dtype.itemsize
        if max(m, n) * k * itemsize > self.target.l0_operand_bytes or m * n * 4 > (
            self.target.l0_result_bytes
        ):
            self.fail(f"{where}: cube tiles {plan.cube} exceed L0")

    def window_phase(self, number: int, phase: ir.Phase) -> None:
        where = f"phase {number}"
        if len(phase.statements) != 1:
            self.fail(f"{where}: a window phase holds {len(phase.statements)} statements")
            return
        window = self.kernel.body[phase.statements[0]].value
        if not (isinstance(window, ir.Op) and isinstance(window.attrs, ir.Window)):
            self.fail(f"{where}: a window phase without a window statement")
            return
        block = list(window.operands[0].type.shape)
        if phase.loop is not None:
            block[phase.loop.axis] = phase.loop.chunk
        steps = phase.window
        if [step.axis for step in steps] != list(window.attrs.axes):
            self.fail(f"{where}: steps along {[s.axis for s in steps]}, not the window's axes")
            return
        budget = self.target.max_tile_elements
        for position, step in enumerate(steps):
            axis, shape = step.axis, step.shape
            outer, rows, stride, inner = step.split
            padded = shape[axis] + step.front + step.back
            fits = (
                list(shape) == block
                and stride == window.attrs.stride[position]
                and padded == rows * stride
                and outer * inner * shape[axis] == math.prod(shape)
                and step.extent
                == window.attrs.extent(position, window.operands[0].type.shape[axis])
                and all(
                    0 <= r and r + step.extent <= rows and 0 <= c < stride for r, c in step.taps
                )
            )
            tiles = (
                (step.frame_tile, len(shape)),
                (step.split_tile, 4),
                (step.result_tile, len(shape)),
            )
            for tile, rank in tiles:
                fits = fits and len(tile) == rank and min(tile) >= 1
                fits = fits and math.prod(tile) <= budget
            if not fits:
                self.fail(f"{where}: window step {position} along axis {axis}: {step}")
                return
            block[axis] = step.extent


def _chain_axes(node: ir.Expr) -> set[int]:
    """The axes a statement's chain of reductions reduces (empty if it is not one)."""
    axes: set[int] = set()
    while isinstance(node, ir.Op) and isinstance(node.attrs, ir.Reduce):
        if ops.lookup(node.op).kind is not ops.Kind.REDUCTION:
            break
        axes.update(node.attrs.axes)
        node = node.operands[0]
    return axes


# ---- what a pass keeps: the IR before it against the IR after it -----------------------


def _transition(before: ir.Kernel, after: ir.Kernel) -> list[str]:
    """What `before` established, `after` keeps: the claims (target forms and ranks), the
    schedule and the program; and, once the kernel is in its frame (align_axes), every op
    that works along particular axes still works along the same ones, whatever axes a pass
    merged, split or dropped (see `_axis_roles`)."""
    found = []
    for claim in ("target_forms", "target_ranks", "schedule", "program"):
        had, has = getattr(before, claim), getattr(after, claim)
        if had not in (None, False) and has in (None, False):
            found.append(f"drops the {claim.replace('_', ' ')} the IR before it had")
    if not (_framed(before) and _framed(after)):
        return found
    old_statements = _statements_by_key(before)
    for key, (index, stmt) in _statements_by_key(after).items():
        _, old = old_statements.get(key, (None, None))
        if old is None or old.value is stmt.value:
            continue
        old_ops = [n for n in ir.walk(old.value) if _axis_roles(n) is not None]
        new_ops = [n for n in ir.walk(stmt.value) if _axis_roles(n) is not None]
        if [n.op for n in old_ops] != [n.op for n in new_ops]:
            continue  # the pass rewrote the statement's ops: nothing to pair them by
        for was, now in zip(old_ops, new_ops, strict=True):
            found += _kept_roles(was, now, f"statement {index}")
    return found


def _framed(kernel: ir.Kernel) -> bool:
    """Whether align_axes put the kernel in one frame of axes (no pass reorders them after)."""
    return all(t.kernel_dims is not None for t in (*kernel.inputs, *kernel.outputs))


def _statements_by_key(kernel: ir.Kernel) -> dict[tuple[str, int], tuple[int, ir.Stmt]]:
    """Each statement by its name (a let's, or the output a store writes) and which store of
    that output it is: the same statement before and after a pass that keeps statements."""
    keyed: dict[tuple[str, int], tuple[int, ir.Stmt]] = {}
    seen: dict[str, int] = {}
    for index, stmt in enumerate(kernel.body):
        name = stmt.name if isinstance(stmt, ir.Let) else stmt.output
        keyed[name, seen.get(name, 0)] = index, stmt
        seen[name] = seen.get(name, 0) + 1
    return keyed


def _axis_roles(node: ir.Expr) -> tuple[str, ...] | None:
    """What an op does along each axis of its operand, for the ops that treat axes apart:
    a reduction reduces some and keeps the rest; a scan, position count or flip runs along
    one; a window slides along some, each its own; a crop cuts some, each by its bounds.
    Axes of one role may merge; axes of two never do. None for every other node."""
    if not isinstance(node, ir.Op) or not node.operands:
        return None
    operand = node.operands[0].type
    if not isinstance(operand, ir.TensorType):
        return None
    rank = operand.rank
    match node.attrs:
        case ir.Reduce(axes=axes):
            return tuple("reduces" if a in axes else "keeps" for a in range(rank))
        case ir.Window(axes=axes):
            return tuple(
                f"slides window {axes.index(a)} along" if a in axes else "keeps"
                for a in range(rank)
            )
        case ir.Slice(starts=starts, stops=stops) if len(starts) == len(stops) == rank:
            return tuple(
                "keeps" if stop is None else f"cuts {start}:{stop} of"
                for start, stop in zip(starts, stops, strict=True)
            )
        case ir.Along(axis=axis) if ops.lookup(node.op).kind in ops.POSITIONAL:
            if ops.lookup(node.op).kind is ops.Kind.CONCAT:
                return None  # two operands of other extents along the axis
            # positions along an axis of size 1 are all 0: merge_axes may then name any axis
            # of the all-ones result (see `positions`)
            along = node.type.rank == rank and node.type.shape[axis] > 1
            return tuple("runs along" if a == axis and along else "keeps" for a in range(rank))
    return None


def _kept_roles(was: ir.Op, now: ir.Op, where: str) -> list[str]:
    """`now` is `was` after a pass that may have merged, split or dropped its operand's
    axes: per run of axes (old and new with equal products, `ir.regroup`), the old axes
    longer than 1 have one role (a reduction's reduced axes are never merged with axes it
    keeps, a scan's axis with any other), and the new axes longer than 1 have it too."""
    old_shape, new_shape = was.operands[0].type.shape, now.operands[0].type.shape
    old_roles, new_roles = _axis_roles(was), _axis_roles(now)
    if math.prod(old_shape) != math.prod(new_shape) or old_roles is None or new_roles is None:
        return [f"{where}: `{now.op}` of {list(new_shape)} was `{was.op}` of {list(old_shape)}"]
    found = []
    for old_axes, new_axes in ir.regroup(old_shape, new_shape):
        old_long = [a for a in old_axes if old_shape[a] > 1]
        new_long = [a for a in new_axes if new_shape[a] > 1]
        roles = {old_roles[a] for a in old_long}
        if len(roles) > 1:
            first, *others = old_long
            other = next(a for a in others if old_roles[a] != old_roles[first])
            found.append(
                f"{where}: `{was.op}` {old_roles[first]} axis {first} of {list(old_shape)} "
                f"and {old_roles[other]} axis {other}, but they are merged into axis "
                f"{list(new_axes)} of {list(new_shape)}"
            )
            continue
        for axis in new_long:
            if roles and new_roles[axis] not in roles:
                (role,) = roles
                found.append(
                    f"{where}: `{was.op}` {role} axes {old_long} of {list(old_shape)}, but "
                    f"{new_roles[axis]} axis {axis} of {list(new_shape)}, which holds them"
                )
    return found


def _loop_extents(kernel: ir.Kernel, phase: ir.Phase) -> list[tuple[ir.Loop, int]]:
    """Each loop of a phase with the length of the axis it must cover: a vector loop its
    axis, a matmul's M loop the rows, a K loop the contraction."""
    extents = []
    if phase.loop is not None:
        extents.append((phase.loop, phase.shape[phase.loop.axis]))
    if phase.k_loop is not None:
        matmul = kernel.body[phase.statements[0]].value
        a = matmul.operands[0].type
        extents.append((phase.k_loop, a.shape[-2] if matmul.attrs.a_trans else a.shape[-1]))
    return extents


Box = tuple[tuple[int, ...], tuple[int, ...]]  # a block's offsets and shape


def _variables(index: ir.Index) -> tuple[str, ...]:
    """The loop (or launch) variables an offset names."""
    if isinstance(index, ir.Affine):
        return index.variables
    return (index,) if isinstance(index, str) else ()


def _offset(index: ir.Index, values: dict[str, int]) -> int:
    """An offset's value at one iteration."""
    if isinstance(index, ir.Affine):
        return index.at(values)
    return values[index] if isinstance(index, str) else index


@attrs.define
class _Scope:
    """What the instructions of one block see: the names bound before them with their types,
    the loop variables' values at each iteration (one empty set outside a loop body), the
    loop whose body they are, and the blocks assembled so far into each tensor by the
    enclosing loop (or phase), which must cover it."""

    names: dict[str, ir.Type]
    iterations: list[dict[str, int]] = attrs.Factory(lambda: [{}])
    loop: ir.BlockLoop | None = None
    pieces: dict[str, tuple[ir.TensorType, list[Box]]] = attrs.Factory(dict)


class _ProgramVerifier:
    """The materialised program's invariants (see the module docstring)."""

    def __init__(self, verifier: _Verifier):
        self.verifier = verifier
        kernel = verifier.kernel
        self.kernel = kernel
        tensors = (*kernel.inputs, *kernel.outputs)
        self.reserved = {t.name for t in tensors} | {p.name for p in kernel.params}
        self.outputs = {t.name: ir.TensorType(t.kernel_shape, t.type.dtype) for t in kernel.outputs}
        self.unwritten = set(self.outputs)  # outputs and temporaries not yet written whole
        # temporaries allocated in a loop's block, one per iteration: the pieces assembled
        # into each at each iteration, which must tile it before it is read
        self.local: dict[str, tuple[ir.TensorType, list[list[Box]]]] = {}
        self.where = "program"
        self.phase: ir.Phase | None = None
        self.vector_tiles = self.cube_tiles = False
        self.taken_values: dict[int, tuple[list, dict[str, set[int]]]] = {}
        # a row launch's first row, per launch: views may read it, assemblies may not
        rows = kernel.launches.rows if kernel.launches else None
        self.launch_values = [{}] if rows is None else [{rows.variable: r} for r in rows.firsts]

    def fail(self, message: str) -> None:
        self.verifier.fail(f"{self.where}: {message}")

    def program(self) -> None:
        kernel = self.kernel
        if kernel.program is None:
            self.fail("no program after materialise")
            return
        phases = kernel.schedule.phases if kernel.schedule else ()
        numbers = [code.phase for code in kernel.program.phases]
        if numbers != list(range(len(phases))):
            self.fail(f"code for phases {numbers}, but the schedule has {len(phases)} phases")
        names: dict[str, ir.Type] = {
            t.name: ir.TensorType(t.kernel_shape, t.type.dtype)
            for t in (*kernel.inputs, *kernel.outputs)
        }
        # (fixed params are constants in the body: the program never reads them)
        names |= {p.name: ir.SCALAR for p in kernel.kernel_params}
        names |= {
            s.name: s.value.type
            for s in kernel.body
            if isinstance(s, ir.Let) and ir.is_scalar(s.value)  # Python in the factory
        }
        for staging in kernel.program.staging:
            self.phase = phases[staging.phase] if 0 <= staging.phase < len(phases) else None
            self.staging(staging, names)
            names[staging.buffer] = staging.type
        for code in kernel.program.phases:
            self.where = f"phase {code.phase}"
            self.phase = phases[code.phase] if 0 <= code.phase < len(phases) else None
            self.vector_tiles = self.cube_tiles = False
            scope = _Scope(names)
            names |= self.block(code.instructions, scope)
            self.covered(scope.pieces, "the phase")
        self.where = "program"
        for name in sorted(self.unwritten):
            kind = "output" if name in self.outputs else "temporary"
            self.fail(f"{kind} `{name}` is never written whole")

    def staging(self, staging: ir.Staging, names: dict[str, ir.Type]) -> None:
        """A staging launch is its convolution phase's batch loop over the kernel input it
        reads, nothing else, and writes its buffer whole: a name of its own, which the
        kernel's phases then read as an input."""
        self.where = f"staging launch of `{staging.buffer}`"
        self.vector_tiles = self.cube_tiles = False
        if self.phase is None or self.phase.conv is None or not self.phase.conv.staged:
            self.fail(f"stages an input for phase {staging.phase}, which does not read one")
        inputs = {t.name for t in self.kernel.inputs}
        if staging.source not in inputs:
            self.fail(f"reads `{staging.source}`, not a kernel input")
        if staging.buffer in names:
            self.fail(f"writes `{staging.buffer}`, a name the kernel already has")
        own = {n: t for n, t in names.items() if n == staging.source or n not in self.reserved}
        self.reserved.add(staging.buffer)
        self.unwritten.add(staging.buffer)
        scope = _Scope({**own, staging.buffer: staging.type})
        self.block(staging.instructions, scope)
        self.covered(scope.pieces, "the staging launch")
        if staging.buffer in self.unwritten:
            self.fail(f"the buffer `{staging.buffer}` is never written whole")
            self.unwritten.discard(staging.buffer)

    def block(self, instructions: tuple[ir.Instruction, ...], scope: _Scope) -> dict[str, ir.Type]:
        """Checks instructions in order; returns the names they bind."""
        scope = attrs.evolve(scope, names=dict(scope.names))
        bound: dict[str, ir.Type] = {}
        for instruction in instructions:
            for name, type_ in self.instruction(instruction, scope):
                if name in self.reserved:
                    self.fail(f"binds `{name}`, a kernel tensor or param")
                scope.names[name] = bound[name] = type_
        return bound

    def instruction(self, instruction: ir.Instruction, scope: _Scope) -> list[tuple[str, ir.Type]]:
        """Checks one instruction; returns the names it binds."""
        match instruction:
            case ir.SetVecTiles(tile):
                if not tile or min(tile) < 1:
                    self.fail(f"empty vector tile {list(tile)}")
                elif math.prod(tile) > self.verifier.target.max_tile_elements:
                    self.fail(f"vector tile {list(tile)} exceeds the tile budget")
                self.vector_tiles = True
            case ir.SetCubeTiles():
                self.cube_tiles = True
            case ir.Allocate(name, tensor):
                self.unwritten.add(name)
                if scope.iterations != [{}]:
                    self.local[name] = (tensor, [[] for _ in scope.iterations])
                return [(name, tensor)]
            case ir.View(name, source, tensor, offsets):
                source_type = self.tensor(source, scope)
                if source_type is not None:
                    what = f"view `{name}` of `{source}`"
                    for launch in self.launch_values:  # a row launch's views: each launch's
                        self.within(what, tensor, source_type, offsets, scope, launch, False)
                return [(name, tensor)]
            case ir.Assign(name, value):
                self.expression(value, scope)
                return [(name, value.type)]
            case ir.StoreOutput(output, value):
                self.expression(value, scope)
                if output not in self.outputs:
                    self.fail(f"stores to `{output}`, not an output")
                elif value.type != self.outputs[output]:
                    self.fail(
                        f"stores {value.type} into output `{output}` of {self.outputs[output]}"
                    )
                self.unwritten.discard(output)
            case ir.Assemble(part, into, offsets):
                part_type = self.tensor(part, scope)
                into_type = scope.names.get(into)
                if not isinstance(into_type, ir.TensorType):
                    self.fail(f"assembles into `{into}`, which is not a tensor defined before")
                elif part_type is not None:
                    what = f"assembled `{part}` in `{into}`"
                    boxes = self.within(what, part_type, into_type, offsets, scope)
                    if into not in self.local:
                        scope.pieces.setdefault(into, (into_type, []))[1].extend(boxes)
                    elif len(boxes) != len(self.local[into][1]):
                        self.fail(f"{what}: assembled from another loop than it is allocated in")
                    else:
                        for pieces, box in zip(self.local[into][1], boxes, strict=True):
                            pieces.append(box)
            case ir.Accumulate():
                self.accumulate(instruction, scope)
            case ir.BlockLoop():
                self.loop(instruction, scope)
            case ir.Comment():
                pass
            case _:
                self.fail(f"not an instruction: {instruction!r}")
        return []

    def tensor(self, name: str, scope: _Scope) -> ir.TensorType | None:
        """The type of a tensor an instruction reads, or None (after failing) if it cannot."""
        if name not in scope.names:
            self.fail(f"reads `{name}` before it is defined")
            return None
        if name in self.local:
            self.local_written(name)
        if name in self.unwritten:
            self.fail(f"reads `{name}` before it is written whole")
        type_ = scope.names[name]
        return type_ if isinstance(type_, ir.TensorType) else None

    def expression(self, value: ir.Expr, scope: _Scope) -> None:
        for node in ir.walk(value):
            if isinstance(node, ir.Ref):
                defined = scope.names.get(node.name)
                if node.name in self.local:
                    self.local_written(node.name)
                if defined is None:
                    self.fail(f"reads `{node.name}` before it is defined")
                elif node.name in self.unwritten:
                    self.fail(f"reads `{node.name}` before it is written whole")
                elif defined != node.type:
                    self.fail(f"reads `{node.name}` as {node.type}, defined as {defined}")
            elif isinstance(node, ir.Op):
                self.verifier.op(node, self.where)
        tensor_ops = [n.op for n in ir.walk(value) if isinstance(n, ir.Op) and not ir.is_scalar(n)]
        if "matmul" in tensor_ops and not self.cube_tiles:
            self.fail("a matmul runs before cube tiles are set")
        if any(op != "matmul" for op in tensor_ops) and not self.vector_tiles:
            self.fail("vector work runs before vector tiles are set")

    def local_written(self, name: str) -> None:
        """A loop block's own temporary, first read: written whole if the pieces assembled
        into it tile it at every iteration."""
        whole, per_iteration = self.local.pop(name)
        for boxes in per_iteration:
            self.unwritten.add(name)
            self.covered({name: (whole, boxes)}, "the block")
            if name in self.unwritten:
                return

    def taken(self, iterations: list[dict[str, int]]) -> dict[str, set[int]]:
        """The values each variable takes over `iterations`, computed once per list (every
        instruction of a loop's block shares its list; the cache keeps it alive)."""
        cached = self.taken_values.get(id(iterations))
        if cached is None:
            variables = iterations[0].keys() if iterations else ()
            taken = {v: {values[v] for values in iterations} for v in variables}
            cached = self.taken_values[id(iterations)] = (iterations, taken)
        return cached[1]

    def within(
        self,
        what: str,
        block: ir.TensorType,
        whole: ir.TensorType,
        offsets: tuple[ir.Index, ...],
        scope: _Scope,
        launch: dict[str, int] | None = None,
        boxes: bool = True,
    ) -> list[Box]:
        """The block at each iteration's offsets (in one launch), checked to lie within
        `whole`; with `boxes` false (a view: no coverage to check) an empty list."""
        if block.rank != whole.rank or len(offsets) != whole.rank or block.dtype != whole.dtype:
            self.fail(f"{what}: {block} at {ir.format_indexes(offsets)} in {whole}")
            return []
        names = [_variables(offset) for offset in offsets]
        variables = list(dict.fromkeys(v for axis in names for v in axis))
        bound = scope.iterations[0].keys() | (launch or {}).keys()
        unbound = [v for v in variables if v not in bound]
        if unbound:
            self.fail(f"{what}: offset `{unbound[0]}` is not a variable of its loop")
            return []

        def exceeds(at: tuple[int, ...]) -> list[Box]:
            self.fail(f"{what}: {list(block.shape)} at {list(at)} exceeds {list(whole.shape)}")
            return []

        if not boxes:
            # Each axis's offset names its own variables (a loop's, the launch's), which
            # vary independently: the axes are checked apart, each over the values its
            # variables take, not over every iteration (a convolution's tap views).
            taken = self.taken(scope.iterations) | {v: {at} for v, at in (launch or {}).items()}
            for axis, offset in enumerate(offsets):
                for combination in itertools.product(*(taken[v] for v in names[axis])):
                    values = dict(zip(names[axis], combination, strict=True))
                    at = _offset(offset, values)
                    if at < 0 or at + block.shape[axis] > whole.shape[axis]:
                        first = next(
                            i | (launch or {})
                            for i in scope.iterations
                            if all((i | (launch or {}))[v] == values[v] for v in values)
                        )
                        return exceeds(tuple(_offset(o, first) for o in offsets))
            return []
        iterations = [v | launch for v in scope.iterations] if launch else scope.iterations
        # An assembled block's place at every iteration, computed once per distinct
        # combination of the variables its offsets name.
        if not variables:
            keys = [()] * len(iterations)
        elif len(variables) == 1:
            keys = [(values[variables[0]],) for values in iterations]
        else:
            keys = list(map(operator.itemgetter(*variables), iterations))
        placed: dict[tuple[int, ...], tuple[int, ...]] = {}
        for key in dict.fromkeys(keys):
            values = dict(zip(variables, key, strict=True))
            at = placed[key] = tuple(_offset(o, values) for o in offsets)
            shapes = zip(at, block.shape, whole.shape, strict=True)
            if any(a < 0 or a + s > w for a, s, w in shapes):
                return exceeds(at)
        return [(placed[key], block.shape) for key in keys]

    def covered(self, pieces: dict[str, tuple[ir.TensorType, list[Box]]], what: str) -> None:
        """The blocks assembled into each tensor tile it, each index once: along one axis,
        or as a grid (a convolution's batch elements, groups and rows), every block one
        cell of the product of each axis's intervals."""
        for into, (whole, boxes) in pieces.items():
            shape = whole.shape
            varying = [
                axis
                for axis in range(len(shape))
                if any(at[axis] != 0 or size[axis] != shape[axis] for at, size in boxes)
            ]
            cells = set()
            for at, size in boxes:
                cell = tuple((at[axis], at[axis] + size[axis]) for axis in varying)
                if cell in cells:
                    self.fail(f"{what} overlaps in `{into}` at {list(at)}")
                    break
                cells.add(cell)
            else:
                if self.tiled(into, shape, varying, cells, what):
                    self.unwritten.discard(into)

    def tiled(
        self,
        into: str,
        shape: tuple[int, ...],
        varying: list[int],
        cells: set[tuple[tuple[int, int], ...]],
        what: str,
    ) -> bool:
        """Whether distinct cells are the whole grid of intervals that tile each axis."""
        grid = 1
        for position, axis in enumerate(varying or [0]):
            intervals = sorted({cell[position] for cell in cells}) if varying else [(0, shape[0])]
            end = 0
            for start, stop in intervals:
                if start != end:
                    gap = "leaves a gap" if start > end else "overlaps"
                    self.fail(f"{what} {gap} in `{into}` at {min(start, end)} of axis {axis}")
                    return False
                end = stop
            if end != shape[axis]:
                self.fail(f"{what} assembles `{into}` up to {end} of {shape[axis]} on axis {axis}")
                return False
            grid *= len(intervals)
        if varying and len(cells) != grid:
            self.fail(f"{what} assembles `{into}` in {len(cells)} blocks, not a grid of {grid}")
            return False
        return True

    def accumulate(self, accumulate: ir.Accumulate, scope: _Scope) -> None:
        output, first = accumulate.output, accumulate.first_iteration
        part_type = self.tensor(accumulate.part, scope)
        if output not in self.outputs:
            self.fail(f"accumulates into `{output}`, not an output")
            return
        if part_type is not None and part_type != self.outputs[output]:
            self.fail(f"accumulates {part_type} into output `{output}` of {self.outputs[output]}")
        try:
            combine = ops.lookup(accumulate.reduction).combine
        except ops.UnknownOp:
            combine = None
        if combine is None:
            self.fail(f"accumulates by `{accumulate.reduction}`, which has no combine rule")
        if not self.vector_tiles:
            self.fail("an accumulation runs before vector tiles are set")
        if accumulate.overwrites:
            if scope.loop is not None:
                self.fail(f"accumulation into `{output}` overwrites it in every iteration")
            self.unwritten.discard(output)
        elif first is not None:
            if output not in self.unwritten:
                self.fail(f"accumulation into `{output}` writes it again, dropping earlier blocks")
            if scope.loop is None or first != scope.loop.index:
                self.fail(
                    f"accumulation into `{output}` writes first on `{first}`, not its loop's index"
                )
            self.unwritten.discard(output)
        elif output in self.unwritten:
            self.fail(f"accumulates into `{output}` before it is written")

    def loop(self, loop: ir.BlockLoop, scope: _Scope) -> None:
        """Checks a loop's blocks (what they bind stays inside them)."""
        nested = scope.iterations != [{}]
        conv = self.phase.conv if self.phase else None
        if nested and (conv is None or scope.loop is None or scope.loop.count != conv.batch):
            self.fail(f"loop `{loop.name}` is nested in a loop")
        planned = [p for p in (self.phase.loop, self.phase.k_loop) if p] if self.phase else []
        if conv is not None:  # a convolution's rows loop inside its batch loop
            planned = [conv.rows] if nested else [ir.Loop(conv.batch, 1, 0, 0)]
        actual = ir.Loop(loop.count, loop.chunk, loop.tail_size, loop.axis)
        if self.phase is not None and actual not in planned:
            self.fail(
                f"loop `{loop.name}` ({loop.count} x {loop.chunk} + tail {loop.tail_size} on "
                f"axis {loop.axis}) is not its phase's planned loop"
            )
        if loop.count < 1 or loop.chunk < 1 or loop.tail_size < 0:
            self.fail(f"loop `{loop.name}` is empty")
        if bool(loop.tail) != bool(loop.tail_size):
            self.fail(
                f"loop `{loop.name}` has a tail of {loop.tail_size} but "
                f"{len(loop.tail)} tail instructions"
            )
        if loop.index == loop.offset or {loop.index, loop.offset} & scope.names.keys():
            self.fail(f"loop `{loop.name}`'s variables shadow a name")
        outer = scope.iterations
        iterations = [
            values | {loop.index: i, loop.offset: i * loop.chunk}
            for values in outer
            for i in range(loop.count)
        ]
        # a nested loop's blocks are the enclosing loop's: it checks that they cover
        blocks = _Scope(scope.names, iterations, loop, scope.pieces if nested else {})
        self.block(loop.tail, attrs.evolve(blocks, iterations=outer, loop=None))
        self.block(loop.body, blocks)
        if not nested:
            self.covered(blocks.pieces, f"loop `{loop.name}`")
