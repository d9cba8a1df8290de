"""Baseline `triplet_loss`: TripletMarginLoss, mean(relu(|a - p + eps|_2 - |a - n + eps|_2 +
margin))
over the batch of [B, D] rows. Pattern D per-sample loss: kept 2-D, two tile phases: row
norms with the rule book's (1, 16384) row tile, then the batch mean over [B, 1] with (B, 1)."""

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
def make_triplet_loss_kernel(b, d, margin, eps):
    row_tile = (1, 16384)
    assert ceil_div(b, row_tile[0]) * ceil_div(d, row_tile[1]) <= MAX_TILES
    col_tile = (min(b, 16384), 1)

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def triplet_loss_kernel(
        a: pypto.Tensor((b, d), pypto.DT_FP32),
        p: pypto.Tensor((b, d), pypto.DT_FP32),
        n: pypto.Tensor((b, d), pypto.DT_FP32),
        loss: pypto.Tensor((1, 1), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*row_tile)
        diff_pos = a - p + eps
        diff_neg = a - n + eps
        d_pos = pypto.sqrt(pypto.sum(diff_pos * diff_pos, 1, keepdim=True))
        d_neg = pypto.sqrt(pypto.sum(diff_neg * diff_neg, 1, keepdim=True))
        pypto.set_vec_tile_shapes(*col_tile)
        per_sample = pypto.relu(d_pos - d_neg + margin)
        loss[:] = pypto.sum(per_sample, 0, keepdim=True) * (1.0 / b)

    return triplet_loss_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, margin: float = 1.0, eps: float = 1e-06):
        super().__init__()
        self.margin = float(margin)
        self.eps = float(eps)

    def forward(self, a, p, n):
        assert a.dim() == 2 and a.dtype == torch.float32
        assert p.shape == a.shape and n.shape == a.shape
        rows, d = a.shape
        kernel = make_triplet_loss_kernel(rows, d, self.margin, self.eps)
        loss = torch.empty((1, 1), dtype=torch.float32, device=a.device)
        kernel(a.contiguous(), p.contiguous(), n.contiguous(), loss)
        return loss.reshape(())
