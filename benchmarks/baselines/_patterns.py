"""Rule-book kernel scaffolds shared by the baselines, each parameterised by a compute callback.

pypto's frontend parses a kernel's source, so a kernel's tensor parameters must be spelled out:
`build_kernel` holds one definition per tensor count, whose body hands the tensors to a plain Python
scaffold (called at trace time, like any helper a kernel calls). The scaffolds:

- `map_kernel`: outputs = compute(inputs), optionally looping over TARGET_LOOP_COUNT chunks of
  one axis (view -> compute -> assemble, plus a constant-size tail); inputs listed in `whole`
  are passed unsliced (broadcast operands, the matmul's B).
- `sum_kernel`: sum(terms(inputs)) * scale over flattened inputs, accumulating into the output
  when it loops (pattern D/E; a pypto.zeros accumulator gives zeros in pypto 0.2.0).

The forward-side helpers (`flat_map`, `row_map`, `chunk_map`, `single`, `flat_sum`) build the
cached kernel from the torch inputs' shapes, allocate the outputs and launch it.
"""

import functools
import math

import pypto
import torch

from benchmarks.baselines._common import (
    MAX_TILES,
    auto_tiles,
    chunk_plan,
    jit,
)

FLAT_TILE = (8192,)  # rule book: 1-D (flattened) elementwise vec tile
# The rule book's flattened patterns run at rank 2 (`flat_layout`): tiles of the same 8192
# contiguous elements on hardware, which pypto 0.2.0's cost model charges by their bytes (it
# charges a rank-1 copy as one element: issue 13).
ROW_TILE = (1, 16384)  # rule book: 2-D row reductions, one row per tile
AXIS_TILE = (1, 16, 256)  # rule book: single-axis 3-D reductions
# Rule book: set_cube_tile_shapes([128, 128], [32, 128], [256, 256], True, False). pypto 0.2.0's
# signature is (m, k, n, enable_split_k=False) and rejects a fifth argument: flags dropped.
CUBE_TILES = ([128, 128], [32, 128], [256, 256])
PTO_DTYPE = {
    torch.float32: pypto.DT_FP32,
    torch.float16: pypto.DT_FP16,
    torch.bfloat16: pypto.DT_BF16,
}


def elementwise_tile(m, n):
    """Rule book 2-D elementwise tile (8, 4096). Adjustment: when it actually covers more than
    16384 elements (rows >= 8 and n > 2048) it breaks the rule book's own prod(tile) <= 16384,
    so the row count is halved to (4, 4096)."""
    tile = (8, 4096)
    if min(tile[0], m) * min(tile[1], n) > 16384:
        tile = (4, 4096)
    return tile


def for_chunks(length, body, name="LOOP"):
    """body(index, offset, size) over TARGET_LOOP_COUNT chunks of `length`: a pypto loop over
    the whole chunks (BASIC_BATCH each), then a constant-size tail when they do not divide."""
    basic_batch, num_iters, rest, tail = chunk_plan(length)
    for bi in pypto.loop(0, num_iters, 1, name=name, idx_name="bi"):
        body(bi, bi * basic_batch, basic_batch)
    if tail > 0:
        body(num_iters, rest, tail)


def _at(shape, axis, value, fill):
    """`shape` as a list with `axis` replaced by value and the other entries by fill (or kept
    when fill is None)."""
    return [value if i == axis else (s if fill is None else fill) for i, s in enumerate(shape)]


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def build_kernel(specs, body):
    """A jit kernel over len(specs) tensors (inputs, then outputs) running body(*tensors)."""
    if len(specs) == 2:

        @jit()
        def kernel_2(t0: specs[0], t1: specs[1]):
            body(t0, t1)

        return kernel_2
    if len(specs) == 3:

        @jit()
        def kernel_3(t0: specs[0], t1: specs[1], t2: specs[2]):
            body(t0, t1, t2)

        return kernel_3
    assert len(specs) == 4, len(specs)

    @jit()
    def kernel_4(t0: specs[0], t1: specs[1], t2: specs[2], t3: specs[3]):
        body(t0, t1, t2, t3)

    return kernel_4


def tensor_specs(pairs):
    """pypto.Tensor annotations for (shape, torch dtype) pairs."""
    return [pypto.Tensor(shape, PTO_DTYPE[dtype]) for shape, dtype in pairs]


