"""What every baseline shares: the run mode, the rule book's loop and tile-count constants and
the `jit` decorator every kernel is built with."""

import importlib.util
import math
import os

import pypto

TARGET_LOOP_COUNT = 32  # rule book: loop count whenever a loop is used
MAX_TILES = 2048  # rule book: auto_tiles = prod(ceil(shape / tile)) must stay <= 2048
# Test hook only: verify.py lowers the limit to run the loop branches at small shapes.
MAX_TILES = int(os.getenv("BASELINE_MAX_TILES", MAX_TILES))


def ceil_div(a, b):
    return (a + b - 1) // b


def auto_tiles(shape, tile):
    """The rule book's tile count prod(ceil(shape / tile))."""
    return math.prod(ceil_div(s, t) for s, t in zip(shape, tile, strict=True))


def chunk_plan(length):
    """Rule-book loop split of `length`: BASIC_BATCH = ceil(length / 32), the number of whole
    chunks, where the tail starts and its (constant) size."""
    basic_batch = ceil_div(length, TARGET_LOOP_COUNT)
    num_iters = length // basic_batch
    rest = num_iters * basic_batch
    return basic_batch, num_iters, rest, length - rest


def run_mode():
    # AIKG_PYPTO_RUN_MODE: 0 = NPU, 1 = SIM; unset: NPU when torch_npu is installed, else SIM.
    mode = os.getenv("AIKG_PYPTO_RUN_MODE")
    if mode is None:
        has_npu = importlib.util.find_spec("torch_npu") is not None
        return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM
    return pypto.RunMode.NPU if int(mode) == 0 else pypto.RunMode.SIM


def jit():
    """`@jit()`: pypto.frontend.jit in the run mode above."""
    return pypto.frontend.jit(runtime_options={"run_mode": run_mode()})
