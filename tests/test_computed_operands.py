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


def test_an_expression_operand_gets_a_generated_name():
    compiled = ptodsl.compile(COMPUTED["scaled_input"], name="scaled_input.pto")
    assert "_matrix0 = x * s" in compiled.reference_source
    assert "pypto.reshape(_matrix0, [64, 96])" in compiled.source
