"""Baseline `sum_of_squares`: sum(x * x) over [N, C, H, W] (67M elements at the spec size).
Pattern E: flattened 1-D, vec tile 8192; 8192 tiles > 2048, so it loops over 32 chunks and
accumulates into the output (a pypto.zeros accumulator gives zeros in 0.2.0)."""

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


def _terms(x):
    return x * x


@functools.cache
def make_sum_of_squares_kernel(size, scale):
    TILE = 8192  # rule book: flattened 1-D vec tile
    auto_tiles = ceil_div(size, TILE)
    if auto_tiles <= MAX_TILES:

        @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
        def sum_of_squares_kernel(
            x: pypto.Tensor((size,), pypto.DT_FP32),
            total: pypto.Tensor((1,), pypto.DT_FP32),
        ):
            pypto.set_vec_tile_shapes(TILE)
            total[:] = pypto.sum(_terms(x), 0, keepdim=True) * scale

        return sum_of_squares_kernel

    # Pattern E: loop over TARGET_LOOP_COUNT chunks and accumulate. pypto 0.2.0 loses sums
    # accumulated in a pypto.zeros temporary, so the output itself is the accumulator.
    BASIC_BATCH = ceil_div(size, TARGET_LOOP_COUNT)
    num_iters = size // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = size - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def sum_of_squares_loop_kernel(
        x: pypto.Tensor((size,), pypto.DT_FP32),
        total: pypto.Tensor((1,), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(TILE)
        total[:] = pypto.zeros([1], dtype=pypto.DT_FP32)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            x_c = pypto.view(x, [BASIC_BATCH], [off])
            total[:] = total + pypto.sum(_terms(x_c), 0, keepdim=True)
        if tail > 0:
            x_t = pypto.view(x, [tail], [rest])
            total[:] = total + pypto.sum(_terms(x_t), 0, keepdim=True)
        total[:] = total * scale

    return sum_of_squares_loop_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        size = x.numel()
        kernel = make_sum_of_squares_kernel(size, 1.0)
        total = torch.empty((1,), dtype=torch.float32, device=x.device)
        kernel(x.contiguous().reshape(size), total)
        return total.reshape(())  # 0-d kernel outputs fail in 0.2.0: shape [1], reshaped here
