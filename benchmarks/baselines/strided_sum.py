"""Baseline `strided_sum`: y = x.sum(dim=(0, 2)) and z = logsumexp(x, dim=-1) on [A, B, C].
Two chained one-axis sums for y; z = log(sum(exp(x - max))) + max. 3-D with the rule book's
(1, 16, 256) tile."""

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
def make_strided_sum_kernel(a, b, c):
    tile = (1, 16, 256)
    assert ceil_div(a, tile[0]) * ceil_div(b, tile[1]) * ceil_div(c, tile[2]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def strided_sum_kernel(
        x: pypto.Tensor((a, b, c), pypto.DT_FP32),
        y: pypto.Tensor((1, b, 1), pypto.DT_FP32),
        z: pypto.Tensor((a, b, 1), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        y[:] = pypto.sum(pypto.sum(x, 2, keepdim=True), 0, keepdim=True)
        row_max = pypto.amax(x, 2, keepdim=True)
        total = pypto.sum(pypto.exp(x - row_max), 2, keepdim=True)
        z[:] = pypto.log(total) + row_max

    return strided_sum_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        assert x.dim() == 3 and x.dtype == torch.float32
        a, b, c = x.shape
        kernel = make_strided_sum_kernel(a, b, c)
        y = torch.empty((1, b, 1), dtype=torch.float32, device=x.device)
        z = torch.empty((a, b, 1), dtype=torch.float32, device=x.device)
        kernel(x.contiguous(), y, z)
        return y.reshape(b), z.reshape(a, b)
