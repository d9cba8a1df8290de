"""partition: the spec's dataflow cut into the fewest kernels whose frames PyPTO can hold.

A spec is one kernel while its values fit one frame. When the lowering passes refuse it
with a `FrameError` (more than PyPTO's 4 axes after merging, a 3-D convolution's merged
batch and channels against channel-wise work, a reshape of a convolution's result into
groups, ...), this pass cuts the spec after a value: the value becomes an intermediate, a
device tensor that one kernel writes and the next reads, and each side is lowered on its
own. The passes are the judge of what a frame holds: a cut is taken when both sides lower.

Cut points are the spec's `let`s and the convolutions, reductions, windows, products and
reshapes inside its expressions (bound to a `let` of their own first). Of the single cuts
that work, the one with the smallest intermediate wins (the least memory traffic); when no
single cut does, the spec is cut where its first part stops fitting, and the rest is cut
again. Values both sides read become intermediates too: no kernel computes twice what
another already wrote. Scalars are constants of every kernel that reads them.

Some cuts are known before any search: a transpose and a matmul of values the spec
computes (attention's heads and scores) read those values only as a kernel's inputs
(`align_axes.read_as_input`), so the spec is first cut after each such value, in program
order, and each part is then searched on its own. That keeps every search small: a
transformer block is thirteen kernels, which one search over all of them found in 231 to
480 lowerings, more than a hundred times over for its tuning candidates.

This pass maps a spec-level kernel to a forward program's kernels, not a kernel to a
kernel, so its signature is its own: `partition(checked, lower_one) -> [Part, ...]`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs

from ptodsl.frontend.diagnostics import FrameError, SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes.align_axes import ONLY_INPUTS, ONLY_INPUTS_NOTE, read_as_input
from ptodsl.passes.fold_reshapes import transposed_views

MAX_KERNELS = 8  # a spec needing more is refused with the first kernel's frame error
# Lowerings one search for cuts may try: the search backtracks over first kernels that
# fit, which grows exponentially with the kernels a spec needs (LeNet-5's four under some
# tuning candidates ran for more than 20 minutes); past this many the spec is refused with
# its frame error. The examples' default plans need at most 47 (ResNet's basic block;
# LeNet-5 34, level 2 #85 24). Cuts a matmul or a transpose requires are made before the
# search (`_required_cuts`): each part is searched on its own.
MAX_LOWERINGS = 120
# Values worth a cut inside an expression: those that change a value's frame.
CUT_KINDS = frozenset(
    {
        ops.Kind.CONV,
        ops.Kind.MATMUL,
        ops.Kind.REDUCTION,
        ops.Kind.AXIS,
        ops.Kind.WINDOW,
        ops.Kind.LAYOUT,
    }
)


@attrs.frozen
class Part:
    """One kernel of the forward program: its spec-level kernel (which inputs and
    intermediates it reads, which outputs and intermediates it writes), its lowering, and
    why the spec was cut after it (None for the last)."""

    kernel: ir.Kernel
    lowering: object
    cut_because: FrameError | None = None


def partition(
    checked: ir.Kernel, lower_one: Callable[[ir.Kernel], object], per_op: bool = False
) -> list[Part]:
    """`checked` as one kernel if `lower_one` lowers it, else as the fewest kernels found
    whose every part it lowers. A spec no cut helps raises its frame error, or, when a cut
    got around the frame but one of its kernels hit another limit, that error. `per_op`: a
    kernel per op instead (`Tuning(kernels="per_op")`: the unfused baseline)."""
    checked = _without_unread_inputs(_without_unread_lets(checked))
    if per_op:
        return _per_op(checked, lower_one)
    parts: list[Part] = []
    taken: frozenset[str] = frozenset()  # the names of the kernels cut off so far
    for segment, because in _required_cuts(checked):
        fitted = _fitted(segment, lower_one, taken)
        fitted[-1] = attrs.evolve(fitted[-1], cut_because=because)
        parts += fitted
        taken |= frozenset(name for part in fitted for name in part.kernel.spec_names)
    return parts


def _required_cuts(kernel: ir.Kernel) -> list[tuple[ir.Kernel, FrameError | None]]:
    """`kernel` cut where it must be: before every matmul or transpose, the operands they
    read only as a kernel's inputs (`align_axes.read_as_input`) are written by kernels of
    their own. Each part with the frame error that cut it after itself (None for the
    last); the parts are cut further where their frames ask."""
    parts: list[tuple[ir.Kernel, FrameError | None]] = []
    taken: frozenset[str] = frozenset()
    while (point := _first_required(kernel, taken)) is not None:
        bound, name, because = point
        writer, kernel = split(bound, (bound, name))
        parts.append((writer, because))
        taken |= writer.spec_names
    return [*parts, (kernel, None)]


def _first_required(
    kernel: ir.Kernel, taken: frozenset[str]
) -> tuple[ir.Kernel, str, FrameError] | None:
    """The first value (in program order) a matmul or a transpose reads only as an input:
    the kernel with it bound to a let (named apart from `taken`) where it was an
    expression, the let's name, and why."""
    inputs = {tensor.name for tensor in kernel.inputs}
    transposed = transposed_views(kernel)

    def computed(operand: ir.Expr) -> bool:
        viewed = _unviewed(operand)  # a view of an input is the input
        return not (isinstance(viewed, ir.Ref) and viewed.name in inputs)

    def computed_for_transpose(operand: ir.Expr) -> bool:
        # an input, or its view that fold_reshapes makes the input's own shape
        if isinstance(operand, ir.Op) and operand.op == "reshape":
            (viewed,) = operand.operands
            return not (isinstance(viewed, ir.Ref) and viewed.name in transposed)
        return computed(operand)

    for index, stmt in enumerate(kernel.body):
        for node in ir.walk(stmt.value):
            moves = isinstance(node, ir.Op) and ops.moves_axes(node.op)
            unread = read_as_input(node, computed_for_transpose if moves else computed)
            for read in unread:
                operand = _unviewed(read)
                if isinstance(operand, ir.Ref) and operand.name in inputs:
                    operand = read  # a view of an input the transpose cannot read as one
                because = FrameError(ONLY_INPUTS[node.op], node.span, note=ONLY_INPUTS_NOTE)
                if isinstance(operand, ir.Ref):
                    # a crop of another value (a `split`'s chunk): that value first, so
                    # that the crop is a view of a kernel's output (tiling's rule on
                    # stored crops)
                    cropped = _cropped_let(kernel, operand.name)
                    return kernel, cropped or operand.name, because
                return (*_bound(kernel, index, operand, taken), because)
    return None


