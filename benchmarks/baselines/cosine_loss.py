"""Baseline `cosine_loss`: mean(1 - cosine_similarity(a, b, dim=1)) over [B, D].
Pattern D per-sample loss: kept 2-D, two tile phases: row sums with the rule book's
(1, 16384) row tile, then the batch mean over the [B, 1] column with a (B, 1) tile.
1.0 - x is written x * -1.0 + 1.0 (rule 5)."""

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
def make_cosine_loss_kernel(b, d):
    row_tile = (1, 16384)
    assert ceil_div(b, row_tile[0]) * ceil_div(d, row_tile[1]) <= MAX_TILES
    col_tile = (min(b, 16384), 1)

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def cosine_loss_kernel(
        a: pypto.Tensor((b, d), pypto.DT_FP32),
        bb: pypto.Tensor((b, d), pypto.DT_FP32),
        loss: pypto.Tensor((1, 1), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*row_tile)
        dot = pypto.sum(a * bb, 1, keepdim=True)
        norm_a = pypto.sqrt(pypto.sum(a * a, 1, keepdim=True))
        norm_b = pypto.sqrt(pypto.sum(bb * bb, 1, keepdim=True))
        pypto.set_vec_tile_shapes(*col_tile)
        cos = dot / pypto.maximum(norm_a * norm_b, 1e-8)
        loss[:] = pypto.sum(cos * -1.0 + 1.0, 0, keepdim=True) * (1.0 / b)

    return cosine_loss_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        assert a.dim() == 2 and a.dtype == torch.float32
        assert b.shape == a.shape and b.dtype == torch.float32
        rows, d = a.shape
        kernel = make_cosine_loss_kernel(rows, d)
        loss = torch.empty((1, 1), dtype=torch.float32, device=a.device)
        kernel(a.contiguous(), b.contiguous(), loss)
        return loss.reshape(())
