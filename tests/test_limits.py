"""Specs at the edges of size: thousands of statements compile to a correct kernel; the
other limits (zero-size and INT32-overflowing dims, rank above 4, expressions nested
thousands deep, huge literals) are located errors with golden texts in test_diagnostics.py
and regressions in test_fuzz.py."""

from __future__ import annotations

import ptodsl
from ptodsl.checking.check import run_check


def chain_spec(statements: int) -> str:
    """`statements` lets, each reading the one before: a long, deep dependency chain."""
    lines = ["kernel chain", "dims N = 1024", "input x: f32[N]", "output y: f32[N]"]
    lines.append("let t0 = x * 1.0")
    lines += [f"let t{i} = t{i - 1} * 0.99 + 0.01" for i in range(1, statements)]
    lines.append(f"y = t{statements - 1} * 0.5")
    return "\n".join(lines) + "\n"


def test_thousands_of_statements_compile_to_valid_python():
    compiled = ptodsl.compile(chain_spec(3000), name="chain.pto")
    compile(compiled.source, "chain.py", "exec")
    assert "        t2999 = t2998 * 0.99 + 0.01\n" in compiled.source


def test_hundreds_of_statements_give_a_correct_kernel():
    report = run_check(ptodsl.compile(chain_spec(300), name="chain.pto"))
    assert report.ok, report.to_json()
