"""Chooses the vector tile shape of each phase from the phase's actual shape.

Rules (PyPTO's limits and the basics' principle 4): rank(tile) = rank(shape) <= 4; every tile
axis <= the shape's axis; prod(tile) <= the target's tile budget; the last axis is filled
first, so a tile moves as many contiguous bytes as the shape allows (>= 1 KB when the last
axis is that long); then tiles are balanced so that the last tile along an axis is not a
sliver. Whether the phase needs a loop (too many tiles) is the loop pass's decision.
"""

from __future__ import annotations

import math

import attrs

from ptodsl.frontend.diagnostics import FrameError, SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.ir.target import PYPTO_0_2_0, Target, ub_use
from ptodsl.passes import DEFAULT_CONTEXT, PassContext
from ptodsl.passes.align_axes import REDUCTIONS
from ptodsl.passes.isolate_reductions import is_conv as is_conv_op
from ptodsl.passes.isolate_reductions import is_window as is_window_op
from ptodsl.passes.output_safety import is_assembled


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def auto_tiles(shape: tuple[int, ...], tile: tuple[int, ...]) -> int:
    return math.prod(ceil_div(size, t) for size, t in zip(shape, tile, strict=True))


def _balanced(size: int, tile: int, align: int) -> int:
    """The smallest tile (a multiple of `align` where possible) giving as few tiles as `tile`."""
    count = ceil_div(size, tile)
    even = ceil_div(size, count)
    aligned = ceil_div(even, align) * align
    return aligned if aligned <= tile and aligned <= size else even


