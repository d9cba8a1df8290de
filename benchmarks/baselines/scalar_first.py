"""Baseline `scalar_first`: u = 1 - x; y = u * (2 / x) - c; z = -tanh(c - u) on [N],
1-D with vec tile 8192 (pattern A). Hand rewrites for pypto 0.2.0 (rule 5): 1.0 - x ->
x * -1.0 + 1.0, 2.0 / x -> reciprocal(x) * 2.0, no tanh: -tanh(a) = 1 - 2 * sigmoid(2a)
written as sigmoid(a * 2.0) * -2.0 + 1.0. Tile 8192 > N = 4096, kept literally."""

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


def _compute(x, c):
    u = x * -1.0 + 1.0
    y = u * (pypto.reciprocal(x) * 2.0) - c
    a = u * -1.0 + c
    z = pypto.sigmoid(a * 2.0) * -2.0 + 1.0
    return y, z


@functools.cache
def make_scalar_first_kernel(size, c):
    TILE = 8192  # rule book: 1-D elementwise vec tile
    auto_tiles = ceil_div(size, TILE)
    if auto_tiles <= MAX_TILES:
        # Few enough tiles: one pass, no loop.
        @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
        def scalar_first_kernel(
            x: pypto.Tensor((size,), pypto.DT_FP32),
            y: pypto.Tensor((size,), pypto.DT_FP32),
            z: pypto.Tensor((size,), pypto.DT_FP32),
        ):
            pypto.set_vec_tile_shapes(TILE)
            y_val, z_val = _compute(x, c)
            y[:] = y_val
            z[:] = z_val

        return scalar_first_kernel

    # Too many tiles: loop over TARGET_LOOP_COUNT chunks, plus a constant-size tail.
    BASIC_BATCH = ceil_div(size, TARGET_LOOP_COUNT)
    num_iters = size // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = size - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def scalar_first_loop_kernel(
        x: pypto.Tensor((size,), pypto.DT_FP32),
        y: pypto.Tensor((size,), pypto.DT_FP32),
        z: pypto.Tensor((size,), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(TILE)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            x_c = pypto.view(x, [BASIC_BATCH], [off])
            y_c, z_c = _compute(x_c, c)
            pypto.assemble(y_c, [off], y)
            pypto.assemble(z_c, [off], z)
        if tail > 0:
            x_t = pypto.view(x, [tail], [rest])
            y_t, z_t = _compute(x_t, c)
            pypto.assemble(y_t, [rest], y)
            pypto.assemble(z_t, [rest], z)

    return scalar_first_loop_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, c: float = 0.5):
        super().__init__()
        self.c = float(c)

    def forward(self, x):
        assert x.dim() == 1 and x.dtype == torch.float32
        size = x.numel()
        kernel = make_scalar_first_kernel(size, self.c)
        y = torch.empty((size,), dtype=torch.float32, device=x.device)
        z = torch.empty((size,), dtype=torch.float32, device=x.device)
        kernel(x.contiguous().reshape(size), y, z)
        return y.reshape(x.shape), z.reshape(x.shape)