def _unviewed(node: ir.Expr) -> ir.Expr:
    """`node` seen through the views (reshapes) around it."""
    while isinstance(node, ir.Op) and _is_layout(node) and len(node.operands) == 1:
        (node,) = node.operands
    return node


def _cropped_let(kernel: ir.Kernel, name: str) -> str | None:
    """The let that let `name` crops, when its value is a crop of one."""
    lets = {s.name: s.value for s in kernel.body if isinstance(s, ir.Let)}
    value = lets[name]
    if isinstance(value, ir.Op) and ops.lookup(value.op).kind is ops.Kind.SLICE:
        (operand,) = value.operands
        if isinstance(operand, ir.Ref) and operand.name in lets:
            return operand.name
    return None


def _fitted(
    kernel: ir.Kernel, lower_one: Callable[[ir.Kernel], object], taken: frozenset[str]
) -> list[Part]:
    """`kernel` as one kernel if `lower_one` lowers it, else cut into the fewest found."""
    try:
        return [Part(kernel, lower_one(kernel))]
    except FrameError as wall:
        blocked: list[SpecError] = []  # what else stopped a cut's kernels
        try:
            parts = _cut(kernel, _Counted(lower_one), wall, MAX_KERNELS, blocked, taken)
        except _SearchExhausted:
            parts = None
        if parts is not None:
            return parts
        if not blocked:
            raise
        # The frame was cut around; what stops the program is in one of its kernels.
        error = blocked[0]
        note = f"ptodsl cuts this spec into kernels ({wall.message}); this one still fails"
        raise SpecError(
            error.message, error.span, note=note if error.note is None else f"{error.note}; {note}"
        ) from None


class _SearchExhausted(FrameError):
    """The search for cuts tried MAX_LOWERINGS lowerings."""


class _Counted:
    """`lower_one`, refusing to lower more than MAX_LOWERINGS kernels in one search."""

    def __init__(self, lower_one: Callable[[ir.Kernel], object]) -> None:
        self.lower_one = lower_one
        self.count = 0

    def __call__(self, kernel: ir.Kernel) -> object:
        self.count += 1
        if self.count > MAX_LOWERINGS:
            raise _SearchExhausted(
                f"no cut into at most {MAX_KERNELS} kernels was found in {MAX_LOWERINGS} tries",
                kernel.body[0].span,
            )
        return self.lower_one(kernel)


