"""Shared test fixtures: golden files and the examples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs
from hypothesis import settings

from ptodsl.target import PYPTO_0_2_0

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.pto"))
EXAMPLE_BY_STEM = {path.stem: path for path in EXAMPLES}
# A target whose tile limits are tiny: kernels loop (with tails, partial results) at sizes
# the simulator checks in seconds.
TINY_TILES = attrs.evolve(PYPTO_0_2_0, max_tile_elements=512, max_auto_tiles=6)
GOLDENS = Path(__file__).resolve().parent / "goldens"

# Examples too large for `ptodsl check` in CI on 2 cores (minutes and >10 GB each at their
# full KernelBench shapes): CI checks these sizes; `ptodsl bench full_shapes` checks
# the full ones. Their goldens are at full size. The loops such shapes need are checked at
# small sizes in test_loops_in_sim.py.
# The patterns interpreter mode is shown on (tests/test_interpret.py, benchmarks/interpret.py):
# elementwise, softmax, a loss with a 0-d output, a norm with weights, a matmul, a K-split
# matmul.
INTERPRETER_PATTERNS = [
    "31_elu",
    "23_softmax",
    "94_mse_loss",
    "33_batch_norm",
    "1_square_matmul",
    "6_matmul_large_k",
]
CI_DIMS = {
    "5_matrix_scalar_multiply": {"M": 1024},
    # products of 256 randn values underflow f32 (about 1e-71): 8 factors keep them visible
    "50_prod_dim": {"dim1": 8, "dim2": 8},  # dim2 shares its size: both scale (--dim)
    "33_batch_norm": {"H": 32, "W": 32},
    "35_group_norm": {"H": 32, "W": 32},
    "36_rms_norm": {"H": 32, "W": 32},
    "40_layer_norm": {"H": 32, "W": 32},
    "34_instance_norm": {"H": 32, "W": 32},
    "37_frobenius_norm": {"H": 32, "W": 32},
    # KernelBench's large matmuls, scaled keeping their tails and K loops
    "2_standard_matmul": {"M": 256, "K": 1024, "N": 512},
    "4_matrix_vector_multiply": {"M": 64, "K": 70000},
    "6_matmul_large_k": {"M": 64, "N": 64, "K": 70000},
    "7_matmul_small_k": {"M": 1024, "N": 1024},
    "8_matmul_irregular_shapes": {"M": 821, "K": 295, "N": 592},
    "9_tall_skinny_matmul": {"M": 2048},
    "10_3d_tensor_matrix_multiply": {"N": 4, "M": 200, "K": 512},
    # i and l share the size 256, so the problem's constants scale both alike (--dim's rule)
    "11_4d_tensor_matrix_multiply": {"b": 2, "i": 64, "j": 64, "l": 64},
    "12_matmul_diagonal": {"N": 1024, "M": 1024},
    "13_matmul_symmetric": {"N": 1024},
    "14_matmul_upper_triangular": {"N": 1024},
    "15_matmul_lower_triangular": {"M": 1024},
    "16_matmul_transposed_a": {"M": 256, "K": 1024, "N": 512},
    "18_matmul_transposed_both": {"M": 256, "K": 1024, "N": 512},
    # pooling: every spatial dim scaled; `pooled` follows torch's rule for the window (#46's
    # channels keep the size `pooled` shares with them: the problem file cannot tell them apart)
    "42_max_pool_2d": {"batch_size": 2, "channels": 4, "height": 16, "width": 16, "pooled": 8},
    "43_max_pool_3d": {
        **{"batch_size": 2, "channels": 4, "dim1": 16, "dim2": 16, "dim3": 16, "pooled": 6}
    },
    "45_avg_pool_2d": {"batch_size": 2, "channels": 4, "height": 32, "width": 32, "pooled": 10},
    "46_avg_pool_3d": {
        **{"batch_size": 2, "channels": 8, "depth": 16, "height": 16, "width": 16, "pooled": 8}
    },
    # convolutions: batch 2 (4 where it shares its size with a spatial axis), spatial axes
    # 8 to 40 long; dims of one size scale alike (--dim's rule), outputs follow torch's rule
    "54_conv3d_square_input_square_kernel": {
        "N": 2,
        "D": 8,
        "H": 8,
        "W": 8,
        "C_out": 8,
        "D_out": 6,
        "H_out": 6,
        "W_out": 6,
    },
    "55_conv2d_asymmetric_input_square_kernel": {
        "N": 2,
        "H": 12,
        "W": 20,
        "H_out": 10,
        "W_out": 18,
    },
    "56_conv2d_asymmetric_input_asymmetric_kernel": {
        "N": 2,
        "H": 20,
        "W": 12,
        "H_out": 18,
        "W_out": 8,
    },
    "57_conv_transpose2d_square_input_square_kernel": {
        "N": 2,
        "H": 12,
        "W": 12,
        "H_out": 14,
        "W_out": 14,
    },
    "58_conv_transpose3d_asymmetric_input_asymmetric_kernel": {
        "N": 4,
        "C_in": 8,
        "D": 4,
        "H": 8,
        "W": 8,
        "C_out": 4,
        "D_out": 6,
        "H_out": 12,
        "W_out": 14,
    },
    "59_conv3d_asymmetric_input_square_kernel": {
        "N": 2,
        "D": 20,
        "H": 20,
        "D_out": 18,
        "H_out": 18,
    },
    "60_conv3d_square_input_asymmetric_kernel": {
        "N": 2,
        "D": 8,
        "H": 8,
        "W": 8,
        "C_out": 8,
        "D_out": 6,
        "H_out": 4,
        "W_out": 2,
    },
    "61_conv_transpose3d_square_input_square_kernel": {
        "N": 2,
        "D": 8,
        "H": 8,
        "W": 8,
        "D_out": 10,
        "H_out": 10,
        "W_out": 10,
    },
    "62_conv2d_square_input_asymmetric_kernel": {
        "N": 2,
        "H": 20,
        "W": 20,
        "H_out": 18,
        "W_out": 16,
    },
    "63_conv2d_square_input_square_kernel": {"N": 2, "H": 20, "W": 20, "H_out": 18, "W_out": 18},
    "64_conv_transpose1d": {"N": 2, "L": 12, "L_out": 14},
    "65_conv_transpose2d_square_input_asymmetric_kernel": {
        "N": 2,
        "H": 12,
        "W": 12,
        "H_out": 14,
        "W_out": 16,
    },
    "66_conv3d_asymmetric_input_asymmetric_kernel": {
        "N": 4,
        "D": 4,
        "H": 20,
        "W": 20,
        "D_out": 2,
        "H_out": 16,
        "W_out": 14,
    },
    "67_conv1d": {"N": 2, "L": 40, "L_out": 38},
    "68_conv_transpose3d_square_input_asymmetric_kernel": {
        "N": 2,
        "D": 8,
        "H": 8,
        "W": 8,
        "C_out": 8,
        "D_out": 10,
        "H_out": 12,
        "W_out": 12,
    },
    "69_conv_transpose2d_asymmetric_input_asymmetric_kernel": {
        "N": 4,
        "C_in": 8,
        "H": 4,
        "W": 8,
        "H_out": 6,
        "W_out": 12,
    },
    "70_conv_transpose3d_asymmetric_input_square_kernel": {
        "N": 4,
        "C_in": 8,
        "D": 4,
        "H": 8,
        "W": 8,
        "C_out": 4,
        "D_out": 6,
        "H_out": 10,
        "W_out": 10,
    },
    "71_conv_transpose2d_asymmetric_input_square_kernel": {
        "N": 2,
        "H": 12,
        "W": 20,
        "H_out": 14,
        "W_out": 22,
    },
    "72_conv_transpose3d_asymmetric_kernel_strided_padded_grouped": {
        "N": 4,
        "C_in": 8,
        "D": 4,
        "H": 8,
        "W": 16,
        "C_out": 16,
        "D_out": 8,
        "H_out": 16,
        "W_out": 32,
    },
    "73_conv_transpose3d_square_kernel_strided_padded_grouped": {
        "N": 4,
        "C_in": 8,
        "D": 4,
        "H": 8,
        "W": 8,
        "D_out": 3,
        "H_out": 11,
        "W_out": 11,
    },
    "74_conv_transpose1d_dilated": {"N": 2, "L": 20, "L_out": 32},
    "75_conv_transpose2d_strided_grouped_padded_dilated": {
        "N": 2,
        "H": 12,
        "W": 20,
        "H_out": 25,
        "W_out": 58,
    },
    "76_conv1d_dilated_strided": {"N": 2, "L": 20, "L_out": 4},
    "77_conv_transpose3d_padded_dilated_strided": {
        "N": 4,
        "C_in": 8,
        "D": 4,
        "H": 8,
        "W": 8,
        "D_out": 9,
        "H_out": 17,
        "W_out": 17,
    },
    "78_conv_transpose2d_asymmetric_kernel_padded": {
        "N": 2,
        "H": 12,
        "W": 20,
        "H_out": 12,
        "W_out": 20,
    },
    "79_conv_transpose1d_padded_strided_dilated": {"N": 2, "L": 12, "L_out": 25},
    "80_conv2d_asymmetric_kernel_dilated_padded": {
        "N": 2,
        "H": 20,
        "W": 20,
        "H_out": 18,
        "W_out": 20,
    },
    "81_conv_transpose2d_dilated_padded_strided": {
        "N": 2,
        "H": 8,
        "W": 12,
        "C_out": 8,
    },
    "82_conv_depthwise2d_square_input_square_kernel": {
        "N": 2,
        "H": 20,
        "W": 20,
        "H_out": 18,
        "W_out": 18,
    },
    "83_conv_depthwise2d_square_input_asymmetric_kernel": {
        "N": 2,
        "H": 20,
        "W": 20,
        "H_out": 18,
        "W_out": 20,
    },
    "84_conv_depthwise2d_asymmetric_input_square_kernel": {
        "N": 2,
        "H": 12,
        "W": 20,
        "H_out": 10,
        "W_out": 18,
    },
    "85_conv_depthwise2d_asymmetric_input_asymmetric_kernel": {
        "N": 2,
        "H": 12,
        "W": 20,
        "H_out": 10,
        "W_out": 16,
    },
    "86_conv_depthwise_separable_2d": {"N": 2, "H": 20, "W": 20, "H_out": 18, "W_out": 18},
    "87_conv_pointwise_2d": {"N": 2, "H": 20, "W": 20, "H_out": 20, "W_out": 20},
}
# KernelBench level 2: every spec's CI dims (`{}`: its full shape, small enough), in the file
# `ptodsl coverage --dims` reads too. Batch 2 to 32, narrower layers, spatial extents 4 to
# 16; a size the problem derives a tuple from (scale_shape = (out_features,)) or a product
# (out_features = G * CG) keeps its own: --dim rescales plain int constants only.
LEVEL2_DIMS_FILE = ROOT / "tests" / "kernelbench_level2_dims.json"
CI_DIMS.update(json.loads(LEVEL2_DIMS_FILE.read_text(encoding="utf-8")))
# Examples ptodsl refuses at their full shape, with what the refusal says: the example tests
# compile them at their CI dims, and test_examples checks that the refusal stands (a fix
# turns that test red, to take the example off this list).
FULL_SHAPE_REFUSED = {
    # BatchNorm3d's statistics over 128 samples of 63^3 values: per channel, one loop's
    # iteration still needs 3965 tiles (pypto's limit: 2048); a loop over two axes would do
    "72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool": "even per index of the loop axis",
}


def example_dims(path: Path) -> dict[str, int] | None:
    """The dims the example tests compile `path` at: its full shape, unless ptodsl refuses
    that (FULL_SHAPE_REFUSED)."""
    return CI_DIMS[path.stem] if path.stem in FULL_SHAPE_REFUSED else None


def ruff_check(path: Path) -> subprocess.CompletedProcess:
    """`ruff check` of generated code with the project's rules, whatever the cwd's config."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "E,F,W,I,B,UP"]
        + ["--line-length", "100", str(path)],
        capture_output=True,
        text=True,
    )


def pytest_configure(config):
    # A plan stored by `ptodsl tune` on this machine would change what compile emits: the
    # tests compile with an empty tuning cache of their own.
    os.environ["PTODSL_TUNING_DIR"] = tempfile.mkdtemp(prefix="ptodsl-test-tuning-")


def pytest_unconfigure(config):
    shutil.rmtree(os.environ.pop("PTODSL_TUNING_DIR"), ignore_errors=True)


# Hypothesis profiles (tests/test_fuzz.py, tests/test_random_specs.py): "ci" is the default,
# deterministic and quick; PTODSL_FUZZ_PROFILE=long runs a long randomized fuzzing session.
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True)
settings.register_profile("long", max_examples=180_000, deadline=None)
settings.load_profile(os.environ.get("PTODSL_FUZZ_PROFILE", "ci"))
