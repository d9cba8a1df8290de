"""Official-pattern baseline for `channel_affine` (examples/channel_affine.pto: x * w + b on
[B, C, H, W] = [4, 8, 16, 16], w and b [C, 1, 1]), after pypto r0.2.0's loop/view/assemble
add (examples/01_beginner/transform/add_scalar_loop_view_assemble, 4-D [B, N, S, D]): vec
tile (1, 4, 1, 64), a `pypto.loop` over B one index per iteration, each a view [1, C, H, W],
the elementwise work, and an assemble into the output. The closest official elementwise
kernels are 4-D adds; this example is the 4-D elementwise one. Its weights broadcast along
H and W, two axes, which pypto does one axis per op: expand_clone to [1, C, H, 1] first.
Variants: channel_affine__tile_1x2x4x128 and __tile_2x4x8x256, the two tilings of the
official 4-D add in examples/01_beginner/tiling."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import per_batch

TILE = (1, 4, 1, 64)


def _stretch(t, n, c, h):
    """[1, C, 1, 1] -> [n, C, H, 1], one axis per expand_clone (pypto's limit)."""
    t = pypto.expand_clone(t, [1, c, h, 1])
    return t if n == 1 else pypto.expand_clone(t, [n, c, h, 1])


def affine(x, w, b):
    """x * w + b, w and b [1, C, 1, 1] stretched to x's [n, C, H, 1] first."""
    n, c, h, _ = x.shape
    return x * _stretch(w, n, c, h) + _stretch(b, n, c, h)


def weights(x, w, b):
    """Checks the spec's interface; w and b as [1, C, 1, 1]."""
    assert x.dim() == 4 and x.dtype == torch.float32
    c = x.shape[1]
    assert w.shape == (c, 1, 1) and b.shape == (c, 1, 1)
    return [w.reshape(1, c, 1, 1), b.reshape(1, c, 1, 1)]


class ModelNew(torch.nn.Module):
    def forward(self, x, w, b):
        return per_batch(affine, [x], weights(x, w, b), vec_tile=TILE)
