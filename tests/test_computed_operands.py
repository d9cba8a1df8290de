"""A matmul's first operand computed in the kernel (`fc(x * scale)`, `h @ w` of a `let`):
the cube reads it as the [M, K] matrix it is, and each such kernel computes its reference
in SIM."""

from __future__ import annotations

import pytest

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.ir import nodes as ir

COMPUTED = {
    # an expression as the operand: named by a let of its own
    "scaled_input": """kernel scaled_input
dims B = 64, K = 96, N = 48
input x: f32[B, K]
input s: f32[K]
input w: f32[N, K]
output y: f32[B, N]
y = relu((x * s) @ w.T)
""",
    # a let as the operand, also read elementwise after the matmul
    "let_and_residual": """kernel let_and_residual
dims B = 32, F = 64
input x: f32[B, F]
weight fc: linear(F, F)
output y: f32[B, F]
let h = tanh(x)
y = fc(h) + h
""",
    # the product's columns grouped by a view and normalised per group
    "grouped_product_of_a_computed_value": """kernel grouped
dims B = 16, K = 64, C = 128, G = 4
input x: f32[B, K]
weight fc: linear(K, C)
output y: f32[B, C]
let g = fc(exp(x * 0.1)).view(B, G, -1)
y = (g - mean(g, axis=2, keepdim=true)).view(B, C)
""",
}


@pytest.mark.parametrize("name", sorted(COMPUTED))
def test_a_matmul_of_a_computed_value_matches_its_reference(name):
    compiled = ptodsl.compile(COMPUTED[name], name=f"{name}.pto")
    matmuls = [
        node
        for stmt in compiled.kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and node.op == "matmul"
    ]
    # the operand is a let the kernel computes, seen as its [M, K] matrix
    (matmul,) = matmuls
    a = matmul.operands[0]
    assert isinstance(a, ir.Op) and a.op == "reshape" and a.type.rank == 2
    report = run_check(compiled)
    assert report.ok, report.to_json()


# Operands the cube cannot read where the kernel computes them: a second operand, a
# transposed one, one of rank 3 or 4 (attention's heads). The value gets a kernel of its
# own, which the matmul's kernel reads as an input.
CUT = {
    "second_operand": """kernel second_operand
dims M = 16, N = 32
input x: f32[M, N]
input w: f32[N, N]
output y: f32[N, M]
y = w @ (x * 2.0).T
""",
    "transposed_first_operand": """kernel transposed_first
dims M = 16, N = 32
input x: f32[M, N]
input w: f32[M, N]
output y: f32[N, N]
y = (x * 2.0).T @ w
""",
    "batched_heads": """kernel batched_heads
dims B = 2, H = 2, T = 16, D = 8
input q: f32[B, H, T, D]
input k: f32[B, H, T, D]
output y: f32[B, H, T, T]
y = softmax(tanh(q) @ (k * 0.5).transpose(-2, -1), axis=-1)
""",
}


@pytest.mark.parametrize("name", sorted(CUT))
def test_an_operand_the_cube_cannot_read_computed_gets_a_kernel_of_its_own(name):
    compiled = ptodsl.compile(CUT[name], name=f"{name}.pto")
    assert len(compiled.lowered.kernels) >= 2
    for kernel in compiled.lowered.kernels:
        inputs = {tensor.name for tensor in kernel.inputs}
        for stmt in kernel.body:
            for node in ir.walk(stmt.value):
                if isinstance(node, ir.Op) and node.op == "matmul":
                    assert all(isinstance(o, ir.Ref) and o.name in inputs for o in node.operands), (
                        kernel.name
                    )
    report = run_check(compiled)
    assert report.ok, report.to_json()


def test_an_expression_operand_gets_a_generated_name():
    compiled = ptodsl.compile(COMPUTED["scaled_input"], name="scaled_input.pto")
    assert "_matrix0 = x * s" in compiled.reference_source
    assert "pypto.reshape(_matrix0, [64, 96])" in compiled.source