@functools.cache
def map_kernel(compute, sliced, whole, outs, params, vec_tile, cube, loop, axis, pass_size):
    """outs = compute(*sliced, *whole, [size,] *params), each argument a (shape, dtype) pair.

    loop: False, one pass; True, loop along `axis` of the sliced inputs and outputs
    (TARGET_LOOP_COUNT chunks, `for_chunks`). pass_size hands compute the chunk's size.
    vec_tile / cube: the tile shapes set first (the cube tiles are CUBE_TILES)."""
    n_in = len(sliced) + len(whole)

    def body(*tensors):
        inputs, outputs = tensors[:n_in], tensors[n_in:]
        if vec_tile is not None:
            pypto.set_vec_tile_shapes(*vec_tile)
        if cube:
            pypto.set_cube_tile_shapes(*CUBE_TILES)
        if not loop:
            extra = (sliced[0][0][axis],) if pass_size else ()
            values = _as_tuple(compute(*inputs, *extra, *params))
            for out, value in zip(outputs, values, strict=True):
                out[:] = value
            return

        def chunk(_, off, size):
            parts = [
                pypto.view(t, _at(shape, axis, size, None), _at(shape, axis, off, 0))
                for t, (shape, _dtype) in zip(inputs[: len(sliced)], sliced, strict=True)
            ]
            extra = (size,) if pass_size else ()
            values = _as_tuple(compute(*parts, *inputs[len(sliced) :], *extra, *params))
            for out, (shape, _dtype), value in zip(outputs, outs, values, strict=True):
                pypto.assemble(value, _at(shape, axis, off, 0), out)

        for_chunks(sliced[0][0][axis], chunk)

    return build_kernel(tensor_specs((*sliced, *whole, *outs)), body)


def _spec(t):
    return tuple(t.shape), t.dtype


def chunk_map(
    compute,
    sliced,
    whole=(),
    out_shapes=None,
    *,
    params=(),
    vec_tile=None,
    cube=False,
    loop=True,
    axis=0,
    pass_size=False,
):
    """Run map_kernel on torch tensors (already laid out as the kernel sees them); outputs are
    new tensors of out_shapes (default: the first input's shape), in its dtype. Returns a list."""
    first = sliced[0]
    out_shapes = out_shapes or [tuple(first.shape)]
    outs = tuple((tuple(shape), first.dtype) for shape in out_shapes)
    kernel = map_kernel(
        compute,
        tuple(_spec(t) for t in sliced),
        tuple(_spec(t) for t in whole),
        outs,
        tuple(params),
        vec_tile,
        cube,
        loop,
        axis,
        pass_size,
    )
    outputs = [torch.empty(shape, dtype=dtype, device=first.device) for shape, dtype in outs]
    kernel(*(t.contiguous() for t in (*sliced, *whole)), *outputs)
    return outputs


def single(compute, inputs, out_shapes=None, *, params=(), tile):
    """One pass, no loop (the tile count must stay within MAX_TILES): compute(*inputs)."""
    assert auto_tiles(inputs[0].shape, tile) <= MAX_TILES
    return chunk_map(compute, inputs, (), out_shapes, params=params, vec_tile=tile, loop=False)