def _cut(
    kernel: ir.Kernel,
    lower_one: _Counted,
    wall: FrameError,
    budget: int,
    blocked: list[SpecError],
    taken: frozenset[str] = frozenset(),
) -> list[Part] | None:
    """`kernel` (which `lower_one` refused with `wall`) as at most `budget` kernels; the
    errors other than a frame's that stopped a cut's kernels go to `blocked`."""
    if budget < 2:
        return None
    pairs: list[tuple[int, list[Part]]] = []
    first_fits: list[tuple[ir.Kernel, Part, FrameError]] = []
    for point in cut_points(kernel, taken):
        writer, reader = split(kernel, point)
        try:
            first = Part(writer, lower_one(writer), wall)
        except FrameError:  # this cut's first kernel does not fit: not a cut to take
            continue
        except SpecError as error:
            blocked.append(error)
            continue
        try:
            rest = Part(reader, lower_one(reader))
        except FrameError as next_wall:  # the rest needs cutting again
            first_fits.append((reader, first, next_wall))
            continue
        except SpecError as error:
            blocked.append(error)
            continue
        bytes_between = sum(o.type.size * o.type.dtype.itemsize for o in writer.outputs)
        pairs.append((bytes_between, [first, rest]))
    if pairs:
        return min(pairs, key=lambda pair: pair[0])[1]
    # No single cut: the largest first part that fits, and the rest cut again.
    first_fits.sort(key=lambda fit: -_ops(fit[1].kernel))
    for reader, first, next_wall in first_fits:
        rest = _cut(
            reader, lower_one, next_wall, budget - 1, blocked, taken | first.kernel.spec_names
        )
        if rest is not None:
            return [first, *rest]
    return None


def _per_op(kernel: ir.Kernel, lower_one: Callable) -> list[Part]:
    """A kernel per op: every op inside an expression bound to a let of its own (reshapes
    stay with their reader: they move no data), then the spec cut after every tensor let."""
    kernel = _every_op_bound(kernel)
    parts = []
    for stmt in kernel.body:
        if _cut_per_op(stmt):
            if stmt.name not in {s.name for s in kernel.body if isinstance(s, ir.Let)}:
                continue  # an earlier cut made it an intermediate
            writer, kernel = split(kernel, (kernel, stmt.name))
            parts.append(Part(writer, lower_one(writer)))
    return [*parts, Part(kernel, lower_one(kernel))]


def _cut_per_op(stmt: ir.Stmt) -> bool:
    """A tensor let that is not a view of another (a reshape goes with its reader)."""
    return (
        isinstance(stmt, ir.Let)
        and _storable(stmt.value)
        and not (isinstance(stmt.value, ir.Op) and _is_layout(stmt.value))
    )


def _is_layout(node: ir.Op) -> bool:
    """A view of its operand that moves no data (a reshape; not a transpose)."""
    return ops.lookup(node.op).kind is ops.Kind.LAYOUT and not ops.moves_axes(node.op)


def _every_op_bound(kernel: ir.Kernel) -> ir.Kernel:
    while True:
        inner = next(
            (
                (index, node)
                for index, stmt in enumerate(kernel.body)
                for node in ir.walk(stmt.value)
                if node is not stmt.value
                and isinstance(node, ir.Op)
                and _storable(node)
                and not _is_layout(node)
            ),
            None,
        )
        if inner is None:
            return kernel
        kernel, _ = _bound(kernel, *inner)


def cut_points(
    kernel: ir.Kernel, taken: frozenset[str] = frozenset()
) -> Iterator[tuple[ir.Kernel, str]]:
    """Each place the spec may be cut: the kernel (with the value bound to a `let` where it
    was not, named apart from `taken`) and that let's name, in program order."""
    for index, stmt in enumerate(kernel.body):
        if isinstance(stmt, ir.Let) and _storable(stmt.value):
            yield kernel, stmt.name
        for node in ir.walk(stmt.value):
            if node is stmt.value and isinstance(stmt, ir.Let):
                continue
            if _worth_a_cut(node) or _read_by_a_cut_kind(node, stmt.value):
                yield _bound(kernel, index, node, taken)


def _storable(value: ir.Expr) -> bool:
    """A float tensor: what an intermediate holds (a comparison's mask stays with the
    `where` that reads it: pypto's select takes a mask it computed, not a stored one)."""
    if isinstance(value, ir.Op) and ops.lookup(value.op).kind is ops.Kind.COMPARISON:
        return False
    return isinstance(value.type, ir.TensorType) and value.type.dtype.is_float


