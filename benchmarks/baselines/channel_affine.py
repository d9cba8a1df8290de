"""Baseline `channel_affine`: y = x * w + b on [B, C, H, W] with w, b of shape [C, 1, 1].
Kept 3-D as [B, C, H*W] (the per-channel weights need the layout); w and b are [1, C, 1] and
stretch along two axes, which pypto does one axis per op: expand_clone to [B, C, 1] first.
Tile: the rule book's 2-D elementwise (8, 4096) with a leading 1 for the batch axis."""

import functools
import importlib.util
import os

import pypto
import torch

TARGET_LOOP_COUNT = 32  # rule book: loop count whenever a loop is used
MAX_TILES = 2048  # rule book: auto_tiles = prod(ceil(shape / tile)) must stay <= 2048
# Test hook only: verify.py lowers the limit to run the loop branches at small shapes.
MAX_TILES = int(os.getenv("BASELINE_MAX_TILES", MAX_TILES))


def ceil_div(a, b):
    return (a + b - 1) // b


def _run_mode():
    # AIKG_PYPTO_RUN_MODE: 0 = NPU, 1 = SIM; unset: NPU when torch_npu is installed, else SIM.
    mode = os.getenv("AIKG_PYPTO_RUN_MODE")
    if mode is None:
        has_npu = importlib.util.find_spec("torch_npu") is not None
        return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM
    return pypto.RunMode.NPU if int(mode) == 0 else pypto.RunMode.SIM


@functools.cache
def make_channel_affine_kernel(b, c, s):
    tile = (1, 8, 4096)
    assert ceil_div(b, tile[0]) * ceil_div(c, tile[1]) * ceil_div(s, tile[2]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def channel_affine_kernel(
        x: pypto.Tensor((b, c, s), pypto.DT_FP32),
        w: pypto.Tensor((1, c, 1), pypto.DT_FP32),
        bias: pypto.Tensor((1, c, 1), pypto.DT_FP32),
        y: pypto.Tensor((b, c, s), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        w_full = pypto.expand_clone(w, [b, c, 1])
        b_full = pypto.expand_clone(bias, [b, c, 1])
        y[:] = x * w_full + b_full

    return channel_affine_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w, b):
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, wd = x.shape
        assert w.shape == (c, 1, 1) and b.shape == (c, 1, 1)
        kernel = make_channel_affine_kernel(n, c, h * wd)
        y = torch.empty((n, c, h * wd), dtype=torch.float32, device=x.device)
        kernel(
            x.contiguous().reshape(n, c, h * wd),
            w.contiguous().reshape(1, c, 1),
            b.contiguous().reshape(1, c, 1),
            y,
        )
        return y.reshape(n, c, h, wd)