def flat_layout(shape):
    """The flattened layout at rank 2 and its tile of 8192 contiguous elements: the tensor's
    own rows [size / last, last] with tile [1, 8192] (rows a multiple of 8192) or
    [8192 / last, last] (rows of 512 or more dividing 8192; shorter rows as tile rows crash
    pypto's SIM); else rows of 8192 (one row when they do not divide the size)."""
    size, last, flat = math.prod(shape), shape[-1] if shape else 1, FLAT_TILE[0]
    if last % flat == 0:
        return (size // last, last), (1, flat)
    if flat % last == 0 and last >= 512:
        return (size // last, last), (flat // last, last)
    if size % flat == 0:
        return (size // flat, flat), (1, flat)
    return (1, size), (1, flat)


def flat_map(compute, inputs, n_out=1, params=()):
    """Pattern A: elementwise on inputs of one shape, flattened (`flat_layout`: rank 2, 8192
    contiguous elements per tile); loops over TARGET_LOOP_COUNT chunks of rows only past
    MAX_TILES tiles. Returns the outputs in the inputs' shape (a tuple when n_out > 1)."""
    shape = inputs[0].shape
    rows, tile = flat_layout(tuple(shape))
    outputs = chunk_map(
        compute,
        [t.reshape(rows) for t in inputs],
        out_shapes=[rows] * n_out,
        params=params,
        vec_tile=tile,
        loop=auto_tiles(rows, tile) > MAX_TILES,
    )
    results = tuple(out.reshape(shape) for out in outputs)
    return results if n_out > 1 else results[0]


def row_map(compute, x, whole=(), *, tile=None):
    """2-D [M, N] map; the whole operands ([1, N] rows) broadcast over rows. tile: ROW_TILE for
    row reductions, else the rule-book elementwise tile. Loops over row chunks only past
    MAX_TILES tiles."""
    m, n = x.shape
    tile = tile or elementwise_tile(m, n)
    loop = auto_tiles((m, n), tile) > MAX_TILES
    return chunk_map(compute, [x], whole, vec_tile=tile, loop=loop)[0]


def norm_map(compute, x, whole=(), *, params=(), tile, sliced=(), axis=0, pass_size=False):
    """Pattern C: always a loop along `axis` (TARGET_LOOP_COUNT chunks); one chunk's tiles must
    stay within MAX_TILES. `sliced` inputs are cut along the axis with x."""
    basic_batch = chunk_plan(x.shape[axis])[0]
    assert auto_tiles(_at(x.shape, axis, basic_batch, None), tile) <= MAX_TILES
    return chunk_map(
        compute,
        [x, *sliced],
        whole,
        params=params,
        vec_tile=tile,
        axis=axis,
        pass_size=pass_size,
    )[0]


@functools.cache
def sum_kernel(terms, shape, n_in, scale, params):
    """Pattern D/E: [1, 1] <- sum(terms(*inputs, *params)) * scale over n_in flattened
    inputs (`flat_layout`; each row summed, then the rows); past MAX_TILES tiles it loops
    over TARGET_LOOP_COUNT chunks of rows and accumulates into the output itself (pypto 0.2.0
    loses sums accumulated in a pypto.zeros temporary)."""
    rows, tile = flat_layout(shape)
    loop = auto_tiles(rows, tile) > MAX_TILES

    def total_of(values):
        return pypto.sum(pypto.sum(values, 1, keepdim=True), 0, keepdim=True)

    def body(*tensors):
        inputs, total = tensors[:-1], tensors[-1]
        pypto.set_vec_tile_shapes(*tile)
        if not loop:
            total[:] = total_of(terms(*inputs, *params)) * scale
            return

        def chunk(_, off, length):
            parts = [pypto.view(t, [length, rows[1]], [off, 0]) for t in inputs]
            total[:] = total + total_of(terms(*parts, *params))

        total[:] = pypto.zeros([1, 1], dtype=pypto.DT_FP32)
        for_chunks(rows[0], chunk)
        total[:] = total * scale

    return build_kernel(
        tensor_specs([(rows, torch.float32)] * n_in + [((1, 1), torch.float32)]), body
    )


def flat_sum(terms, inputs, scale, params=()):
    """Run sum_kernel on flattened fp32 inputs; returns the 0-d result (0-d kernel outputs fail
    in pypto 0.2.0: the kernel writes shape [1], reshaped here)."""
    shape = tuple(inputs[0].shape)
    kernel = sum_kernel(terms, shape, len(inputs), scale, tuple(params))
    total = torch.empty((1, 1), dtype=torch.float32, device=inputs[0].device)
    kernel(*(t.contiguous().reshape(flat_layout(shape)[0]) for t in inputs), total)
    return total.reshape(())


def matmul(a, b):
    return pypto.matmul(a, b, pypto.DT_FP32, b_trans=False)


def matmul_bt(a, b):
    return pypto.matmul(a, b, pypto.DT_FP32, b_trans=True)


def matmul_rows(compute, A, whole, n, *, cube=True, params=(), pass_size=False):
    """Pattern B: C [M, n] = compute(A rows, *whole, *params), looping along M
    (TARGET_LOOP_COUNT chunks of rows); cube: set CUBE_TILES first (else compute sets its own
    tiles)."""
    out_shapes = [(A.shape[0], n)]
    return chunk_map(
        compute, [A], whole, out_shapes, params=params, cube=cube, pass_size=pass_size
    )[0]
