"""Loop code paths proven numerically at small sizes: a target whose auto-tile limit is tiny
makes ptodsl loop (with tails, accumulation into outputs, partial results, loops on axis 1)
where the real limit of 2048 tiles would need tensors of tens of millions of elements."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE_BY_STEM, TINY_TILES

import ptodsl
from ptodsl.checking.check import run_check

CASES = {
    # example, dims: each shape makes more than 6 tiles of at most 512 elements
    "bias_rows_tail": {"M": 23, "N": 512},  # loop over rows with a 3-row tail
    "sum_of_squares": {"N": 2, "C": 3, "H": 16, "W": 50},  # accumulates into the output
    "37_frobenius_norm": {"N": 2, "C": 3, "H": 16, "W": 50},  # partial sums, then a new phase
    "33_batch_norm": {"N": 2, "C": 12, "H": 4, "W": 64},  # loops over channels (axis 1)
    "40_layer_norm": {"N": 7, "C": 2, "H": 8, "W": 64},  # row reductions inside the loop
    "23_softmax": {"batch_size": 13, "dim": 512},
    "99_triplet_margin_loss": {"batch_size": 10, "dim": 512},
    "89_cumsum": {"batch_size": 13, "n": 512},  # rows looped, never the scanned axis
    "91_cumsum_reverse": {"batch_size": 11, "n": 300},  # a row total beside the scan
    "51_argmax_dim": {"batch_size": 7, "dim1": 64, "dim2": 40},  # positions, not looped
    "90_cumprod": {"batch_size": 13, "N": 300},  # two running sums and their signs
    "group_views": {"B": 13},  # split features: rows looped, each block's groups whole
}


@pytest.mark.parametrize("example", sorted(CASES))
def test_looped_kernel_matches_reference(example):
    spec = EXAMPLE_BY_STEM[example].read_text()
    compiled = ptodsl.compile(spec, name=f"{example}.pto", dims=CASES[example], target=TINY_TILES)
    assert any(phase["loop"] for phase in compiled.plan["kernels"][0]["phases"]), "no loop"
    report = run_check(compiled)
    assert report.ok, report.to_json()


SHIFTED_ROWS = """kernel shifted_rows
dims M = 29, N = 300
input x: f32[M, N]
output y: f32[M, N + 1]
y = cumsum(cat([x[:, :1] * 0.0, x], axis=1), axis=1) + x[:, 1:2]
"""


def test_crops_and_joins_along_a_row_loop_over_the_rows():
    """The crop and the join cut only the last axis: the rows are looped, each block cropping
    and joining its own rows."""
    compiled = ptodsl.compile(SHIFTED_ROWS, name="shifted_rows.pto", target=TINY_TILES)
    (phase,) = compiled.plan["kernels"][0]["phases"]
    assert phase["loop"] and phase["loop"]["axis"] == 0
    report = run_check(compiled)
    assert report.ok, report.to_json()


# Rows 23 = 4 blocks of 5 and a tail of 3. pypto 0.2.0 drops what a tail after its loop
# assembles into a temporary (a `let`'s partial results or rows): every element came out
# 8% off, so the tail now runs first.
TAILED = {
    "partials_of_a_total": "let s = sum(a * a)\ny = a / sqrt(s)\n",
    "rows_of_a_let_and_partials": "let t = exp(a)\nlet s = sum(t)\ny = t / s\n",
    "accumulated_output": "y = sum(a * a)\n",
}


@pytest.mark.parametrize("body", TAILED.values(), ids=TAILED.keys())
def test_a_tail_block_writes_what_its_loop_writes(body):
    shape = "[M, N]" if "let" in body else "[]"
    spec = f"kernel tailed\ndims M = 23, N = 300\ninput a: f32[M, N]\noutput y: f32{shape}\n"
    compiled = ptodsl.compile(spec + body, name="tailed.pto", target=TINY_TILES)
    loops = [phase["loop"] for phase in compiled.plan["kernels"][0]["phases"] if phase["loop"]]
    assert loops and all(loop["tail"] == 3 for loop in loops), loops
    report = run_check(compiled)
    assert report.ok, report.to_json()


GEMM_TIMES_INPUT = """kernel gemm_times_input
dims   M = 512, K = 1024, N = 768
input  x: f32[M, K]
input  W: f32[N, K]
input  b: f32[N]
input  s: f32[M, N]
output y: f32[M, N]
y = relu(x @ W.T + b) * s
"""


def test_a_matmul_workspace_beside_four_arguments_is_not_looped():
    """A matmul's row chunks assembled into a workspace, in a kernel of five tensor
    arguments, crashed pypto's simulator ("Invalid slot index 64"): such a matmul runs
    unlooped and the kernel passes in SIM; with four arguments the loop stays."""
    compiled = ptodsl.compile(GEMM_TIMES_INPUT, name="gemm_times_input.pto")
    assert "pypto.loop(" not in compiled.source
    report = run_check(compiled, passes="graph")
    assert report.ok, report.to_json()
    four = ptodsl.compile(EXAMPLE_BY_STEM["linear_relu"].read_text(encoding="utf-8"))
    assert "pypto.loop(" in four.source and "_m0 = pypto.Tensor(" in four.source
