"""Baseline `scalar_multiply`: A * s on [M, N] (KernelBench #5), flattened to 1-D with vec
tile 8192; 16384 x 4096 makes 8192 tiles > 2048, so it loops over TARGET_LOOP_COUNT = 32
chunks (the rule book's 1-D scalar-mul example)."""

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


def _compute(A, s):
    return A * s


@functools.cache
def make_scalar_multiply_kernel(size, s):
    TILE = 8192  # rule book: 1-D elementwise vec tile
    auto_tiles = ceil_div(size, TILE)
    if auto_tiles <= MAX_TILES:
        # Few enough tiles: one pass, no loop.
        @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
        def scalar_multiply_kernel(
            A: pypto.Tensor((size,), pypto.DT_FP32),
            C: pypto.Tensor((size,), pypto.DT_FP32),
        ):
            pypto.set_vec_tile_shapes(TILE)
            C[:] = _compute(A, s)

        return scalar_multiply_kernel

    # Too many tiles: loop over TARGET_LOOP_COUNT chunks, plus a constant-size tail.
    BASIC_BATCH = ceil_div(size, TARGET_LOOP_COUNT)
    num_iters = size // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = size - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def scalar_multiply_loop_kernel(
        A: pypto.Tensor((size,), pypto.DT_FP32),
        C: pypto.Tensor((size,), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(TILE)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            A_c = pypto.view(A, [BASIC_BATCH], [off])
            pypto.assemble(_compute(A_c, s), [off], C)
        if tail > 0:
            A_t = pypto.view(A, [tail], [rest])
            pypto.assemble(_compute(A_t, s), [rest], C)

    return scalar_multiply_loop_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        assert A.dim() == 2 and A.dtype == torch.float32
        size = A.numel()
        kernel = make_scalar_multiply_kernel(size, float(s))
        C = torch.empty((size,), dtype=torch.float32, device=A.device)
        kernel(A.contiguous().reshape(size), C)
        return C.reshape(A.shape)
