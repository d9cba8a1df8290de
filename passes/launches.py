"""Split a kernel too big to verify into launches along its outputs' axis 0 (and a
convolution's output channels).

pypto's SIM verification keeps several copies of every tensor a launch touches and frees
nothing until the next launch (`ptodsl.ir.sim_memory`): a 16384 x 16384 output needs about
16 GiB in one launch. When the estimate for one launch exceeds the target's budget, and the
kernel computes each index of the outputs' axis 0 from the same index of some inputs and
from the whole of the others, `forward` launches the kernel on consecutive chunks of that
axis instead (a convolution's batch). Any op that mixes indices along the axis (a
reduction, scan, window, crop or contraction over it, a transpose that moves it) keeps the
kernel whole. A convolution whose one sample is still too big runs each sample in launches
of consecutive output channels, each on those channels' weights (and a grouped one's on its
groups' input channels), or, when even one channel per launch is too big, in launches of
consecutive rows of its output's first spatial axis, each reading the whole sample.
"""

from __future__ import annotations

import math

import attrs

from ptodsl.frontend.diagnostics import SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops, sim_memory
from ptodsl.passes import DEFAULT_CONTEXT, PassContext

ELEMENTWISE_KINDS = frozenset(
    {
        ops.Kind.ARITHMETIC,
        ops.Kind.ELEMENTWISE,
        ops.Kind.COMPARISON,
        ops.Kind.SELECT,
        ops.Kind.CAST,
    }
)


class _Mixes(Exception):
    """An op combines different indices of the launch axis: the kernel stays whole."""


