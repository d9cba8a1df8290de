"""The two kernel shapes pypto's r0.2.0 example kernels use, as scaffolds taking a compute
callback (like `_patterns`, whose `build_kernel` and `tensor_specs` they reuse):

- `whole`: one pass over the whole tensors, no loop, no view: set the tiles, compute, write
  the outputs (the activation, norm, matmul, linear, 4-D add and reduction examples);
- `per_batch`: a `pypto.loop` over the leading axis one index at a time, each iteration a
  view of that index, the compute and an assemble into the outputs (the softmax and the
  loop/view/assemble add examples, `tile_b = 1`).

The official examples never loop for size. With no loop, pypto tiles the whole tensor in one
pass, and compile time and pypto 0.2.0's per-body tile-op cap (20000) grow with the tile
count: `whole` refuses shapes past the rule book's single-pass budget of MAX_TILES tiles with
an AssertionError (benchmarks.run then compares at reduced dims), and so does `per_batch` for
one iteration's tiles. Kernels are cached per shapes, dtypes, parameters and tiles.
"""

import functools

import pypto
import torch

from benchmarks.baselines._common import MAX_TILES, auto_tiles
from benchmarks.baselines._patterns import build_kernel, tensor_specs


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _set_tiles(vec_tile, cube_tiles):
    if cube_tiles is not None:
        pypto.set_cube_tile_shapes(*(list(t) for t in cube_tiles))
    if vec_tile is not None:
        pypto.set_vec_tile_shapes(*vec_tile)


@functools.cache
def _whole_kernel(compute, ins, outs, params, vec_tile, cube_tiles, assemble):
    def body(*tensors):
        inputs, outputs = tensors[: len(ins)], tensors[len(ins) :]
        _set_tiles(vec_tile, cube_tiles)
        values = _as_tuple(compute(*inputs, *params))
        for out, (shape, _), value in zip(outputs, outs, values, strict=True):
            if assemble:
                pypto.assemble(value, [0] * len(shape), out)
            else:
                out[:] = value

    return build_kernel(tensor_specs((*ins, *outs)), body)


@functools.cache
def _per_batch_kernel(compute, sliced, whole_ins, outs, params, vec_tile):
    n_sliced = len(sliced)
    batch = sliced[0][0][0]

    def at(shape, index):
        return [index, *([0] * (len(shape) - 1))]

    def body(*tensors):
        inputs, outputs = tensors[: n_sliced + len(whole_ins)], tensors[n_sliced + len(whole_ins) :]
        _set_tiles(vec_tile, None)
        for idx in pypto.loop(0, batch, 1, name="LOOP_B", idx_name="idx"):
            parts = [
                pypto.view(t, [1, *shape[1:]], at(shape, idx))
                for t, (shape, _) in zip(inputs[:n_sliced], sliced, strict=True)
            ]
            values = _as_tuple(compute(*parts, *inputs[n_sliced:], *params))
            for out, (shape, _), value in zip(outputs, outs, values, strict=True):
                pypto.assemble(value, at(shape, idx), out)

    return build_kernel(tensor_specs((*sliced, *whole_ins, *outs)), body)


def _spec(t):
    return tuple(t.shape), t.dtype


def _launch(kernel, inputs, outs, device):
    outputs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in outs]
    kernel(*(t.contiguous() for t in inputs), *outputs)
    return outputs


def whole(
    compute,
    inputs,
    out_shapes=None,
    *,
    params=(),
    vec_tile=None,
    cube_tiles=None,
    assemble=False,
):
    """outputs = compute(*inputs, *params) in one pass; out_shapes default to the first
    input's shape, in its dtype. vec_tile / cube_tiles (([m0, m1], [k0, k1], [n0, n1])) are
    set first; a compute that sets its own passes neither. The results are moved into the
    outputs (`out[:] = value`), or with `assemble` assembled at offset 0 as the official norm
    examples do. Returns a list."""
    first = inputs[0]
    outs = tuple((tuple(s), first.dtype) for s in (out_shapes or [first.shape]))
    if vec_tile is not None:
        tiles = max(auto_tiles(shape, vec_tile) for shape, _ in outs)
        assert tiles <= MAX_TILES, f"one pass of {tiles} tiles exceeds {MAX_TILES}"
    kernel = _whole_kernel(
        compute,
        tuple(_spec(t) for t in inputs),
        outs,
        tuple(params),
        vec_tile,
        None if cube_tiles is None else tuple(tuple(t) for t in cube_tiles),
        assemble,
    )
    return _launch(kernel, inputs, outs, first.device)


def per_batch(compute, sliced, whole_inputs=(), *, params=(), vec_tile):
    """The official loop/view/assemble form: for each index of the leading axis, compute on
    the [1, ...] views of `sliced` (whole_inputs unsliced) and assemble into outputs shaped
    like sliced[0]. Returns the output."""
    first = sliced[0]
    outs = ((tuple(first.shape), first.dtype),)
    tiles = auto_tiles((1, *first.shape[1:]), vec_tile)
    assert tiles <= MAX_TILES, f"one iteration of {tiles} tiles exceeds {MAX_TILES}"
    kernel = _per_batch_kernel(
        compute,
        tuple(_spec(t) for t in sliced),
        tuple(_spec(t) for t in whole_inputs),
        outs,
        tuple(params),
        tuple(vec_tile),
    )
    return _launch(kernel, [*sliced, *whole_inputs], outs, first.device)[0]
