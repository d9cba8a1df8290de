"""Baseline `layer_norm`: LayerNorm over (C, H, W) with elementwise affine weight/bias [C, H, W]
on [N, C, H, W]. Pattern C like GroupNorm/InstanceNorm: reshape to (N, C*H*W), tile
(1, 16384), loop along the batch with TARGET_LOOP_COUNT = 32 (N = 16 < 32: 16 iterations of
one row); var = sq_sum * inv_hidden - mean * mean."""

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


def _layer_norm(xc, weight, bias, inv_hidden, eps):
    mean = pypto.sum(xc, 1, keepdim=True) * inv_hidden
    var = pypto.sum(xc * xc, 1, keepdim=True) * inv_hidden - mean * mean
    return (xc - mean) * pypto.rsqrt(var + eps) * weight + bias


@functools.cache
def make_layer_norm_kernel(rows, hidden, eps):
    tile = (1, 16384)
    inv_hidden = 1.0 / hidden
    BASIC_BATCH = ceil_div(rows, TARGET_LOOP_COUNT)
    num_iters = rows // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = rows - rest
    assert BASIC_BATCH * ceil_div(hidden, tile[1]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def layer_norm_kernel(
        x: pypto.Tensor((rows, hidden), pypto.DT_FP32),
        weight: pypto.Tensor((1, hidden), pypto.DT_FP32),
        bias: pypto.Tensor((1, hidden), pypto.DT_FP32),
        y: pypto.Tensor((rows, hidden), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            xc = pypto.view(x, [BASIC_BATCH, hidden], [off, 0])
            pypto.assemble(_layer_norm(xc, weight, bias, inv_hidden, eps), [off, 0], y)
        if tail > 0:
            xt = pypto.view(x, [tail, hidden], [rest, 0])
            pypto.assemble(_layer_norm(xt, weight, bias, inv_hidden, eps), [rest, 0], y)

    return layer_norm_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape: tuple = (64, 256, 256), eps: float = 1e-05):
        super().__init__()
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.ones(tuple(normalized_shape)))
        self.bias = torch.nn.Parameter(torch.zeros(tuple(normalized_shape)))

    def forward(self, x):
        weight, bias = self.weight.detach(), self.bias.detach()
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        assert weight.shape == (c, h, w) and bias.shape == (c, h, w)
        hidden = c * h * w
        kernel = make_layer_norm_kernel(n, hidden, self.eps)
        y = torch.empty((n, hidden), dtype=torch.float32, device=x.device)
        kernel(
            x.contiguous().reshape(n, hidden),
            weight.contiguous().reshape(1, hidden),
            bias.contiguous().reshape(1, hidden),
            y,
        )
        return y.reshape(n, c, h, w)