def _worth_a_cut(node: ir.Expr) -> bool:
    return (
        isinstance(node, ir.Op)
        and _storable(node)
        and ops.lookup(node.op).kind in CUT_KINDS
        and not _a_view_of_declared(node)
    )


def _a_view_of_declared(node: ir.Expr) -> bool:
    """A declared tensor seen through reshapes only: a kernel computing it would copy it."""
    return isinstance(_unviewed(node), ir.Ref)


def _ops(kernel: ir.Kernel) -> int:
    """How much a kernel computes: the ops in its statements."""
    return sum(isinstance(n, ir.Op) for s in kernel.body for n in ir.walk(s.value))


def _read_by_a_cut_kind(node: ir.Expr, tree: ir.Expr) -> bool:
    """Whether a computed value is the operand of a window, a reduction, ...: its frame may
    be the one the cut kind's own cannot share (a per-channel bias before a 3-D pooling
    keeps the batch and the channels apart, the pooling alone merges them)."""
    return (
        isinstance(node, ir.Op)
        and _storable(node)
        and not _is_layout(node)
        and any(
            _worth_a_cut(user) and any(operand is node for operand in user.operands)
            for user in ir.walk(tree)
        )
    )


def _bound(
    kernel: ir.Kernel, index: int, node: ir.Op, taken: frozenset[str] = frozenset()
) -> tuple[ir.Kernel, str]:
    """`kernel` with `node` (in statement `index`) bound to a let of its own before it, named
    apart from the spec's names and the `taken` ones (the kernels cut off before this one
    hold lets it cannot see, which may be the program's buffers too)."""
    stmt = kernel.body[index]
    bound = kernel.free_name(f"{node.op}_value", taken)
    ref = ir.Ref(bound, node.type, node.span)
    replaced = ir.map_expr(stmt.value, lambda n: ref if n is node else n)
    body = list(kernel.body)
    body[index : index + 1] = [ir.Let(bound, node, node.span), attrs.evolve(stmt, value=replaced)]
    return attrs.evolve(kernel, body=tuple(body)), bound


def split(kernel: ir.Kernel, point: tuple[ir.Kernel, str]) -> tuple[ir.Kernel, ir.Kernel]:
    """The kernel that computes the let `point` names (and every let both sides read), and
    the kernel that reads them as inputs and computes the rest."""
    kernel, cut = point
    updating = {o.name for o in kernel.outputs if o.updates is not None}
    lets = {s.name: s for s in kernel.body if isinstance(s, ir.Let)}
    position = {s.name: i for i, s in enumerate(kernel.body) if isinstance(s, ir.Let)}
    written = _closure({cut}, lets)  # the lets the first kernel computes
    # A running statistic's update the first kernel can compute is stored there, beside
    # the statistics it shares with the normalisation (the rest may not hold their frame).
    early = [
        s
        for s in kernel.body
        if isinstance(s, ir.Store)
        and s.output in updating
        and all(name in written or name not in lets for name in _read([s]))
    ]
    # What the rest reads: its stores and the later lets they need, transitively.
    later = {n: let for n, let in lets.items() if position[n] > position[cut]}
    stores = [s for s in kernel.body if isinstance(s, ir.Store) and s not in early]
    live = [later[n] for n in _closure(_read(stores), later)]
    read_after = _read([*stores, *live])
    # Tensor lets the rest reads and the first computes: written once, read from memory.
    between = sorted(
        (name for name in written & read_after if isinstance(lets[name].value.type, ir.TensorType)),
        key=position.__getitem__,
    )
    needed = _closure(set(between) | _read(early), lets)
    writer_lets = [lets[n] for n in sorted(needed, key=position.__getitem__)]
    intermediates = [_intermediate(lets[n]) for n in between]
    # In the first kernel the intermediates are outputs: stored as computed where no other
    # let reads them (no copy), else their lets get names of their own.
    read_by_lets = _read([*writer_lets, *early])
    stored = {n for n in between if n not in read_by_lets}
    renamed = {n: kernel.free_name(f"{n}_value") for n in between if n not in stored}

    def rename(node: ir.Expr) -> ir.Expr:
        if isinstance(node, ir.Ref) and node.name in renamed:
            return attrs.evolve(node, name=renamed[node.name])
        return node

    writer_body: list[ir.Stmt] = []
    for let in writer_lets:
        value = ir.map_expr(let.value, rename)
        if let.name in stored:
            writer_body.append(ir.Store(let.name, value, let.span))
        else:
            writer_body.append(ir.Let(renamed.get(let.name, let.name), value, let.span))
    writer_body += [
        ir.Store(n, ir.Ref(renamed[n], lets[n].value.type, lets[n].span), lets[n].span)
        for n in between
        if n not in stored
    ]
    writer_body += [attrs.evolve(s, value=ir.map_expr(s.value, rename)) for s in early]
    moved = {s.output for s in early}
    # named after what it writes (the last kernel keeps the spec's name): short enough for
    # the names generated from it (`_make_<name>_kernel`, a staging launch's) to fit a line
    writer = _part(
        kernel,
        (cut if cut != kernel.name else f"{cut}_part") + _mode_suffix(kernel),
        writer_body,
        outputs=(
            *(ir.Output(t.name, t.type, t.span, t.dims) for t in intermediates),
            *(o for o in kernel.outputs if o.name in moved),
        ),
        extra_inputs=(),
    )
    # The rest keeps its own lets (scalars, and tensors the first kernel does not write).
    reader_body = [
        s
        for s in kernel.body
        if not (isinstance(s, ir.Let) and s.name in between) and s not in early
    ]
    reader_outputs = tuple(o for o in kernel.outputs if o.name not in moved)
    reader = _part(
        kernel, kernel.name, reader_body, outputs=reader_outputs, extra_inputs=intermediates
    )
    return writer, reader