def split_launches(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    budget = ctx.target.verify_memory_budget
    macs = ctx.target.max_conv_macs_per_launch

    def launch_bytes(block: ir.Kernel) -> float:
        """One launch's estimate: the larger of the block's as it stands (which assumes a
        matmul's default chunks of loop iterations) and with the loops and matmul products
        the later passes plan for it. A block that fits by the first can need 2.5x more by
        the second (level 3 #44's MLP at batch 64: 9 iterations, not 4); the full-shape
        plans measured in SIM were cut by the first, so a block with fewer iterations than
        assumed keeps their launches."""
        try:
            planned = ctx.plan(block)
        except SpecError:  # the passes report it on the block chosen
            planned = block
        return max(map(sim_memory.verification_bytes, (block, planned)))

    def fits_memory(block: ir.Kernel) -> bool:
        return launch_bytes(block) <= budget

    def fits(block: ir.Kernel) -> bool:
        return fits_memory(block) and ir.convolution_macs(block) <= macs

    whole = launch_bytes(kernel)
    if fits(kernel):
        return kernel
    extent = _launch_extent(kernel)
    if extent is None:
        return _noted(kernel, whole, budget, "its outputs do not share a first axis")
    sliced = tuple(
        t.name
        for t in kernel.inputs
        if t.type.shape and t.declared_shape[:1] == (extent,) and t.type.shape[0] == extent
    )
    block = kernel
    try:  # the fewest launches that fit, else one per index
        for count in _divisors(extent)[1:]:
            block = _shrunk(kernel, sliced, extent // count)
            if fits(block):
                break
    except _Mixes as reason:
        return _noted(kernel, whole, budget, str(reason))
    assert block.launches is not None
    if not fits(block) and block.launches.chunk == 1:
        sample = block
        block = _split_channels(sample, fits, fits_memory)
        channels = block.launches.channels if block.launches else None
        if not fits_memory(block) or (channels is not None and channels.chunk == 1):
            block = _split_rows(sample, fits_memory, block)
    estimate = launch_bytes(block) / sim_memory.GIB
    over = "; the finest split, still over" if estimate * sim_memory.GIB > budget else ""
    work = ir.convolution_macs(kernel)
    convolutions = (
        f"; {work / 1e9:.1f} G convolution multiply-adds, at most {macs / 1e9:.1f} G per launch"
        if work > macs
        else ""
    )
    if convolutions and block.launches.rows is not None:
        per_launch = ir.convolution_macs(block) / 1e9
        convolutions = (
            f"; {work / 1e9:.1f} G convolution multiply-adds, {per_launch:.1f} G per launch "
            "(row launches are cut for memory only)"
        )
    channels, rows = block.launches.channels, block.launches.rows
    within = (
        f", each {channels.count} of {channels.chunk} output channels"
        if channels is not None
        else f", each {rows.count} of {rows.chunk} output rows"
        if rows is not None
        else ""
    )
    decision = (
        f"launches: {block.launches.count} of {block.launches.chunk} along axis 0{within} "
        f"(verification needs ~{whole / sim_memory.GIB:.1f} GiB in one launch, "
        f"~{estimate:.1f} GiB per launch; budget {budget / sim_memory.GIB:.0f} GiB{over}"
        f"{convolutions})"
    )
    return attrs.evolve(block, decisions=(*block.decisions, decision))


def _divisors(n: int) -> list[int]:
    """n's divisors in increasing order, by trial division up to its square root (an extent
    can be a prime near 2**31)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _noted(kernel: ir.Kernel, whole: float, budget: float, reason: str) -> ir.Kernel:
    decision = (
        f"launches: one, though verification needs ~{whole / sim_memory.GIB:.1f} GiB "
        f"(budget {budget / sim_memory.GIB:.0f} GiB): {reason}"
    )
    return attrs.evolve(kernel, decisions=(*kernel.decisions, decision))


def _launch_extent(kernel: ir.Kernel) -> int | None:
    """The common length of every output's first axis, if each declares it unsplit."""
    extents = {
        o.type.shape[0]
        for o in kernel.outputs
        if o.type.shape and o.declared_shape[:1] == o.type.shape[:1]
    }
    if len(extents) != 1 or any(not o.type.shape for o in kernel.outputs):
        return None
    (extent,) = extents
    return extent if extent > 1 else None


def _shrunk(kernel: ir.Kernel, sliced: tuple[str, ...], chunk: int) -> ir.Kernel:
    """One launch's kernel: axis 0 of the outputs, the sliced inputs and every value
    computed from them `chunk` long. Raises `_Mixes` when an op mixes indices of that axis."""
    aligned = set(sliced)
    body = []
    for stmt in kernel.body:
        value, is_aligned = _shrink(stmt.value, aligned, chunk)
        if isinstance(stmt, ir.Let) and is_aligned:
            aligned.add(stmt.name)
        if isinstance(stmt, ir.Store) and not is_aligned:
            raise _Mixes(f"output `{stmt.output}` does not follow the sliced inputs' first axis")
        body.append(attrs.evolve(stmt, value=value))
    extent = kernel.outputs[0].type.shape[0]
    return attrs.evolve(
        kernel,
        inputs=tuple(_cut(t, 0, chunk) if t.name in sliced else t for t in kernel.inputs),
        outputs=tuple(_cut(o, 0, chunk) for o in kernel.outputs),
        body=tuple(body),
        launches=ir.Launches(count=extent // chunk, chunk=chunk, sliced=sliced),
    )


def samples_part(kernel: ir.Kernel, sliced: tuple[str, ...], chunk: int) -> ir.Kernel | None:
    """`kernel` on `chunk` samples (axis 0 of the outputs and the `sliced` inputs), or None
    when an op mixes samples."""
    try:
        return _shrunk(kernel, sliced, chunk)
    except _Mixes:
        return None


def _cut(tensor, axis: int, chunk: int):
    """`tensor` as one launch sees it: `chunk` long along `axis`."""

    def cut(shape):
        return (*shape[:axis], chunk, *shape[axis + 1 :])

    declared = None if tensor.declared is None else cut(tensor.declared)
    return attrs.evolve(
        tensor,
        type=attrs.evolve(tensor.type, shape=cut(tensor.type.shape)),
        dims=cut(tensor.dims),
        declared=declared,
    )


def _stored_convolutions(block: ir.Kernel) -> list[ir.ConvGeometry] | None:
    """Each statement's convolution, when every one stores a convolution of a sliced input
    with a weight input into an output (and the kernel computes nothing else)."""
    assert block.launches is not None
    inputs = {t.name for t in block.inputs}
    convolutions = []
    for stmt in block.body:
        conv = stmt.value
        if not (
            isinstance(stmt, ir.Store)
            and isinstance(conv, ir.Op)
            and ops.lookup(conv.op).kind is ops.Kind.CONV
        ):
            return None
        x, weight = conv.operands
        if not (
            isinstance(x, ir.Ref)
            and x.name in block.launches.sliced
            and isinstance(weight, ir.Ref)
            and weight.name in inputs
        ):
            return None
        convolutions.append(ir.ConvGeometry.of(conv))
    return convolutions


def _cut_for(convolutions: list[ir.ConvGeometry], fits, fits_memory):
    """What a cut of these convolutions must fit: memory and the multiply-add cap, or for
    transposed and grouped ones memory only. One sample of #73, #75, #77 and #81 passes at
    full shape in one launch of 3.7 to 14 G multiply-adds, far over the target's cap, so the
    cap is no reason to multiply their launches."""
    if any(g.attributes.groups > 1 or g.transposed for g in convolutions):
        return fits_memory
    return fits


def _split_channels(block: ir.Kernel, fits, fits_memory) -> ir.Kernel:
    """One sample per launch still too big: when every output is a convolution's of a
    sliced input with a weight input, and the kernel computes nothing else, each sample runs
    in launches of consecutive output channels, each on those channels' part of the weights
    (the fewest launches that fit, else the most). A grouped convolution (the only one then)
    launches whole groups, each on its groups' input channels. Otherwise `block` as it was.
    Transposed and grouped convolutions are cut for memory only (`_cut_for`)."""
    convolutions = _stored_convolutions(block)
    if convolutions is None:
        return block
    grouped = [g for g in convolutions if g.attributes.groups > 1]
    if grouped and len(block.body) > 1:
        return block
    fits = _cut_for(convolutions, fits, fits_memory)
    if fits is fits_memory and fits_memory(block):
        return block
    extents = {o.type.shape[1] for o in block.outputs}
    if len(extents) != 1:
        return block
    (extent,) = extents
    whole_groups = grouped[0].group_out if grouped else 1
    cut = block
    for count in _divisors(extent)[1:]:
        if (extent // count) % whole_groups:
            continue  # a launch would split a group
        cut = _channels_cut(block, extent // count)
        if fits(cut):
            break
    return cut


def _split_rows(sample: ir.Kernel, fits_memory, cut: ir.Kernel) -> ir.Kernel:
    """One convolution's sample, where its channel launches `cut` are too big or one output
    channel each, in launches of consecutive rows of its output's first spatial axis, every
    channel each (the fewest that fit memory). A launch of one channel multiplies the whole
    sample's stacked taps by one weight row (M = 1 on the cube), and every launch stacks
    them again: #68's one-channel launches each needed 11.4 GiB (2.9 GB of stacked taps per
    channel), #66's 1024 would take 3.4 hours. The multiply-add cap is no reason to keep
    them: two samples of #66 pass at full size in 14 row launches of 2.5 G each, 8 s apiece
    two at a time. Otherwise `cut` when it fits, else one row per launch."""
    convolutions = _stored_convolutions(sample)
    if convolutions is None or len(convolutions) != 1:
        return cut
    (geometry,) = convolutions
    extent = geometry.out[0]
    variable = sample.free_name("first_row")
    for count in _divisors(extent)[1:]:
        block = _rows_cut(sample, extent // count, variable)
        if fits_memory(block):
            return block
    return cut if fits_memory(cut) else block


def _rows_cut(sample: ir.Kernel, chunk: int, variable: str) -> ir.Kernel:
    """`sample` on `chunk` rows of its convolution's output (axis 2), read from the whole
    sample."""
    assert sample.launches is not None
    (stmt,) = sample.body
    conv = stmt.value
    assert isinstance(conv, ir.Op) and isinstance(conv.attrs, ir.Conv)
    shape = conv.type.shape  # type: ignore[union-attr]
    value = attrs.evolve(
        conv,
        type=attrs.evolve(conv.type, shape=(*shape[:2], chunk, *shape[3:])),
        attrs=attrs.evolve(conv.attrs, rows=chunk),
    )
    rows = ir.RowLaunches(count=shape[2] // chunk, chunk=chunk, variable=variable)
    return attrs.evolve(
        sample,
        outputs=tuple(_cut(o, 2, chunk) for o in sample.outputs),
        body=(attrs.evolve(stmt, value=value),),
        launches=attrs.evolve(sample.launches, rows=rows),
    )


def _channels_cut(block: ir.Kernel, chunk: int) -> ir.Kernel:
    """`block` on `chunk` output channels: axis 1 of the outputs, the weights' output
    channels and, of a grouped convolution, its input's channels of those groups."""
    assert block.launches is not None
    parts: dict[str, ir.ChannelCut] = {}

    def conv(stmt: ir.Stmt) -> ir.Stmt:
        node = stmt.value
        assert isinstance(node, ir.Op) and isinstance(node.attrs, ir.Conv)
        geometry = ir.ConvGeometry.of(node)
        x, weight = node.operands
        assert isinstance(x, ir.Ref) and isinstance(weight, ir.Ref)
        groups = max(1, geometry.attributes.groups * chunk // geometry.out_channels)
        if geometry.transposed and geometry.attributes.groups == 1:
            parts[weight.name] = ir.ChannelCut(weight.name, 1, chunk)  # [C_in, C_out, ...]
        elif geometry.transposed:  # [C_in, C_out / groups, ...]: the groups' input rows
            rows = groups * geometry.group_in
            parts[weight.name] = ir.ChannelCut(
                weight.name, 0, rows, geometry.in_channels, geometry.out_channels
            )
        else:  # [C_out, C_in / groups, ...]
            parts[weight.name] = ir.ChannelCut(weight.name, 0, chunk)
        if geometry.attributes.groups > 1:
            parts[x.name] = ir.ChannelCut(
                x.name, 1, groups * geometry.group_in, geometry.in_channels, geometry.out_channels
            )
        operands = tuple(_part_type(operand, parts.get(operand.name)) for operand in (x, weight))
        shape = node.type.shape  # type: ignore[union-attr]
        value = attrs.evolve(
            node,
            operands=operands,
            type=attrs.evolve(node.type, shape=(shape[0], chunk, *shape[2:])),
            attrs=attrs.evolve(node.attrs, groups=groups),
        )
        return attrs.evolve(stmt, value=value)

    body = tuple(conv(stmt) for stmt in block.body)
    extent = block.outputs[0].type.shape[1]
    channels = ir.ChannelLaunches(count=extent // chunk, chunk=chunk, inputs=tuple(parts.values()))

    def input_part(tensor: ir.Input) -> ir.Input:
        part = parts.get(tensor.name)
        return tensor if part is None else _cut(tensor, part.axis, part.chunk)

    return attrs.evolve(
        block,
        inputs=tuple(input_part(t) for t in block.inputs),
        outputs=tuple(_cut(o, 1, chunk) for o in block.outputs),
        body=body,
        launches=attrs.evolve(block.launches, channels=channels),
    )


def _part_type(operand: ir.Ref, part: ir.ChannelCut | None) -> ir.Ref:
    if part is None:
        return operand
    shape = list(operand.type.shape)  # type: ignore[union-attr]
    shape[part.axis] = part.chunk
    return attrs.evolve(operand, type=attrs.evolve(operand.type, shape=tuple(shape)))


def _shrink(expr: ir.Expr, aligned: set[str], chunk: int) -> tuple[ir.Expr, bool]:
    """The expression for one launch, and whether its axis 0 is the launch axis (False: it
    does not depend on which launch runs)."""
    if isinstance(expr, ir.Const):
        return expr, False
    if isinstance(expr, ir.Ref):
        if expr.name not in aligned:
            return expr, False
        return attrs.evolve(expr, type=_first_axis(expr.type, chunk)), True
    shrunk = [_shrink(operand, aligned, chunk) for operand in expr.operands]
    flags = [is_aligned for _, is_aligned in shrunk]
    if not any(flags):
        return expr, False
    _expect_one_index_per_index(expr, flags)
    operands = tuple(operand for operand, _ in shrunk)
    return attrs.evolve(expr, operands=operands, type=_first_axis(expr.type, chunk)), True


def _first_axis(type_: ir.Type, chunk: int) -> ir.TensorType:
    assert isinstance(type_, ir.TensorType) and type_.shape, "aligned values have an axis 0"
    return attrs.evolve(type_, shape=(chunk, *type_.shape[1:]))


def _expect_one_index_per_index(node: ir.Op, flags: list[bool]) -> None:
    """Raises `_Mixes` unless index i of the result's axis 0 reads only index i of the
    aligned operands' axis 0 (and anything of the others)."""
    kind = ops.lookup(node.op).kind
    rank = len(node.type.shape) if isinstance(node.type, ir.TensorType) else 0
    if rank == 0:
        raise _Mixes(f"`{node.op}` reduces the launch axis away")
    if kind is ops.Kind.MATMUL and rank == 2:
        if flags != [True, False] or node.attrs.a_trans:  # type: ignore[union-attr]
            raise _Mixes("a matmul contracts the launch axis")
        return
    if kind is ops.Kind.CONV:
        # axis 0 is the batch: each element's output reads its own input, the whole weight
        if flags != [True, False]:
            raise _Mixes(f"`{node.op}` reads a sliced weight or an unsliced input")
        return
    if kind in ELEMENTWISE_KINDS or kind is ops.Kind.MATMUL:
        # Broadcasting pairs trailing axes: an aligned operand must have the result's rank,
        # a whole one a lower rank or a size-1 axis 0 (batched matmuls pair batch axes).
        for operand, is_aligned in zip(node.operands, flags, strict=True):
            shape = operand.type.shape if isinstance(operand.type, ir.TensorType) else ()
            if is_aligned and len(shape) != rank:
                raise _Mixes(f"`{node.op}` broadcasts a sliced value along another axis")
            if not is_aligned and len(shape) == rank and shape[0] != 1:
                raise _Mixes(f"`{node.op}` pairs a whole input's axis 0 with the launch axis")
        return
    mixed = _axes_read_together(node)
    if mixed is None:
        raise _Mixes(f"`{node.op}` moves or copies axes")
    if 0 in mixed:
        raise _Mixes(f"`{node.op}` combines indices along the launch axis")
    if not all(flags):
        raise _Mixes(f"`{node.op}` joins a sliced value with a whole one")


# Kinds whose result elements read several positions along the axes their attributes name
# (`axes` or `axis`), or positions of their own along them.
ALONG_NAMED_AXES = frozenset(
    {
        ops.Kind.REDUCTION,
        ops.Kind.ARG_REDUCTION,
        ops.Kind.AXIS,
        ops.Kind.SCAN,
        ops.Kind.INDEX,
        ops.Kind.REVERSE,
        ops.Kind.CONCAT,
        ops.Kind.WINDOW,
    }
)


def _axes_read_together(node: ir.Op) -> frozenset[int] | None:
    """The operand axes along which one result element reads several positions (or
    positions of its own), or None for ops that move axes."""
    kind = ops.lookup(node.op).kind
    rank = len(node.operands[0].type.shape)  # type: ignore[union-attr]
    attributes = node.attrs
    if kind in ALONG_NAMED_AXES:
        axes = getattr(attributes, "axes", None) or (attributes.axis,)  # type: ignore[union-attr]
        return frozenset(a % rank for a in axes)
    if kind is ops.Kind.SLICE:
        return attributes.cut()  # type: ignore[union-attr]
    if kind is ops.Kind.MASK:  # triu/tril: positions along the last two axes
        return frozenset({rank - 2, rank - 1})
    return None
