"""Baseline `rms_norm`: x / sqrt(mean(x * x, dim=1, keepdim=True) + eps) on [N, C, H, W].
Pattern C RMSNorm: 3-D (B, C, S) with S = H*W, tile (1, 1, 16384), loop along the batch with
TARGET_LOOP_COUNT = 32 (N = 16: 16 iterations of one sample), sum over dim 1 (C)."""

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


def _rms(xc, inv_c, eps):
    mean_sq = pypto.sum(xc * xc, 1, keepdim=True) * inv_c
    return xc * pypto.rsqrt(mean_sq + eps)


@functools.cache
def make_rms_norm_kernel(b, c, s, eps):
    tile = (1, 1, 16384)
    inv_c = 1.0 / c
    BASIC_BATCH = ceil_div(b, TARGET_LOOP_COUNT)
    num_iters = b // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = b - rest
    assert BASIC_BATCH * c * ceil_div(s, tile[2]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def rms_norm_kernel(
        x: pypto.Tensor((b, c, s), pypto.DT_FP32),
        y: pypto.Tensor((b, c, s), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            xc = pypto.view(x, [BASIC_BATCH, c, s], [off, 0, 0])
            pypto.assemble(_rms(xc, inv_c, eps), [off, 0, 0], y)
        if tail > 0:
            xt = pypto.view(x, [tail, c, s], [rest, 0, 0])
            pypto.assemble(_rms(xt, inv_c, eps), [rest, 0, 0], y)

    return rms_norm_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, num_features: int = 64, eps: float = 1e-05):
        super().__init__()
        self.num_features = num_features
        self.eps = float(eps)

    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        kernel = make_rms_norm_kernel(n, c, h * w, self.eps)
        y = torch.empty((n, c, h * w), dtype=torch.float32, device=x.device)
        kernel(x.contiguous().reshape(n, c, h * w), y)
        return y.reshape(n, c, h, w)
