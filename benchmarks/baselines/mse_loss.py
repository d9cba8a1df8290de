"""Baseline `mse_loss`: mean((p - t) ** 2) over [B, D] (pattern D: simple loss, flattened to
1-D, vec tile 8192); loops and accumulates into the output only past 2048 tiles."""

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


def _terms(p, t):
    d = p - t
    return d * d


@functools.cache
def make_mse_loss_kernel(size, scale):
    TILE = 8192  # rule book: flattened 1-D vec tile
    auto_tiles = ceil_div(size, TILE)
    if auto_tiles <= MAX_TILES:

        @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
        def mse_loss_kernel(
            p: pypto.Tensor((size,), pypto.DT_FP32),
            t: pypto.Tensor((size,), pypto.DT_FP32),
            loss: pypto.Tensor((1,), pypto.DT_FP32),
        ):
            pypto.set_vec_tile_shapes(TILE)
            loss[:] = pypto.sum(_terms(p, t), 0, keepdim=True) * scale

        return mse_loss_kernel

    # Pattern E: loop over TARGET_LOOP_COUNT chunks and accumulate. pypto 0.2.0 loses sums
    # accumulated in a pypto.zeros temporary, so the output itself is the accumulator.
    BASIC_BATCH = ceil_div(size, TARGET_LOOP_COUNT)
    num_iters = size // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = size - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def mse_loss_loop_kernel(
        p: pypto.Tensor((size,), pypto.DT_FP32),
        t: pypto.Tensor((size,), pypto.DT_FP32),
        loss: pypto.Tensor((1,), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(TILE)
        loss[:] = pypto.zeros([1], dtype=pypto.DT_FP32)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            p_c = pypto.view(p, [BASIC_BATCH], [off])
            t_c = pypto.view(t, [BASIC_BATCH], [off])
            loss[:] = loss + pypto.sum(_terms(p_c, t_c), 0, keepdim=True)
        if tail > 0:
            p_t = pypto.view(p, [tail], [rest])
            t_t = pypto.view(t, [tail], [rest])
            loss[:] = loss + pypto.sum(_terms(p_t, t_t), 0, keepdim=True)
        loss[:] = loss * scale

    return mse_loss_loop_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, t):
        assert p.dim() == 2 and p.dtype == torch.float32
        assert t.shape == p.shape and t.dtype == torch.float32
        size = p.numel()
        kernel = make_mse_loss_kernel(size, 1.0 / size)
        loss = torch.empty((1,), dtype=torch.float32, device=p.device)
        kernel(p.contiguous().reshape(size), t.contiguous().reshape(size), loss)
        return loss.reshape(())  # 0-d kernel outputs fail in 0.2.0: shape [1], reshaped here
