"""Inserts a loop into a phase whose tiles would exceed the target's auto-tile limit.

One loop, never nested, along the outermost axis that no reduction of the phase reduces and
one index of which fits (PyPTO pattern C: LayerNorm and RMSNorm loop over the batch,
BatchNorm over channels; attention's scores over the heads when one sample's alone exceed
the limit), so every iteration reduces whole rows of its own. A phase that reduces every
axis (a global sum), or whose free axes have no index that fits (BatchNorm3d over 128
samples of 63^3 values), loops along a reduced axis: each block leaves a partial result,
combined after the loop, and what reads the reduction runs in a phase after it. Each iteration
takes `chunk` indices of the loop axis, a multiple of the tile there; a chunk dividing the
axis exactly is preferred, otherwise one constant-size tail block follows the loop, so every
view has a compile-time size and nothing reads or writes past the tensor.
"""

from __future__ import annotations

import attrs

from ptodsl.frontend.diagnostics import FrameError, SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import Target
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import REDUCTIONS
from ptodsl.passes.chain_reductions import chain_axes
from ptodsl.passes.tiling import (
    auto_tiles,
    ceil_div,
    choose_tile,
    positional_axes,
    reduction_aligned,
    window_auto_tiles,
    window_steps,
)


def _without(values: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return values[:axis] + values[axis + 1 :]


def plan_loop(
    shape: tuple[int, ...],
    tile: tuple[int, ...],
    target: Target,
    reduced: frozenset[int] = frozenset(),
    min_count: int | None = None,
    positional: frozenset[int] = frozenset(),
) -> ir.Loop | None:
    """The loop for one phase, or None when its tiles fit without one (or no axis can be
    split: see `insert_loops`). `reduced` are the axes the phase's reductions reduce (split
    only when nothing else is: partial results combine); `positional` the axes scans and
    position counts run along, never split; `min_count` asks for at least that many
    iterations (as far as the axis allows)."""
    if auto_tiles(shape, tile) <= target.max_auto_tiles:
        return None
    splittable = [a for a in range(len(shape)) if a not in positional]
    if not splittable:
        return None
    free = [a for a in splittable if a not in reduced and shape[a] > 1]

    def slices_along(axis: int) -> int:
        tiles_per_slice = auto_tiles(_without(shape, axis), _without(tile, axis))
        return target.max_auto_tiles // tiles_per_slice

    # The outermost free axis whose single index fits; an inner one when an outer index
    # alone has too many tiles ([2, 4, 3136, 3136] scores loop over heads, not batch). When
    # no free axis fits, the outermost reduced one that does: each block reduces its part
    # and the partials combine after the loop (BatchNorm3d's statistics of 128 samples, one
    # channel alone 3968 tiles, loop over the samples).
    fitting = [a for a in free if slices_along(a) > 0] or [
        a for a in splittable if slices_along(a) > 0 and (a in reduced or not free)
    ]
    if not fitting:
        return None
    axis = fitting[0]
    slices = slices_along(axis)
    size, step = shape[axis], tile[axis]
    largest_chunk = slices * step
    fewest_iterations = max(ceil_div(size, largest_chunk), min(min_count or 1, size // step))
    # A chunk that divides the axis (within 2x of the fewest iterations) needs no tail.
    for count in range(fewest_iterations, 2 * fewest_iterations + 1):
        if size % count == 0 and (size // count) % step == 0:
            return ir.Loop(count=count, chunk=size // count, tail=0, axis=axis)
    # Otherwise the fewest full-size chunks, and a tail block smaller than one chunk.
    chunk = max(step, size // fewest_iterations // step * step)
    return ir.Loop(count=size // chunk, chunk=chunk, tail=size % chunk, axis=axis)


def reduced_axes(kernel: ir.Kernel, phase: ir.Phase) -> frozenset[int]:
    return frozenset(
        axis
        for index in phase.statements
        for node in ir.walk(kernel.body[index].value)
        if isinstance(node, ir.Op) and node.op in REDUCTIONS
        for axis in node.attrs.axes
    )


def _reduces_loop_axis(stmt: ir.Stmt, loop: ir.Loop) -> bool:
    return loop.axis in chain_axes(stmt.value)


def _split_after_loop_reductions(
    kernel: ir.Kernel, phase: ir.Phase, target: Target
) -> list[ir.Phase]:
    """A value reduced over the loop axis is complete only after the loop: statements of
    the phase that come after it run in a phase of their own (with a loop of its own)."""
    loop = plan_loop(
        phase.shape,
        phase.tile,
        target,
        reduced_axes(kernel, phase),
        positional=positional_axes(kernel, phase.statements),
    )
    if loop is None:
        return [phase]
    for position, index in enumerate(phase.statements[:-1]):
        if _reduces_loop_axis(kernel.body[index], loop):
            rest = phase.statements[position + 1 :]
            head = attrs.evolve(phase, statements=phase.statements[: position + 1])
            return [
                *_narrow_first(kernel, head, loop, target),
                *_split_after_loop_reductions(kernel, attrs.evolve(phase, statements=rest), target),
            ]
    return _narrow_first(kernel, phase, loop, target)


def _narrow_first(
    kernel: ir.Kernel, phase: ir.Phase, loop: ir.Loop, target: Target
) -> list[ir.Phase]:
    """A value one long along a loop over a longer axis, and not reduced over it (a
    BatchNorm's mean from sums a loop over the samples completed, its running mean), is the
    same in every block: unless it reads a value the loop computes (a crop of one), it
    runs once, in a phase of its own before the loop's. Inside the loop it would be a
    block's value, and one read after the loop reads garbage on pypto 0.2.0."""
    narrow: list[int] = []
    in_loop: set[str] = set()  # lets of the phase that stay in the loop
    for index in phase.statements:
        stmt = kernel.body[index]
        shape = stmt.value.type.shape
        if (
            len(shape) == len(phase.shape)
            and shape[loop.axis] == 1
            and not _reduces_loop_axis(stmt, loop)
            and not in_loop & {n.name for n in ir.walk(stmt.value) if isinstance(n, ir.Ref)}
        ):
            narrow.append(index)
        elif isinstance(stmt, ir.Let):
            in_loop.add(stmt.name)
    if not narrow or phase.shape[loop.axis] == 1:
        return [phase]
    shapes = [kernel.body[index].value.type.shape for index in narrow]
    shape = tuple(map(max, *shapes)) if len(shapes) > 1 else shapes[0]
    itemsize = max(kernel.body[index].value.type.dtype.itemsize for index in narrow)
    once = ir.Phase(tuple(narrow), shape, choose_tile(shape, itemsize, target))
    kept = tuple(index for index in phase.statements if index not in narrow)
    return [once, attrs.evolve(phase, statements=kept)] if kept else [once]


MATMUL_ITERATIONS = 4
MATMUL_MIN_ROWS = 128


# Why some kernels with a workspace crash the check ("Invalid slot index", SIGSEGV), as
# tests/test_layer_specs.py first recorded for random layer specs (PYPTO_SLOT_CRASH) and
# pypto 0.2.0's source confirms: under pass verification the jit registers a kernel's
# arguments for the calculator, and the cost-model run that follows appends them again
# without a reset (`CostModelRunOnceDataFromHost`). The device emulation then reads twice as
# many arguments as the program has slots for, past the end of its slot list, and crashes
# when a value it finds there is not a slot index. Plain SIM (no verification) runs the same
# kernels. What lies past the list depends on the program's layout, so no count of arguments
# or workspaces predicts it: kernel-scope workspaces written in one loop and read in the
# next crashed in every small case with at least four inputs more than workspaces (5 inputs
# beside 1 workspace, 6 beside 2, 7 beside 3) and passed with fewer, yet kernels of up to 14
# arguments with workspaces pass (level 2 #73, level 3 #8). Resetting the registration
# before the cost model would end the crash but also the values: the calculator's results
# reach the caller only through the copies registered for it. The guards below refuse the
# plans measured to crash.

# Kernel arguments past which a looped matmul's workspace crashes pypto 0.2.0's simulator.
MAX_ARGUMENTS_WITH_MATMUL_WORKSPACE = 4


def _workspace_crashes(kernel: ir.Kernel, phase: ir.Phase) -> bool:
    """A matmul whose row chunks are assembled into a workspace (`_m0 = pypto.Tensor(...)`,
    its product a `let` that later phases read) in a kernel of five or more tensor
    arguments crashes pypto 0.2.0's simulator ("Invalid slot index 64", SIGSEGV), whatever
    the chunk count or vector tile: `relu(x @ W.T + b) * s` of a [512, 1024] x and a
    [512, 768] or [768] s, and the dropout after minGPT's output projection. With four
    arguments it runs (`examples/linear_relu.pto`), and so does one matmul without the
    loop (37.6 us for [1024, 768] by [768, 768] with a dropout mask): it then runs so."""
    (index,) = phase.statements
    arguments = len(kernel.inputs) + len(kernel.outputs)
    return (
        isinstance(kernel.body[index], ir.Let) and arguments > MAX_ARGUMENTS_WITH_MATMUL_WORKSPACE
    )


def plan_matmul_loop(phase: ir.Phase, chunks: int = MATMUL_ITERATIONS) -> ir.Loop | None:
    """2-D matmuls loop over M (PyPTO pattern B) in 4 chunks of ceil_div(M, 4) rows, rounded
    up to the cube's 16 and at least one 128-row block; a constant tail takes the rest.
    Measured on #1: a loop never beats one matmul call alone (197 us; 4, 8 or 16 chunks:
    218 us; 32: 365 us) but halves compile time, verify memory grows with the count, and
    with elementwise work after the matmul 4 chunks win (#17 + bias + relu: 263 -> 211 us).
    Batched 3-D matmuls run without a loop."""
    if len(phase.shape) != 2:
        return None
    rows = phase.shape[0]
    chunk = max(MATMUL_MIN_ROWS, ceil_div(ceil_div(rows, chunks), 16) * 16)
    if chunk >= rows:
        return None
    return ir.Loop(count=rows // chunk, chunk=chunk, tail=rows % chunk, axis=0)


def plan_k_loop(kernel: ir.Kernel, phase: ir.Phase, target: Target) -> ir.Loop | None:
    """A contraction longer than PyPTO's inner-axis limit is split into chunks of K whose
    partial products accumulate into the output (measured: 53-96 us on [16, 70000] @
    [70000, 16], where multiply-and-reduce crashes the simulator inside a loop)."""
    (index,) = phase.statements
    stmt = kernel.body[index]
    matmul = stmt.value
    a = matmul.operands[0]
    k = a.type.shape[-2] if matmul.attrs.a_trans else a.type.shape[-1]
    if k <= target.max_inner_axis:
        return None
    if ir.is_cube_matrix(a):
        raise SpecError(
            f"a matmul of a computed value contracting {k} > {target.max_inner_axis} elements "
            "is not supported",
            matmul.span,
            note="its K chunks are views of declared tensors: make the value an input",
        )
    if not isinstance(stmt, ir.Store) or len(phase.shape) != 2:
        raise SpecError(
            f"a 2-D matmul contracting {k} > {target.max_inner_axis} elements must be an output of "
            "its own (its K chunks accumulate into the output)",
            matmul.span,
        )
    count = ceil_div(k, target.max_inner_axis)
    chunk = k // count if k % count == 0 else ceil_div(k, count) // 16 * 16
    return ir.Loop(count=k // chunk, chunk=chunk, tail=k % chunk, axis=len(phase.shape))


def plan_window_loop(kernel: ir.Kernel, phase: ir.Phase, target: Target) -> ir.Phase:
    """A window phase whose steps would exceed the auto-tile limit loops over its first
    axis no window slides along, in equal blocks (each block's steps planned for it)."""
    assert phase.window is not None
    if window_auto_tiles(phase.window) <= target.max_auto_tiles:
        return phase
    (index,) = phase.statements
    window = kernel.body[index].value
    shape = window.operands[0].type.shape
    free = [a for a in range(len(shape)) if a not in window.attrs.axes and shape[a] > 1]
    for axis in free[:1]:
        size = shape[axis]
        for count in range(2, size + 1):
            if size % count:
                continue
            block = shape[:axis] + (size // count,) + shape[axis + 1 :]
            steps = window_steps(window, block, target)
            if window_auto_tiles(steps) <= target.max_auto_tiles:
                loop = ir.Loop(count=count, chunk=size // count, tail=0, axis=axis)
                return attrs.evolve(phase, loop=loop, window=steps)
    raise SpecError(
        f"the window over {list(shape)} needs more than {target.max_auto_tiles} tiles even "
        "per index of a loop over an axis it does not slide along",
        window.span,
    )


def insert_loops(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    """`tuning` may ask for more loop iterations, or other matmul chunks, than the defaults."""
    target, tuning = ctx.target, ctx.tuning
    assert kernel.schedule is not None, "tiling runs first"
    tuning = tuning or ir.Tuning()
    # Launches already chunk a matmul's rows; a loop inside each launch only adds its own
    # overhead (#7 at 8192 x 8192 in 16 launches: 567 us with 4 chunks each, 349 us with one).
    default_chunks = 1 if kernel.launches is not None else MATMUL_ITERATIONS
    matmul_chunks = tuning.matmul_chunks or default_chunks
    phases = []
    for whole in kernel.schedule.phases:
        if whole.window is not None:
            phases.append(plan_window_loop(kernel, whole, target))
            continue
        if whole.conv is not None:  # tiling planned its loops with its blocks
            phases.append(whole)
            continue
        if whole.cube is not None:
            k_loop = plan_k_loop(kernel, whole, target)
            chunks = 1 if _workspace_crashes(kernel, whole) else matmul_chunks
            loop = None if k_loop or chunks == 1 else plan_matmul_loop(whole, chunks)
            accumulate = None
            if k_loop is not None:  # K chunks accumulate into the output on the vector cores
                (index,) = whole.statements
                output = kernel.body[index].value
                accumulate = choose_tile(output.type.shape, output.type.dtype.itemsize, target)
            phases.append(attrs.evolve(whole, loop=loop, k_loop=k_loop, accumulate_tile=accumulate))
            continue
        for phase in _split_after_loop_reductions(kernel, whole, target):
            loop = plan_loop(
                phase.shape,
                phase.tile,
                target,
                reduced_axes(kernel, phase),
                tuning.loop_count,
                positional_axes(kernel, phase.statements),
            )
            if loop is None and auto_tiles(phase.shape, phase.tile) > target.max_auto_tiles:
                raise SpecError(
                    f"shape {list(phase.shape)} needs more than {target.max_auto_tiles} tiles "
                    f"of {list(phase.tile)} even per index of the loop axis; one loop cannot "
                    "split it",
                    kernel.outputs[0].span,
                )
            partials = () if loop is None else _partials(kernel, phase, loop, target)
            _refuse_crashing_partials(kernel, phase, loop)
            phases.append(attrs.evolve(phase, loop=loop, partials=partials))
    return _clone_stores_of_loop_reads(kernel, phases, target)


def _clone_stores_of_loop_reads(
    kernel: ir.Kernel, phases: list[ir.Phase], target: Target
) -> ir.Kernel:
    """A store of a let that a loop reads clones it: moved into the output after the loop
    (`m[:] = mean`, a BatchNorm's mean that a loop over the samples subtracted), pypto
    0.2.0 wrote values off by up to 3e16 (`output_safety` clones a value the body reads
    later only; phases may now run a store before the loop that reads its value). A clone's
    phase takes a last-axis tile of 32 bytes at least, past a shorter axis: pypto 0.2.0
    refuses a clone under a narrower one ("FwkOp tile shape's last dim is not aligned")."""
    body = kernel.body
    read_in_loops = {
        node.name
        for phase in phases
        if phase.loop is not None
        for index in phase.statements
        for node in ir.walk(body[index].value)
        if isinstance(node, ir.Ref)
    }
    body = tuple(
        attrs.evolve(stmt, clone=True)
        if isinstance(stmt, ir.Store)
        and isinstance(stmt.value, ir.Ref)
        and stmt.value.name in read_in_loops
        else stmt
        for stmt in body
    )
    cloned = {i for i, stmt in enumerate(body) if isinstance(stmt, ir.Store) and stmt.clone}
    phases = [
        attrs.evolve(
            phase,
            tile=reduction_aligned(
                phase.tile, body[phase.statements[0]].value.type.dtype.itemsize, target
            ),
        )
        if cloned & set(phase.statements)
        and phase.loop is None
        and phase.cube is None
        and phase.conv is None
        and phase.window is None
        else phase
        for phase in phases
    ]
    return attrs.evolve(kernel, body=body, schedule=ir.Schedule(tuple(phases)))


# Tensor arguments from which a kernel looping over a reduced axis beside a free one crashes
# pypto 0.2.0's verified simulation (the slot over-read above): a BatchNorm over
# [16, 2, 512] in 8 blocks of samples with its affine weights and running statistics (5
# inputs, 3 outputs) crashes, the same with one running statistic fewer (7 arguments)
# passes. Only this loop, new at stop 61, is refused here.
MAX_ARGUMENTS_WITH_REDUCED_LOOP = 7


def _refuse_crashing_partials(kernel: ir.Kernel, phase: ir.Phase, loop: ir.Loop | None) -> None:
    """A loop over a reduced axis chosen because no free axis fits, in a kernel of more
    arguments than run: a frame error, so that partition cuts the kernel smaller."""
    reduced = reduced_axes(kernel, phase)
    if loop is None or loop.axis not in reduced:
        return
    free = [axis for axis, size in enumerate(phase.shape) if size > 1 and axis not in reduced]
    arguments = len(kernel.inputs) + len(kernel.outputs)
    if free and arguments > MAX_ARGUMENTS_WITH_REDUCED_LOOP:
        (index, *_) = phase.statements
        raise FrameError(
            f"a loop over a reduced axis of {list(phase.shape)} (no index of its free axes "
            f"fits) in a kernel of {arguments} tensor arguments crashes pypto 0.2.0's "
            f"simulator; at most {MAX_ARGUMENTS_WITH_REDUCED_LOOP} run",
            kernel.body[index].span,
        )


def _partials(
    kernel: ir.Kernel, phase: ir.Phase, loop: ir.Loop, target: Target
) -> tuple[ir.Partial, ...]:
    """The phase's `let` reductions over the loop axis: each block leaves a partial result,
    and the partials are combined after the loop (a last-axis combine is reduce-aligned)."""
    blocks = loop.count + (1 if loop.tail else 0)
    partials = []
    for index in phase.statements:
        stmt = kernel.body[index]
        if not isinstance(stmt, ir.Let) or loop.axis not in chain_axes(stmt.value):
            continue
        shape = tuple(
            blocks if axis == loop.axis else size for axis, size in enumerate(stmt.value.type.shape)
        )
        tile = shape
        if loop.axis == len(shape) - 1:
            tile = reduction_aligned(tile, stmt.value.type.dtype.itemsize, target)
        partials.append(ir.Partial(index, shape, tile))
    return tuple(partials)
