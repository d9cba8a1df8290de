"""The pieces attention is written with: `split` into chunks, `transpose` and `permute`
(data moved by `pypto.transpose` in a kernel of its own), batched matmuls of computed
values, `masked_fill` with `-inf`. Each spec is checked against its torch reference in
pypto's SIM; the level-3 problems that use them are in test_kernelbench_level3.py."""

from __future__ import annotations

import pytest

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes.tiling import is_transpose

SPECS = {
    # torch's split: chunks of 3 along an axis of 8, the last one of 2
    "uneven_split": """kernel uneven_split
dims B = 4, C = 8
input x: f32[B, C]
output y: f32[B, 3]
output z: f32[B, 2]
let a, b, c = (x * 2.0).split(3, axis=-1)
y = a + b
z = c
""",
    # a permutation of three axes: a chain of two exchanges, each in a kernel of its own
    "permute_three_axes": """kernel permute_three
dims S = 16, B = 2, E = 8
input x: f32[B, E, S]
output y: f32[S, B, E]
y = relu(x.permute(2, 0, 1)) + 1.0
""",
    # masked scores: -inf where the mask is 0; relu turns them to 0, softmax to weight 0
    "masked_scores": """kernel masked_scores
dims B = 2, T = 8
input s: f32[B, T, T]
buffer mask: f32[T, T] = tril(ones)
output p: f32[B, T, T]
output r: f32[B, T, T]
let masked = s.masked_fill(mask == 0, -inf)
p = softmax(masked, axis=-1)
r = relu(masked)
""",
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_attention_pieces_match_their_reference(name):
    compiled = ptodsl.compile(SPECS[name], name=f"{name}.pto")
    report = run_check(compiled)
    assert report.ok, report.to_json()


def test_a_permutation_is_one_kernel_per_exchange():
    compiled = ptodsl.compile(SPECS["permute_three_axes"], name="permute.pto")
    swaps = [
        [node.attrs for stmt in kernel.body for node in ir.walk(stmt.value)
         if isinstance(node, ir.Op) and ops.moves_axes(node.op)]
        for kernel in compiled.lowered.kernels
    ]  # fmt: skip
    assert [len(s) for s in swaps] == [1, 1]
    assert compiled.source.count("pypto.transpose(") == 2


def test_an_infinity_is_spelled_as_python_reads_it():
    compiled = ptodsl.compile(SPECS["masked_scores"], name="masked.pto")
    assert '-float("inf")' in compiled.source
    assert "inf" in compiled.reference_source


def test_a_transpose_reads_a_head_view_of_its_input_in_forward():
    """`k.view(B, T, NH, HS).transpose(1, 2)` of an input: forward hands the kernel the
    split view (no copy), the kernel moves the data once."""
    text = """kernel heads
dims B = 2, T = 16, C = 32, NH = 2, HS = C / NH
input k: f32[B, T, C]
output kh: f32[B, NH, T, HS]
kh = k.view(B, T, NH, HS).transpose(1, 2)
"""
    compiled = ptodsl.compile(text, name="heads.pto")
    (kernel,) = compiled.lowered.kernels
    assert "k.contiguous().reshape(2, 16, 2, 16)" in compiled.source
    assert "pypto.transpose(k, 1, 2)" in compiled.source
    assert kernel.inputs[0].kernel_shape == (2, 16, 2, 16)


CROSS_ATTENTION = """kernel cross_attention
dims B = 2, L = 8, S = 4, E = 16, NH = 2
param embed_dim: int = E
param num_heads: int = NH
input query: f32[B, L, E]
input memory: f32[B, S, E]
weight attn: multihead_attention(embed_dim, num_heads, batch_first=true)
output out: f32[B, L, E]
output weights: f32[B, L, S]
let attended, averaged = attn(query, memory, memory)
out = attended
weights = averaged
"""

CROSS_ATTENTION_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, query, memory):
        return self.attn(query, memory, memory)


def get_inputs():
    return [torch.randn(2, 8, 16), torch.randn(2, 4, 16)]


def get_init_inputs():
    return [16, 2]
"""


def test_multihead_attention_of_another_sequence_is_torchs(tmp_path):
    """nn.MultiheadAttention's other path: queries of one sequence, keys and values of
    another (each projected by its third of `in_proj_weight`), batch first, and both of
    its results (the weights averaged over the heads), against torch's own module."""
    problem = tmp_path / "cross_attention.py"
    problem.write_text(CROSS_ATTENTION_PROBLEM, encoding="utf-8")
    compiled = ptodsl.compile(CROSS_ATTENTION, name="cross_attention.pto")
    report = run_check(compiled, against=problem)
    assert report.ok, report.to_json()


def test_a_transpose_of_a_long_last_axis_is_tiled_within_the_scan_limit():
    """An exchange that moves an axis of 1200 into the last place runs along it as a scan
    does: its last-axis tile stays within the scans' limit (1024; the plan pypto rejects
    was an internal error, #31's attention over 40 x 40 positions), and it runs in SIM."""
    spec = (
        "kernel long_swap\ndims B = 2, S = 1200, E = 16\ninput x: f32[B, S, E]\n"
        "output y: f32[B, E, S]\ny = x.transpose(1, 2)\n"
    )
    compiled = ptodsl.compile(spec, name="long_swap.pto")
    swaps = [
        phase
        for kernel in compiled.lowered.kernels
        for phase in kernel.schedule.phases
        if any(is_transpose(kernel.body[i]) for i in phase.statements)
    ]
    assert swaps and all(phase.tile[-1] <= 1024 for phase in swaps)
    report = run_check(compiled)
    assert report.ok, report.to_json()
