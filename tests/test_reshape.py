"""Reshapes of computed values (`h.reshape(B, G, C / G)`, `.view`, an output declared as a
view of its value): the kernel works at the finest granularity any reshape sees an axis,
so no reshape is left for PyPTO, and each kernel computes the reshaped math in SIM."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE_BY_STEM

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import nodes as ir
from ptodsl.pipeline import lower


def lowered_to(text: str, stage: str) -> ir.Kernel:
    return lower(Source(text, "case.pto"), until=stage).kernel


def ops_in(kernel: ir.Kernel) -> set[str]:
    return {
        node.op for stmt in kernel.body for node in ir.walk(stmt.value) if isinstance(node, ir.Op)
    }


def test_a_split_and_its_merge_leave_no_reshape_and_split_every_related_tensor():
    kernel = lowered_to(EXAMPLE_BY_STEM["group_views"].read_text(), "align_axes")
    assert "reshape" not in ops_in(kernel)
    shapes = {t.name: t.kernel_shape for t in (*kernel.inputs, *kernel.outputs)}
    # x and w are read whole by `h`, y is the merge of the groups, s one value per group
    assert shapes == {"x": (32, 6, 64), "w": (1, 6, 64), "y": (32, 6, 64), "s": (32, 6, 1)}
    # `sum(h * h)` over everything reduces both parts of the split axis
    reductions = [
        node.attrs.axes
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and node.op == "sum"
    ]
    assert (0, 1, 2) in reductions


def test_a_method_is_the_function_of_its_receiver():
    header = "kernel k\ndims M = 4, N = 8\ninput x: f32[M, N]\noutput y: f32[M]\n"
    method = lowered_to(header + "y = x.exp().sum(axis=1)\n", "check")
    function = lowered_to(header + "y = sum(exp(x), axis=1)\n", "check")
    assert ir.format_kernel(method) == ir.format_kernel(function)


RESHAPED = {
    # axes merged: the sum over the merged axis reduces both of its parts
    "merged_reduction": """kernel merged_sum
dims B = 8, G = 4, CG = 16
input x: f32[B, G, CG]
output y: f32[B]
y = sum(reshape(x, [B, G * CG]) * 2.0, axis=1)
""",
    # an output declared as a merge, from a value of that declared shape
    "declared_view_of_a_value": """kernel flat
dims N = 5, B = 8
input b: f32[N, 3, B]
output z: f32[N, 3 * B]
z = exp(b.reshape(N, 3 * B)) - 1.0
""",
    # a batched matmul's product with its batch and row axes merged
    "merged_product": """kernel bmm_rows
dims B = 4, M = 8, K = 32, N = 16
input a: f32[B, M, K]
input b: f32[B, K, N]
output y: f32[B * M]
y = max((a @ b).reshape(B * M, N), axis=1)
""",
    # a reduction's result split: the input's row axis splits with it
    "split_reduction": """kernel pairs
dims B = 12, C = 40
input x: f32[B, C]
output y: f32[6, 2]
y = sum(x * x, axis=1).view(6, 2) / sum(x, axis=1).view(6, -1)
""",
    # a linear layer's output grouped by `view`, normalised, merged, scaled per feature
    "grouped_product": """kernel linear_groups
dims B = 16, K = 64, C = 128, G = 4
input x: f32[B, K]
weight fc: linear(K, C)
weight gain: f32[C] = randn
output y: f32[B, C]
let g = fc(x).view(B, G, -1)
let d = g - mean(g, axis=2, keepdim=true)
y = relu((d * rsqrt(mean(d * d, axis=2, keepdim=true) + 1e-5)).view(B, C) * gain)
""",
}


@pytest.mark.parametrize("name", sorted(RESHAPED))
def test_a_reshaped_kernel_matches_its_reference(name):
    compiled = ptodsl.compile(RESHAPED[name], name=f"{name}.pto")
    assert "reshape" not in ops_in(compiled.lowered.after("align_axes"))
    report = run_check(compiled)
    assert report.ok, report.to_json()


def test_a_split_axis_is_contracted_whole():
    """`a @ b` contracting an axis declared split (`f32[M, 2 * N]`, or LeNet-5's
    `linear(16 * 5 * 5, 120)` once named sizes split it) multiplies the declared layout: the
    split matters where the axis is reduced in parts (the mean over `N` here), not to the
    cube."""
    spec = (
        "kernel k\ndims M = 4, N = 8\ninput a: f32[M, 2 * N]\ninput b: f32[16, N]\n"
        "output y: f32[M, N]\noutput z: f32[M, 2, N]\n"
        "y = a @ b\nz = a - mean(a, axis=2, keepdim=true)\n"
    )
    report = run_check(ptodsl.compile(spec), passes="graph")
    assert report.ok, report.to_json()
