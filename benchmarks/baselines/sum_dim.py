"""Baseline `sum_dim`: torch.sum(x, dim=1, keepdim=True) on [B, M, N]. One-axis 3-D reduction
with the rule book's
(1, 16, 256) tile (its "single-axis 3-D reduction" starting point); the kernel writes
[B, 1, N] and forward reshapes."""

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
def make_sum_dim_kernel(b, m, n):
    tile = (1, 16, 256)
    assert ceil_div(b, tile[0]) * ceil_div(m, tile[1]) * ceil_div(n, tile[2]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def sum_dim_kernel(
        x: pypto.Tensor((b, m, n), pypto.DT_FP32),
        y: pypto.Tensor((b, 1, n), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        y[:] = pypto.sum(x, 1, keepdim=True)

    return sum_dim_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim == 1, "this kernel reduces dim 1"

    def forward(self, x):
        assert x.dim() == 3 and x.dtype == torch.float32
        b, m, n = x.shape
        kernel = make_sum_dim_kernel(b, m, n)
        y = torch.empty((b, 1, n), dtype=torch.float32, device=x.device)
        kernel(x.contiguous(), y)
        return y.reshape(b, 1, n)
