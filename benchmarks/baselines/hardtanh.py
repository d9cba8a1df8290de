"""Baseline `hardtanh`: F.hardtanh(x, min_val, max_val) on [M, N], flattened to 1-D
(pattern A, vec tile 8192). clamp = minimum(maximum(x, lo), hi)."""

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


def _compute(x, min_val, max_val):
    return pypto.minimum(pypto.maximum(x, min_val), max_val)


@functools.cache
def make_hardtanh_kernel(size, min_val, max_val):
    TILE = 8192  # rule book: 1-D elementwise vec tile
    auto_tiles = ceil_div(size, TILE)
    if auto_tiles <= MAX_TILES:
        # Few enough tiles: one pass, no loop.
        @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
        def hardtanh_kernel(
            x: pypto.Tensor((size,), pypto.DT_FP32),
            y: pypto.Tensor((size,), pypto.DT_FP32),
        ):
            pypto.set_vec_tile_shapes(TILE)
            y[:] = _compute(x, min_val, max_val)

        return hardtanh_kernel

    # Too many tiles: loop over TARGET_LOOP_COUNT chunks, plus a constant-size tail.
    BASIC_BATCH = ceil_div(size, TARGET_LOOP_COUNT)
    num_iters = size // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = size - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def hardtanh_loop_kernel(
        x: pypto.Tensor((size,), pypto.DT_FP32),
        y: pypto.Tensor((size,), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(TILE)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            x_c = pypto.view(x, [BASIC_BATCH], [off])
            pypto.assemble(_compute(x_c, min_val, max_val), [off], y)
        if tail > 0:
            x_t = pypto.view(x, [tail], [rest])
            pypto.assemble(_compute(x_t, min_val, max_val), [rest], y)

    return hardtanh_loop_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val = float(min_val)
        self.max_val = float(max_val)

    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        size = x.numel()
        kernel = make_hardtanh_kernel(size, self.min_val, self.max_val)
        y = torch.empty((size,), dtype=torch.float32, device=x.device)
        kernel(x.contiguous().reshape(size), y)
        return y.reshape(x.shape)
