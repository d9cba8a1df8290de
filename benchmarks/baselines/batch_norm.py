"""Baseline `batch_norm`: BatchNorm2d in training mode on [N, C, H, W]: per channel, mean and
biased variance over N, H, W, then * weight[c] + bias[c]. Pattern C BatchNorm: 3-D (B, C, S)
with S = H*W, tile (1, 1, 16384), loop along the channel axis with TARGET_LOOP_COUNT = 32
(C = 64: 2 channels per iteration), sum over dim 2 then dim 0. The [1, c, 1] statistics
stretch along two axes, so they are expand_clone'd to [N, c, 1] (one broadcast axis per op).
var = sq_sum * inv_count - mean * mean."""

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


def _batch_norm(xc, wc, bc, n, cc, inv_count, eps):
    s1 = pypto.sum(pypto.sum(xc, 2, keepdim=True), 0, keepdim=True)
    s2 = pypto.sum(pypto.sum(xc * xc, 2, keepdim=True), 0, keepdim=True)
    mean = s1 * inv_count
    var = s2 * inv_count - mean * mean
    scale = pypto.rsqrt(var + eps) * wc
    shift = bc - mean * scale
    return xc * pypto.expand_clone(scale, [n, cc, 1]) + pypto.expand_clone(shift, [n, cc, 1])


@functools.cache
def make_batch_norm_kernel(n, c, s, eps):
    tile = (1, 1, 16384)
    inv_count = 1.0 / (n * s)
    BASIC_BATCH = ceil_div(c, TARGET_LOOP_COUNT)
    num_iters = c // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = c - rest
    assert n * BASIC_BATCH * ceil_div(s, tile[2]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def batch_norm_kernel(
        x: pypto.Tensor((n, c, s), pypto.DT_FP32),
        weight: pypto.Tensor((1, c, 1), pypto.DT_FP32),
        bias: pypto.Tensor((1, c, 1), pypto.DT_FP32),
        y: pypto.Tensor((n, c, s), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            xc = pypto.view(x, [n, BASIC_BATCH, s], [0, off, 0])
            wc = pypto.view(weight, [1, BASIC_BATCH, 1], [0, off, 0])
            bc = pypto.view(bias, [1, BASIC_BATCH, 1], [0, off, 0])
            yc = _batch_norm(xc, wc, bc, n, BASIC_BATCH, inv_count, eps)
            pypto.assemble(yc, [0, off, 0], y)
        if tail > 0:
            xt = pypto.view(x, [n, tail, s], [0, rest, 0])
            wt = pypto.view(weight, [1, tail, 1], [0, rest, 0])
            bt = pypto.view(bias, [1, tail, 1], [0, rest, 0])
            pypto.assemble(_batch_norm(xt, wt, bt, n, tail, inv_count, eps), [0, rest, 0], y)

    return batch_norm_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, num_features: int = 64, eps: float = 1e-05):
        super().__init__()
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.ones(num_features))
        self.bias = torch.nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        weight, bias = self.weight.detach(), self.bias.detach()
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        assert weight.shape == (c,) and bias.shape == (c,)
        kernel = make_batch_norm_kernel(n, c, h * w, self.eps)
        y = torch.empty((n, c, h * w), dtype=torch.float32, device=x.device)
        kernel(
            x.contiguous().reshape(n, c, h * w),
            weight.contiguous().reshape(1, c, 1),
            bias.contiguous().reshape(1, c, 1),
            y,
        )
        return y.reshape(n, c, h, w)