def choose_tile(
    shape: tuple[int, ...],
    itemsize: int,
    target: Target = PYPTO_0_2_0,
    last_axis_max: int | None = None,
    balance_last: bool = True,
) -> tuple[int, ...]:
    budget = target.max_tile_elements
    align = max(1, target.reduce_align_bytes // itemsize)
    tile = [1] * len(shape)
    last = len(shape) - 1
    for axis in reversed(range(len(shape))):
        cap = last_axis_max if axis == last and last_axis_max else budget
        tile[axis] = min(shape[axis], budget, cap)
        # UB holds a row of the last axis in whole 32-byte blocks: a [4096, 1] f32 tile
        # takes as much as [4096, 8].
        budget //= ceil_div(tile[axis], align) * align if axis == last else tile[axis]
        if budget <= 1:
            break
    return tuple(
        t if axis == last and not balance_last else _balanced(size, t, align if axis == last else 1)
        for axis, (size, t) in enumerate(zip(shape, tile, strict=True))
    )


def is_matmul(stmt: ir.Stmt) -> bool:
    return isinstance(stmt.value, ir.Op) and stmt.value.op == "matmul"


def is_window(stmt: ir.Stmt) -> bool:
    return is_window_op(stmt.value)


def window_steps(
    window: ir.Op, shape: tuple[int, ...], target: Target
) -> tuple[ir.WindowStep, ...]:
    """The steps of a window phase on an operand block of `shape`, one windowed axis at a
    time (a window reduction is separable: max, min and sum of a box are the reduction of
    the per-axis reductions). Each step pads the axis to `rows * stride`, splits it into
    [rows, stride] (PyPTO's reshape), so that every tap of every window is one view of
    rows, and combines the taps elementwise. Splits stay rank 4: the axes before and after
    are merged."""
    attributes = window.attrs
    assert isinstance(attributes, ir.Window)
    itemsize = window.type.dtype.itemsize
    swapping = _transposing(target)
    # The taps and their running combination share UB: tiles that do not spill (a spilled
    # sum of three 64 KB taps breaks pypto's simulator: "opSequenceAfterOOO_").
    combining = attrs.evolve(target, max_tile_elements=target.spill_safe_tile_elements)
    steps = []
    for position, axis in enumerate(attributes.axes):
        transposed = axis == len(shape) - 1
        working = ir.swap_last(shape) if transposed else shape
        at = len(shape) - 2 if transposed else axis
        length = shape[axis]
        extent = attributes.extent(position, length)
        stride, dilation = attributes.stride[position], attributes.dilation[position]
        taps = tuple(divmod(j * dilation, stride) for j in range(attributes.size[position]))
        front = attributes.padding[position]
        # Rows enough for every tap of every window and for the whole axis: PyPTO copies a
        # cropped view element row by row, a padded one by whole tiles.
        rows = max(extent + max(row for row, _ in taps), -(-(front + length) // stride))
        padded = working[:at] + (rows * stride,) + working[at + 1 :]
        split = (math.prod(working[:at]), rows, stride, math.prod(working[at + 1 :]))
        result = working[:at] + (extent,) + working[at + 1 :]
        steps.append(
            ir.WindowStep(
                axis=axis,
                shape=shape,
                front=front,
                back=rows * stride - front - length,
                split=split,
                taps=taps,
                extent=extent,
                frame_tile=_window_tile(padded, itemsize, target),
                split_tile=_window_tile(split, itemsize, combining),
                result_tile=_window_tile(result, itemsize, swapping if transposed else target),
                transposed=transposed,
                swap_tile=_window_tile(shape, itemsize, swapping) if transposed else None,
            )
        )
        shape = steps[-1].result
    return tuple(steps)


def is_conv(stmt: ir.Stmt) -> bool:
    return is_conv_op(stmt.value)


def is_transpose(stmt: ir.Stmt) -> bool:
    return isinstance(stmt.value, ir.Op) and ops.moves_axes(stmt.value.op)


def has_own_phase(stmt: ir.Stmt) -> bool:
    """A matmul and a convolution run on the cube, a window through reshapes, a transpose
    with a workspace in UB: each in a phase of its own."""
    return is_matmul(stmt) or is_window(stmt) or is_conv(stmt) or is_transpose(stmt)


def _reads_input(kernel: ir.Kernel, conv: ir.Op) -> bool:
    """Whether the convolution's input is a kernel input (not a value computed before)."""
    x = conv.operands[0]
    return isinstance(x, ir.Ref) and any(t.name == x.name for t in kernel.inputs)


def plan_conv(conv: ir.Op, target: Target, reads_input: bool = False) -> ir.ConvPlan:
    """A convolution's plan (see `ir.ConvPlan`): as many output rows per block as keep the
    block within the target's `conv_block_elements` (at least one), zero padding that gives
    every tap a whole view, and a vector tile for every shape the phase computes on."""
    geometry = ir.ConvGeometry.of(conv)
    attributes = geometry.attributes
    itemsize = conv.type.dtype.itemsize
    rest = math.prod(geometry.out[1:])
    if not geometry.depthwise and rest >= target.max_inner_axis:
        raise SpecError(
            f"a convolution's output rows of {rest} elements pass PyPTO's inner-axis limit "
            f"of {target.max_inner_axis} for the cube",
            conv.span,
            note="ptodsl blocks the first spatial axis only",
        )
    strided = sum(step > 1 for step in geometry.stride)
    if len(geometry.spatial) + 1 + strided > target.max_rank:
        raise SpecError(
            f"a {len(geometry.spatial)}-D convolution strided along {strided} "
            f"{'axis' if strided == 1 else 'axes'} needs "
            f"views of rank {len(geometry.spatial) + 1 + strided}; PyPTO has {target.max_rank}",
            conv.span,
            note="ptodsl splits each strided axis in two: stride along fewer axes",
        )
    # the spaced input: a transposed convolution's elements `stride` apart (zeros between,
    # and after the last); a crop where the padding is negative
    spaced = tuple(n * gap for n, gap in zip(geometry.spatial, geometry.inserted, strict=True))
    front = [max(0, f) for f in geometry.front]
    skip = [max(0, -f) for f in geometry.front]
    # Zeros joined along the contiguous axis in pieces narrower than a 32-byte block are
    # copied element by element (a [4, 11, 700] input padded by 1 per side: 5.5 ms, by 8:
    # 0.8 ms): the last axis pads whole blocks in front, its first tap skipping the extra.
    granule = target.reduce_align_bytes // itemsize
    if front[-1]:
        aligned = ceil_div(front[-1], granule) * granule
        skip[-1] += aligned - front[-1]
        front[-1] = aligned
    # the last tap of the last output reads (out - 1) * stride + (kernel - 1) * dilation; a
    # strided axis is a whole number of strides long, its last tap's view inside
    back = tuple(
        max(
            0,
            (ceil_div(k + (w - 1) * d + 1, s) + o) * s - f - n
            if s > 1
            else k + (o - 1) * s + (w - 1) * d + 1 - f - n,
        )
        for k, o, s, w, d, f, n in zip(
            skip,
            (geometry.whole_rows, *geometry.out[1:]),  # a row launch's input: the whole
            geometry.stride,
            geometry.kernel,
            attributes.dilation,
            front,
            spaced,
            strict=True,
        )
    )
    if back[-1] and geometry.stride[-1] == 1:  # a strided axis stays whole strides long
        back = (*back[:-1], ceil_div(back[-1], granule) * granule)
    front, skip = tuple(front), tuple(skip)
    # An input padded or spaced with zeros is so by a launch of its own, into device memory,
    # when the input is the kernel's: views of a padded value built inside the kernel cost
    # pypto's model 50 times more (#80 at one sample: 19.3 ms against 0.39 ms). Otherwise
    # the taps view a padded copy of each sample (materialise: padded_input), its strided
    # axes split, or the input itself.
    zeros = any(front) or any(back) or any(g > 1 for g in geometry.inserted)
    staged = zeros and reads_input
    chunk = conv_rows_per_block(geometry, target, zeros or strided > 0)
    rows = ir.Loop(
        geometry.out[0] // chunk, chunk, geometry.out[0] % chunk, axis=_conv_rows_axis(geometry)
    )
    # Depthwise: multiply-adds of every channel's views on the vector cores, not a K = 1
    # matmul per channel and tap: #82 at 18 x 18 outputs 36 us against 63, at 126 x 126
    # 55 us against 332
    vector = geometry.depthwise
    shapes = conv_shapes(geometry, front, back, rows, vector, staged)
    # a transpose needs workspace: its tile takes a quarter of the budget, as a window's
    # exchange of axes does, in rows of at least TRANSPOSE_ROWS
    transposing = attrs.evolve(target, max_tile_elements=target.max_tile_elements // 4)
    row_cap = transposing.max_tile_elements // TRANSPOSE_ROWS
    tiles = tuple(
        (
            shape,
            reduction_aligned(
                choose_tile(shape, itemsize, transposing, row_cap), itemsize, transposing
            )
            if exchanged
            else _window_tile(shape, itemsize, target),
        )
        for shape, exchanged in shapes
    )
    for shape, tile in tiles:
        if auto_tiles(shape, tile) > target.max_auto_tiles:
            raise SpecError(
                f"a convolution block of {list(shape)} needs more than {target.max_auto_tiles} "
                f"tiles of {list(tile)}",
                conv.span,
                note="ptodsl loops over the batch and the output's first spatial axis only",
            )
    if geometry.stacked >= target.max_inner_axis:
        raise SpecError(
            f"a convolution's taps stack {geometry.stacked} rows (input channels per group "
            f"times taps): PyPTO's cube takes fewer than {target.max_inner_axis}",
            conv.span,
            note="use fewer input channels per group or a smaller kernel",
        )
    stacked = geometry.stacked
    product = ir.op(
        "matmul",
        ir.Ref("_w", ir.TensorType((geometry.group_out, stacked), conv.type.dtype), conv.span),
        ir.Ref("_x", ir.TensorType((stacked, chunk * rest), conv.type.dtype), conv.span),
        span=conv.span,
        attributes=ir.Transposes(False, False),
    )
    # A block's columns are many: 256-wide blocks still leave every cube core several
    # (#62 at 128 x 126 outputs, 64 channels: 54 us against 71 with 64-wide ones).
    cube = choose_cube_tile(product, target, wide=chunk * rest >= WIDE_BLOCK_COLUMNS)
    return ir.ConvPlan(geometry.batch, rows, front, back, skip, cube, tiles, vector, staged)


WIDE_BLOCK_COLUMNS = 1 << 12

# PyPTO's transpose works in blocks of 16 rows: a tile of fewer rows still takes 16 rows of
# workspace (#75's [1, 4096] tile of a [768, 8192] exchange asked 256 KB of a 192 KB UB).
TRANSPOSE_ROWS = 16

# Columns of a block whose taps view a padded or split input. Views of a kernel-local one:
# pypto's simulated machine runs out of workspace slabs ("Slab alloc null") on #80's 65024
# and #71's 33540; #57's 16900 run. Staged in device memory, #80 at one sample runs either
# way, but 254 rows in one block take 431 us against 391 in blocks of 64.
PADDED_BLOCK_COLUMNS = 1 << 14


def conv_rows_per_block(geometry: ir.ConvGeometry, target: Target, pads: bool = False) -> int:
    """Output rows per block: within the target's block size and, for the cube, the
    operand [C_in/groups, rows * rest] within PyPTO's inner-axis limit (#87's 256 x 256
    outputs in one block are 65536 columns: pypto refuses them), and within
    PADDED_BLOCK_COLUMNS when the taps view a padded or split copy of the input."""
    columns = None if geometry.depthwise else target.max_inner_axis - 1
    if pads:
        columns = min(columns or PADDED_BLOCK_COLUMNS, PADDED_BLOCK_COLUMNS)
    return geometry.rows_per_block(target.conv_block_elements, columns)


def _conv_rows_axis(geometry: ir.ConvGeometry) -> int:
    """The result's first spatial axis in the kernel's layout."""
    return 1 if geometry.merges_batch else 2


def conv_shapes(
    geometry: ir.ConvGeometry,
    front: tuple[int, ...],
    back: tuple[int, ...],
    rows: ir.Loop,
    vector: bool = False,
    staged: bool = False,
) -> list[tuple[tuple[int, ...], bool]]:
    """Every shape a convolution phase computes on, in order of first use (materialise
    computes exactly these), each with whether it is exchanged (transposed)."""
    co, cig, cog = geometry.out_channels, geometry.group_in, geometry.group_out
    taps = len(geometry.taps)
    # the input's batch element and the result's block keep a leading 1 unless merged
    lead = () if geometry.merges_batch else (1,)
    # the weight as the cube's [C_out/groups, K] matrices: read as [C_out, K], or a
    # transposed convolution's [C_in, C_out/groups, taps] exchanged per group to [C_out /
    # groups, C_in/groups, taps] (a depthwise convolution on the vector cores reads each tap's
    # column of the weight as it is)
    shapes = [(co * cig, taps)]
    exchanged = set()
    if geometry.transposed:
        shapes += [(cig, cog, taps), (cog, cig, taps)]
        exchanged.add((cig, cog, taps))
    inserts = any(gap > 1 for gap in geometry.inserted)
    strided = any(step > 1 for step in geometry.stride)
    if any(front) or any(back) or inserts or strided:
        ci = geometry.in_channels
        shapes.append((*lead, ci, *geometry.spatial))
        spaced = list(geometry.spatial)
        for axis, gap in enumerate(geometry.inserted):
            if gap == 1:
                continue
            before, n, gap, after = geometry.spacing(axis, tuple(spaced))
            if after > 1:  # zeros joined along `gap`
                shapes.append((before, n, gap, after))
            else:  # exchanged to [n, before], joined, exchanged back
                shapes += [(before, n), (1, n, gap, before), (n * gap, before)]
                exchanged |= {(before, n), (n * gap, before)}
            spaced[axis] *= gap
        for axis, (f, b) in enumerate(zip(front, back, strict=True)):
            if f or b:  # its fills and joins run under the tile of the padded result
                spaced[axis] += f + b
                shapes.append((ci, *spaced))
        if staged:  # the staging launch writes, and the kernel views, a padded element
            shapes.append((*lead, ci, *spaced))
        if strided:
            shapes.append(geometry.split_source(tuple(spaced)))
        lead_taps = ()
    else:
        lead_taps = lead
    rest = geometry.out[1:]
    for block in (rows.chunk, rows.tail):
        if not block:
            continue
        # all channels at once, or a group's with its taps' views stacked
        channels, out_channels = (co, co) if vector else (cig, cog)
        columns = block * math.prod(rest)
        shapes.append(geometry.tap_view(block, lead_taps, channels))
        if vector:  # the taps' products summed
            shapes.append((out_channels, columns))
        elif taps > 1:
            shapes.append((cig, taps, columns))
        shapes.append((*lead, out_channels, block, *rest))
    return [(shape, shape in exchanged) for shape in dict.fromkeys(shapes)]


def _transposing(target: Target) -> Target:
    """A transpose keeps its input, its output and a workspace twice the tile in UB
    (measured: a [16, 8, 8, 16] f32 tile needs 262144 bytes of the 196608)."""
    return attrs.evolve(target, max_tile_elements=target.max_tile_elements // 4)


def _window_tile(
    shape: tuple[int, ...], itemsize: int, target: Target, last_axis_cap: int | None = None
) -> tuple[int, ...]:
    """Pads, taps and splits are narrower than their neighbours along some axis, the last
    one included: the last-axis tile is 32-byte aligned, as for a crop."""
    tile = choose_tile(shape, itemsize, target, last_axis_cap)
    return reduction_aligned(tile, itemsize, target)


def window_auto_tiles(steps: tuple[ir.WindowStep, ...]) -> int:
    """The most tiles any op of the steps expands to."""
    counts = []
    for step in steps:
        counts += [
            auto_tiles(step.padded, step.frame_tile),
            auto_tiles(step.split, step.split_tile),
            auto_tiles(step.working_result, step.result_tile),
        ]
        if step.swap_tile is not None:
            counts.append(auto_tiles(step.shape, step.swap_tile))
    return max(counts)


def iteration_shape(stmt: ir.Stmt) -> tuple[int, ...]:
    """The shape a statement's ops run over: the broadcast of every tensor in it, the longest
    extent along an axis a crop or a concatenation changes (for a matmul, its result: the
    operands keep layouts of their own, as a convolution's and a transpose's do)."""
    shape = stmt.value.type.shape
    if is_matmul(stmt) or is_conv(stmt) or is_transpose(stmt):
        return shape
    for node in ir.walk(stmt.value):
        if isinstance(node.type, ir.TensorType):
            shape = ir.covering_shape(shape, node.type.shape)
    return shape


def _joins(stmt: ir.Stmt, shape: tuple[int, ...], phase_shape: tuple[int, ...]) -> bool:
    """Whether a statement can run under the current phase's tile instead of its own."""
    if has_own_phase(stmt):
        return False  # a cube or window phase of its own
    if shape == phase_shape:
        return not _reads_output(stmt)
    if isinstance(stmt.value, ir.Op) and stmt.value.op in REDUCTIONS:
        return False  # a reduction of a smaller tensor gets a tile fitted to it
    # Elementwise work on a broadcast-smaller value stays under the phase's tile.
    fits = ir.broadcast_shapes(shape, phase_shape) == phase_shape
    return fits and not _reads_output(stmt)


def _reads_output(stmt: ir.Stmt) -> bool:
    """Reading an output back (`out = f(out)`) waits for every write of the phase before."""
    return isinstance(stmt, ir.Store) and any(
        isinstance(n, ir.Ref) and n.name == stmt.output for n in ir.walk(stmt.value)
    )


def reduction_aligned(tile: tuple[int, ...], itemsize: int, target: Target) -> tuple[int, ...]:
    """PyPTO wants the last-axis tile of a reduced tensor to be a multiple of 32 bytes even
    when the axis is shorter: such a tile is rounded up past the shape (verified in SIM)."""
    align = max(1, target.reduce_align_bytes // itemsize)
    last = ceil_div(tile[-1], align) * align
    # Rounding up must not take the tile past the element budget: shrink the outer axes.
    outer = list(tile[:-1])
    for axis in range(len(outer)):
        if math.prod(outer) * last <= target.max_tile_elements:
            break
        rest = math.prod(outer) // outer[axis]
        outer[axis] = max(1, target.max_tile_elements // (last * rest))
    return (*outer, last)


def _narrower_last_axis(kernel: ir.Kernel, statements: list[int], shape: tuple[int, ...]) -> bool:
    """Whether a tensor of the phase is shorter along the last axis than the phase without
    being a broadcast (a crop's or a concatenation's operand): pypto then wants the last-axis
    tile 32-byte aligned, as for a reduced tensor (a [16, 301] tile on a [16, 1] crop fails)."""

    def narrower(node: ir.Expr) -> bool:
        if not isinstance(node.type, ir.TensorType) or node.type.shape[-1] == shape[-1]:
            return False
        cropped = isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.SLICE
        return cropped or node.type.shape[-1] != 1

    return any(narrower(node) for i in statements for node in ir.walk(kernel.body[i].value))


def _concatenates(kernel: ir.Kernel, statements: list[int]) -> bool:
    """Whether the phase joins values (`cat`): pypto 0.2.0 tiles a concatenation as copies
    into its result and refuses one under a vector tile whose last axis is not a multiple of
    32 bytes, whatever the shapes ("FwkOp tile shape's last dim is not aligned. Last dim
    bytes: 4": a join along the channels of [N, C, 1] values under a [4, 64, 1] tile)."""
    return any(
        isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.CONCAT
        for i in statements
        for node in ir.walk(kernel.body[i].value)
    )


def _stores_a_view(kernel: ir.Kernel, statements: list[int]) -> bool:
    """Whether the phase stores a crop of a stored tensor (an input, or a value an earlier
    phase wrote) as it is: `y[:] = pypto.view(x, ...)` is a copy between tensors, which
    pypto 0.2.0 tiles with the vector tile and refuses when its last axis is not a multiple
    of 32 bytes ("FwkOp tile shape's last dim is not aligned. Last dim bytes: 8": `y =
    x[:, :, :7]` of an [N, C, 8, 2] input under a [4, 8, 2] tile). A crop that an op reads
    is computed in UB and has no such rule. So is the copy of a let its phase assembled
    (`y = h` after `let h = conv(x)`: "Last dim bytes: 16" under a [2, 4, 4, 4] tile), and
    every copy codegen clones: of an input (a kernel of its own reshaping an intermediate,
    LeNet-5's `flat = h.view(-1, 400)`: "Last dim bytes: 20" under an [80, 5] tile) or of a
    let read again (VanillaRNN's new hidden state: "Last dim bytes: 4" under an
    [8, 1, 256, 1] tile)."""
    assembled = {s.name for s in kernel.body if isinstance(s, ir.Let) and is_assembled(s.value)}
    return any(
        isinstance(stmt := kernel.body[i], ir.Store)
        and (
            stmt.clone
            or isinstance(stmt.value, ir.Op)
            and ops.lookup(stmt.value.op).kind is ops.Kind.SLICE
            and isinstance(stmt.value.operands[0], ir.Ref)
            or _copied(stmt.value) in assembled
        )
        for i in statements
    )


def _refuse_large_stored_crops(kernel: ir.Kernel, statements: list[int], target: Target) -> None:
    """A crop of a value the kernel computes, stored as it is (`k = h[:, C:2 * C]` of `let
    h = fc(x)`): pypto 0.2.0 copies the whole crop into UB at once, whatever the vector
    tile ("Alloc tensor size [6291456] exceeds MEM_UB size [196608]" for a [2048, 768]
    crop; read through `pypto.clone` or `* 1.0` it crashes the simulator, "Invalid slot
    index"). Past UB the value is written by a kernel of its own and the crop is a view of
    that kernel's output, which pypto copies tile by tile."""
    lets = {s.name for s in kernel.body if isinstance(s, ir.Let)}
    for index in statements:
        stmt = kernel.body[index]
        value = stmt.value
        if not (
            isinstance(stmt, ir.Store)
            and isinstance(value, ir.Op)
            and ops.lookup(value.op).kind is ops.Kind.SLICE
            and isinstance(value.operands[0], ir.Ref)
            and value.operands[0].name in lets
        ):
            continue
        size = value.type.size * value.type.dtype.itemsize
        if size > target.ub_bytes:
            raise FrameError(
                f"a crop of {size} bytes of a value this kernel computes is stored; pypto "
                f"copies it into UB ({target.ub_bytes} bytes) at once",
                stmt.span,
                note="the value is written by a kernel of its own, and the crop read from it",
            )


def _copied(value: ir.Expr) -> str | None:
    """The let a store copies (`y <- clone(h)`, or `y <- h`), if it only copies one."""
    if isinstance(value, ir.Op) and value.op == "clone":
        (value,) = value.operands
    return value.name if isinstance(value, ir.Ref) else None


def _row_reductions(kernel: ir.Kernel, statements: list[int]) -> list[ir.Op]:
    """The phase's reductions over the last axis."""
    return [
        node
        for index in statements
        for node in ir.walk(kernel.body[index].value)
        if isinstance(node, ir.Op)
        and node.op in REDUCTIONS
        and node.attrs.axes == (node.type.rank - 1,)
    ]


def _cut_outer_reductions(
    kernel: ir.Kernel, statements: list[int], shape: tuple[int, ...], tile: tuple[int, ...]
) -> list[ir.Op]:
    """The phase's reductions over outer axes only whose reduced extent `tile` cuts."""
    cut = []
    for index in statements:
        for node in ir.walk(kernel.body[index].value):
            if not (isinstance(node, ir.Op) and node.op in REDUCTIONS):
                continue
            operand = node.operands[0].type.shape
            if len(operand) != len(shape) or len(operand) - 1 in node.attrs.axes:
                continue
            if any(tile[axis] < operand[axis] for axis in node.attrs.axes):
                cut.append(node)
    return cut


def _matrix_tile(matmul: ir.Op, target: Target) -> tuple[int, ...]:
    """The vector tile under which a computed first operand is seen as its [M, K] matrix
    (a reshape, vector work): one for the operand's frame shape. Unused otherwise."""
    a = matmul.operands[0]
    if not ir.is_cube_matrix(a):
        return matmul.type.shape
    (frame_value,) = a.operands
    return choose_tile(frame_value.type.shape, a.type.dtype.itemsize, target, None)


def choose_cube_tile(
    matmul: ir.Op, target: Target, wide: bool = False
) -> tuple[tuple[int, int], ...]:
    """[m L0, m L1], [k L0, k L1], [n L0, n L1] for `set_cube_tile_shapes`, from the shapes
    and the buffer sizes (measured on the #1, #17 and #3 shapes: 128 x 256 output blocks with
    k streamed 64 / 256 beat 128 x 128 blocks by 40%; small products want narrower n blocks
    for more parallel blocks; `wide` asks for 256-column blocks regardless). Extents are
    multiples of 16, cut down for small matrices."""
    a, _ = matmul.operands
    m, n = ir.product_shape(matmul)[-2:]
    k = a.type.shape[-2] if matmul.attrs.a_trans else a.type.shape[-1]
    itemsize = a.type.dtype.itemsize

    def _cube_extent(size: int, preferred: int) -> int:
        return min(preferred, ceil_div(size, target.cube_align) * target.cube_align)

    m_tile = _cube_extent(m, 128)
    wide = wide or math.prod(ir.product_shape(matmul)) >= 1 << 20
    n_tile = _cube_extent(n, 256 if wide else 64)
    k_l0 = _cube_extent(k, 64)
    k_l1 = k_l0  # the longest k stream (a multiple of k L0) whose A and B tiles fit L1
    for size in (512, 256, 128):
        candidate = _cube_extent(k, size)
        if candidate % k_l0 == 0 and (m_tile + n_tile) * candidate * itemsize <= target.l1_bytes:
            k_l1 = candidate
            break
    assert (
        m_tile * k_l0 * itemsize <= target.l0_operand_bytes
        and n_tile * k_l0 * itemsize <= target.l0_operand_bytes
    )
    assert m_tile * n_tile * 4 <= target.l0_result_bytes
    return ((m_tile, m_tile), (k_l0, k_l1), (n_tile, n_tile))


# A phase that reduces only outer axes of short rows (sum over dim 1 of [16, 256, 256]) gives
# the reduced axis its whole extent before the row: measured on #47-#49, [1, 256, 64] tiles
# take 12.4 us where [1, 64, 256] take 19.2 us. Rows stay at least 256 bytes long; long rows
# (RMSNorm's 65536) keep the contiguous-first rule, which measures fastest there.
SHORT_ROW_ELEMENTS = 1024
MIN_ROW_BYTES = 256


def _reduced_axis_first_cap(
    kernel: ir.Kernel, statements: list[int], shape: tuple[int, ...], itemsize: int, budget: int
) -> int | None:
    """The last-axis tile cap for a phase reducing only outer axes of short rows."""
    reduced = {
        axis
        for index in statements
        for node in ir.walk(kernel.body[index].value)
        if isinstance(node, ir.Op) and node.op in REDUCTIONS
        for axis in node.attrs.axes
    }
    last = len(shape) - 1
    if not reduced or last in reduced or shape[last] > SHORT_ROW_ELEMENTS:
        return None
    reduced_extent = math.prod(shape[axis] for axis in reduced)
    return max(MIN_ROW_BYTES // itemsize, budget // reduced_extent)


def positional_axes(kernel: ir.Kernel, statements: tuple[int, ...] | list[int]) -> frozenset[int]:
    return ops.positional_axes(kernel.body[index].value for index in statements)


def tile_phases(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    """Groups consecutive statements into phases and gives each a tile for its shape;
    `tuning` may shrink the tile budget or cap the last axis."""
    target, tuning = ctx.target, ctx.tuning
    if tuning.tile_elements:
        budget = min(tuning.tile_elements, target.max_tile_elements)
        target = attrs.evolve(target, max_tile_elements=budget)
    groups: list[tuple[tuple[int, ...], list[int], int]] = []
    for index, stmt in enumerate(kernel.body):
        if ir.is_scalar(stmt.value):
            continue  # scalar lets are Python in the factory, outside every phase
        shape = iteration_shape(stmt)
        follows_own = groups and has_own_phase(kernel.body[groups[-1][1][-1]])
        if groups and not follows_own and _joins(stmt, shape, groups[-1][0]):
            groups[-1][1].append(index)
        else:
            groups.append((shape, [index], ir.compute_itemsize(stmt.value)))
    phases = []
    for shape, indexes, itemsize in groups:
        if is_matmul(kernel.body[indexes[0]]):
            matmul = kernel.body[indexes[0]].value
            cube = choose_cube_tile(matmul, target)
            phases.append(
                ir.Phase(tuple(indexes), shape, tile=_matrix_tile(matmul, target), cube=cube)
            )
            continue
        if is_conv(kernel.body[indexes[0]]):
            conv = kernel.body[indexes[0]].value
            plan = plan_conv(conv, target, reads_input=_reads_input(kernel, conv))
            phases.append(ir.Phase(tuple(indexes), shape, tile=plan.tiles[0][1], conv=plan))
            continue
        if is_window(kernel.body[indexes[0]]):
            window = kernel.body[indexes[0]].value
            steps = window_steps(window, window.operands[0].type.shape, target)
            phases.append(ir.Phase(tuple(indexes), shape, tile=steps[0].frame_tile, window=steps))
            continue
        if is_transpose(kernel.body[indexes[0]]):
            # an exchange moving the last axis runs along it as a scan does: the scans'
            # last-axis limit (the verifier's rule; 2304 positions of #31's attention)
            moves_last = len(shape) - 1 in positional_axes(kernel, indexes)
            cap = target.max_scan_last_axis_tile if moves_last else None
            tile = _window_tile(shape, itemsize, _transposing(target), cap)
            phases.append(ir.Phase(tuple(indexes), shape, tile=tile))
            continue
        _refuse_large_stored_crops(kernel, indexes, target)
        # every op's operands and result share UB: the widest op bounds the tile
        ub = ub_use(kernel, indexes, shape, target)
        fitting = (target.ub_bytes - ub.workspace) // ub.bytes_per_element
        phase_target = attrs.evolve(
            target, max_tile_elements=min(target.max_tile_elements, fitting)
        )
        last_axis_cap = tuning.last_axis_tile or _reduced_axis_first_cap(
            kernel, indexes, shape, itemsize, phase_target.max_tile_elements
        )
        positional = positional_axes(kernel, indexes)
        scanned_last = len(shape) - 1 in positional
        if positional:  # the tiles scans were measured to run with: see Target's scan limits
            budget = min(target.spill_safe_tile_elements, phase_target.max_tile_elements)
            phase_target = attrs.evolve(target, max_tile_elements=budget)
        if scanned_last:
            scan_cap = target.max_scan_last_axis_tile
            last_axis_cap = min(last_axis_cap or scan_cap, scan_cap)
        # a scanned last axis is not balanced: (16, 840) or (16, 960) tiles fail
        tile = choose_tile(
            shape, itemsize, phase_target, last_axis_cap, balance_last=not scanned_last
        )
        row_reductions = _row_reductions(kernel, indexes)
        # two row sums over rows of one 32-byte block spill too (tests/specgen.py seed 156,
        # two over rows of 5: [1902, 8] tiles fail in SIM, [1024, 8] pass)
        spilling = [
            r
            for r in row_reductions
            if r.operands[0].type.shape[-1] > tile[-1]
            or r.operands[0].type.shape[-1] * itemsize <= target.reduce_align_bytes
        ]
        if len(spilling) >= 2:
            budget = min(target.spill_safe_tile_elements, phase_target.max_tile_elements)
            spill_safe = attrs.evolve(target, max_tile_elements=budget)
            tile = choose_tile(shape, itemsize, spill_safe, last_axis_cap)
        cut = _cut_outer_reductions(kernel, indexes, shape, tile)
        if len(cut) >= 2 and math.prod(tile) >= fitting:
            # two reductions over outer axes the tile cuts, in a tile that fills UB, fail
            # pypto 0.2.0's simulator once the phase has many tiles ("hasCall=0
            # opSequenceAfterOOO_"; logsumexp over the 16 channels of [N, 16, 2048]: tiles
            # (1, 8, 2048) fail from N = 32; (1, 4, 2048) and (1, 16, 1024) pass at N = 128,
            # and so do tiles with room to spare, #6's (1, 1, 12600) at full shape)
            budget = min(target.spill_safe_tile_elements, phase_target.max_tile_elements)
            spill_safe = attrs.evolve(target, max_tile_elements=budget)
            tile = choose_tile(
                shape, itemsize, spill_safe, last_axis_cap, balance_last=not scanned_last
            )
        joins = _concatenates(kernel, indexes)
        aligned = joins or _stores_a_view(kernel, indexes)
        if row_reductions or aligned or _narrower_last_axis(kernel, indexes, shape):
            tile = reduction_aligned(tile, itemsize, phase_target)
        phases.append(ir.Phase(statements=tuple(indexes), shape=shape, tile=tile))
    # plan choices other than the defaults, stated in the plan and the module's docstring
    decisions, tuned = kernel.decisions, None
    if tuning != ir.Tuning():
        decisions, tuned = (*decisions, f"plan choices: {tuning.describe()}"), tuning
    schedule = ir.Schedule(tuple(phases))
    return attrs.evolve(kernel, schedule=schedule, decisions=decisions, tuning=tuned)