def _mode_suffix(kernel: ir.Kernel) -> str:
    """Eval mode's kernels share a module with training mode's: named apart."""
    return "_eval" if kernel.mode is ir.Mode.EVAL else ""


def _intermediate(let: ir.Let) -> ir.Input:
    """The tensor a let becomes between two kernels: its dims are its sizes."""
    assert isinstance(let.value.type, ir.TensorType)
    return ir.Input(let.name, let.value.type, let.span, let.value.type.shape)


def _part(
    kernel: ir.Kernel,
    name: str,
    body: list[ir.Stmt],
    outputs: tuple[ir.Output, ...],
    extra_inputs: tuple[ir.Input, ...] | list[ir.Input],
) -> ir.Kernel:
    """A kernel of `body` (its dead lets dropped) reading the inputs, intermediates and
    params it uses."""
    lets = {s.name: s for s in body if isinstance(s, ir.Let)}
    stores = [s for s in body if isinstance(s, ir.Store)]
    live = _closure(_read(stores), lets)
    body = [s for s in body if not isinstance(s, ir.Let) or s.name in live]
    read = _read(body)
    inputs = (*(t for t in kernel.inputs if t.name in read), *extra_inputs)
    params = tuple(p for p in kernel.params if p.name in read)
    return attrs.evolve(
        kernel,
        name=name,
        inputs=inputs,
        outputs=tuple(outputs),
        params=params,
        body=tuple(body),
    )


def _read(statements: list[ir.Stmt]) -> set[str]:
    return {
        node.name for stmt in statements for node in ir.walk(stmt.value) if isinstance(node, ir.Ref)
    }


def _closure(names: set[str], lets: dict[str, ir.Let]) -> set[str]:
    """The lets among `names` and every let they read, transitively."""
    done: set[str] = set()
    pending = [n for n in names if n in lets]
    while pending:
        name = pending.pop()
        if name in done:
            continue
        done.add(name)
        pending += [n for n in _read([lets[name]]) if n in lets and n not in done]
    return done


def _without_unread_lets(kernel: ir.Kernel) -> ir.Kernel:
    """Lets no output depends on are computed by no kernel (a cut there would give a kernel
    with nothing to write)."""
    kept: list[ir.Stmt] = []
    needed: set[str] = set()
    for stmt in reversed(kernel.body):
        if isinstance(stmt, ir.Store) or stmt.name in needed:
            kept.append(stmt)
            needed |= _read([stmt])
    if len(kept) == len(kernel.body):
        return kernel
    return attrs.evolve(kernel, body=tuple(reversed(kept)))


def _without_unread_inputs(kernel: ir.Kernel) -> ir.Kernel:
    """Inputs no statement reads (a module's unused parameter) stay out of every kernel:
    forward still takes them, ModelNew still creates them."""
    read = _read(list(kernel.body))
    if all(t.name in read for t in kernel.inputs):
        return kernel
    return attrs.evolve(kernel, inputs=tuple(t for t in kernel.inputs if t.name in read))
